package e2blocal

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem/filesystemconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process/processconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/jail"
)

const testKey = "e2b_0000000000000000000000000000000000000000" // obviously fake

// testEnv is a Server behind a real HTTP listener.
type testEnv struct {
	t   testing.TB
	srv *Server
	ts  *httptest.Server
	dir string
	api *api.ClientWithResponses
}

func requireJail(t testing.TB) {
	t.Helper()
	if err := jail.Check(); err != nil {
		t.Skipf("process isolation is unavailable here: %v", err)
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

func newEnv(t testing.TB, mutate ...func(*Options)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	opts := Options{Dir: filepath.Join(dir, "state"), APIKey: testKey, Logger: testLogger(t)}
	for _, m := range mutate {
		m(&opts)
	}
	srv, err := New(opts)
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		require.NoError(t, srv.Close(context.Background()))
		ts.Close()
	})
	c, err := api.NewClientWithResponses(ts.URL, api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("X-API-Key", testKey)
		return nil
	}))
	require.NoError(t, err)
	return &testEnv{t: t, srv: srv, ts: ts, dir: opts.Dir, api: c}
}

// do sends a control-plane request with the test key and returns status and body.
func (e *testEnv) do(method, path string, body any) (int, []byte) {
	e.t.Helper()
	return e.doKey(method, path, body, testKey)
}

func (e *testEnv) doKey(method, path string, body any, key string) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(e.t, err)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, r)
	require.NoError(e.t, err)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, out
}

// create makes a sandbox through the generated client.
func (e *testEnv) create(body api.NewSandbox) api.Sandbox {
	e.t.Helper()
	if body.TemplateID == "" {
		body.TemplateID = "base"
	}
	if body.Timeout == nil {
		t := int32(600) // the API's default (15 s) is shorter than a slow -race run
		body.Timeout = &t
	}
	if body.AllowInternetAccess == nil {
		f := false
		body.AllowInternetAccess = &f
	}
	resp, err := e.api.CreateSandboxWithResponse(context.Background(), body)
	require.NoError(e.t, err)
	require.Equal(e.t, http.StatusCreated, resp.StatusCode(), string(resp.Body))
	return *resp.JSON201
}

// envdTransport adds the headers the SDKs send to reach a sandbox's envd.
type envdTransport struct {
	id, token, user string
}

func (tr envdTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", tr.id)
	r.Header.Set("E2b-Sandbox-Port", EnvdPort)
	if tr.token != "" {
		r.Header.Set("X-Access-Token", tr.token)
	}
	if tr.user != "" {
		r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(tr.user+":")))
	}
	return http.DefaultTransport.RoundTrip(r)
}

func tokenOf(sb api.Sandbox) string {
	if sb.EnvdAccessToken == nil {
		return ""
	}
	return *sb.EnvdAccessToken
}

func (e *testEnv) envdHTTP(sb api.Sandbox, user string) *http.Client {
	return &http.Client{Transport: envdTransport{id: sb.SandboxID, token: tokenOf(sb), user: user}}
}

func (e *testEnv) processClient(sb api.Sandbox, json bool) processconnect.ProcessClient {
	var opts []connect.ClientOption
	if json {
		opts = append(opts, connect.WithProtoJSON())
	}
	return processconnect.NewProcessClient(e.envdHTTP(sb, "user"), e.ts.URL, opts...)
}

func (e *testEnv) fsClient(sb api.Sandbox) filesystemconnect.FilesystemClient {
	return filesystemconnect.NewFilesystemClient(e.envdHTTP(sb, "user"), e.ts.URL, connect.WithProtoJSON())
}

// result is a finished command as the events told it.
type result struct {
	pid        uint32
	stdout     string
	stderr     string
	end        *process.ProcessEvent_EndEvent
	events     []string // kinds in order: start, data, keepalive, end
	firstData  int      // index in events of the first data event, -1 if none
	err        error
	keepalives int
}

// run starts a command and collects its whole stream.
func run(ctx context.Context, pc processconnect.ProcessClient, cmd string, mutate ...func(*connect.Request[process.StartRequest])) result {
	f := false
	req := connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}},
		Stdin:   &f,
	})
	for _, m := range mutate {
		m(req)
	}
	stream, err := pc.Start(ctx, req)
	res := result{firstData: -1}
	if err != nil {
		res.err = err
		return res
	}
	defer stream.Close()
	var out, errb strings.Builder
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Start:
			res.pid = e.Start.GetPid()
			res.events = append(res.events, "start")
		case *process.ProcessEvent_Data:
			if res.firstData < 0 {
				res.firstData = len(res.events)
			}
			res.events = append(res.events, "data")
			out.Write(e.Data.GetStdout())
			errb.Write(e.Data.GetStderr())
		case *process.ProcessEvent_Keepalive:
			res.keepalives++
			res.events = append(res.events, "keepalive")
		case *process.ProcessEvent_End:
			res.end = e.End
			res.events = append(res.events, "end")
		}
	}
	res.err = stream.Err()
	res.stdout, res.stderr = out.String(), errb.String()
	return res
}

// procsWith returns the pids whose command line contains marker.
func procsWith(marker string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if strings.Trim(e.Name(), "0123456789") != "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), marker) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitGone waits (bounded) until no process carries marker.
func waitGone(t testing.TB, marker string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(procsWith(marker)) == 0 }, 10*time.Second, 20*time.Millisecond,
		"processes with %q still running: %v", marker, procsWith(marker))
}
