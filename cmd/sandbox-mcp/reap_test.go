package main

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

func e2bClientFromEnv(t *testing.T, env []string) *e2b.Client {
	t.Helper()
	vals := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	c, err := e2b.New(e2b.Options{APIURL: vals["E2B_API_URL"], SandboxURL: vals["E2B_SANDBOX_URL"], APIKey: e2b.Secret(vals["E2B_API_KEY"])})
	require.NoError(t, err)
	return c
}

func runReapCmd(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), append([]string{"reap"}, args...)...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

func TestReapKillsWhatACrashedServerLeftBehind(t *testing.T) {
	requireE2E(t)
	env := startE2BLocal(t)
	client := e2bClientFromEnv(t, env)
	state := t.TempDir()
	contract := writeContract(t, "e2e-reap", "e2b", "kill")
	ours := map[string]string{tools.MetaTask: "e2e-reap"}

	r := startRaw(t, contract, state, env...)
	r.send(t, toolCall(1, "run_command", `{"command":"echo hi"}`))
	require.False(t, isToolError(r.reply(t, 1)))

	t.Run("a-running-server-is-left-alone", func(t *testing.T) {
		out, code := runReapCmd(t, env, "--state", state)
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "a server is using")
		left, err := client.List(context.Background(), ours)
		require.NoError(t, err)
		assert.Len(t, left, 1)
	})

	// The server dies without a chance to clean up.
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGKILL))
	r.cmd.Wait()
	left, err := client.List(context.Background(), ours)
	require.NoError(t, err)
	require.Len(t, left, 1, "the crash left the task's sandbox running")

	out, code := runReapCmd(t, env, "--state", state, "--dry-run")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "would kill "+left[0].ID)
	left, err = client.List(context.Background(), ours)
	require.NoError(t, err)
	require.Len(t, left, 1, "a dry run kills nothing")

	out, code = runReapCmd(t, env, "--state", state)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "killed "+left[0].ID)
	left, err = client.List(context.Background(), ours)
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestReapRemovesLocalSandboxDirectories(t *testing.T) {
	requireE2E(t)
	state := t.TempDir()
	r := startRaw(t, writeContract(t, "e2e-reap-local", "local", "kill"), state)
	r.send(t, toolCall(1, "run_command", `{"command":"echo hi"}`))
	require.False(t, isToolError(r.reply(t, 1)))
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGKILL))
	r.cmd.Wait()

	out, code := runReapCmd(t, nil, "--state", state)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "removed ")
	out, code = runReapCmd(t, nil, "--state", state)
	require.Equal(t, 0, code, out)
	assert.NotContains(t, out, "removed ", "nothing is left the second time")
}

func TestReapRefusesBadArguments(t *testing.T) {
	requireE2E(t)
	_, code := runReapCmd(t, nil)
	assert.Equal(t, 2, code)
	out, code := runReapCmd(t, nil, "--state", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "not a sandbox-mcp state directory")
}
