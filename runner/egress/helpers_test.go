package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

// Public addresses the test resolver hands out. They are never dialled on
// the network: the test dial sends them to loopback test servers.
var (
	pypiAddr  = netip.MustParseAddr("151.101.0.223")
	filesAddr = netip.MustParseAddr("151.101.64.223")
	pypiAddr6 = netip.MustParseAddr("2a04:4e42::223")
)

// allowlist is a contract whose network section allows entries.
func allowlist(entries ...string) *contracts.Contract {
	return &contracts.Contract{Network: contracts.Network{Egress: contracts.EgressAllowlist, Allow: entries}}
}

// policyAllow binds policy.HostAllowed to a contract, as production does.
func policyAllow(c *contracts.Contract) func(string) (bool, string) {
	return func(h string) (bool, string) { return policy.HostAllowed(c, h) }
}

// mapResolver is a DNS stand-in: name (no trailing dot) → addresses.
type mapResolver struct {
	mu      sync.Mutex
	m       map[string][]netip.Addr
	lookups []string
}

func (r *mapResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, host)
	if network != "ip" {
		return nil, fmt.Errorf("unexpected network %q", network)
	}
	if !strings.HasSuffix(host, ".") {
		return nil, fmt.Errorf("lookup of %q is not rooted: search domains could apply", host)
	}
	if a, ok := r.m[strings.TrimSuffix(host, ".")]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *mapResolver) Lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lookups...)
}

// env is a proxy on loopback TCP with a test resolver, a test dial that
// routes checked public addresses to loopback test servers, and the
// decisions it made.
type env struct {
	t        *testing.T
	proxy    *egress.Proxy
	addr     string
	resolver *mapResolver

	mu        sync.Mutex
	routes    map[netip.AddrPort]string
	decisions []egress.Decision
	dials     []netip.AddrPort
}

type envOpts struct {
	contract *contracts.Contract
	dns      map[string][]netip.Addr
	opts     egress.Options
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, resolver: &mapResolver{m: o.dns}, routes: map[netip.AddrPort]string{}}
	opts := o.opts
	if opts.Allow == nil {
		opts.Allow = policyAllow(o.contract)
	}
	opts.Resolver = e.resolver
	opts.OnDecision = func(d egress.Decision) {
		e.mu.Lock()
		e.decisions = append(e.decisions, d)
		e.mu.Unlock()
	}
	opts = egress.WithTestDial(opts, func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		e.mu.Lock()
		e.dials = append(e.dials, ap)
		to, ok := e.routes[ap]
		e.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("test: no route to %s", ap)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", to)
	})
	p, err := egress.New(opts)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e.proxy, e.addr = p, ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-done)
	})
	return e
}

// route sends dials of ap to a loopback server address.
func (e *env) route(ap netip.AddrPort, to string) {
	e.mu.Lock()
	e.routes[ap] = to
	e.mu.Unlock()
}

func (e *env) Decisions() []egress.Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]egress.Decision(nil), e.decisions...)
}

func (e *env) Dials() []netip.AddrPort {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]netip.AddrPort(nil), e.dials...)
}

// lastDecision waits for the proxy's decision on the latest request.
func (e *env) lastDecision(n int) egress.Decision {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return len(e.Decisions()) >= n }, 5*time.Second, 5*time.Millisecond)
	d := e.Decisions()
	return d[len(d)-1]
}

// upstreamTLS starts a TLS server that answers "hello <Host>" and echoes
// the body, reachable as ap through the test dial.
func (e *env) upstreamTLS(ap netip.AddrPort) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "hello %s %s", r.Host, b)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the proxy refused
	s.StartTLS()
	e.t.Cleanup(s.Close)
	e.route(ap, s.Listener.Addr().String())
	return s
}

// upstreamHTTP starts a plain HTTP server reachable as ap.
func (e *env) upstreamHTTP(ap netip.AddrPort) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s %s ua=%q proxy-auth=%q", r.Host, r.URL.RequestURI(), r.Header.Values("User-Agent"), r.Header.Get("Proxy-Authorization"))
	}))
	e.t.Cleanup(s.Close)
	e.route(ap, s.Listener.Addr().String())
	return s
}

// rawConnect sends CONNECT target and returns the response and the
// connection (positioned after the response header).
func (e *env) rawConnect(target string) (*http.Response, net.Conn, *bufio.Reader) {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	require.NoError(e.t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(e.t, err)
	return resp, c, br
}

// rawRequest sends a raw request and returns the response with its body read.
func (e *env) rawRequest(raw string) (*http.Response, string) {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	require.NoError(e.t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, raw)
	require.NoError(e.t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(e.t, err)
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// tlsOver runs a TLS handshake with serverName (empty: no SNI) over c.
func tlsOver(c net.Conn, serverName string) (*tls.Conn, error) {
	tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}) //nolint:gosec // the test server's certificate is self-signed; the proxy is what is under test
	return tc, tc.Handshake()
}

// httpsGet fetches url through the proxy with a standard client.
func (e *env) httpsGet(target string) (string, error) {
	proxyURL, _ := url.Parse("http://" + e.addr)
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:           http.ProxyURL(proxyURL),
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see tlsOver
		},
	}
	defer client.CloseIdleConnections()
	resp, err := client.Get(target)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), errors.New(resp.Status)
	}
	return string(b), err
}
