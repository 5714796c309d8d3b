package main

import (
	"context"
	"encoding/base64"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

func TestServeProgressArrivesDuringALongCommand(t *testing.T) {
	requireE2E(t)
	s := startStdio(t, writeContract(t, "e2e-progress", "local", "kill"), t.TempDir())
	// The redactor holds back the last few hundred bytes of a stream (a
	// secret may continue in the next chunk), so print more than that, then
	// stay busy: the output must reach the client while the command runs.
	m := structured(t, s.callCtx(t, context.Background(), "run_command",
		map[string]any{"command": "seq 1 3000; sleep 3; echo done"}, true))
	returned := time.Now()
	assert.True(t, strings.HasSuffix(m["stdout"].(string), "3000\ndone\n"))
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.progress, "progress notifications were sent")
	first := s.progress[0].msg
	require.Greater(t, len(first), 100, "the first progress message carries output")
	require.Contains(t, m["stdout"], first, "it is a piece of the command's output")
	assert.True(t, s.progress[0].at.Before(returned.Add(-time.Second)),
		"the first progress message arrived while the command was still running (3 s sleep after the output)")
}

// processWithArg reports whether a host process has arg in its command line.
func processWithArg(arg string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				return true
			}
		}
	}
	return false
}

func TestServeCancellationKillsTheCommand(t *testing.T) {
	requireE2E(t)
	s := startStdio(t, writeContract(t, "e2e-cancel", "local", "kill"), t.TempDir())
	const marker = "47.123" // a sleep nobody else runs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_command"
		req.Params.Arguments = map[string]any{"command": "sleep " + marker}
		_, _ = s.c.CallTool(ctx, req)
	}()
	require.Eventually(t, func() bool { return processWithArg(marker) }, 20*time.Second, 50*time.Millisecond, "the command started")
	cancel()
	<-done
	require.Eventually(t, func() bool { return !processWithArg(marker) }, 10*time.Second, 100*time.Millisecond,
		"cancelling the request killed the process in the sandbox")
	// The server keeps serving.
	m := structured(t, s.call(t, "run_command", map[string]any{"command": "echo still here"}))
	assert.Equal(t, "still here\n", m["stdout"])
}

func TestServeCanarySecretNeverLeaves(t *testing.T) {
	requireE2E(t)
	state := t.TempDir()
	s := startStdio(t, writeContract(t, "e2e-canary", "local", "kill"), state)

	// The grant injects the credential into printenv; what printenv prints
	// is redacted, in plain and in base64.
	m := structured(t, s.call(t, "run_command", map[string]any{"command": "printenv CANARY_TOKEN"}))
	assert.Equal(t, "[REDACTED:CANARY_TOKEN]\n", m["stdout"])
	m = structured(t, s.call(t, "run_command", map[string]any{"command": "printenv CANARY_TOKEN | base64"}))
	assert.NotContains(t, m["stdout"], base64.StdEncoding.EncodeToString([]byte(canary))[:20])
	// Not granted to echo: the variable is not even there.
	m = structured(t, s.call(t, "run_command", map[string]any{"command": "printenv"}))
	assert.NotContains(t, m["stdout"], canary)
	// An artifact's manifest records the last command, redacted.
	structured(t, s.call(t, "write_file", map[string]any{"path": "x.txt", "content": "x"}))
	structured(t, s.call(t, "export_artifact", map[string]any{"path": "x.txt"}))
	s.c.Close()

	assertNoCanary(t, state)
	assert.NotContains(t, s.stderr.String(), canary, "operator log")
	b64 := base64.StdEncoding.EncodeToString([]byte(canary))
	assert.NotContains(t, s.stderr.String(), b64)
}

// assertNoCanary walks every file under dir (state: audit log, store) and
// fails if the canary or its base64 appears.
func assertNoCanary(t *testing.T, dir string) {
	t.Helper()
	b64 := base64.StdEncoding.EncodeToString([]byte(canary))
	n := 0
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		n++
		assert.NotContains(t, string(b), canary, p)
		assert.NotContains(t, string(b), b64, p)
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, n, "state files were checked")
}

func TestServeAuditChainVerifiesAndDetectsTampering(t *testing.T) {
	requireE2E(t)
	state := t.TempDir()
	s := startStdio(t, writeContract(t, "e2e-audit", "local", "kill"), state)
	structured(t, s.call(t, "run_command", map[string]any{"command": "echo one"}))
	require.True(t, s.call(t, "run_command", map[string]any{"command": "rm -rf /"}).IsError)
	s.c.Close()

	bin := buildBinary(t)
	log := filepath.Join(state, "audit.jsonl")
	out, stderr, code := runBinary(t, bin, "audit", "verify", log)
	require.Equal(t, 0, code, "stdout %s stderr %s", out, stderr)
	raw, err := os.ReadFile(log)
	require.NoError(t, err)
	for _, want := range []string{`"tool":"run_command"`, `"decision":"deny"`, `"decision":"allow"`, `"exit_code":0`, `"task_id":"e2e-audit"`, `"msg":"sandbox ended"`} {
		assert.Contains(t, string(raw), want)
	}

	lines := strings.SplitAfter(string(raw), "\n")
	require.Greater(t, len(lines), 4)
	removed := strings.Join(append(append([]string{}, lines[:2]...), lines[3:]...), "")
	// Line 1 is the first decision (allow); making it look like something
	// else must break the chain at the line after it.
	edited := strings.Replace(string(raw), `"decision":"allow"`, `"decision":"deny!"`, 1)
	require.NotEqual(t, string(raw), edited)
	for name, body := range map[string]string{"line-removed": removed, "line-edited": edited} {
		t.Run(name+"-fails-verification", func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "audit.jsonl")
			require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
			out, stderr, code := runBinary(t, bin, "audit", "verify", p)
			assert.Equal(t, 1, code, "stdout %s stderr %s log:\n%s", out, stderr, body)
		})
	}
}

// startE2BLocal runs `sandbox-mcp e2b-local` as its own process on a free
// loopback port and returns the environment that points a server at it.
func startE2BLocal(t *testing.T) []string {
	t.Helper()
	bin := buildBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	const key = "e2b_0000000000000000000000000000000000000000"
	cmd := exec.Command(bin, "e2b-local", "--listen", addr, "--api-key", key, "--dir", t.TempDir())
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		waited := make(chan struct{})
		go func() { cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
		}
	})
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "e2b-local listening; stderr: %s", stderr)
	url := "http://" + addr
	return []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key}
}

func TestServeRestartReconnectsToTheTasksSandbox(t *testing.T) {
	requireE2E(t)
	env := startE2BLocal(t)
	state := t.TempDir()
	contract := writeContract(t, "e2e-restart", "e2b", "pause")

	s := startStdio(t, contract, state, env...)
	structured(t, s.call(t, "write_file", map[string]any{"path": "kept.txt", "content": "survives a restart"}))
	s.c.Close() // stdin EOF: the contract says pause

	s = startStdio(t, contract, state, env...)
	m := structured(t, s.call(t, "read_file", map[string]any{"path": "kept.txt"}))
	assert.Equal(t, "survives a restart", m["content"])
	m = structured(t, s.call(t, "run_command", map[string]any{"command": "cat kept.txt"}))
	assert.Equal(t, "survives a restart", m["stdout"])
	s.c.Close()
}

func TestServeRestartSaysSoWhenTheSandboxIsGone(t *testing.T) {
	requireE2E(t)
	env := startE2BLocal(t)
	state := t.TempDir()
	contract := writeContract(t, "e2e-gone", "e2b", "kill")

	s := startStdio(t, contract, state, env...)
	structured(t, s.call(t, "write_file", map[string]any{"path": "lost.txt", "content": "gone with the sandbox"}))
	s.c.Close() // the contract says kill

	s = startStdio(t, contract, state, env...)
	m := structured(t, s.call(t, "run_command", map[string]any{"command": "cat lost.txt"}))
	assert.Contains(t, m["notice"], "no longer exists")
	assert.EqualValues(t, 1, m["exit_code"])
}

func TestServeRestartWithAChangedContractDoesNotReuseTheSandbox(t *testing.T) {
	requireE2E(t)
	env := startE2BLocal(t)
	client := e2bClientFromEnv(t, env)
	state := t.TempDir()
	before := writeContract(t, "e2e-changed", "e2b", "pause")

	s := startStdio(t, before, state, env...)
	structured(t, s.call(t, "write_file", map[string]any{"path": "old.txt", "content": "written under the old rules"}))
	s.c.Close() // paused, kept for a restart under the same contract

	// Same task, other rules: the sandbox made under the old ones must not
	// come back.
	raw, err := os.ReadFile(before)
	require.NoError(t, err)
	after := filepath.Join(t.TempDir(), "task.yaml")
	require.NoError(t, os.WriteFile(after, []byte(strings.Replace(string(raw), "max_timeout: 60s", "max_timeout: 30s", 1)), 0o600))

	s = startStdio(t, after, state, env...)
	m := structured(t, s.call(t, "run_command", map[string]any{"command": "cat old.txt"}))
	assert.Contains(t, m["notice"], "the contract changed")
	assert.EqualValues(t, 1, m["exit_code"], "the new sandbox has none of the old files")
	left, err := client.List(context.Background(), map[string]string{tools.MetaTask: "e2e-changed"})
	require.NoError(t, err)
	assert.Len(t, left, 1, "the old sandbox was killed; only the new one runs")
}
