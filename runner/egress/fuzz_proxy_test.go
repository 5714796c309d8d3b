package egress_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

// FuzzProxyRequest sends arbitrary bytes as a client's request. Whatever
// they say, the proxy may only ever dial pypi.org's checked address on an
// allowed port — never evil.com's, never a literal, never a private one —
// and every allowed decision must be for pypi.org.
func FuzzProxyRequest(f *testing.F) {
	for _, s := range []string{
		"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n",
		"CONNECT PyPI.org.:443 HTTP/1.1\r\n\r\n",
		"CONNECT evil.com:443 HTTP/1.1\r\n\r\n",
		"CONNECT 2130706433:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT pypi.org:80 HTTP/1.1\r\n\r\n",
		"GET http://pypi.org/simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
		"GET http://pypi.org/ HTTP/1.1\r\nHost: evil.com\r\n\r\n",
		"GET http://evil.com/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
		"GET http://pypi.org@evil.com/ HTTP/1.1\r\n\r\n",
		"POST http://pypi.org/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: evil.com\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	var mu sync.Mutex
	var bad []string
	pypi := map[netip.AddrPort]bool{netip.AddrPortFrom(pypiAddr, 443): true, netip.AddrPortFrom(pypiAddr, 80): true}
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(f, err)
	defer upstream.Close()
	go func() {
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	opts := egress.Options{
		Allow: policyAllow(allowlist("pypi.org")),
		Resolver: &mapResolver{m: map[string][]netip.Addr{
			"pypi.org": {pypiAddr},
			"evil.com": {netip.MustParseAddr("9.9.9.9")},
		}},
		HeaderTimeout: time.Second,
		IdleTimeout:   time.Second,
		MaxConns:      1024,
		OnDecision: func(d egress.Decision) {
			if d.Allow && d.Addr.Addr() != pypiAddr {
				mu.Lock()
				bad = append(bad, "allowed "+d.Host+" at "+d.Addr.String())
				mu.Unlock()
			}
		},
	}
	opts = egress.WithTestDial(opts, func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		if !pypi[ap] {
			mu.Lock()
			bad = append(bad, "dialled "+ap.String())
			mu.Unlock()
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", upstream.Addr().String())
	})
	p, err := egress.New(opts)
	require.NoError(f, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(f, err)
	go func() { _ = p.Serve(context.Background(), ln) }()
	defer p.Close()

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = c.Write(data)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, bad)
	})
}
