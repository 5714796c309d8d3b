package e2blocal

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
)

func ptr[T any](v T) *T { return &v }

func TestControlPlaneAuth(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		key  string
		want int
	}{
		{"missing-key-is-401", "", http.StatusUnauthorized},
		{"wrong-key-is-401", "e2b_ffffffffffffffffffffffffffffffffffffffff", http.StatusUnauthorized},
		{"prefix-of-the-key-is-401", testKey[:10], http.StatusUnauthorized},
		{"right-key-passes", testKey, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.doKey(http.MethodGet, "/v2/sandboxes", nil, tc.key)
			assert.Equal(t, tc.want, code, string(body))
			if tc.want == http.StatusUnauthorized {
				var ae apiError
				require.NoError(t, json.Unmarshal(body, &ae))
				assert.Equal(t, 401, ae.Code)
				assert.NotEmpty(t, ae.Message)
			}
		})
	}
}

func TestControlPlaneBadRequests(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		method string
		path   string
		body   any
		want   int
		msg    string
	}{
		{"malformed-json-is-400", http.MethodPost, "/sandboxes", `{"templateID":`, 400, "malformed JSON"},
		{"missing-template-is-400", http.MethodPost, "/sandboxes", `{}`, 400, "templateID is required"},
		{"unknown-template-is-404", http.MethodPost, "/sandboxes", `{"templateID":"code-interpreter-v1"}`, 404, "only the \"base\" template"},
		{"timeout-zero-is-400", http.MethodPost, "/sandboxes", `{"templateID":"base","timeout":0}`, 400, "positive"},
		{"timeout-over-a-day-is-400", http.MethodPost, "/sandboxes", `{"templateID":"base","timeout":86401}`, 400, "exceeds the maximum"},
		{"partial-deny-list-is-refused", http.MethodPost, "/sandboxes", `{"templateID":"base","network":{"denyOut":["10.0.0.0/8"]}}`, 400, "a partial deny list is not enforced"},
		{"allow-list-without-deny-all-is-refused", http.MethodPost, "/sandboxes", `{"templateID":"base","allow_internet_access":true,"network":{"allowOut":["pypi.org"]}}`, 400, "allowOut needs denyOut"},
		{"allow-everything-entry-is-refused", http.MethodPost, "/sandboxes", `{"templateID":"base","network":{"allowOut":["*"],"denyOut":["0.0.0.0/0"]}}`, 400, `"*" would allow every destination`},
		{"invalid-allow-entry-is-refused", http.MethodPost, "/sandboxes", `{"templateID":"base","network":{"allowOut":["pypi.org/simple"],"denyOut":["0.0.0.0/0"]}}`, 400, `"pypi.org/simple" is not an IP address`},
		{"domain-in-deny-list-is-refused", http.MethodPost, "/sandboxes", `{"templateID":"base","network":{"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0","evil.com"]}}`, 400, `"evil.com" is not an IP address or CIDR`},
		{"network-rules-are-refused", http.MethodPost, "/v2/sandboxes", `{"templateID":"base","network":{"rules":[{"x":1}]}}`, 400, "network.rules and network.egressProxy are not supported"},
		{"egress-proxy-is-refused", http.MethodPost, "/v2/sandboxes", `{"templateID":"base","network":{"egressProxy":{"url":"socks5://x"}}}`, 400, "network.rules and network.egressProxy are not supported"},
		{"mcp-gateway-is-refused", http.MethodPost, "/v2/sandboxes", `{"templateID":"base","mcp":{"x":{}}}`, 400, "mcp"},
		{"unknown-sandbox-get-is-404", http.MethodGet, "/sandboxes/inope", nil, 404, `sandbox "inope" not found`},
		{"unknown-sandbox-kill-is-404", http.MethodDelete, "/sandboxes/inope", nil, 404, `sandbox "inope" not found`},
		{"unknown-sandbox-timeout-is-404", http.MethodPost, "/sandboxes/inope/timeout", `{"timeout":30}`, 404, "not found"},
		{"unknown-sandbox-pause-is-404", http.MethodPost, "/sandboxes/inope/pause", nil, 404, "not found"},
		{"unknown-sandbox-connect-is-404", http.MethodPost, "/sandboxes/inope/connect", `{"timeout":30}`, 404, "not found"},
		{"timeout-body-required", http.MethodPost, "/sandboxes/inope/timeout", `{}`, 400, "timeout is required"},
		{"v1-connect-needs-a-timeout", http.MethodPost, "/sandboxes/inope/connect", `{}`, 400, "timeout is required"},
		{"bad-list-limit-is-400", http.MethodGet, "/v2/sandboxes?limit=1000", nil, 400, "limit"},
		{"bad-list-state-is-400", http.MethodGet, "/v2/sandboxes?state=dead", nil, 400, "invalid state"},
		{"unsupported-route-is-json-501", http.MethodGet, "/sandboxes/inope/metrics", nil, 501, "not supported by the local sandbox"},
		{"network-update-is-501", http.MethodPut, "/sandboxes/inope/network", `{}`, 501, "not supported"},
		{"bad-list-order-is-400", http.MethodGet, "/v2/sandboxes?order=sideways", nil, 400, "invalid order"},
		{"bad-list-started-after-is-400", http.MethodGet, "/v2/sandboxes?startedAfter=yesterday", nil, 400, "invalid startedAfter"},
		{"bad-next-token-is-400", http.MethodGet, "/v2/sandboxes?nextToken=!!", nil, 400, "invalid nextToken"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.do(tc.method, tc.path, tc.body)
			assert.Equal(t, tc.want, code, string(body))
			var ae apiError
			require.NoError(t, json.Unmarshal(body, &ae), string(body))
			assert.Equal(t, tc.want, ae.Code)
			assert.Contains(t, ae.Message, tc.msg)
		})
	}
	entries, err := os.ReadDir(e.dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused creation must leave no directory behind")
}

func TestSandboxLifecycle(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)

	a := e.create(api.NewSandbox{Timeout: ptr(int32(300)), Metadata: &api.SandboxMetadata{"task_id": "task-1", "owner": "a b&c=d"}})
	b := e.create(api.NewSandbox{Timeout: ptr(int32(300)), Metadata: &api.SandboxMetadata{"task_id": "task-2"}})

	t.Run("create-returns-an-e2b-shaped-sandbox", func(t *testing.T) {
		assert.Regexp(t, regexp.MustCompile(`^i[a-z0-9]{20}$`), a.SandboxID)
		assert.Equal(t, EnvdVersion, a.EnvdVersion)
		assert.Equal(t, "base", a.TemplateID)
		require.NotNil(t, a.EnvdAccessToken, "sandboxes are secure by default")
		assert.NotEqual(t, tokenOf(a), tokenOf(b))
		assert.DirExists(t, filepath.Join(e.dir, a.SandboxID))
	})

	t.Run("get-returns-the-detail", func(t *testing.T) {
		resp, err := e.api.GetSandboxWithResponse(ctx, a.SandboxID)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode())
		d := resp.JSON200
		assert.Equal(t, api.Running, d.State)
		assert.Equal(t, "task-1", (*d.Metadata)["task_id"])
		assert.Equal(t, api.Kill, d.Lifecycle.OnTimeout)
		require.NotNil(t, d.AllowInternetAccess)
		assert.False(t, *d.AllowInternetAccess)
		assert.InDelta(t, 300, d.EndAt.Sub(d.StartedAt).Seconds(), 5)
		assert.Equal(t, int32(1024), d.MemoryMB, "the jail's default memory limit")
	})

	t.Run("list-filters-by-metadata", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			filter url.Values
			want   []string
		}{
			{"one-pair", url.Values{"task_id": {"task-2"}}, []string{b.SandboxID}},
			{"escaped-value", url.Values{"owner": {"a b&c=d"}}, []string{a.SandboxID}},
			{"two-pairs-must-both-match", url.Values{"task_id": {"task-2"}, "owner": {"a b&c=d"}}, nil},
			{"no-filter-lists-all", nil, []string{a.SandboxID, b.SandboxID}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				params := &api.ListSandboxesParams{}
				if tc.filter != nil {
					// As the JS SDK does: encode keys and values, then the pairs.
					enc := url.Values{}
					for k, vs := range tc.filter {
						enc.Set(url.QueryEscape(k), url.QueryEscape(vs[0]))
					}
					params.Metadata = ptr(enc.Encode())
				}
				resp, err := e.api.ListSandboxesWithResponse(ctx, params)
				require.NoError(t, err)
				require.Equal(t, 200, resp.StatusCode(), string(resp.Body))
				var got []string
				for _, s := range *resp.JSON200 {
					got = append(got, s.SandboxID)
				}
				assert.ElementsMatch(t, tc.want, got)
			})
		}
	})

	t.Run("list-orders-and-filters-like-e2b", func(t *testing.T) {
		ids := func(query string) []string {
			code, body := e.do(http.MethodGet, "/v2/sandboxes"+query, nil)
			require.Equal(t, 200, code, string(body))
			var got []api.ListedSandbox
			require.NoError(t, json.Unmarshal(body, &got))
			out := []string{}
			for _, s := range got {
				out = append(out, s.SandboxID)
			}
			return out
		}
		assert.Equal(t, []string{b.SandboxID, a.SandboxID}, ids(""), "newest first by default")
		assert.Equal(t, []string{a.SandboxID, b.SandboxID}, ids("?order=asc"))
		assert.Equal(t, []string{}, ids("?template=other"))
		assert.Len(t, ids("?template=base"), 2)
		d, err := e.api.GetSandboxWithResponse(ctx, b.SandboxID)
		require.NoError(t, err)
		assert.Equal(t, []string{b.SandboxID}, ids("?startedAfter="+url.QueryEscape(d.JSON200.StartedAt.Format(time.RFC3339Nano))))
	})

	t.Run("list-pages-with-next-token", func(t *testing.T) {
		resp, err := e.api.ListSandboxesWithResponse(ctx, &api.ListSandboxesParams{Limit: ptr(int32(1))})
		require.NoError(t, err)
		require.Len(t, *resp.JSON200, 1)
		next := resp.HTTPResponse.Header.Get("X-Next-Token")
		require.NotEmpty(t, next)
		resp2, err := e.api.ListSandboxesWithResponse(ctx, &api.ListSandboxesParams{Limit: ptr(int32(1)), NextToken: &next})
		require.NoError(t, err)
		require.Len(t, *resp2.JSON200, 1)
		assert.NotEqual(t, (*resp.JSON200)[0].SandboxID, (*resp2.JSON200)[0].SandboxID)
		assert.Empty(t, resp2.HTTPResponse.Header.Get("X-Next-Token"))
	})

	t.Run("timeout-can-shorten", func(t *testing.T) {
		resp, err := e.api.SetSandboxTimeoutWithResponse(ctx, a.SandboxID, api.SetSandboxTimeoutJSONRequestBody{Timeout: 60})
		require.NoError(t, err)
		require.Equal(t, 204, resp.StatusCode())
		d, _ := e.api.GetSandboxWithResponse(ctx, a.SandboxID)
		assert.InDelta(t, 60, time.Until(d.JSON200.EndAt).Seconds(), 5)
	})

	t.Run("refresh-only-extends", func(t *testing.T) {
		resp, err := e.api.RefreshSandboxWithResponse(ctx, a.SandboxID, api.RefreshSandboxJSONRequestBody{Duration: ptr(20)})
		require.NoError(t, err)
		require.Equal(t, 204, resp.StatusCode())
		d, _ := e.api.GetSandboxWithResponse(ctx, a.SandboxID)
		assert.InDelta(t, 60, time.Until(d.JSON200.EndAt).Seconds(), 5, "a shorter refresh keeps the later expiry")
	})

	t.Run("pause-then-pause-again-is-409", func(t *testing.T) {
		resp, err := e.api.PauseSandboxWithResponse(ctx, a.SandboxID, api.PauseSandboxJSONRequestBody{})
		require.NoError(t, err)
		require.Equal(t, 204, resp.StatusCode(), string(resp.Body))
		d, _ := e.api.GetSandboxWithResponse(ctx, a.SandboxID)
		assert.Equal(t, api.Paused, d.JSON200.State)
		resp, err = e.api.PauseSandboxWithResponse(ctx, a.SandboxID, api.PauseSandboxJSONRequestBody{})
		require.NoError(t, err)
		assert.Equal(t, 409, resp.StatusCode())
		code, _ := e.do(http.MethodGet, "/v2/sandboxes?state=paused", nil)
		assert.Equal(t, 200, code)
		list, _ := e.api.ListSandboxesWithResponse(ctx, &api.ListSandboxesParams{State: &[]api.SandboxState{api.Paused}})
		require.Len(t, *list.JSON200, 1)
		assert.Equal(t, a.SandboxID, (*list.JSON200)[0].SandboxID)
	})

	t.Run("envd-of-a-paused-sandbox-answers-502", func(t *testing.T) {
		resp, err := e.envdHTTP(a, "").Get(e.ts.URL + "/health")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	})

	t.Run("connect-resumes-with-201-then-200", func(t *testing.T) {
		resp, err := e.api.ConnectSandboxWithResponse(ctx, a.SandboxID, api.ConnectSandboxJSONRequestBody{Timeout: 120})
		require.NoError(t, err)
		require.Equal(t, 201, resp.StatusCode(), string(resp.Body))
		assert.Equal(t, tokenOf(a), *resp.JSON201.EnvdAccessToken)
		resp, err = e.api.ConnectSandboxWithResponse(ctx, a.SandboxID, api.ConnectSandboxJSONRequestBody{Timeout: 30})
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode())
		d, _ := e.api.GetSandboxWithResponse(ctx, a.SandboxID)
		assert.Equal(t, api.Running, d.JSON200.State)
		assert.InDelta(t, 120, time.Until(d.JSON200.EndAt).Seconds(), 5, "connect on a running sandbox never shortens it")
		r := run(ctx, e.processClient(a, true), "echo back")
		require.NoError(t, r.err)
		assert.Equal(t, "back\n", r.stdout)
	})

	t.Run("kill-removes-it", func(t *testing.T) {
		resp, err := e.api.KillSandboxWithResponse(ctx, b.SandboxID)
		require.NoError(t, err)
		assert.Equal(t, 204, resp.StatusCode())
		assert.NoDirExists(t, filepath.Join(e.dir, b.SandboxID))
		resp, err = e.api.KillSandboxWithResponse(ctx, b.SandboxID)
		require.NoError(t, err)
		assert.Equal(t, 404, resp.StatusCode())
		g, _ := e.api.GetSandboxWithResponse(ctx, b.SandboxID)
		assert.Equal(t, 404, g.StatusCode())
	})
}

func TestCreateV2DefaultsAndLimits(t *testing.T) {
	requireJail(t)
	e := newEnv(t, func(o *Options) { o.MaxSandboxes = 1 })
	code, body := e.do(http.MethodPost, "/v2/sandboxes", `{"templateID":"base","allow_internet_access":false,"secure":false}`)
	require.Equal(t, 201, code, string(body))
	var sb api.Sandbox
	require.NoError(t, json.Unmarshal(body, &sb))
	assert.Nil(t, sb.EnvdAccessToken, "secure:false means no token")

	d, err := e.api.GetSandboxWithResponse(context.Background(), sb.SandboxID)
	require.NoError(t, err)
	assert.InDelta(t, 300, d.JSON200.EndAt.Sub(d.JSON200.StartedAt).Seconds(), 2, "the v2 route defaults to the SDK's 300 s")

	code, body = e.do(http.MethodPost, "/v2/sandboxes", `{"templateID":"base","allow_internet_access":false}`)
	assert.Equal(t, http.StatusTooManyRequests, code, string(body))
}

func TestNetworkFollowsAllowInternetAccess(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)
	u, err := url.Parse(e.ts.URL)
	require.NoError(t, err)
	// The service itself listens on the host's loopback: reachable only
	// from a sandbox that shares the host's network.
	probe := "exec 3<>/dev/tcp/127.0.0.1/" + u.Port() + " && echo reachable"
	for _, tc := range []struct {
		name string
		body string
		want bool
	}{
		{"no-internet-reaches-nothing-on-the-host", `{"templateID":"base","allow_internet_access":false}`, false},
		{"omitted-means-no-network-unlike-e2b", `{"templateID":"base"}`, false},
		{"internet-access-shares-the-host-network", `{"templateID":"base","allow_internet_access":true}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.do(http.MethodPost, "/v2/sandboxes", tc.body)
			require.Equal(t, 201, code, string(body))
			var sb api.Sandbox
			require.NoError(t, json.Unmarshal(body, &sb))
			d, err := e.api.GetSandboxWithResponse(ctx, sb.SandboxID)
			require.NoError(t, err)
			assert.Equal(t, tc.want, *d.JSON200.AllowInternetAccess)

			r := run(ctx, e.processClient(sb, true), probe)
			require.NoError(t, r.err)
			if tc.want {
				assert.Equal(t, "reachable\n", r.stdout, r.stderr)
				assert.Equal(t, int32(0), r.end.ExitCode)
			} else {
				assert.Empty(t, r.stdout)
				assert.NotEqual(t, int32(0), r.end.ExitCode)
			}
		})
	}
}

func TestAutoResumeOnTraffic(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)
	sb := e.create(api.NewSandbox{AutoPause: ptr(true), AutoResume: &api.SandboxAutoResumeConfig{Enabled: true}})
	resp, err := e.api.PauseSandboxWithResponse(ctx, sb.SandboxID, api.PauseSandboxJSONRequestBody{})
	require.NoError(t, err)
	require.Equal(t, 204, resp.StatusCode())
	r := run(ctx, e.processClient(sb, true), "echo awake")
	require.NoError(t, r.err)
	assert.Equal(t, "awake\n", r.stdout)
	d, err := e.api.GetSandboxWithResponse(ctx, sb.SandboxID)
	require.NoError(t, err)
	assert.Equal(t, api.Running, d.JSON200.State)
	assert.True(t, d.JSON200.Lifecycle.AutoResume)

	code, body := e.do(http.MethodPost, "/sandboxes", `{"templateID":"base","autoResume":{"enabled":true}}`)
	assert.Equal(t, 400, code, "autoResume without autoPause is refused: %s", body)
}
