package e2blocal

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
)

// control implements the generated control-plane ServerInterface.
type control struct{ s *Server }

var _ api.ServerInterface = control{}

func (s *Server) controlHandler() http.Handler {
	mux := http.NewServeMux()
	c := control{s}
	api.HandlerWithOptions(c, api.StdHTTPServerOptions{
		BaseRouter: mux,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadRequest, err.Error())
		},
	})
	// The SDKs (e2b 2.x) create and connect through the v2 routes.
	mux.HandleFunc("POST /v2/sandboxes", c.createV2)
	mux.HandleFunc("POST /v2/sandboxes/{sandboxID}/connect", func(w http.ResponseWriter, r *http.Request) {
		c.connect(w, r, r.PathValue("sandboxID"), defaultTimeoutV2)
	})
	// The rest of E2B's API (metrics, snapshots, fork, network updates,
	// templates) is answered 501, not 404, which the SDKs would read as
	// "sandbox not found".
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotImplemented, fmt.Sprintf("%s %s is not supported by the local sandbox service", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.apiKeyOK(r) {
			writeError(w, http.StatusUnauthorized, "missing or invalid X-API-Key header")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// newSandboxRequest is NewSandbox plus the fields newer SDKs send that the
// local sandbox refuses rather than ignores.
type newSandboxRequest struct {
	api.NewSandbox
	Network      *networkRequest `json:"network,omitempty"`
	Mcp          json.RawMessage `json:"mcp,omitempty"`
	VolumeMounts json.RawMessage `json:"volumeMounts,omitempty"`
	Iam          json.RawMessage `json:"iam,omitempty"`
}

type networkRequest struct {
	api.SandboxNetworkConfig
	Rules       json.RawMessage `json:"rules,omitempty"`
	EgressProxy json.RawMessage `json:"egressProxy,omitempty"`
	HTTPSPorts  json.RawMessage `json:"httpsPorts,omitempty"`
}

func present(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

func (c control) CreateSandbox(w http.ResponseWriter, r *http.Request) {
	c.create(w, r, defaultTimeoutV1)
}

func (c control) createV2(w http.ResponseWriter, r *http.Request) {
	c.create(w, r, defaultTimeoutV2)
}

func (c control) create(w http.ResponseWriter, r *http.Request, defaultTimeout time.Duration) {
	var req newSandboxRequest
	if err := decodeJSON(r, &req, false); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	spec, code, err := c.s.specFromRequest(req, defaultTimeout)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	sb, code, err := c.s.create(r.Context(), spec)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, sb.apiSandbox())
}

// specFromRequest validates a creation request. Everything the local
// sandbox cannot enforce is refused with a reason, never ignored.
func (s *Server) specFromRequest(req newSandboxRequest, defaultTimeout time.Duration) (sandboxSpec, int, error) {
	var spec sandboxSpec
	switch req.TemplateID {
	case "":
		return spec, http.StatusBadRequest, errors.New("templateID is required")
	case TemplateID:
	default:
		return spec, http.StatusNotFound, fmt.Errorf("template %q not found: the local sandbox provides only the %q template (this machine's system directories, read-only)", req.TemplateID, TemplateID)
	}
	timeout := defaultTimeout
	if req.Timeout != nil {
		t, err := checkTimeout(int64(*req.Timeout))
		if err != nil {
			return spec, http.StatusBadRequest, err
		}
		timeout = t
	}
	if present(req.Mcp) {
		return spec, http.StatusBadRequest, errors.New("mcp gateways are not supported by the local sandbox; use the e2b backend")
	}
	if present(req.VolumeMounts) {
		return spec, http.StatusBadRequest, errors.New("volume mounts are not supported by the local sandbox; use the e2b backend")
	}
	if present(req.Iam) {
		return spec, http.StatusBadRequest, errors.New("iam tokens are not supported by the local sandbox; use the e2b backend")
	}
	// E2B opens egress when the field is omitted. Locally, open egress is
	// the host's network (its loopback services included), so it must be
	// asked for: omitted means no network.
	allowInternet := req.AllowInternetAccess != nil && *req.AllowInternetAccess
	if n := req.Network; n != nil {
		if present(n.Rules) || present(n.EgressProxy) {
			return spec, http.StatusBadRequest, errors.New("network.rules and network.egressProxy are not supported by the local sandbox; use allowOut with denyOut [\"0.0.0.0/0\"], or the e2b backend")
		}
		allowOut, code, err := egressAllowlist(n.SandboxNetworkConfig)
		if err != nil {
			return spec, code, err
		}
		if n.DenyOut != nil && slices.Contains(*n.DenyOut, denyAll) {
			// Allow wins over deny: only allowOut gets out, whatever
			// allow_internet_access says.
			allowInternet = false
			spec.allowOut = allowOut
		}
		if n.MaskRequestHost != nil || present(n.HTTPSPorts) || (n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic) {
			// Inbound traffic to sandbox ports does not exist locally: nothing to enforce.
			s.log.Info("e2blocal: inbound network settings have no effect on the local sandbox")
		}
		spec.network = &n.SandboxNetworkConfig
	}
	if req.AllowInternetAccess == nil && len(spec.allowOut) == 0 {
		s.log.Info("e2blocal: allow_internet_access omitted: the local sandbox gets no network (send true to share the host's)")
	}
	spec.templateID = req.TemplateID
	spec.timeout = timeout
	spec.allowInternet = allowInternet
	spec.secure = req.Secure == nil || *req.Secure // secure unless explicitly refused
	spec.autoPause = req.AutoPause != nil && *req.AutoPause
	spec.autoResume = req.AutoResume != nil && req.AutoResume.Enabled
	if spec.autoResume && !spec.autoPause {
		return spec, http.StatusBadRequest, errors.New("autoResume requires autoPause")
	}
	if req.Metadata != nil {
		spec.metadata = map[string]string(*req.Metadata)
	}
	if req.EnvVars != nil {
		spec.envVars = map[string]string(*req.EnvVars)
	}
	if err := checkStringMap("metadata", spec.metadata); err != nil {
		return spec, http.StatusBadRequest, err
	}
	if err := checkStringMap("envVars", spec.envVars); err != nil {
		return spec, http.StatusBadRequest, err
	}
	for k := range spec.envVars {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return spec, http.StatusBadRequest, fmt.Errorf("envVars: invalid variable name %q", k)
		}
	}
	return spec, 0, nil
}

// denyAll is the denyOut entry that, with allowOut, makes an allowlist.
const denyAll = "0.0.0.0/0"

// Bounds on a creation request's network lists.
const (
	maxAllowOut      = 256
	maxAllowOutEntry = 255 + 2 // a host name plus "*."
)

// egressAllowlist checks the network lists of a creation request and
// returns its allowOut. The local sandbox enforces exactly one shape, the
// one sandbox-mcp's contracts produce: denyOut containing 0.0.0.0/0 (the
// other entries it holds are then moot: allow wins over deny, and deny-all
// covers them) with allowOut entries that are IPs, CIDRs, host names or
// *.domain wildcards, each decided by policy.HostAllowed in a filtering
// proxy. A partial deny list, or allowOut without deny-all (which in E2B
// adds nothing to open egress), is refused rather than half enforced.
func egressAllowlist(n api.SandboxNetworkConfig) ([]string, int, error) {
	var allowOut, denyOut []string
	if n.AllowOut != nil {
		allowOut = *n.AllowOut
	}
	if n.DenyOut != nil {
		denyOut = *n.DenyOut
	}
	if len(allowOut) > maxAllowOut || len(denyOut) > maxAllowOut {
		return nil, http.StatusBadRequest, fmt.Errorf("network: at most %d allowOut and %d denyOut entries", maxAllowOut, maxAllowOut)
	}
	for _, d := range denyOut {
		if _, err := netip.ParsePrefix(d); err != nil {
			if _, err := netip.ParseAddr(d); err != nil {
				return nil, http.StatusBadRequest, fmt.Errorf("network.denyOut entry %q is not an IP address or CIDR (denyOut takes no domains)", printable(d))
			}
		}
	}
	if len(denyOut) > 0 && !slices.Contains(denyOut, denyAll) {
		return nil, http.StatusBadRequest, fmt.Errorf("the local sandbox enforces denyOut only as [%q] (deny everything but allowOut); a partial deny list is not enforced: use allowOut with denyOut [%q], allow_internet_access:false, or the e2b backend", denyAll, denyAll)
	}
	if len(allowOut) > 0 && len(denyOut) == 0 {
		return nil, http.StatusBadRequest, fmt.Errorf("network.allowOut needs denyOut [%q] (as in E2B, where a domain in allowOut requires it); without a deny list allowOut restricts nothing", denyAll)
	}
	for _, a := range allowOut {
		if len(a) > maxAllowOutEntry {
			return nil, http.StatusBadRequest, fmt.Errorf("network.allowOut entry of %d bytes is too long", len(a))
		}
		if strings.TrimSpace(a) == "*" {
			return nil, http.StatusBadRequest, errors.New(`network.allowOut "*" would allow every destination: send allow_internet_access:true without network lists for open egress`)
		}
		if len(policy.NetworkPlanFor(allowlistContract([]string{a})).AllowOut) != 1 {
			return nil, http.StatusBadRequest, fmt.Errorf("network.allowOut entry %q is not an IP address, CIDR, host name or *.domain wildcard", printable(a))
		}
	}
	return slices.Clone(allowOut), 0, nil
}

// allowlistContract is the contract a sandbox's allowOut stands for: the
// egress proxy decides every host with policy.HostAllowed on it, as the
// task's own contract would (runner/egress pins that the two agree).
func allowlistContract(allowOut []string) *contracts.Contract {
	return &contracts.Contract{Network: contracts.Network{Egress: contracts.EgressAllowlist, Allow: allowOut}}
}

// printable quotes at most 100 bytes of s for an error message.
func printable(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

func checkStringMap(field string, m map[string]string) error {
	const maxEntries, maxBytes = 256, 64 << 10
	if len(m) > maxEntries {
		return fmt.Errorf("%s: at most %d entries", field, maxEntries)
	}
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
		if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%s: NUL bytes are not allowed", field)
		}
	}
	if n > maxBytes {
		return fmt.Errorf("%s: at most %d bytes in total", field, maxBytes)
	}
	return nil
}

func checkTimeout(seconds int64) (time.Duration, error) {
	if seconds <= 0 {
		return 0, fmt.Errorf("timeout must be a positive number of seconds, got %d", seconds)
	}
	if d := time.Duration(seconds) * time.Second; d <= maxTimeout {
		return d, nil
	}
	return 0, fmt.Errorf("timeout %ds exceeds the maximum of %ds", seconds, int64(maxTimeout/time.Second))
}

func notFound(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", id))
}

func (c control) KillSandbox(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	ok, err := c.s.kill(r.Context(), id)
	if !ok {
		notFound(w, id)
		return
	}
	if err != nil {
		c.s.log.Error("e2blocal: kill sandbox", "sandbox_id", id, "error", err)
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("sandbox %q was killed but cleanup failed: %v", id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c control) GetSandbox(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	sb, ok := c.s.lookup(id)
	if !ok {
		notFound(w, id)
		return
	}
	writeJSON(w, http.StatusOK, sb.detail())
}

func (c control) ConnectSandbox(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	c.connect(w, r, id, 0)
}

// connect resumes a paused sandbox (201) or extends a running one (200).
// A zero defaultTimeout makes the timeout field required.
func (c control) connect(w http.ResponseWriter, r *http.Request, id string, defaultTimeout time.Duration) {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decodeJSON(r, &req, defaultTimeout != 0); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	timeout := defaultTimeout
	if req.Timeout != nil {
		t, err := checkTimeout(*req.Timeout)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		timeout = t
	} else if timeout == 0 {
		writeError(w, http.StatusBadRequest, "timeout is required")
		return
	}
	sb, ok := c.s.lookup(id)
	if !ok {
		notFound(w, id)
		return
	}
	resumed, code, err := sb.connect(timeout)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	writeJSON(w, status, sb.apiSandbox())
}

func (c control) PauseSandbox(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	var req api.SandboxPauseRequest
	if err := decodeJSON(r, &req, true); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sb, ok := c.s.lookup(id)
	if !ok {
		notFound(w, id)
		return
	}
	if code, err := sb.pause(); err != nil {
		writeError(w, code, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c control) RefreshSandbox(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	var req api.SandboxRefreshRequest
	if err := decodeJSON(r, &req, true); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	d := minRefresh
	if req.Duration != nil {
		if *req.Duration < 0 || time.Duration(*req.Duration)*time.Second > maxRefresh {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("duration must be between 0 and %d seconds", int(maxRefresh/time.Second)))
			return
		}
		d = max(time.Duration(*req.Duration)*time.Second, minRefresh)
	}
	sb, ok := c.s.lookup(id)
	if !ok {
		notFound(w, id)
		return
	}
	if code, err := sb.setTimeout(d, true); err != nil {
		writeError(w, code, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c control) SetSandboxTimeout(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decodeJSON(r, &req, false); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Timeout == nil {
		writeError(w, http.StatusBadRequest, "timeout is required")
		return
	}
	d, err := checkTimeout(*req.Timeout)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sb, ok := c.s.lookup(id)
	if !ok {
		notFound(w, id)
		return
	}
	if code, err := sb.setTimeout(d, false); err != nil {
		writeError(w, code, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c control) ListSandboxes(w http.ResponseWriter, r *http.Request, params api.ListSandboxesParams) {
	var want map[string]string
	if params.Metadata != nil && *params.Metadata != "" {
		m, err := parseMetadataFilter(*params.Metadata)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		want = m
	}
	states := []api.SandboxState{api.Running, api.Paused}
	if params.State != nil && len(*params.State) > 0 {
		states = *params.State
		for _, st := range states {
			if !st.Valid() {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid state %q: want running or paused", st))
				return
			}
		}
	}
	limit := 100
	if params.Limit != nil {
		if *params.Limit < 1 || *params.Limit > 100 {
			writeError(w, http.StatusBadRequest, "limit must be between 1 and 100")
			return
		}
		limit = int(*params.Limit)
	}
	// Filters the generated binder does not know about.
	q := r.URL.Query()
	desc := true // E2B lists newest first
	switch o := q.Get("order"); o {
	case "", "desc":
	case "asc":
		desc = false
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid order %q: want asc or desc", o))
		return
	}
	var startedAfter time.Time
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid startedAfter %q: want an RFC 3339 time", v))
			return
		}
		startedAfter = t
	}
	template := q.Get("template")

	var after *api.ListedSandbox
	if params.NextToken != nil && *params.NextToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(*params.NextToken)
		ns, id, ok := strings.Cut(string(b), "/")
		n, perr := strconv.ParseInt(ns, 10, 64)
		if err != nil || !ok || perr != nil {
			writeError(w, http.StatusBadRequest, "invalid nextToken")
			return
		}
		after = &api.ListedSandbox{StartedAt: time.Unix(0, n), SandboxID: id}
	}

	c.s.mu.Lock()
	all := make([]*sandbox, 0, len(c.s.sandboxes))
	for _, sb := range c.s.sandboxes {
		all = append(all, sb)
	}
	c.s.mu.Unlock()

	cmp := func(a, b api.ListedSandbox) int {
		c := a.StartedAt.Compare(b.StartedAt)
		if c == 0 {
			c = strings.Compare(a.SandboxID, b.SandboxID)
		}
		if desc {
			return -c
		}
		return c
	}
	var listed []api.ListedSandbox
	for _, sb := range all {
		d := sb.listed()
		switch {
		case !slices.Contains(states, d.State), !metadataMatches(sb.metadata, want),
			template != "" && template != d.TemplateID,
			d.StartedAt.Before(startedAfter),
			after != nil && cmp(d, *after) <= 0:
			continue
		}
		listed = append(listed, d)
	}
	slices.SortFunc(listed, cmp)
	running := 0
	for _, sb := range all {
		if sb.listed().State == api.Running {
			running++
		}
	}
	w.Header().Set("X-Total-Running", strconv.Itoa(running))
	if len(listed) > limit {
		last := listed[limit-1]
		tok := fmt.Sprintf("%d/%s", last.StartedAt.UnixNano(), last.SandboxID)
		w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(tok)))
		listed = listed[:limit]
	}
	if listed == nil {
		listed = []api.ListedSandbox{}
	}
	writeJSON(w, http.StatusOK, listed)
}

// parseMetadataFilter reads E2B's metadata filter: a query string
// ("k=v&k2=v2") whose keys and values the SDKs percent-encode once more.
func parseMetadataFilter(s string) (map[string]string, error) {
	q, err := url.ParseQuery(s)
	if err != nil {
		return nil, fmt.Errorf("invalid metadata filter %q: want k=v pairs joined by &", s)
	}
	out := make(map[string]string, len(q))
	for k, vs := range q {
		key, err := url.QueryUnescape(k)
		if err != nil {
			key = k
		}
		v := vs[len(vs)-1]
		val, err := url.QueryUnescape(v)
		if err != nil {
			val = v
		}
		out[key] = val
	}
	return out, nil
}

func metadataMatches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
