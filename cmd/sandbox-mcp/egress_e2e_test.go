package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/jail"
)

// egressContract allows curl and python3 on the local backend with an
// egress allowlist of pypi.org only.
const egressContract = `version: 1
task:
  id: egress-e2e
  owner: tester@example.com
sandbox:
  backend: local
  lifetime: 10m
commands:
  default_timeout: 30s
  max_timeout: 60s
  allow:
    - run: curl
    - run: python3
network:
  egress: allowlist
  allow: [pypi.org]
limits:
  output_bytes: 64KiB
`

// runResult is run_command's structured result as `call` prints it.
type runResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

func callRun(t *testing.T, bin, contract, command string) (runResult, string, int) {
	t.Helper()
	return callRunState(t, bin, contract, t.TempDir(), command)
}

// callRunState is callRun with the state directory given, so the test can
// read the audit log afterwards.
func callRunState(t *testing.T, bin, contract, state, command string) (runResult, string, int) {
	t.Helper()
	args, err := json.Marshal(map[string]string{"command": command})
	require.NoError(t, err)
	stdout, stderr, code := runBinary(t, bin, "call", "--quiet", "--contract", contract, "--state", state, "run_command", string(args))
	var r runResult
	if code == 0 {
		require.NoError(t, json.Unmarshal([]byte(stdout), &r), "stdout: %s\nstderr: %s", stdout, stderr)
	}
	return r, stdout + stderr, code
}

// TestEgressAllowlistOnTheLocalBackend drives the product path: a contract
// with egress: allowlist on the local backend starts a sandbox whose only
// way out is the filtering proxy. Nothing here reaches a public address:
// every destination tried is refused before any resolution or dial.
func TestEgressAllowlistOnTheLocalBackend(t *testing.T) {
	requireE2E(t)
	if err := jail.Check(); err != nil {
		t.Skipf("process isolation is unavailable here: %v", err)
	}
	bin := buildBinary(t)
	contract := filepath.Join(t.TempDir(), "task.yaml")
	require.NoError(t, os.WriteFile(contract, []byte(egressContract), 0o600))

	t.Run("curl-to-a-host-outside-the-allowlist-is-denied-by-policy-before-it-runs", func(t *testing.T) {
		_, out, code := callRun(t, bin, contract, "curl -sS https://evil.example")
		assert.Equal(t, 3, code, out)
		assert.Contains(t, out, "denied by network.allow")
	})
	t.Run("python-reaching-a-host-outside-the-allowlist-is-refused-by-the-proxy", func(t *testing.T) {
		// The static check cannot see a URL inside a program; the proxy can.
		state := t.TempDir()
		r, out, code := callRunState(t, bin, contract, state, `python3 -c "import urllib.request; urllib.request.urlopen('https://evil.example')"`)
		require.Equal(t, 0, code, out)
		assert.NotEqual(t, 0, r.ExitCode)
		assert.Contains(t, r.Stderr, "Tunnel connection failed: 403")
		// The proxy's refusal is a side effect of the command: audited.
		log, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
		require.NoError(t, err)
		assert.Regexp(t, `"msg":"egress".*"decision":"deny".*"host":"evil.example"`, string(log))
	})
	t.Run("python-ignoring-the-proxy-reaches-nothing", func(t *testing.T) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, "host secret\n")
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		r, out, code := callRun(t, bin, contract, fmt.Sprintf(`python3 -c "import socket; print(socket.create_connection(('127.0.0.1', %d), 5).recv(100))"`, port))
		require.Equal(t, 0, code, out)
		assert.NotEqual(t, 0, r.ExitCode)
		assert.NotContains(t, r.Stdout, "host secret")
		assert.Contains(t, r.Stderr, "Connection refused")
		// The neighbour: the proxy inside the sandbox is reachable, and set.
		r, out, code = callRun(t, bin, contract, `python3 -c "import os, socket; socket.create_connection(('127.0.0.1', 3128), 5); print(os.environ['HTTPS_PROXY'])"`)
		require.Equal(t, 0, code, out)
		assert.Equal(t, 0, r.ExitCode, r.Stderr)
		assert.Equal(t, "http://127.0.0.1:3128\n", r.Stdout)
	})
	t.Run("the-python-pypi-example-starts-a-sandbox", func(t *testing.T) {
		r, out, code := callRun(t, bin, "../../contracts/examples/python-pypi.yaml", "python3 --version")
		require.Equal(t, 0, code, out)
		assert.Equal(t, 0, r.ExitCode, r.Stderr)
		assert.Contains(t, r.Stdout, "Python 3")
	})
}
