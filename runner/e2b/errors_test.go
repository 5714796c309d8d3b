package e2b

// Error mapping for the responses e2blocal cannot produce (429 with
// Retry-After, 507 disk full, 502 from the sandbox proxy), served by an
// httptest server replaying the bodies E2B sends. Everything else is tested
// against the real e2blocal in e2blocal_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	fakeKey   = "e2b_fake_0123456789abcdef0123456789abcdef"
	fakeToken = "fake-envd-token-do-not-use"
	fakeID    = "ifakefakefakefakefake"
)

// replay is an httptest server answering each request with the next
// recorded response for its path, and recording what it was sent.
type replay struct {
	mu        sync.Mutex
	responses map[string][]recorded
	requests  []*http.Request
	bodies    []string
}

type recorded struct {
	status int
	header map[string]string
	body   string
}

func (rp *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rp.mu.Lock()
	rp.requests = append(rp.requests, r)
	rp.bodies = append(rp.bodies, string(body))
	key := r.Method + " " + r.URL.Path
	queue := rp.responses[key]
	if len(queue) == 0 {
		rp.mu.Unlock()
		http.Error(w, "unexpected "+key, http.StatusTeapot)
		return
	}
	resp := queue[0]
	if len(queue) > 1 {
		rp.responses[key] = queue[1:]
	}
	rp.mu.Unlock()
	for k, v := range resp.header {
		w.Header().Set(k, v)
	}
	if resp.body != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(resp.status)
	_, _ = io.WriteString(w, resp.body)
}

func (rp *replay) count() int {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return len(rp.requests)
}

const createdBody = `{"templateID":"base","sandboxID":"` + fakeID + `","clientID":"c","envdVersion":"0.6.13","envdAccessToken":"` + fakeToken + `","domain":null}`

// newReplay starts the server and a client pointed at it for both the
// control plane and envd; waits between retries are recorded, not slept.
func newReplay(t *testing.T, responses map[string][]recorded) (*replay, *Client, *[]time.Duration) {
	t.Helper()
	rp := &replay{responses: responses}
	ts := httptest.NewServer(rp)
	t.Cleanup(ts.Close)
	c, err := New(Options{APIURL: ts.URL, SandboxURL: ts.URL, APIKey: fakeKey,
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	require.NoError(t, err)
	var waits []time.Duration
	var mu sync.Mutex
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return rp, c, &waits
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
		want       time.Duration
	}{
		{"retry-after-in-seconds-is-waited", "7", 7 * time.Second},
		{"retry-after-as-http-date-is-waited", "Fri, 02 Jan 2026 03:04:17 GMT", 12 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limited := recorded{status: 429, header: map[string]string{"Retry-After": tt.retryAfter},
				body: `{"code":429,"message":"too many requests for team"}`}
			detail := `{"templateID":"base","sandboxID":"` + fakeID + `","clientID":"c","startedAt":"2026-01-02T03:00:00Z","endAt":"2026-01-02T04:00:00Z","cpuCount":2,"memoryMB":512,"diskSizeMB":1024,"state":"running","envdVersion":"0.6.13"}`
			rp, c, waits := newReplay(t, map[string][]recorded{
				"GET /sandboxes/" + fakeID: {limited, {status: 200, body: detail}},
			})
			info, err := c.Get(context.Background(), fakeID)
			require.NoError(t, err)
			assert.Equal(t, "running", info.State)
			assert.Equal(t, 2, rp.count())
			assert.Equal(t, []time.Duration{tt.want}, *waits)
		})
	}
}

func TestRateLimitErrorIsTypedWhenRetriesRunOut(t *testing.T) {
	limited := recorded{status: 429, header: map[string]string{"Retry-After": "2"},
		body: `{"code":429,"message":"rate limit exceeded"}`}
	rp, c, waits := newReplay(t, map[string][]recorded{"DELETE /sandboxes/" + fakeID: {limited}})
	err := c.Kill(context.Background(), fakeID)
	var rl *RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, 2*time.Second, rl.RetryAfter)
	assert.Equal(t, 4, rp.count(), "one call and three retries")
	assert.Len(t, *waits, 3)
	assert.Contains(t, err.Error(), "e2b: kill sandbox "+fakeID+": ")
	assert.Contains(t, err.Error(), "rate limit exceeded")
}

func TestRetryAfterBeyondTheBudgetIsNotWaited(t *testing.T) {
	limited := recorded{status: 429, header: map[string]string{"Retry-After": "3600"}, body: `{"code":429,"message":"slow down"}`}
	rp, c, waits := newReplay(t, map[string][]recorded{"GET /sandboxes/" + fakeID: {limited}})
	_, err := c.Get(context.Background(), fakeID)
	var rl *RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, time.Hour, rl.RetryAfter)
	assert.Equal(t, 1, rp.count())
	assert.Empty(t, *waits)
}

func TestCreateIsNeverRetried(t *testing.T) {
	tests := []struct {
		name string
		resp recorded
		kind error
	}{
		{"create-rate-limited-is-not-retried", recorded{status: 429, header: map[string]string{"Retry-After": "1"}, body: `{"code":429,"message":"concurrency limit"}`}, &RateLimitError{}},
		{"create-unavailable-is-not-retried", recorded{status: 503, body: `{"code":503,"message":"no capacity"}`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rp, c, waits := newReplay(t, map[string][]recorded{"POST /sandboxes": {tt.resp}})
			_, err := c.Create(context.Background(), CreateParams{Timeout: time.Minute})
			require.Error(t, err)
			assert.Equal(t, 1, rp.count())
			assert.Empty(t, *waits)
			assert.True(t, strings.HasPrefix(err.Error(), "e2b: create sandbox: "), err.Error())
			if tt.kind != nil {
				var rl *RateLimitError
				assert.ErrorAs(t, err, &rl)
			}
		})
	}
}

func TestIdempotentCallsRetryServerErrors(t *testing.T) {
	t.Run("kill-that-got-404-after-a-lost-response-succeeds", func(t *testing.T) {
		rp, c, waits := newReplay(t, map[string][]recorded{"DELETE /sandboxes/" + fakeID: {
			{status: 502, body: `{"code":502,"message":"bad gateway"}`},
			{status: 404, body: `{"code":404,"message":"sandbox not found"}`},
		}})
		require.NoError(t, c.Kill(context.Background(), fakeID))
		assert.Equal(t, 2, rp.count())
		assert.Len(t, *waits, 1)
	})
	t.Run("kill-of-an-unknown-sandbox-on-the-first-try-is-gone", func(t *testing.T) {
		_, c, _ := newReplay(t, map[string][]recorded{"DELETE /sandboxes/" + fakeID: {
			{status: 404, body: `{"code":404,"message":"sandbox \"` + fakeID + `\" not found"}`},
		}})
		err := c.Kill(context.Background(), fakeID)
		require.ErrorIs(t, err, ErrSandboxGone)
		assert.Contains(t, err.Error(), "not found")
	})
	t.Run("pause-that-got-409-after-a-lost-response-succeeds", func(t *testing.T) {
		rp, c, _ := newReplay(t, map[string][]recorded{"POST /sandboxes/" + fakeID + "/pause": {
			{status: 503, body: `{"code":503,"message":"try again"}`},
			{status: 409, body: `{"code":409,"message":"sandbox is already paused"}`},
		}})
		require.NoError(t, c.Pause(context.Background(), fakeID))
		assert.Equal(t, 2, rp.count())
	})
	t.Run("pause-of-a-paused-sandbox-on-the-first-try-is-a-conflict", func(t *testing.T) {
		_, c, _ := newReplay(t, map[string][]recorded{"POST /sandboxes/" + fakeID + "/pause": {
			{status: 409, body: `{"code":409,"message":"sandbox is already paused"}`},
		}})
		require.ErrorIs(t, c.Pause(context.Background(), fakeID), ErrConflict)
	})
	t.Run("client-errors-are-not-retried", func(t *testing.T) {
		rp, c, _ := newReplay(t, map[string][]recorded{"POST /sandboxes/" + fakeID + "/timeout": {
			{status: 400, body: `{"code":400,"message":"timeout above the plan maximum"}`},
		}})
		err := c.SetTimeout(context.Background(), fakeID, 48*time.Hour)
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.Contains(t, err.Error(), "timeout above the plan maximum")
		assert.Equal(t, 1, rp.count())
	})
	t.Run("cancelled-context-stops-the-retries", func(t *testing.T) {
		rp, c, _ := newReplay(t, map[string][]recorded{"GET /sandboxes/" + fakeID: {
			{status: 503, body: `{"code":503,"message":"try again"}`},
		}})
		ctx, cancel := context.WithCancel(context.Background())
		c.sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
		_, err := c.Get(ctx, fakeID)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 1, rp.count())
	})
}

// sandboxOnReplay creates a sandbox whose envd is the replay server.
func sandboxOnReplay(t *testing.T, envd map[string][]recorded) (*replay, *Sandbox) {
	t.Helper()
	responses := map[string][]recorded{"POST /sandboxes": {{status: 201, body: createdBody}}}
	for k, v := range envd {
		responses[k] = v
	}
	rp, c, _ := newReplay(t, responses)
	sb, err := c.Create(context.Background(), CreateParams{Timeout: time.Minute})
	require.NoError(t, err)
	return rp, sb
}

func TestEnvdErrorsAreTyped(t *testing.T) {
	proxyGone := recorded{status: 502, body: `{"sandboxId":"` + fakeID + `","message":"The sandbox was not found","code":502}`}
	t.Run("upload-to-a-full-disk-is-disk-full", func(t *testing.T) {
		_, sb := sandboxOnReplay(t, map[string][]recorded{"POST /files": {
			{status: 507, body: `{"code":507,"message":"not enough disk space available"}`},
		}})
		err := sb.WriteFile(context.Background(), "/home/user/big.bin", strings.NewReader("data"))
		require.ErrorIs(t, err, ErrDiskFull)
		assert.Contains(t, err.Error(), "e2b: write file /home/user/big.bin in sandbox "+fakeID+": ")
		assert.Contains(t, err.Error(), "not enough disk space")
	})
	t.Run("download-through-a-proxy-that-lost-the-sandbox-is-gone", func(t *testing.T) {
		_, sb := sandboxOnReplay(t, map[string][]recorded{"GET /files": {proxyGone}})
		_, err := sb.ReadFile(context.Background(), "/home/user/a.txt")
		require.ErrorIs(t, err, ErrSandboxGone)
		assert.Contains(t, err.Error(), "The sandbox was not found")
	})
	t.Run("rpc-through-a-proxy-that-lost-the-sandbox-is-gone", func(t *testing.T) {
		_, sb := sandboxOnReplay(t, map[string][]recorded{"POST /filesystem.Filesystem/Stat": {proxyGone}})
		_, err := sb.Stat(context.Background(), "/home/user")
		require.ErrorIs(t, err, ErrSandboxGone)
		assert.Contains(t, err.Error(), "e2b: stat /home/user in sandbox "+fakeID+": ")
		assert.Contains(t, err.Error(), "The sandbox was not found")
	})
	t.Run("command-through-a-proxy-that-lost-the-sandbox-is-gone", func(t *testing.T) {
		_, sb := sandboxOnReplay(t, map[string][]recorded{
			"POST /process.Process/Start": {proxyGone},
			"GET /health":                 {proxyGone},
		})
		_, err := sb.Run(context.Background(), RunParams{Command: "true"}, nil, nil)
		require.ErrorIs(t, err, ErrSandboxGone)
	})
	t.Run("rpc-rate-limited-by-the-proxy-is-a-rate-limit", func(t *testing.T) {
		_, sb := sandboxOnReplay(t, map[string][]recorded{"POST /filesystem.Filesystem/ListDir": {
			{status: 429, header: map[string]string{"Retry-After": "5"}, body: `{"code":429,"message":"too many connections"}`},
		}})
		_, err := sb.List(context.Background(), "/home/user", 1)
		var rl *RateLimitError
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, 5*time.Second, rl.RetryAfter)
	})
	t.Run("health-502-means-not-running", func(t *testing.T) {
		_, sb := sandboxOnReplay(t, map[string][]recorded{"GET /health": {proxyGone}})
		running, err := sb.IsRunning(context.Background())
		require.NoError(t, err)
		assert.False(t, running)
	})
}

func TestSecretsNeverLeak(t *testing.T) {
	t.Run("secret-formats-and-logs-as-redacted", func(t *testing.T) {
		o := Options{APIKey: fakeKey}
		var logged bytes.Buffer
		slog.New(slog.NewJSONHandler(&logged, nil)).Info("opts", "opts", o, "key", o.APIKey)
		js, err := json.Marshal(struct{ APIKey Secret }{o.APIKey})
		require.NoError(t, err)
		for _, s := range []string{fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprintf("%s %q %x", o.APIKey, o.APIKey, o.APIKey), logged.String(), string(js)} {
			assert.NotContains(t, s, fakeKey)
			assert.Contains(t, s, "REDACTED")
		}
	})
	t.Run("printing-or-logging-a-sandbox-or-client-shows-no-credential", func(t *testing.T) {
		_, sb := sandboxOnReplay(t, nil)
		var logged bytes.Buffer
		slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "sandbox", sb, "client", sb.c)
		for _, s := range []string{fmt.Sprintf("%v %+v %s", sb, sb, sb), fmt.Sprintf("%v %+v", sb.c, sb.c), fmt.Sprintf("%+v", *sb), logged.String()} {
			assert.NotContains(t, s, fakeToken)
			assert.NotContains(t, s, fakeKey)
		}
	})
	t.Run("error-bodies-echoing-credentials-are-scrubbed", func(t *testing.T) {
		_, sb := sandboxOnReplay(t, map[string][]recorded{"GET /files": {
			{status: 401, body: `{"code":401,"message":"bad token ` + fakeToken + ` for key ` + fakeKey + `"}`},
		}})
		_, err := sb.ReadFile(context.Background(), "/x")
		require.ErrorIs(t, err, ErrUnauthorized)
		assert.NotContains(t, err.Error(), fakeToken)
		assert.NotContains(t, err.Error(), fakeKey)
		assert.Contains(t, err.Error(), "bad token REDACTED")
	})
	t.Run("credentials-go-only-in-their-headers", func(t *testing.T) {
		rp, sb := sandboxOnReplay(t, map[string][]recorded{"GET /files": {{status: 200, header: map[string]string{"Content-Type": "application/octet-stream"}, body: "x"}}})
		rc, err := sb.ReadFile(context.Background(), "/home/user/a")
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		rp.mu.Lock()
		defer rp.mu.Unlock()
		create, read := rp.requests[0], rp.requests[1]
		assert.Equal(t, fakeKey, create.Header.Get("X-API-Key"))
		assert.Empty(t, create.Header.Get("X-Access-Token"))
		assert.Equal(t, fakeToken, read.Header.Get("X-Access-Token"))
		assert.Empty(t, read.Header.Get("X-API-Key"), "the API key must not go to the sandbox")
		assert.NotContains(t, read.URL.String(), fakeToken)
		assert.Equal(t, fakeID, read.Header.Get("E2b-Sandbox-Id"))
		assert.Equal(t, "49983", read.Header.Get("E2b-Sandbox-Port"))
	})
}

func TestCreateSendsTheContractValues(t *testing.T) {
	tests := []struct {
		name   string
		params CreateParams
		want   map[string]any
	}{
		{
			name: "allowlist-without-internet-denies-everything-else",
			params: CreateParams{Timeout: 90*time.Second + time.Millisecond, OnExpiry: "pause", AllowOut: []string{"pypi.org"},
				Metadata: map[string]string{"task_id": "task-1"}, EnvVars: map[string]string{"CI": "1"}},
			want: map[string]any{
				"templateID": "base", "timeout": float64(91), "autoPause": true, "secure": true,
				"allow_internet_access": false,
				"network":               map[string]any{"allowOut": []any{"pypi.org"}, "denyOut": []any{"0.0.0.0/0"}},
				"metadata":              map[string]any{"task_id": "task-1"},
				"envVars":               map[string]any{"CI": "1"},
			},
		},
		{
			name:   "open-internet-sends-no-network-rules",
			params: CreateParams{Template: "python", Timeout: time.Hour, AllowInternet: true},
			want: map[string]any{
				"templateID": "python", "timeout": float64(3600), "autoPause": false, "secure": true,
				"allow_internet_access": true,
			},
		},
		{
			name:   "no-internet-and-no-allowlist-relies-on-the-flag",
			params: CreateParams{Timeout: time.Second, DenyOut: []string{"10.0.0.0/8"}},
			want: map[string]any{
				"templateID": "base", "timeout": float64(1), "autoPause": false, "secure": true,
				"allow_internet_access": false,
				"network":               map[string]any{"denyOut": []any{"10.0.0.0/8"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rp, c, _ := newReplay(t, map[string][]recorded{"POST /sandboxes": {{status: 201, body: createdBody}}})
			_, err := c.Create(context.Background(), tt.params)
			require.NoError(t, err)
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(rp.bodies[0]), &body))
			assert.Equal(t, tt.want, body)
		})
	}
}

func TestBadInputIsRefusedBeforeTheNetwork(t *testing.T) {
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer ts.Close()
	c, err := New(Options{APIURL: ts.URL, APIKey: fakeKey})
	require.NoError(t, err)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
	}{
		{"create-without-a-timeout-is-refused", func() error { _, err := c.Create(ctx, CreateParams{}); return err }},
		{"create-with-an-unknown-expiry-action-is-refused", func() error {
			_, err := c.Create(ctx, CreateParams{Timeout: time.Minute, OnExpiry: "explode"})
			return err
		}},
		{"get-of-a-path-like-id-is-refused", func() error { _, err := c.Get(ctx, "../templates"); return err }},
		{"kill-of-an-empty-id-is-refused", func() error { return c.Kill(ctx, "") }},
		{"connect-without-a-timeout-is-refused", func() error { _, err := c.Connect(ctx, fakeID, 0); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.call(), ErrInvalidArgument)
		})
	}
	assert.Zero(t, calls.Load())

	_, err = New(Options{APIURL: ts.URL})
	assert.Error(t, err, "a client without an API key")
	_, err = New(Options{APIURL: "ftp://x", APIKey: fakeKey})
	assert.Error(t, err, "a non-http API URL")
	_, err = New(Options{SandboxURL: "http://u:p@x", APIKey: fakeKey})
	assert.Error(t, err, "a sandbox URL with credentials")
}

func TestErrorsMatchOnlyTheirKind(t *testing.T) {
	err := error(&Error{Op: "read file", Status: 404, Kind: ErrNotFound, Message: "path '/x' does not exist"})
	assert.ErrorIs(t, err, ErrNotFound)
	assert.NotErrorIs(t, err, ErrSandboxGone)
	assert.Equal(t, "e2b: read file: not found, HTTP 404: path '/x' does not exist", err.Error())
	assert.True(t, errors.Is(fmt.Errorf("wrapped: %w", err), ErrNotFound))
}

func FuzzErrorParsing(f *testing.F) {
	for _, seed := range []string{"7", "0", "-3", "Fri, 02 Jan 2026 03:04:17 GMT", "99999999999999999999", "Mon, 01 Jan 3000 00:00:00 GMT", ""} {
		f.Add(seed, `{"code":429,"message":"slow"}`)
	}
	f.Add("1", "<html>bad gateway</html>")
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	f.Fuzz(func(t *testing.T, retryAfter, body string) {
		d := parseRetryAfter(retryAfter, now)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("Retry-After %q gave %s", retryAfter, d)
		}
		msg, code := errorBodyMessage([]byte(body))
		if len(msg) > maxMessage+len("…") || len(code) > maxMessage+len("…") {
			t.Fatalf("message of %d bytes from body %q", len(msg), body)
		}
	})
}

func TestRunSendsEnvdHeaders(t *testing.T) {
	tests := []struct {
		name        string
		protoJSON   bool
		user        string
		contentType string
		authUser    string
	}{
		{"binary-run-as-the-default-user", false, "", "application/connect+proto", "Basic dXNlcjo="},
		{"json-run-as-root", true, "root", "application/connect+json", "Basic cm9vdDo="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rp, c, _ := newReplay(t, map[string][]recorded{
				"POST /sandboxes":             {{status: 201, body: createdBody}},
				"POST /process.Process/Start": {{status: 502, body: `{"code":502,"message":"The sandbox was not found"}`}},
				"GET /health":                 {{status: 502, body: `{"code":502,"message":"The sandbox was not found"}`}},
			})
			c.protoJSON = tt.protoJSON
			sb, err := c.Create(context.Background(), CreateParams{Timeout: time.Minute})
			require.NoError(t, err)
			_, err = sb.Run(context.Background(), RunParams{Command: "true", User: tt.user, Timeout: 42 * time.Second}, nil, nil)
			require.ErrorIs(t, err, ErrSandboxGone)

			rp.mu.Lock()
			defer rp.mu.Unlock()
			start := rp.requests[1]
			assert.Equal(t, "/process.Process/Start", start.URL.Path)
			assert.Equal(t, tt.contentType, start.Header.Get("Content-Type"))
			assert.Equal(t, tt.authUser, start.Header.Get("Authorization"))
			assert.Equal(t, "50", start.Header.Get("Keepalive-Ping-Interval"))
			assert.Equal(t, fakeToken, start.Header.Get("X-Access-Token"))
			ms, err := strconv.Atoi(start.Header.Get("Connect-Timeout-Ms"))
			require.NoError(t, err, "the command timeout must travel as Connect-Timeout-Ms")
			assert.True(t, ms > 40_000 && ms <= 42_000, "Connect-Timeout-Ms %d for a 42s timeout", ms)
			assert.Equal(t, "HTTP/1.1", start.Proto)
		})
	}
}
