package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/audit"
)

func TestAuditVerifyCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "audit.jsonl")
	l, err := audit.Open(good, audit.Options{NoSync: true})
	require.NoError(t, err)
	for _, tool := range []string{"run_command", "write_file", "export_artifact", "read_file"} {
		l.Logger().Info("decision", audit.KeyTaskID, "task-1", audit.KeyTool, tool, audit.KeyDecision, "allow")
	}
	_, head := l.Head()
	require.NoError(t, l.Close())
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(data), "\n")[:4]

	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	edited := []byte(string(data))
	i := strings.Index(string(edited), "write_file")
	edited[i] = 'W'

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"an-intact-log-passes", []string{"audit", "verify", good}, 0, "ok: 4 lines, chain intact, head " + head, ""},
		{"an-intact-log-with-its-anchor-passes", []string{"audit", "verify", "-anchor", head, good}, 0, "ok: 4 lines", ""},
		{"an-edited-byte-fails-naming-the-line", []string{"audit", "verify", write("edited.jsonl", string(edited))}, 1, "", "line 2: line 2's sha256 does not match"},
		{"a-deleted-line-fails-naming-the-line", []string{"audit", "verify", write("deleted.jsonl", lines[0]+lines[2]+lines[3])}, 1, "", "line 2: seq is 3, expected 2"},
		{"a-cut-tail-fails-against-the-anchor", []string{"audit", "verify", "-anchor", head, write("cut.jsonl", lines[0]+lines[1])}, 1, "", "anchor"},
		{"a-missing-file-is-a-usage-error", []string{"audit", "verify", filepath.Join(dir, "nope")}, 2, "", "no such file"},
		{"no-file-is-a-usage-error", []string{"audit", "verify"}, 2, "", "expected exactly one FILE"},
		{"an-unknown-subcommand-is-a-usage-error", []string{"audit", "frobnicate"}, 2, "", "expected the subcommand 'verify'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runBinary(t, bin, tt.args...)
			assert.Equal(t, tt.wantCode, code, "stdout: %s\nstderr: %s", stdout, stderr)
			assert.Contains(t, stdout, tt.wantStdout)
			assert.Contains(t, stderr, tt.wantStderr)
		})
	}
}
