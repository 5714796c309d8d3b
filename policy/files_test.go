package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecideWrite(t *testing.T) {
	c := devContract()
	cases := []struct {
		name  string
		call  WriteCall
		allow bool
		path  string
		rule  string
	}{
		{name: "relative-path-in-workdir-is-allowed", call: WriteCall{Path: "src/a.py", Size: 10}, allow: true, path: "/work/src/a.py"},
		{name: "absolute-path-in-workdir-is-allowed", call: WriteCall{Path: "/work/a"}, allow: true, path: "/work/a"},
		{name: "sibling-with-the-same-prefix-is-denied", call: WriteCall{Path: "/work2/a"}, rule: "paths.write"},
		{name: "dotdot-out-of-workdir-is-denied", call: WriteCall{Path: "/work/../etc/passwd"}, rule: "paths.write"},
		{name: "relative-dotdot-out-of-workdir-is-denied", call: WriteCall{Path: "../../home/user/.bashrc"}, rule: "paths.write"},
		{name: "dotdot-staying-inside-is-allowed", call: WriteCall{Path: "/work/a/../b"}, allow: true, path: "/work/b"},
		{name: "read-only-path-is-denied", call: WriteCall{Path: "/opt/data/x"}, rule: "paths.write"},
		{name: "proc-alias-is-denied", call: WriteCall{Path: "/proc/self/root/work/x"}, rule: "paths.write"},
		{name: "dev-fd-alias-is-denied", call: WriteCall{Path: "/dev/fd/3"}, rule: "paths.write"},
		{name: "nul-byte-is-denied", call: WriteCall{Path: "/work/a\x00b"}, rule: "paths.write"},
		{name: "invalid-utf8-is-denied", call: WriteCall{Path: "/work/\xff"}, rule: "paths.write"},
		{name: "directory-path-is-denied", call: WriteCall{Path: "/work/dir/"}, rule: "paths.write"},
		{name: "empty-path-is-denied", call: WriteCall{Path: ""}, rule: "paths.write"},
		{name: "file-at-the-size-limit-is-allowed", call: WriteCall{Path: "a", Size: 1 << 20}, allow: true, path: "/work/a"},
		{name: "file-over-the-size-limit-is-denied", call: WriteCall{Path: "a", Size: 1<<20 + 1}, rule: "limits.file_bytes"},
		{name: "negative-size-is-denied", call: WriteCall{Path: "a", Size: -1}, rule: "limits.file_bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideWrite(c, tc.call)
			if tc.allow {
				require.True(t, d.Allow, d.Reason)
				assert.Equal(t, tc.path, d.Effective.(*FileEffective).Path)
				return
			}
			assert.False(t, d.Allow)
			assert.Equal(t, tc.rule, d.Rule)
			assert.NotContains(t, d.Reason, "\x00")
		})
	}
}

func TestDecideRead(t *testing.T) {
	c := devContract()
	t.Run("read-path-is-allowed-and-length-defaults-to-the-limit", func(t *testing.T) {
		d := DecideRead(c, ReadCall{Path: "/opt/data/x"})
		require.True(t, d.Allow, d.Reason)
		assert.Equal(t, &FileEffective{Path: "/opt/data/x", Length: 1 << 20}, d.Effective)
	})
	t.Run("long-read-is-clamped", func(t *testing.T) {
		d := DecideRead(c, ReadCall{Path: "a", Offset: 5, Length: 1 << 30})
		require.True(t, d.Allow, d.Reason)
		assert.Equal(t, &FileEffective{Path: "/work/a", Offset: 5, Length: 1 << 20, Clamped: true}, d.Effective)
	})
	t.Run("outside-read-paths-is-denied", func(t *testing.T) {
		d := DecideRead(c, ReadCall{Path: "/etc/shadow"})
		assert.False(t, d.Allow)
		assert.Equal(t, "paths.read", d.Rule)
	})
	t.Run("negative-offset-is-denied", func(t *testing.T) {
		assert.False(t, DecideRead(c, ReadCall{Path: "a", Offset: -1}).Allow)
	})
	t.Run("proc-self-cwd-is-denied", func(t *testing.T) {
		assert.False(t, DecideRead(c, ReadCall{Path: "/proc/self/cwd/a"}).Allow)
	})
}

func TestDecideExport(t *testing.T) {
	c := devContract()
	cases := []struct {
		name  string
		call  ExportCall
		allow bool
		want  string
	}{
		{name: "file-in-export-path-gets-its-base-name", call: ExportCall{Path: "dist/app-1.0.whl"}, allow: true, want: "app-1.0.whl"},
		{name: "explicit-name-is-kept", call: ExportCall{Path: "/work/dist/x", Name: "report.txt"}, allow: true, want: "report.txt"},
		{name: "file-outside-export-path-is-denied", call: ExportCall{Path: "/work/secret"}},
		{name: "sibling-prefix-is-denied", call: ExportCall{Path: "/work/dist2/x"}},
		{name: "name-with-slash-is-denied", call: ExportCall{Path: "dist/x", Name: "../x"}},
		{name: "name-starting-with-dot-is-denied", call: ExportCall{Path: "dist/x", Name: ".bashrc"}},
		{name: "name-too-long-is-denied", call: ExportCall{Path: "dist/x", Name: strings.Repeat("a", 129)}},
		{name: "base-name-that-is-invalid-is-denied", call: ExportCall{Path: "dist/.hidden"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideExport(c, tc.call)
			if tc.allow {
				require.True(t, d.Allow, d.Reason)
				assert.Equal(t, tc.want, d.Effective.(*ExportEffective).Name)
				return
			}
			assert.False(t, d.Allow, d.Reason)
		})
	}
}

func TestDecideHandoff(t *testing.T) {
	c := devContract()
	known := []string{"app.zip", "log.txt"}
	cases := []struct {
		name  string
		call  HandoffCall
		allow bool
	}{
		{name: "known-step-with-known-artifacts-is-allowed", call: HandoffCall{Step: "build", Artifacts: []string{"app.zip"}, Known: known}, allow: true},
		{name: "unknown-step-is-denied", call: HandoffCall{Step: "deploy", Known: known}},
		{name: "step-with-a-slash-is-denied", call: HandoffCall{Step: "build/../test", Known: known}},
		{name: "step-with-trailing-space-is-denied", call: HandoffCall{Step: "build ", Known: known}},
		{name: "step-with-a-nul-is-denied", call: HandoffCall{Step: "build\x00", Known: known}},
		{name: "step-in-other-case-is-denied", call: HandoffCall{Step: "Build", Known: known}},
		{name: "artifact-not-exported-is-denied", call: HandoffCall{Step: "build", Artifacts: []string{"other.zip"}, Known: known}},
		{name: "duplicate-artifact-is-denied", call: HandoffCall{Step: "build", Artifacts: []string{"app.zip", "app.zip"}, Known: known}},
		{name: "artifact-path-is-denied", call: HandoffCall{Step: "build", Artifacts: []string{"/work/app.zip"}, Known: append(known, "/work/app.zip")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideHandoff(c, tc.call)
			assert.Equal(t, tc.allow, d.Allow, d.Reason)
			if tc.allow {
				assert.Equal(t, &HandoffEffective{Step: tc.call.Step, Artifacts: tc.call.Artifacts}, d.Effective)
			}
		})
	}
	t.Run("contract-without-mac-denies-every-handoff", func(t *testing.T) {
		c := devContract()
		c.Mac = nil
		d := DecideHandoff(c, HandoffCall{Step: "build"})
		assert.False(t, d.Allow)
		assert.Equal(t, "mac", d.Rule)
	})
}

func TestDecide(t *testing.T) {
	c := devContract()
	t.Run("run-command-decodes-and-decides", func(t *testing.T) {
		d, err := Decide(c, ToolRunCommand, []byte(`{"command":"ls -la","cwd":"src","env":{"CI":"1"},"timeout_seconds":5}`))
		require.NoError(t, err)
		require.True(t, d.Allow, d.Reason)
		eff := d.Effective.(*RunEffective)
		assert.Equal(t, "/work/src", eff.Cwd)
		out, err := json.Marshal(d)
		require.NoError(t, err)
		assert.Contains(t, string(out), `"timeout":"5s"`)
	})
	t.Run("write-file-counts-base64-content", func(t *testing.T) {
		d, err := Decide(c, ToolWriteFile, []byte(`{"path":"a","content":"aGVsbG8=","encoding":"base64"}`))
		require.NoError(t, err)
		require.True(t, d.Allow, d.Reason)
		assert.Equal(t, int64(5), d.Effective.(*FileEffective).Length)
	})
	t.Run("handoff-without-known-artifacts-denies-artifacts", func(t *testing.T) {
		d, err := Decide(c, ToolHandoffToMac, []byte(`{"step":"build","artifacts":["a.zip"]}`))
		require.NoError(t, err)
		assert.False(t, d.Allow)
	})
	t.Run("unknown-tool-is-default-deny", func(t *testing.T) {
		d, err := Decide(c, "delete_everything", []byte(`{}`))
		require.NoError(t, err)
		assert.False(t, d.Allow)
		assert.Equal(t, "default-deny", d.Rule)
	})
	bad := []struct{ name, tool, args string }{
		{"unknown-field-is-an-error", ToolRunCommand, `{"command":"ls","sandbox":"danger-full-access"}`},
		{"wrong-type-is-an-error", ToolRunCommand, `{"command":["ls"]}`},
		{"missing-command-is-an-error", ToolRunCommand, `{}`},
		{"duplicate-key-is-an-error", ToolRunCommand, `{"command":"ls","command":"rm -rf /"}`},
		{"case-variant-key-is-an-error", ToolRunCommand, `{"command":"ls","Command":"rm -rf /"}`},
		{"duplicate-nested-key-is-an-error", ToolRunCommand, `{"command":"ls","env":{"CI":"1","CI":"2"}}`},
		{"trailing-data-is-an-error", ToolRunCommand, `{"command":"ls"} {"command":"rm"}`},
		{"not-an-object-is-an-error", ToolRunCommand, `"ls"`},
		{"invalid-json-is-an-error", ToolReadFile, `{"path":`},
		{"bad-base64-is-an-error", ToolWriteFile, `{"path":"a","content":"!!","encoding":"base64"}`},
		{"unknown-encoding-is-an-error", ToolWriteFile, `{"path":"a","content":"x","encoding":"rot13"}`},
		{"export-with-extra-field-is-an-error", ToolExportArtifact, `{"path":"a","overwrite":true}`},
		{"handoff-with-command-is-an-error", ToolHandoffToMac, `{"step":"build","command":"rm -rf ~"}`},
		{"fractional-offset-is-an-error", ToolReadFile, `{"path":"a","offset":1.5}`},
		{"deep-nesting-is-an-error", ToolRunCommand, `{"command":"ls","env":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decide(c, tc.tool, []byte(tc.args))
			assert.Error(t, err)
		})
	}
}
