package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
)

// DefaultAPIURL is E2B's control plane.
const DefaultAPIURL = "https://api.e2b.app"

const (
	// requestTimeout bounds one control-plane request (the SDKs use 60 s).
	requestTimeout = 60 * time.Second
	// maxControlBody bounds a control-plane response body.
	maxControlBody = 8 << 20
	// listPageLimit is the page size asked of GET /v2/sandboxes.
	listPageLimit = 100
	// maxListPages bounds how many pages List follows.
	maxListPages = 100
	// allTraffic is the CIDR that denies all egress.
	allTraffic = "0.0.0.0/0"
	// defaultRetries is used when Options.Retries is zero.
	defaultRetries = 3
)

// Options configures a Client.
type Options struct {
	// APIURL is the control plane's base URL. If empty, DefaultAPIURL.
	APIURL string
	// SandboxURL, if set, is the single base URL through which every
	// sandbox's envd is reached, the sandbox chosen by the E2b-Sandbox-Id and
	// E2b-Sandbox-Port headers (the SDK's E2B_SANDBOX_URL; the embedded local
	// sandbox serves this way). If empty, each sandbox is reached at
	// https://49983-<id>.<domain>.
	SandboxURL string
	// APIKey is the E2B API key, sent as X-API-Key. Required.
	APIKey Secret
	// HTTPClient performs every request. If nil, a client restricted to
	// HTTP/1.1 (what envd speaks) with no overall timeout (commands stream).
	HTTPClient *http.Client
	// Logger receives debug lines about calls and retries. If nil, discard.
	Logger *slog.Logger
	// Retries is how many times an idempotent control-plane call (Get, List,
	// SetTimeout, Pause, Connect, Kill) is retried after a transport error,
	// 429 or 5xx. Create and envd calls are never retried. If zero, 3;
	// negative disables retries.
	Retries int
	// EnvdProtoJSON makes envd RPCs use Connect with JSON, as the official
	// SDKs do. If false, binary protobuf (smaller, and what connect-go
	// servers such as envd accept by default).
	EnvdProtoJSON bool
	// Now is the clock (used for Retry-After dates). If nil, time.Now.
	Now func() time.Time
}

// Client talks to an E2B control plane and to the envd of its sandboxes. It
// is safe for concurrent use.
type Client struct {
	api        *api.Client
	apiURL     *url.URL
	sandboxURL string
	apiKey     *Secret // a pointer, so fmt never prints the value
	http       *http.Client
	logger     *slog.Logger
	retries    int
	protoJSON  bool
	now        func() time.Time
	sleep      func(context.Context, time.Duration) error
	listPage   int32 // page size asked of GET /v2/sandboxes
}

// New returns a Client. It fails on a missing API key or a malformed URL;
// it makes no network call.
func New(o Options) (*Client, error) {
	if o.APIKey == "" {
		return nil, errors.New("e2b: new client: API key is required")
	}
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	apiURL, err := parseBaseURL(o.APIURL)
	if err != nil {
		return nil, fmt.Errorf("e2b: new client: API URL: %w", err)
	}
	if o.SandboxURL != "" {
		su, err := parseBaseURL(o.SandboxURL)
		if err != nil {
			return nil, fmt.Errorf("e2b: new client: sandbox URL: %w", err)
		}
		o.SandboxURL = strings.TrimSuffix(su.String(), "/")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultHTTPClient()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Retries == 0:
		o.Retries = defaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Client{
		apiURL:     apiURL,
		sandboxURL: o.SandboxURL,
		apiKey:     &o.APIKey,
		http:       o.HTTPClient,
		logger:     o.Logger,
		retries:    o.Retries,
		protoJSON:  o.EnvdProtoJSON,
		now:        o.Now,
		sleep:      sleepCtx,
		listPage:   listPageLimit,
	}
	key := string(o.APIKey)
	c.api, err = api.NewClient(strings.TrimSuffix(apiURL.String(), "/"),
		api.WithHTTPClient(o.HTTPClient),
		api.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("X-API-Key", key)
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("e2b: new client: %w", err)
	}
	return c, nil
}

// String describes the client without its API key.
func (c *Client) String() string { return "e2b client for " + c.apiURL.String() }

// LogValue logs the client as its API URL.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.apiURL.String()) }

func parseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("%q must not carry credentials, a query or a fragment", s)
	}
	return u, nil
}

// defaultHTTPClient is HTTP/1.1 only: envd does not speak h2c, and one TCP
// stream per command keeps a slow command from stalling others.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	var p http.Protocols
	p.SetHTTP1(true)
	t.Protocols = &p
	t.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: t}
}

// CreateParams describes a new sandbox.
type CreateParams struct {
	// Template is the template ID or alias. If empty, "base".
	Template string
	// Timeout is the sandbox's lifetime; at its end the sandbox is killed or
	// paused (OnExpiry). It is always sent (the server's own default is 15 s);
	// it must be positive and is rounded up to whole seconds.
	Timeout time.Duration
	// OnExpiry is "kill" or "pause". If empty, "kill".
	OnExpiry string
	// AllowInternet opens outbound internet access. If false, all egress is
	// denied except what AllowOut lists.
	AllowInternet bool
	// AllowOut lists IPs, CIDRs or domains (a.com, *.a.com) the sandbox may
	// reach even when other egress is denied. With AllowInternet false,
	// 0.0.0.0/0 is added to DenyOut, as E2B requires for domain rules.
	AllowOut []string
	// DenyOut lists IPs or CIDRs the sandbox may not reach.
	DenyOut []string
	// Metadata is stored with the sandbox and can filter List (the task id
	// goes here, for reaping orphans).
	Metadata map[string]string
	// EnvVars is the environment every command in the sandbox starts with.
	EnvVars map[string]string
}

// Info describes a sandbox as the control plane reports it.
type Info struct {
	ID          string
	TemplateID  string
	State       string // "running" or "paused"
	StartedAt   time.Time
	EndAt       time.Time
	Metadata    map[string]string
	EnvdVersion string
	CPUCount    int
	MemoryMB    int
	DiskSizeMB  int
	// OnExpiry is "kill" or "pause" when the server reports it (Get only).
	OnExpiry string
}

// Create starts a new sandbox. It is never retried: a lost response could
// otherwise leave two sandboxes running.
func (c *Client) Create(ctx context.Context, p CreateParams) (*Sandbox, error) {
	const op = "create sandbox"
	if p.Timeout <= 0 {
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Message: "timeout must be positive"}
	}
	secs, err := timeoutSeconds(p.Timeout)
	if err != nil {
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Message: err.Error()}
	}
	var autoPause bool
	switch p.OnExpiry {
	case "", "kill":
	case "pause":
		autoPause = true
	default:
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Message: fmt.Sprintf("on expiry must be kill or pause, not %q", p.OnExpiry)}
	}
	template := p.Template
	if template == "" {
		template = "base"
	}
	body := api.NewSandbox{
		TemplateID:          template,
		Timeout:             &secs,
		AutoPause:           &autoPause,
		Secure:              ptr(true),
		AllowInternetAccess: ptr(p.AllowInternet),
	}
	denyOut := slices.Clone(p.DenyOut)
	if !p.AllowInternet && len(p.AllowOut) > 0 && !slices.Contains(denyOut, allTraffic) {
		// E2B takes a domain in allowOut only alongside a deny-all, and
		// "no internet but these" means exactly that.
		denyOut = append(denyOut, allTraffic)
	}
	if len(p.AllowOut) > 0 || len(denyOut) > 0 {
		body.Network = &api.SandboxNetworkConfig{}
		if len(p.AllowOut) > 0 {
			body.Network.AllowOut = ptr(slices.Clone(p.AllowOut))
		}
		if len(denyOut) > 0 {
			body.Network.DenyOut = &denyOut
		}
	}
	if len(p.Metadata) > 0 {
		body.Metadata = ptr(api.SandboxMetadata(p.Metadata))
	}
	if len(p.EnvVars) > 0 {
		body.EnvVars = ptr(api.EnvVars(p.EnvVars))
	}
	var out api.Sandbox
	start := time.Now()
	_, err = c.call(ctx, op, "", scopeResource, func(ctx context.Context) (*http.Response, error) {
		return c.api.CreateSandbox(ctx, body)
	}, []int{http.StatusCreated, http.StatusOK}, &out)
	if err != nil {
		c.logger.DebugContext(ctx, "e2b: create sandbox failed", "duration_ms", time.Since(start).Milliseconds(), "error", err.Error())
		return nil, err
	}
	c.logger.DebugContext(ctx, "e2b: sandbox created", "sandbox_id", out.SandboxID, "duration_ms", time.Since(start).Milliseconds())
	return c.newSandbox(op, out)
}

// Connect attaches to an existing sandbox by id, resuming it if it is
// paused, and sets its remaining lifetime to timeout (the server requires
// one). It is how a restarted server gets back its sandboxes.
func (c *Client) Connect(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	const op = "connect sandbox"
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	secs, err := timeoutSeconds(timeout)
	if err != nil || timeout <= 0 {
		return nil, &Error{Op: op, SandboxID: id, Kind: ErrInvalidArgument, Message: "timeout must be positive and at most 2^31-1 seconds"}
	}
	var out api.Sandbox
	err = c.withRetry(ctx, func(int) error {
		out = api.Sandbox{}
		_, err := c.call(ctx, op, id, scopeSandbox, func(ctx context.Context) (*http.Response, error) {
			return c.api.ConnectSandbox(ctx, id, api.ConnectSandbox{Timeout: secs})
		}, []int{http.StatusOK, http.StatusCreated}, &out)
		return err
	})
	if err != nil {
		return nil, err
	}
	if out.SandboxID == "" {
		out.SandboxID = id
	}
	return c.newSandbox(op, out)
}

// Get returns a sandbox's state. A sandbox that no longer exists is
// ErrSandboxGone.
func (c *Client) Get(ctx context.Context, id string) (Info, error) {
	const op = "get sandbox"
	if err := checkID(op, id); err != nil {
		return Info{}, err
	}
	var out api.SandboxDetail
	err := c.withRetry(ctx, func(int) error {
		out = api.SandboxDetail{}
		_, err := c.call(ctx, op, id, scopeSandbox, func(ctx context.Context) (*http.Response, error) {
			return c.api.GetSandbox(ctx, id)
		}, []int{http.StatusOK}, &out)
		return err
	})
	if err != nil {
		return Info{}, err
	}
	info := Info{
		ID: out.SandboxID, TemplateID: out.TemplateID, State: string(out.State),
		StartedAt: out.StartedAt, EndAt: out.EndAt, EnvdVersion: out.EnvdVersion,
		CPUCount: int(out.CpuCount), MemoryMB: int(out.MemoryMB), DiskSizeMB: int(out.DiskSizeMB),
	}
	if out.Metadata != nil {
		info.Metadata = map[string]string(*out.Metadata)
	}
	if out.Lifecycle != nil {
		info.OnExpiry = string(out.Lifecycle.OnTimeout)
	}
	return info, nil
}

// List returns every running or paused sandbox whose metadata contains all
// of the given pairs (all sandboxes when metadata is empty), following the
// server's pages.
func (c *Client) List(ctx context.Context, metadata map[string]string) ([]Info, error) {
	const op = "list sandboxes"
	params := api.ListSandboxesParams{
		State: &[]api.SandboxState{api.Running, api.Paused},
		Limit: ptr(c.listPage),
	}
	if len(metadata) > 0 {
		q := url.Values{}
		for k, v := range metadata {
			q.Set(k, v)
		}
		params.Metadata = ptr(q.Encode())
	}
	var all []Info
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page >= maxListPages {
			return nil, &Error{Op: op, Message: fmt.Sprintf("more than %d pages of sandboxes", maxListPages)}
		}
		var out []api.ListedSandbox
		var hdr http.Header
		err := c.withRetry(ctx, func(int) error {
			out = nil
			var err error
			hdr, err = c.call(ctx, op, "", scopeResource, func(ctx context.Context) (*http.Response, error) {
				return c.api.ListSandboxes(ctx, &params)
			}, []int{http.StatusOK}, &out)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, s := range out {
			if seen[s.SandboxID] {
				continue
			}
			seen[s.SandboxID] = true
			info := Info{
				ID: s.SandboxID, TemplateID: s.TemplateID, State: string(s.State),
				StartedAt: s.StartedAt, EndAt: s.EndAt, EnvdVersion: s.EnvdVersion,
				CPUCount: int(s.CpuCount), MemoryMB: int(s.MemoryMB), DiskSizeMB: int(s.DiskSizeMB),
			}
			if s.Metadata != nil {
				info.Metadata = map[string]string(*s.Metadata)
			}
			all = append(all, info)
		}
		next := hdr.Get("X-Next-Token")
		if next == "" || len(out) == 0 {
			return all, nil
		}
		if params.NextToken != nil && *params.NextToken == next {
			return nil, &Error{Op: op, Message: "server repeated the same page token"}
		}
		params.NextToken = ptr(next)
	}
}

// SetTimeout sets the sandbox to expire timeout from now; it can shorten
// the lifetime as well as extend it.
func (c *Client) SetTimeout(ctx context.Context, id string, timeout time.Duration) error {
	const op = "set sandbox timeout"
	if err := checkID(op, id); err != nil {
		return err
	}
	secs, err := timeoutSeconds(timeout)
	if err != nil || timeout <= 0 {
		return &Error{Op: op, SandboxID: id, Kind: ErrInvalidArgument, Message: "timeout must be positive and at most 2^31-1 seconds"}
	}
	return c.withRetry(ctx, func(int) error {
		_, err := c.call(ctx, op, id, scopeSandbox, func(ctx context.Context) (*http.Response, error) {
			return c.api.SetSandboxTimeout(ctx, id, api.SandboxTimeoutRequest{Timeout: secs})
		}, []int{http.StatusNoContent, http.StatusOK}, nil)
		return err
	})
}

// Pause pauses a running sandbox, keeping its memory; Connect resumes it. A
// 409 (already paused) on a retry after a lost response counts as success.
func (c *Client) Pause(ctx context.Context, id string) error {
	const op = "pause sandbox"
	if err := checkID(op, id); err != nil {
		return err
	}
	return c.withRetry(ctx, func(n int) error {
		_, err := c.call(ctx, op, id, scopeSandbox, func(ctx context.Context) (*http.Response, error) {
			return c.api.PauseSandbox(ctx, id, api.SandboxPauseRequest{Memory: ptr(true)})
		}, []int{http.StatusNoContent, http.StatusOK}, nil)
		if n > 0 && errors.Is(err, ErrConflict) {
			return nil
		}
		return err
	})
}

// Kill destroys a sandbox (and any pause snapshot). Killing a sandbox that
// is already gone is ErrSandboxGone, except after a retry, when the earlier
// attempt is taken to have succeeded.
func (c *Client) Kill(ctx context.Context, id string) error {
	const op = "kill sandbox"
	if err := checkID(op, id); err != nil {
		return err
	}
	err := c.withRetry(ctx, func(n int) error {
		_, err := c.call(ctx, op, id, scopeSandbox, func(ctx context.Context) (*http.Response, error) {
			return c.api.KillSandbox(ctx, id)
		}, []int{http.StatusNoContent, http.StatusOK}, nil)
		if n > 0 && errors.Is(err, ErrSandboxGone) {
			return nil
		}
		return err
	})
	if err == nil {
		c.logger.DebugContext(ctx, "e2b: sandbox killed", "sandbox_id", id)
	}
	return err
}

// call performs one control-plane request with the request timeout, checks
// its status against ok and decodes a JSON body into out (if non-nil). It
// returns the response headers.
func (c *Client) call(ctx context.Context, op, id string, sc scope, do func(context.Context) (*http.Response, error), ok []int, out any) (http.Header, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := do(rctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, transportError(op, id, err, string(*c.apiKey))
	}
	defer resp.Body.Close()
	if !slices.Contains(ok, resp.StatusCode) {
		return resp.Header, statusError(op, id, resp, sc, c.now, string(*c.apiKey))
	}
	if out != nil {
		dec := json.NewDecoder(io.LimitReader(resp.Body, maxControlBody))
		if err := dec.Decode(out); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &Error{Op: op, SandboxID: id, Status: resp.StatusCode, Message: "decoding response: " + err.Error(), Err: err}
		}
	}
	return resp.Header, nil
}

// timeoutSeconds rounds d up to whole seconds for the wire.
func timeoutSeconds(d time.Duration) (int32, error) {
	secs := math.Ceil(d.Seconds())
	if secs > math.MaxInt32 {
		return 0, fmt.Errorf("timeout %s is too long", d)
	}
	return int32(secs), nil
}

// checkID refuses ids that are not plain identifiers: an id lands in URL
// paths and, for E2B's cloud, in a host name.
func checkID(op, id string) error {
	if id == "" || len(id) > 128 || strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		shown := id
		if len(shown) > 40 {
			shown = shown[:40] + "…"
		}
		return &Error{Op: op, Kind: ErrInvalidArgument, Message: fmt.Sprintf("malformed sandbox id %q", shown)}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
