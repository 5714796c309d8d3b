package egress_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

// TestOptionsDialGetsOnlyCheckedAddresses: the public Dial hook is called
// with the checked address (never a name) for an allowed host, and never
// for a refused one.
func TestOptionsDialGetsOnlyCheckedAddresses(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.Host)
	}))
	t.Cleanup(upstream.Close)
	var (
		mu    sync.Mutex
		dials []string
	)
	p, err := egress.New(egress.Options{
		Allow:    policyAllow(allowlist("pypi.org")),
		Resolver: &mapResolver{m: map[string][]netip.Addr{"pypi.org": {pypiAddr}, "evil.example": {filesAddr}}},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dials = append(dials, network+" "+addr)
			mu.Unlock()
			if addr != netip.AddrPortFrom(pypiAddr, 443).String() {
				return nil, fmt.Errorf("test: no route to %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", upstream.Listener.Addr().String())
		},
	})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-done)
	})
	e := &env{t: t, proxy: p, addr: ln.Addr().String()}

	t.Run("an-allowed-host-is-dialled-at-its-checked-address", func(t *testing.T) {
		body, err := e.httpsGet("https://pypi.org/simple/")
		require.NoError(t, err)
		assert.Equal(t, "hello pypi.org", body)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"tcp 151.101.0.223:443"}, dials)
	})
	t.Run("a-refused-host-is-never-dialled", func(t *testing.T) {
		mu.Lock()
		before := len(dials)
		mu.Unlock()
		resp, c, _ := e.rawConnect("evil.example:443")
		_, _ = io.Copy(io.Discard, resp.Body)
		c.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		mu.Lock()
		defer mu.Unlock()
		assert.Len(t, dials, before)
	})
}
