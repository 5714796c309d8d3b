package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// HTTPOptions configure ServeHTTP. Zero values are usable except Token.
type HTTPOptions struct {
	// Addr is the address to listen on, such as "127.0.0.1:8080". Ignored
	// when Listener is set.
	Addr string
	// Listener, if set, is served instead of listening on Addr.
	Listener net.Listener
	// Token is the bearer token every request must carry. Required.
	Token string
	// SSE serves the legacy SSE transport (GET /sse, POST /message) instead
	// of streamable HTTP (/mcp).
	SSE bool
	// AllowedHosts are host names (without port) accepted in the Host header
	// besides localhost, 127.0.0.1, ::1 and the listening address itself.
	AllowedHosts []string
	// AllowedOrigins are exact origins ("https://app.example.com") accepted
	// in an Origin header besides loopback origins. A request without Origin
	// (any non-browser client) is not affected.
	AllowedOrigins []string
	// MaxBodyBytes bounds a request body. If zero, 4 MiB.
	MaxBodyBytes int64
	// IdleTTL ends a session idle for that long. If zero, 30 minutes.
	IdleTTL time.Duration
	// MaxEvents bounds the events kept per session for resumption. If zero,
	// 1024.
	MaxEvents int
	// OnListen, if set, is called with the bound address before serving.
	OnListen func(addr net.Addr)
}

// ServeHTTP serves streamable HTTP (or SSE) until ctx is done, then shuts
// down gracefully: open sessions are closed and in-flight requests get up
// to 10 seconds to finish.
func (s *Server) ServeHTTP(ctx context.Context, o HTTPOptions) error {
	if o.Token == "" {
		return errors.New("http: a bearer token is required")
	}
	ln := o.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", o.Addr); err != nil {
			return fmt.Errorf("http: %w", err)
		}
	}
	defer ln.Close()
	if o.OnListen != nil {
		o.OnListen(ln.Addr())
	}
	handler, closeSessions := s.httpHandler(o, ln.Addr())
	hs := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// No WriteTimeout: SSE streams and long tool calls stay open.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closeSessions(shutdownCtx)
	if err := hs.Shutdown(shutdownCtx); err != nil {
		hs.Close()
	}
	return nil
}

// httpHandler returns the MCP handler behind the access checks, and a
// function that closes every session.
func (s *Server) httpHandler(o HTTPOptions, bound net.Addr) (http.Handler, func(context.Context)) {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.IdleTTL == 0 {
		o.IdleTTL = 30 * time.Minute
	}
	if o.MaxEvents == 0 {
		o.MaxEvents = 1024
	}
	mux := http.NewServeMux()
	var closeSessions func(context.Context)
	if o.SSE {
		sse := mcpserver.NewSSEServer(s.mcp,
			mcpserver.WithSSEEndpoint("/sse"),
			mcpserver.WithMessageEndpoint("/message"),
			mcpserver.WithKeepAlive(true),
			mcpserver.WithKeepAliveInterval(25*time.Second),
		)
		mux.Handle("/sse", sse)
		mux.Handle("/message", sse)
		closeSessions = func(context.Context) { sse.CloseSessions() }
	} else {
		h := mcpserver.NewStreamableHTTPServer(s.mcp,
			mcpserver.WithStateful(true),
			mcpserver.WithEventStore(newEventStore(o.MaxEvents)),
			mcpserver.WithSessionIdleTTL(o.IdleTTL),
			mcpserver.WithHeartbeatInterval(25*time.Second),
			mcpserver.WithStreamableHTTPLogger(s.logger),
		)
		mux.Handle("/mcp", h)
		closeSessions = h.CloseSessions
	}
	a := &access{
		token:   []byte(o.Token),
		hosts:   allowedHosts(o.AllowedHosts, bound),
		origins: o.AllowedOrigins,
		maxBody: o.MaxBodyBytes,
		logger:  s.logger,
	}
	return a.wrap(mux), closeSessions
}

// access enforces the transport's rules before a request reaches mcp-go.
type access struct {
	token   []byte
	hosts   map[string]bool
	origins []string
	maxBody int64
	logger  interface{ Warn(string, ...any) }
}

func (a *access) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hostAllowed(r.Host) {
			a.refuse(w, r, http.StatusForbidden, "host not allowed")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !a.originAllowed(o) {
			a.refuse(w, r, http.StatusForbidden, "origin not allowed")
			return
		}
		if !a.authorized(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-mcp"`)
			a.refuse(w, r, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		if r.ContentLength > a.maxBody {
			a.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", a.maxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.maxBody)
		next.ServeHTTP(w, r)
	})
}

func (a *access) refuse(w http.ResponseWriter, r *http.Request, code int, why string) {
	a.logger.Warn("http request refused", "status", code, "reason", why, "remote", r.RemoteAddr, "path", r.URL.Path)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":%q}`+"\n", why)
}

func (a *access) authorized(h string) bool {
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(prefix):]), a.token) == 1
}

func (a *access) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	return a.hosts[host]
}

func (a *access) originAllowed(origin string) bool {
	for _, o := range a.origins {
		if origin == o {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLoopbackName(u.Hostname())
}

func allowedHosts(extra []string, bound net.Addr) map[string]bool {
	m := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	for _, h := range extra {
		m[strings.TrimSuffix(strings.ToLower(h), ".")] = true
	}
	if tcp, ok := bound.(*net.TCPAddr); ok && !tcp.IP.IsUnspecified() {
		m[tcp.IP.String()] = true
	}
	return m
}

func isLoopbackName(host string) bool {
	host = strings.ToLower(host)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackAddr reports whether addr ("host:port") names a loopback
// address, so a caller can refuse to listen elsewhere without a token the
// user chose.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return isLoopbackName(host)
}
