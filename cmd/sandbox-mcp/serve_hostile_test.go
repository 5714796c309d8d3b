package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var syscallTERM = syscall.SIGTERM

// rawStdio drives `serve` with hand-written JSON-RPC lines, as a broken or
// hostile client would.
type rawStdio struct {
	in  io.WriteCloser
	out *bufio.Reader
	cmd *exec.Cmd
}

func startRaw(t *testing.T, contract, state string, env ...string) *rawStdio {
	t.Helper()
	bin := buildBinary(t)
	cmd := exec.Command(bin, "serve", "--contract", contract, "--state", state, "--log-level", "warn")
	cmd.Env = append(append(cmd.Environ(), "SANDBOX_MCP_TEST_CANARY="+canary), env...)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	r := &rawStdio{in: in, out: bufio.NewReaderSize(out, 1<<20), cmd: cmd}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
	})
	r.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.reply(t, 0)
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawStdio) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(r.in, line+"\n")
	require.NoError(t, err)
}

// reply reads lines until the response with id arrives (skipping
// notifications) and returns it.
func (r *rawStdio) reply(t *testing.T, id int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		line, err := r.out.ReadString('\n')
		require.NoError(t, err, "server stdout closed")
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "stdout carries only JSON-RPC: %q", line)
		if v, ok := m["id"].(float64); ok && int(v) == id {
			return m
		}
	}
	t.Fatalf("no reply to %d", id)
	return nil
}

func toolCall(id int, tool string, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

func isToolError(m map[string]any) bool {
	res, _ := m["result"].(map[string]any)
	e, _ := res["isError"].(bool)
	return e
}

func TestServeSurvivesHostileStdioClients(t *testing.T) {
	requireE2E(t)
	r := startRaw(t, writeContract(t, "e2e-hostile", "local", "kill"), t.TempDir())

	t.Run("malformed-json-rpc-gets-an-error-and-the-server-goes-on", func(t *testing.T) {
		r.send(t, `{"jsonrpc":"2.0","id":1,"method":`)
		r.send(t, `this is not json`)
		r.send(t, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		m := r.reply(t, 2)
		assert.Contains(t, m, "result")
	})
	t.Run("wrong-types-are-an-is-error-result", func(t *testing.T) {
		r.send(t, toolCall(3, "run_command", `{"command":["echo","hi"]}`))
		assert.True(t, isToolError(r.reply(t, 3)))
		r.send(t, toolCall(4, "run_command", `"not an object"`))
		m := r.reply(t, 4)
		assert.True(t, isToolError(m) || m["error"] != nil)
	})
	t.Run("a-20-mib-argument-is-refused-cleanly", func(t *testing.T) {
		big := strings.Repeat("a", 20<<20)
		r.send(t, toolCall(5, "run_command", fmt.Sprintf(`{"command":"echo %s"}`, big)))
		assert.True(t, isToolError(r.reply(t, 5)))
		r.send(t, toolCall(6, "write_file", fmt.Sprintf(`{"path":"big.txt","content":"%s"}`, big)))
		assert.True(t, isToolError(r.reply(t, 6)))
	})
	t.Run("an-unknown-tool-is-an-error-not-a-crash", func(t *testing.T) {
		r.send(t, toolCall(7, "handoff_to_mac", `{"step":"build"}`))
		m := r.reply(t, 7)
		assert.True(t, isToolError(m) || m["error"] != nil)
	})
	t.Run("a-flood-of-requests-is-answered", func(t *testing.T) {
		const n = 200
		for i := 0; i < n; i++ {
			if i%2 == 0 {
				r.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 100+i))
			} else {
				r.send(t, toolCall(100+i, "run_command", `{"command":"rm -rf /"}`))
			}
		}
		seen := map[int]bool{}
		for len(seen) < n {
			line, err := r.out.ReadString('\n')
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			if v, ok := m["id"].(float64); ok && v >= 100 {
				seen[int(v)] = true
			}
		}
		r.send(t, toolCall(9, "run_command", `{"command":"echo after the flood"}`))
		m := r.reply(t, 9)
		assert.False(t, isToolError(m))
	})
}
