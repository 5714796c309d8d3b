package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/store"
)

const testToken = "test-token-0123456789abcdef"

var listenRE = regexp.MustCompile(`url=(http://\S+)`)

// startHTTP starts `sandbox-mcp serve --http` (or --sse) on a free loopback
// port and returns its URL.
func startHTTP(t *testing.T, contract, flag string) string {
	t.Helper()
	return startHTTPServer(t, contract, flag, t.TempDir()).url
}

type httpServer struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

func startHTTPServer(t *testing.T, contract, flag, state string) *httpServer {
	t.Helper()
	bin := buildBinary(t)
	cmd := exec.Command(bin, "serve", "--contract", contract, "--state", state, flag, "127.0.0.1:0")
	cmd.Env = append(cmd.Environ(), "SANDBOX_MCP_TOKEN="+testToken, "SANDBOX_MCP_TEST_CANARY="+canary)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	urls := make(chan string, 1)
	logs := &syncBuffer{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscallTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Errorf("server did not stop on SIGTERM; log:\n%s", logs)
		}
	})
	select {
	case u := <-urls:
		return &httpServer{url: u, cmd: cmd, done: done}
	case <-time.After(20 * time.Second):
		t.Fatalf("server did not start listening; log:\n%s", logs)
	}
	return nil
}

func TestServeHTTPSigtermEndsTheSandbox(t *testing.T) {
	requireE2E(t)
	state := t.TempDir()
	srv := startHTTPServer(t, writeContract(t, "e2e-sigterm", "local", "kill"), "--http", state)
	c := httpClient(t, srv.url)
	res, err := callTool(context.Background(), c, "run_command", map[string]any{"command": "echo up"})
	require.NoError(t, err)
	structured(t, res)
	dirs, _ := filepath.Glob(filepath.Join(state, "sandboxes", "*"))
	require.NotEmpty(t, dirs, "the sandbox exists while the server runs")

	require.NoError(t, srv.cmd.Process.Signal(syscallTERM))
	select {
	case <-srv.done:
	case <-time.After(20 * time.Second):
		t.Fatal("server did not stop on SIGTERM")
	}
	assert.Equal(t, 0, srv.cmd.ProcessState.ExitCode())
	dirs, _ = filepath.Glob(filepath.Join(state, "sandboxes", "i*"))
	assert.Empty(t, dirs, "the sandbox's directory is gone")
	st, err := store.Open(filepath.Join(state, "store"), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	rec, err := st.GetTask(context.Background(), "e2e-sigterm")
	require.NoError(t, err)
	assert.Equal(t, store.StatusKilled, rec.Status, "the contract says kill")
}

func httpClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + testToken}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-http", Version: "1"}
	_, err = c.Initialize(ctx, init)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func callTool(ctx context.Context, c *client.Client, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

func TestServeHTTPToolsAndAccessRules(t *testing.T) {
	requireE2E(t)
	url := startHTTP(t, writeContract(t, "e2e-http", "local", "kill"), "--http")
	c := httpClient(t, url)

	t.Run("allowed-and-denied-calls", func(t *testing.T) {
		res, err := callTool(context.Background(), c, "run_command", map[string]any{"command": "seq 3"})
		require.NoError(t, err)
		m := structured(t, res)
		assert.Equal(t, "1\n2\n3\n", m["stdout"])
		res, err = callTool(context.Background(), c, "run_command", map[string]any{"command": "echo $(cat /etc/passwd)"})
		require.NoError(t, err)
		assert.True(t, res.IsError)
	})

	post := func(mutate func(*http.Request)) *http.Response {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
		req, err := http.NewRequest("POST", url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+testToken)
		mutate(req)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	cases := []struct {
		name   string
		mutate func(*http.Request)
		want   int
	}{
		{"no-token-is-401", func(r *http.Request) { r.Header.Del("Authorization") }, 401},
		{"wrong-token-is-401", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope-nope-nope-nope") }, 401},
		{"rebound-host-is-403", func(r *http.Request) { r.Host = "evil.example:80" }, 403},
		{"foreign-origin-is-403", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403},
		{"huge-body-is-413", func(r *http.Request) {
			big := bytes.Repeat([]byte("a"), 20<<20)
			r.Body = io.NopCloser(bytes.NewReader(big))
			r.ContentLength = int64(len(big))
		}, 413},
		{"loopback-origin-with-token-is-served", func(r *http.Request) { r.Header.Set("Origin", "http://localhost:6274") }, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, post(tc.mutate).StatusCode)
		})
	}

	t.Run("concurrent-sessions-all-succeed", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8*5)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				cc := httpClient(t, url)
				for j := 0; j < 5; j++ {
					res, err := callTool(context.Background(), cc, "run_command", map[string]any{"command": fmt.Sprintf("echo %d-%d", i, j)})
					switch {
					case err != nil:
						errs <- err
					case res.IsError || !strings.Contains(resultText(res), fmt.Sprintf("%d-%d", i, j)):
						errs <- fmt.Errorf("session %d call %d: %s", i, j, resultText(res))
					}
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("a-client-that-disconnects-mid-call-does-not-stop-the-server", func(t *testing.T) {
		cc := httpClient(t, url)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := callTool(ctx, cc, "run_command", map[string]any{"command": "sleep 20"})
		require.Error(t, err)
		res, err := callTool(context.Background(), c, "run_command", map[string]any{"command": "echo alive"})
		require.NoError(t, err)
		assert.Contains(t, resultText(res), "alive")
	})
}

func TestServeSSETransport(t *testing.T) {
	requireE2E(t)
	url := startHTTP(t, writeContract(t, "e2e-sse", "local", "kill"), "--sse")
	c, err := client.NewSSEMCPClient(url, transport.WithHeaders(map[string]string{"Authorization": "Bearer " + testToken}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-sse", Version: "1"}
	_, err = c.Initialize(ctx, init)
	require.NoError(t, err)
	res, err := callTool(ctx, c, "run_command", map[string]any{"command": "echo over sse"})
	require.NoError(t, err)
	assert.Equal(t, "over sse\n", structured(t, res)["stdout"])

	resp, err := http.Get(strings.TrimSuffix(url, "/sse") + "/sse")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 401, resp.StatusCode, "SSE without a token")
}
