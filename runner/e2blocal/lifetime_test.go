package e2blocal

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process"
)

// startSleeper starts a sleep with marker m in its argv and returns once it runs.
func startSleeper(t *testing.T, e *testEnv, sb api.Sandbox, m string) {
	t.Helper()
	stream, err := e.processClient(sb, false).Start(context.Background(), connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", fmt.Sprintf("sleep 1%s & sleep %s", m, m)}},
	}))
	require.NoError(t, err)
	require.True(t, stream.Receive())
	require.Eventually(t, func() bool { return len(procsWith(m)) >= 2 }, 10*time.Second, 10*time.Millisecond)
	t.Cleanup(func() { stream.Close() })
}

func TestExpiry(t *testing.T) {
	requireJail(t)
	ctx := context.Background()

	t.Run("kill-at-timeout-removes-processes-and-files", func(t *testing.T) {
		e := newEnv(t)
		sb := e.create(api.NewSandbox{Timeout: ptr(int32(1))})
		m := marker(t)
		startSleeper(t, e, sb, m)
		waitGone(t, m)
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(e.dir, sb.SandboxID))
			return os.IsNotExist(err)
		}, 10*time.Second, 20*time.Millisecond)
		g, err := e.api.GetSandboxWithResponse(ctx, sb.SandboxID)
		require.NoError(t, err)
		assert.Equal(t, 404, g.StatusCode())
	})

	t.Run("pause-at-timeout-keeps-files-and-resumes", func(t *testing.T) {
		e := newEnv(t)
		sb := e.create(api.NewSandbox{Timeout: ptr(int32(1)), AutoPause: ptr(true)})
		code, body := e.upload(sb, "/home/user/kept.txt", strings.NewReader("kept"))
		require.Equal(t, 200, code, body)
		require.Eventually(t, func() bool {
			g, err := e.api.GetSandboxWithResponse(ctx, sb.SandboxID)
			return err == nil && g.JSON200 != nil && g.JSON200.State == api.Paused
		}, 10*time.Second, 20*time.Millisecond)
		g, _ := e.api.GetSandboxWithResponse(ctx, sb.SandboxID)
		assert.Equal(t, api.Pause, g.JSON200.Lifecycle.OnTimeout)

		resp, err := e.envdHTTP(sb, "").Get(e.ts.URL + "/health")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadGateway, resp.StatusCode, "a paused sandbox is not running")

		c, err := e.api.ConnectSandboxWithResponse(ctx, sb.SandboxID, api.ConnectSandboxJSONRequestBody{Timeout: 60})
		require.NoError(t, err)
		require.Equal(t, 201, c.StatusCode(), string(c.Body))
		code, data := e.download(sb, "/home/user/kept.txt")
		assert.Equal(t, 200, code)
		assert.Equal(t, "kept", string(data))
	})
}

func TestCloseLeavesNothing(t *testing.T) {
	requireJail(t)
	dir := filepath.Join(t.TempDir(), "state")
	srv, err := New(Options{Dir: dir, APIKey: testKey, Logger: testLogger(t)})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = srv.Close(context.Background()) }) // runs first, even on failure
	c, err := api.NewClientWithResponses(ts.URL, api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("X-API-Key", testKey)
		return nil
	}))
	require.NoError(t, err)
	e := &testEnv{t: t, srv: srv, ts: ts, dir: dir, api: c}

	m1, m2 := marker(t), marker(t)
	running := e.create(api.NewSandbox{})
	startSleeper(t, e, running, m1)
	paused := e.create(api.NewSandbox{})
	startSleeper(t, e, paused, m2)
	resp, err := c.PauseSandboxWithResponse(context.Background(), paused.SandboxID, api.PauseSandboxJSONRequestBody{})
	require.NoError(t, err)
	require.Equal(t, 204, resp.StatusCode())

	require.NoError(t, srv.Close(context.Background()))
	assert.Empty(t, procsWith(m1), "Close must wait for every process to be gone")
	assert.Empty(t, procsWith(m2), "Close must kill paused processes too")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "Close must remove every sandbox directory")

	code, _ := e.do(http.MethodPost, "/sandboxes", `{"templateID":"base","allow_internet_access":false}`)
	assert.Equal(t, http.StatusServiceUnavailable, code, "a closed server creates nothing")
}

func TestCommandsLeakNoDescriptors(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)
	sb := e.create(api.NewSandbox{})
	pc := e.processClient(sb, false)
	countFDs := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(ents)
	}
	for range 3 { // warm the client's connection pool
		require.NoError(t, run(ctx, pc, "echo warm").err)
	}
	before := countFDs()
	for i := range 20 {
		r := run(ctx, pc, fmt.Sprintf("echo %d; echo err >&2; sleep 0.3 & exit 1", i))
		require.NoError(t, r.err)
	}
	// Each leaked command would hold at least two pipes: 20 commands, 40 fds.
	assert.LessOrEqual(t, countFDs(), before+4, "commands leaked descriptors")
}

func TestNewRemovesOnlyStaleSandboxDirectories(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)
	live := e.create(api.NewSandbox{})

	stale := filepath.Join(e.dir, "i"+strings.Repeat("s", 20))
	require.NoError(t, os.MkdirAll(filepath.Join(stale, "home", "locked"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(stale, "home", "locked", "f"), []byte("x"), 0o600))
	require.NoError(t, os.Chmod(filepath.Join(stale, "home", "locked"), 0o500))
	other := filepath.Join(e.dir, "keep-me")
	require.NoError(t, os.MkdirAll(other, 0o700))

	second, err := New(Options{Dir: e.dir, APIKey: testKey, Logger: testLogger(t)})
	require.NoError(t, err)
	defer second.Close(ctx)

	assert.NoDirExists(t, stale, "a directory no live server owns is removed")
	assert.DirExists(t, other, "entries that are not sandbox directories are left alone")
	assert.DirExists(t, filepath.Join(e.dir, live.SandboxID), "another live server's sandbox is left alone")
	r := run(ctx, e.processClient(live, true), "echo still-here")
	require.NoError(t, r.err)
	assert.Equal(t, "still-here\n", r.stdout)
}
