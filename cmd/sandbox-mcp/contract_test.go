package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

func TestContractCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	examples, err := filepath.Abs("../../contracts/examples")
	require.NoError(t, err)
	dir := t.TempDir()

	t.Run("valid-contracts-exit-0-with-their-hash-and-warnings-on-stderr", func(t *testing.T) {
		quick := filepath.Join(examples, "quickstart.yaml")
		review := filepath.Join(examples, "review-readonly.yaml")
		stdout, stderr, code := runBinary(t, bin, "contract", "check", quick, review)
		assert.Equal(t, 0, code, stderr)
		c, _, err := contracts.Load(quick)
		require.NoError(t, err)
		r, _, err := contracts.Load(review)
		require.NoError(t, err)
		assert.Equal(t, quick+": ok "+c.Hash()+"\n"+review+": ok "+r.Hash()+"\n", stdout)
		assert.Equal(t, quick+": warning: commands.allow[0]: python3 is allowed: that is arbitrary code; network and file confinement rest on the sandbox alone\n"+
			quick+": warning: commands.allow[1]: pytest runs code from the workdir, which paths.write[0] (/home/user/work) makes writable: the agent can write a test or build file and have it run (write-then-execute); confinement rests on the sandbox alone\n", stderr)
	})

	t.Run("an-invalid-contract-exits-1-and-prints-every-error", func(t *testing.T) {
		bad := filepath.Join(dir, "task.yaml")
		require.NoError(t, os.WriteFile(bad, []byte("version: 1\ntask:\n  id: t\ncommands:\n  allow:\n  - run: pytest\n  - run: git\n  - run: /bin/sh -c\nnetwork: {egress: sometimes}\n"), 0o600))
		good := filepath.Join(examples, "ios-app.yaml")
		stdout, stderr, code := runBinary(t, bin, "contract", "check", bad, good)
		assert.Equal(t, 1, code)
		assert.True(t, strings.HasPrefix(stdout, good+": ok sha256:"), "the valid file is still checked: %q", stdout)
		assert.Equal(t, bad+`:8:5: commands.allow[2].run: must be a program name, got "/bin/sh -c"`+"\n"+
			bad+`:9:11: network.egress: must be one of none, allowlist, open; got "sometimes"`+"\n"+
			"sandbox-mcp: contract check: 1 of 2 files invalid\n", stderr)
	})

	t.Run("a-missing-file-exits-1-and-names-it", func(t *testing.T) {
		missing := filepath.Join(dir, "nope.yaml")
		_, stderr, code := runBinary(t, bin, "contract", "check", missing)
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, missing+": contracts: open "+missing+": no such file or directory\n")
	})

	t.Run("schema-prints-the-embedded-schema", func(t *testing.T) {
		stdout, _, code := runBinary(t, bin, "contract", "schema")
		assert.Equal(t, 0, code)
		assert.Equal(t, string(contracts.Schema()), stdout)
	})

	t.Run("usage-errors-exit-2", func(t *testing.T) {
		for _, args := range [][]string{{"contract"}, {"contract", "frobnicate"}, {"contract", "check"}, {"contract", "schema", "extra"}} {
			_, stderr, code := runBinary(t, bin, args...)
			assert.Equal(t, 2, code, "%v: %s", args, stderr)
		}
	})

	t.Run("help-lists-the-subcommands", func(t *testing.T) {
		stdout, _, code := runBinary(t, bin, "contract", "-h")
		assert.Equal(t, 0, code)
		assert.Contains(t, stdout, "  check ")
		assert.Contains(t, stdout, "  schema ")
	})
}
