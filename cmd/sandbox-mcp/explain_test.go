package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContractExplain runs the real binary: the decision is one JSON object
// on stdout and the exit status says allowed (0), denied (3) or invalid (1).
func TestContractExplain(t *testing.T) {
	bin := buildBinary(t)
	quickstart := filepath.Join("..", "..", "contracts", "examples", "quickstart.yaml")
	ios := filepath.Join("..", "..", "contracts", "examples", "ios-app.yaml")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("version: 1\ncommands: {allow: [{run: ls, bogus: 1}]}\n"), 0o644))

	cases := []struct {
		name  string
		args  []string
		code  int
		allow bool
		rule  string
	}{
		{name: "allowed-command-exits-zero", args: []string{quickstart, "run_command", `{"command":"pytest -q"}`}, code: 0, allow: true, rule: "commands.allow[1]"},
		{name: "chained-curl-is-denied-with-exit-three", args: []string{quickstart, "run_command", `{"command":"pytest -q && curl evil.example"}`}, code: 3, rule: "commands.allow"},
		{name: "write-outside-paths-is-denied", args: []string{quickstart, "write_file", `{"path":"/etc/x","content":"x"}`}, code: 3, rule: "paths.write"},
		{name: "handoff-with-known-artifact-is-allowed", args: []string{"--known", "src.tgz", ios, "handoff_to_mac", `{"step":"build","artifacts":["src.tgz"]}`}, code: 0, allow: true, rule: "mac.steps.build"},
		{name: "handoff-without-known-artifacts-is-denied", args: []string{ios, "handoff_to_mac", `{"step":"build","artifacts":["src.tgz"]}`}, code: 3, rule: "builtin.artifacts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runBinary(t, bin, append([]string{"contract", "explain"}, tc.args...)...)
			require.Equal(t, tc.code, code, "stderr: %s", stderr)
			var d struct {
				Allow     bool           `json:"allow"`
				Rule      string         `json:"rule"`
				Reason    string         `json:"reason"`
				Effective map[string]any `json:"effective"`
			}
			require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
			assert.Equal(t, tc.allow, d.Allow)
			assert.Equal(t, tc.rule, d.Rule)
			assert.NotEmpty(t, d.Reason)
			assert.Equal(t, tc.allow, d.Effective != nil)
		})
	}

	invalid := []struct {
		name string
		args []string
		code int
	}{
		{name: "invalid-contract-exits-one", args: []string{bad, "run_command", `{"command":"ls"}`}, code: 1},
		{name: "missing-contract-exits-one", args: []string{filepath.Join(t.TempDir(), "none.yaml"), "run_command", `{"command":"ls"}`}, code: 1},
		{name: "unknown-argument-field-exits-one", args: []string{quickstart, "run_command", `{"command":"ls","sandbox":"off"}`}, code: 1},
		{name: "malformed-json-exits-one", args: []string{quickstart, "run_command", `{"command":`}, code: 1},
		{name: "missing-arguments-is-a-usage-error", args: []string{quickstart, "run_command"}, code: 2},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runBinary(t, bin, append([]string{"contract", "explain"}, tc.args...)...)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			assert.NotEmpty(t, stderr)
		})
	}
}
