package e2blocal

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
	"github.com/sandbox-mcp/sandbox-mcp/runner/jail"
)

// Wire constants the SDKs depend on.
const (
	// EnvdPort is the port envd listens on in an E2B sandbox; the local service
	// accepts it in the E2b-Sandbox-Port header and the 49983-<id>.<domain> host form.
	EnvdPort = "49983"
	// EnvdVersion is the envd version the local sandbox reports. 0.5.7 is the
	// first with octet-stream uploads; features of later versions (file
	// metadata, watch entries) are not implemented, so the SDKs refuse them on
	// their side with a clear message instead of the server ignoring them.
	EnvdVersion = "0.5.7"
	// TemplateID is the only template the local sandbox provides.
	TemplateID = "base"

	sandboxUser = "user"
	homeDir     = "/home/user"
	tmpDir      = "/tmp"

	defaultTimeoutV1 = 15 * time.Second  // E2B API default when "timeout" is omitted
	defaultTimeoutV2 = 300 * time.Second // E2B SDK default (the v2 routes leave it to the server)
	maxTimeout       = 24 * time.Hour
	maxRefresh       = time.Hour
	minRefresh       = 15 * time.Second
	maxJSONBody      = 1 << 20
)

// Options configures a Server.
type Options struct {
	// Dir is the state root; each sandbox gets Dir/<sandbox id>, removed when
	// the sandbox is killed. Required.
	Dir string
	// APIKey is the key control-plane requests must carry in X-API-Key. Required.
	APIKey string
	// Logger receives operational logs. If nil, logs are discarded.
	Logger *slog.Logger
	// Now is the clock that decides expiry times. If nil, time.Now.
	Now func() time.Time
	// MaxSandboxes caps running plus paused sandboxes. If zero, 32.
	MaxSandboxes int
	// MaxUploadBytes caps one uploaded file. If zero, 1 GiB.
	MaxUploadBytes int64
	// DefaultLimits are the resource limits of every sandbox (zero fields
	// take the jail's defaults).
	DefaultLimits jail.Limits
	// OnEgressDecision, if set, receives every decision of an allowlist
	// sandbox's egress proxy (for an audit log). It must not block for long.
	OnEgressDecision func(sandboxID string, d egress.Decision)

	// EgressResolver and EgressDial are test hooks for the egress proxy of
	// allowlist sandboxes (egress.Options.Resolver and .Dial): they let a
	// test map an allowed name to a fake public address and route that
	// checked address to a loopback server. Production leaves them nil
	// (the system resolver, a direct dial).
	EgressResolver egress.Resolver
	EgressDial     func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Server is the embedded E2B-compatible sandbox service: the control-plane
// REST API and envd for every sandbox, on one handler.
type Server struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	jailErr error // why isolation is unavailable, or nil

	control http.Handler
	envd    http.Handler

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	pending   int // creations in progress, counted against MaxSandboxes
	closed    bool
}

// New returns a Server. It fails only on bad options: when process isolation
// is unavailable on this machine, New succeeds but every sandbox creation
// fails with a 503 that says why (nothing ever runs unisolated).
func New(opts Options) (*Server, error) {
	if opts.APIKey == "" {
		return nil, errors.New("e2blocal: an API key is required")
	}
	if opts.Dir == "" {
		return nil, errors.New("e2blocal: a state directory is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("e2blocal: state directory: %w", err)
	}
	opts.Dir = dir
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("e2blocal: state directory: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxSandboxes <= 0 {
		opts.MaxSandboxes = 32
	}
	if opts.MaxUploadBytes <= 0 {
		opts.MaxUploadBytes = 1 << 30
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		now:       opts.Now,
		sandboxes: map[string]*sandbox{},
	}
	reapStale(opts.Dir, s.log)
	if err := jail.Check(); err != nil {
		s.jailErr = err
		s.log.Warn("e2blocal: process isolation is unavailable; sandbox creation will fail", "error", err)
	}
	s.control = s.controlHandler()
	s.envd = s.envdHandler()
	return s, nil
}

// Handler returns the HTTP handler serving the control plane and envd.
// Requests with an E2b-Sandbox-Id header (or a 49983-<id>.<domain> host)
// go to that sandbox's envd; all others are control-plane requests.
func (s *Server) Handler() http.Handler {
	return recoverJSON(s.log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, port, ok := envdTarget(r); ok {
			s.serveEnvd(w, r, id, port)
			return
		}
		s.control.ServeHTTP(w, r)
	}))
}

// recoverJSON turns a handler panic into a logged 500 JSON error, so bad
// input can never take the service down.
func recoverJSON(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("e2blocal: handler panic", "error", fmt.Sprint(v), "method", r.Method, "path", r.URL.Path, "stack", string(debug.Stack()))
				writeError(w, http.StatusInternalServerError, "internal error in the local sandbox service (logged)")
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// envdTarget reports the sandbox and port an envd request is for: the
// E2b-Sandbox-Id/E2b-Sandbox-Port headers the SDKs send, or a
// <port>-<id>.<domain> host.
func envdTarget(r *http.Request) (id, port string, ok bool) {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		port := r.Header.Get("E2b-Sandbox-Port")
		if port == "" {
			port = EnvdPort
		}
		return id, port, true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, _, found := strings.Cut(host, ".")
	if !found {
		return "", "", false
	}
	port, id, found = strings.Cut(label, "-")
	if !found || port == "" || id == "" || strings.Trim(port, "0123456789") != "" {
		return "", "", false
	}
	return id, port, true
}

// Close kills every sandbox and removes its directory. The handler answers
// later requests for them as for unknown sandboxes.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	all := make([]*sandbox, 0, len(s.sandboxes))
	for id, sb := range s.sandboxes {
		all = append(all, sb)
		delete(s.sandboxes, id)
	}
	s.mu.Unlock()

	var errs []error
	for _, sb := range all {
		if err := sb.destroy(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lookup returns a live sandbox by id.
func (s *Server) lookup(id string) (*sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	return sb, ok
}

// kill removes a sandbox, kills its processes and deletes its directory.
// It reports false when the sandbox did not exist.
func (s *Server) kill(ctx context.Context, id string) (bool, error) {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	delete(s.sandboxes, id)
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	return true, sb.destroy(ctx)
}

// apiKeyOK reports whether the request carries the service's API key.
func (s *Server) apiKeyOK(r *http.Request) bool {
	got := r.Header.Get("X-API-Key")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.APIKey)) == 1
}

// apiError is E2B's error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeJSON reads a small JSON body into v. An empty body leaves v alone
// when allowEmpty.
func decodeJSON(r *http.Request, v any, allowEmpty bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxJSONBody))
	if err != nil {
		return fmt.Errorf("reading the request body: %w", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if allowEmpty {
			return nil
		}
		return errors.New("a JSON request body is required")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	return nil
}
