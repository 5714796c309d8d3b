package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveExit runs serve to completion (it must exit on its own) and returns
// its exit code and stderr.
func serveExit(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader("") // stdio mode ends at EOF
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err)
	return 0, string(out)
}

func TestServeRefusesUnsafeOrBrokenSetups(t *testing.T) {
	requireE2E(t)
	contract := writeContract(t, "e2e-flags", "local", "kill")
	state := func() string { return "--state=" + t.TempDir() }
	canaryEnv := "SANDBOX_MCP_TEST_CANARY=" + canary

	t.Run("a-non-loopback-address-without-a-chosen-token-is-refused", func(t *testing.T) {
		code, out := serveExit(t, []string{canaryEnv, "SANDBOX_MCP_TOKEN="}, "--contract", contract, state(), "--http", "0.0.0.0:0")
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "refusing to listen on 0.0.0.0:0 without a bearer token")
	})
	t.Run("a-non-loopback-address-with-a-token-listens", func(t *testing.T) {
		cmd := exec.Command(buildBinary(t), "serve", "--contract", contract, state(), "--http", "0.0.0.0:0")
		cmd.Env = append(os.Environ(), canaryEnv, "SANDBOX_MCP_TOKEN="+testToken)
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		defer func() { cmd.Process.Signal(syscallTERM); cmd.Wait() }()
		listening := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "msg=listening") {
					listening <- true
					return
				}
			}
			listening <- false
		}()
		select {
		case ok := <-listening:
			assert.True(t, ok, "the server said it is listening")
		case <-time.After(20 * time.Second):
			t.Fatal("no listening line")
		}
	})
	t.Run("a-short-token-is-refused", func(t *testing.T) {
		code, out := serveExit(t, []string{canaryEnv, "SANDBOX_MCP_TOKEN=short"}, "--contract", contract, state(), "--http", "127.0.0.1:0")
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "at least 16 characters")
	})
	t.Run("a-credential-that-cannot-be-read-stops-the-server", func(t *testing.T) {
		code, out := serveExit(t, []string{"SANDBOX_MCP_TEST_CANARY="}, "--contract", contract, state())
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "credential CANARY_TOKEN: environment variable SANDBOX_MCP_TEST_CANARY is not set")
	})
	t.Run("with-the-credential-stdio-serves-until-eof", func(t *testing.T) {
		code, out := serveExit(t, []string{canaryEnv}, "--contract", contract, state())
		assert.Equal(t, 0, code, out)
	})
	t.Run("an-invalid-contract-is-refused-with-its-errors", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		require.NoError(t, os.WriteFile(bad, []byte("version: 1\ntask: {id: x}\nsandbox: {lifetim: 5m}\n"), 0o600))
		code, out := serveExit(t, nil, "--contract", bad, state())
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "bad.yaml:3:")
		assert.Contains(t, out, "sandbox.lifetim")
	})
	t.Run("usage-errors-exit-2", func(t *testing.T) {
		code, _ := serveExit(t, nil)
		assert.Equal(t, 2, code)
		code, _ = serveExit(t, nil, "--contract", contract, "--http", "127.0.0.1:0", "--sse", "127.0.0.1:0")
		assert.Equal(t, 2, code)
	})
}

func TestCallRefusesBadArguments(t *testing.T) {
	requireE2E(t)
	bin := buildBinary(t)
	contract := writeContract(t, "e2e-call-args", "local", "kill")
	_, stderr, code := runBinary(t, bin, "call", "--contract", contract, "run_command", "{not json")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "ARGS_JSON must be a JSON object")
	_, _, code = runBinary(t, bin, "call", "--contract", contract, "run_command")
	assert.Equal(t, 2, code)
}
