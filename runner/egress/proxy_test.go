package egress_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

func pypiEnv(t *testing.T, allow ...string) *env {
	if len(allow) == 0 {
		allow = []string{"pypi.org", "*.pythonhosted.org"}
	}
	e := newEnv(t, envOpts{
		contract: allowlist(allow...),
		dns: map[string][]netip.Addr{
			"pypi.org":               {pypiAddr},
			"files.pythonhosted.org": {filesAddr},
			"evil.com":               {pypiAddr},
		},
	})
	e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 443))
	e.upstreamTLS(netip.AddrPortFrom(filesAddr, 443))
	return e
}

func TestConnectAllowedHostReachesServer(t *testing.T) {
	e := pypiEnv(t)
	body, err := e.httpsGet("https://pypi.org/simple/")
	require.NoError(t, err)
	assert.Equal(t, "hello pypi.org ", body)
	d := e.lastDecision(1)
	assert.True(t, d.Allow)
	assert.Equal(t, "pypi.org", d.Host)
	assert.Equal(t, 443, d.Port)
	assert.Equal(t, "pypi.org", d.SNI)
	assert.Equal(t, netip.AddrPortFrom(pypiAddr, 443), d.Addr)
	assert.Equal(t, []string{"pypi.org."}, e.resolver.Lookups(), "the proxy resolves the name itself, rooted")
}

func TestDeniedHostIsRefusedWithoutResolving(t *testing.T) {
	e := pypiEnv(t)
	resp, _, br := e.rawConnect("example.org:443")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	b, _ := io.ReadAll(io.LimitReader(br, 4096))
	assert.Contains(t, string(b), "host example.org is not allowed")
	assert.Contains(t, string(b), "pypi.org")
	assert.Empty(t, e.resolver.Lookups())
	assert.Empty(t, e.Dials())
	d := e.lastDecision(1)
	assert.False(t, d.Allow)
	assert.Equal(t, http.StatusForbidden, d.Status)

	_, err := e.httpsGet("https://example.org/")
	require.Error(t, err, "a standard client gets the refusal too")
}

func TestHostSpellings(t *testing.T) {
	cases := []struct {
		name   string
		allow  []string
		target string
		ok     bool
	}{
		{"upper-case-and-trailing-dot-is-the-allowed-host", []string{"pypi.org"}, "PyPI.org.:443", true},
		{"trailing-dot-of-a-ruled-host-is-that-host", []string{"evil.com"}, "evil.com.:443", true},
		{"ruled-host-as-a-prefix-of-another-is-denied", []string{"evil.com"}, "evil.com.attacker.net:443", false},
		{"lookalike-suffix-is-denied", []string{"evil.com"}, "notevil.com:443", false},
		{"two-trailing-dots-are-denied", []string{"pypi.org"}, "pypi.org..:443", false},
		{"wildcard-allows-a-subdomain", []string{"*.pythonhosted.org"}, "files.pythonhosted.org:443", true},
		{"wildcard-allows-a-subdomain-with-trailing-dot", []string{"*.pythonhosted.org"}, "Files.PythonHosted.org.:443", true},
		{"wildcard-does-not-allow-the-bare-domain", []string{"*.pythonhosted.org"}, "pythonhosted.org:443", false},
		{"wildcard-does-not-allow-a-lookalike", []string{"*.pythonhosted.org"}, "evilpythonhosted.org:443", false},
		{"wildcard-does-not-allow-it-as-a-prefix", []string{"*.pythonhosted.org"}, "files.pythonhosted.org.evil.com:443", false},
		{"unicode-lookalike-is-denied", []string{"pypi.org"}, "pypі.org:443", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{
				contract: allowlist(tc.allow...),
				dns: map[string][]netip.Addr{
					"pypi.org": {pypiAddr}, "evil.com": {pypiAddr}, "files.pythonhosted.org": {filesAddr},
					"pythonhosted.org": {filesAddr}, "evilpythonhosted.org": {filesAddr},
					"evil.com.attacker.net": {pypiAddr}, "notevil.com": {pypiAddr}, "files.pythonhosted.org.evil.com": {filesAddr},
				},
			})
			e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 443))
			e.upstreamTLS(netip.AddrPortFrom(filesAddr, 443))
			resp, c, _ := e.rawConnect(tc.target)
			if !tc.ok {
				assert.Equal(t, http.StatusForbidden, resp.StatusCode)
				assert.Empty(t, e.Dials())
				return
			}
			require.Equal(t, http.StatusOK, resp.StatusCode)
			host, _, _ := net.SplitHostPort(tc.target)
			_, err := tlsOver(c, strings.ToLower(strings.TrimSuffix(host, ".")))
			require.NoError(t, err)
			assert.True(t, e.lastDecision(1).Allow)
		})
	}
}

func TestIPLiteralsAreDenied(t *testing.T) {
	targets := []string{
		"2130706433:443", "0x7f000001:443", "0177.0.0.1:443", "127.1:443", "127.0.0.1:443",
		"[::ffff:127.0.0.1]:443", "[::1]:443", "[::]:443", "169.254.169.254:80", "0:443",
		"[64:ff9b::a9fe:a9fe]:443", "10.0.0.1:443", "151.101.0.223:443",
	}
	for _, allow := range [][]string{{"pypi.org"}, {"pypi.org", "127.0.0.0/8", "10.0.0.0/8", "169.254.0.0/16", "::/0"}} {
		for _, target := range targets {
			name := "ip-literal-" + target + "-is-denied-without-a-cidr"
			if len(allow) > 1 {
				name = "ip-literal-" + target + "-is-denied-even-when-a-cidr-covers-an-internal-range"
			}
			t.Run(name, func(t *testing.T) {
				e := pypiEnv(t, allow...)
				resp, _, _ := e.rawConnect(target)
				assert.Equal(t, http.StatusForbidden, resp.StatusCode)
				assert.Empty(t, e.Dials(), "nothing was dialled")
				assert.Empty(t, e.resolver.Lookups(), "an IP literal never reaches the resolver")
			})
		}
	}
	t.Run("public-ip-literal-inside-an-allowed-cidr-is-allowed-without-sni", func(t *testing.T) {
		e := pypiEnv(t, "151.101.0.0/16")
		resp, c, _ := e.rawConnect("151.101.0.223:443")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, err := tlsOver(c, "")
		require.NoError(t, err)
		assert.True(t, e.lastDecision(1).Allow)
	})
	t.Run("ip-literal-with-a-server-name-is-denied", func(t *testing.T) {
		e := pypiEnv(t, "151.101.0.0/16")
		resp, c, _ := e.rawConnect("151.101.0.223:443")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, err := tlsOver(c, "evil.com")
		require.Error(t, err)
		d := e.lastDecision(1)
		assert.False(t, d.Allow)
		assert.Contains(t, d.Reason, "does not match the CONNECT address")
	})
	t.Run("public-ipv6-literal-inside-an-allowed-cidr-is-allowed", func(t *testing.T) {
		e := pypiEnv(t, "2a04:4e42::/32")
		e.upstreamTLS(netip.AddrPortFrom(pypiAddr6, 443))
		resp, c, _ := e.rawConnect("[2a04:4e42::223]:443")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, err := tlsOver(c, "")
		require.NoError(t, err)
	})
	t.Run("inet-aton-spelling-of-an-allowed-public-address-is-denied", func(t *testing.T) {
		e := pypiEnv(t, "151.101.0.0/16")
		resp, _, _ := e.rawConnect("2540044511:443") // 151.101.0.223 as one number
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.Empty(t, e.Dials())
	})
}

func TestAllowedNameResolvingToInternalAddressIsDenied(t *testing.T) {
	cases := []struct {
		name  string
		addrs []string
	}{
		{"rebound-to-private-10", []string{"10.1.2.3"}},
		{"rebound-to-loopback", []string{"127.0.0.1"}},
		{"rebound-to-cloud-metadata", []string{"169.254.169.254"}},
		{"rebound-to-cgnat", []string{"100.64.0.1"}},
		{"rebound-to-ipv4-mapped-private", []string{"::ffff:192.168.1.1"}},
		{"rebound-to-nat64-of-metadata", []string{"64:ff9b::a9fe:a9fe"}},
		{"rebound-to-ipv6-loopback", []string{"::1"}},
		{"rebound-to-ipv6-unique-local", []string{"fd00::1"}},
		{"rebound-to-ipv6-link-local", []string{"fe80::1"}},
		{"rebound-to-multicast", []string{"224.0.0.1"}},
		{"rebound-to-unspecified", []string{"0.0.0.0"}},
		{"one-private-address-among-public-ones", []string{"151.101.0.223", "10.0.0.1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name+"-is-denied", func(t *testing.T) {
			var addrs []netip.Addr
			for _, a := range tc.addrs {
				addrs = append(addrs, netip.MustParseAddr(a))
			}
			e := newEnv(t, envOpts{contract: allowlist("pypi.org"), dns: map[string][]netip.Addr{"pypi.org": addrs}})
			e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 443))
			resp, _, br := e.rawConnect("pypi.org:443")
			assert.Equal(t, http.StatusForbidden, resp.StatusCode)
			b, _ := io.ReadAll(io.LimitReader(br, 4096))
			assert.Contains(t, string(b), "resolves to a non-public address")
			assert.Empty(t, e.Dials())
		})
	}
	t.Run("public-address-is-allowed", func(t *testing.T) {
		e := pypiEnv(t)
		_, err := e.httpsGet("https://pypi.org/")
		require.NoError(t, err)
	})
	t.Run("unresolvable-allowed-name-is-a-bad-gateway", func(t *testing.T) {
		e := pypiEnv(t, "nowhere.example")
		resp, _, _ := e.rawConnect("nowhere.example:443")
		assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	})
}

func TestSNIMustNameTheConnectHost(t *testing.T) {
	cases := []struct {
		name   string
		sni    string
		ok     bool
		reason string
	}{
		{"matching-sni-is-allowed", "pypi.org", true, ""},
		{"matching-sni-in-upper-case-is-allowed", "PYPI.org", true, ""},
		{"other-allowed-host-in-sni-is-denied", "files.pythonhosted.org", false, "domain fronting"},
		{"disallowed-host-in-sni-is-denied", "evil.com", false, "domain fronting"},
		{"missing-sni-is-denied", "", false, "no SNI"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := pypiEnv(t)
			resp, c, _ := e.rawConnect("pypi.org:443")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			tc2, err := tlsOver(c, tc.sni)
			d := e.lastDecision(1)
			if !tc.ok {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "access denied")
				assert.False(t, d.Allow)
				assert.Contains(t, d.Reason, tc.reason)
				return
			}
			require.NoError(t, err)
			assert.True(t, d.Allow)
			_, err = io.WriteString(tc2, "GET / HTTP/1.1\r\nHost: pypi.org\r\nConnection: close\r\n\r\n")
			require.NoError(t, err)
			b, _ := io.ReadAll(tc2)
			assert.Contains(t, string(b), "hello pypi.org")
		})
	}
	t.Run("non-tls-bytes-on-443-are-denied", func(t *testing.T) {
		e := pypiEnv(t)
		resp, c, br := e.rawConnect("pypi.org:443")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, err := io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
		require.NoError(t, err)
		_, _ = io.ReadAll(br)
		d := e.lastDecision(1)
		assert.False(t, d.Allow)
		assert.Contains(t, d.Reason, "takes TLS only")
	})
	t.Run("sni-check-can-be-turned-off-per-port", func(t *testing.T) {
		e := newEnv(t, envOpts{contract: allowlist("pypi.org"), dns: map[string][]netip.Addr{"pypi.org": {pypiAddr}}, opts: egress.Options{TLSPorts: []int{}}})
		e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 443))
		resp, c, _ := e.rawConnect("pypi.org:443")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, err := tlsOver(c, "evil.com")
		require.NoError(t, err)
	})
}

func TestPortsOutsideTheListAreDenied(t *testing.T) {
	e := pypiEnv(t)
	for _, target := range []string{"pypi.org:22", "pypi.org:8443", "pypi.org:0", "pypi.org:65536", "pypi.org:+443", "pypi.org:0x1bb", "pypi.org"} {
		t.Run("connect-to-"+target+"-is-refused", func(t *testing.T) {
			resp, _, br := e.rawConnect(target)
			assert.Contains(t, []int{http.StatusForbidden, http.StatusBadRequest}, resp.StatusCode)
			b, _ := io.ReadAll(io.LimitReader(br, 4096))
			assert.Contains(t, string(b), "port")
		})
	}
	assert.Empty(t, e.Dials())
	t.Run("a-configured-port-is-allowed", func(t *testing.T) {
		e := newEnv(t, envOpts{contract: allowlist("pypi.org"), dns: map[string][]netip.Addr{"pypi.org": {pypiAddr}}, opts: egress.Options{Ports: []int{8443}, TLSPorts: []int{8443}}})
		e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 8443))
		resp, c, _ := e.rawConnect("pypi.org:8443")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, err := tlsOver(c, "pypi.org")
		require.NoError(t, err)
		resp, _, _ = e.rawConnect("pypi.org:443")
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	})
}

func TestPlainHTTP(t *testing.T) {
	e := newEnv(t, envOpts{contract: allowlist("pypi.org"), dns: map[string][]netip.Addr{"pypi.org": {pypiAddr}, "evil.com": {pypiAddr}}})
	e.upstreamHTTP(netip.AddrPortFrom(pypiAddr, 80))
	cases := []struct {
		name   string
		raw    string
		status int
		body   string
	}{
		{"absolute-url-to-allowed-host-is-forwarded", "GET http://pypi.org/simple/?q=1 HTTP/1.1\r\nHost: pypi.org\r\nUser-Agent: pip\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n", 200, `hello pypi.org /simple/?q=1 ua=["pip"] proxy-auth=""`},
		{"host-header-in-another-spelling-of-the-same-host-is-forwarded", "GET http://pypi.org/ HTTP/1.1\r\nHost: PYPI.ORG.:80\r\n\r\n", 200, `hello pypi.org / ua=[] proxy-auth=""`},
		{"no-host-header-is-forwarded-with-the-url-host", "GET http://pypi.org/x HTTP/1.0\r\n\r\n", 200, "hello pypi.org /x"},
		{"host-header-naming-another-host-is-denied", "GET http://pypi.org/ HTTP/1.1\r\nHost: evil.com\r\n\r\n", 403, "does not match the URL's host"},
		{"host-header-naming-another-port-is-denied", "GET http://pypi.org/ HTTP/1.1\r\nHost: pypi.org:8080\r\n\r\n", 403, "does not match the URL's host"},
		{"absolute-url-to-denied-host-is-denied", "GET http://evil.com/ HTTP/1.1\r\nHost: evil.com\r\n\r\n", 403, "host evil.com is not allowed"},
		{"origin-form-request-is-refused", "GET / HTTP/1.1\r\nHost: pypi.org\r\n\r\n", 400, "forward proxy"},
		{"https-url-without-connect-is-refused", "GET https://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", 400, "use CONNECT"},
		{"userinfo-in-url-is-refused", "GET http://u:p@pypi.org/ HTTP/1.1\r\n\r\n", 400, "user information"},
		{"ip-literal-url-is-denied", "GET http://2130706433/ HTTP/1.1\r\n\r\n", 403, "not covered by an allowed CIDR"},
		{"port-22-url-is-denied", "GET http://pypi.org:22/ HTTP/1.1\r\n\r\n", 403, "port 22 is not allowed"},
		{"plain-http-to-the-tls-port-is-denied", "GET http://pypi.org:443/ HTTP/1.1\r\n\r\n", 403, "takes TLS only"},
		{"upgrade-is-refused", "GET http://pypi.org/ HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 403, "upgrades"},
		{"two-host-headers-are-refused", "GET http://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\nHost: evil.com\r\n\r\n", 400, "Host"},
		{"oversized-header-is-refused", "GET http://pypi.org/ HTTP/1.1\r\nX-Pad: " + strings.Repeat("a", 40<<10) + "\r\n\r\n", 431, "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.rawRequest(tc.raw)
			assert.Equal(t, tc.status, resp.StatusCode, body)
			assert.Contains(t, body, tc.body)
		})
	}
	t.Run("connect-to-port-80-is-refused-so-a-tunnelled-host-header-cannot-front", func(t *testing.T) {
		resp, _, br := e.rawConnect("pypi.org:80")
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		b, _ := io.ReadAll(io.LimitReader(br, 4096))
		assert.Contains(t, string(b), "send plain http:// requests")
	})
	t.Run("standard-client-fetches-through-the-proxy", func(t *testing.T) {
		body, err := e.httpsGet("http://pypi.org/simple/")
		require.NoError(t, err)
		assert.Contains(t, body, "hello pypi.org /simple/")
	})
}

func TestProxyNeverChainsThroughTheHostsProxySettings(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("ALL_PROXY", "socks5://127.0.0.1:1")
	e := pypiEnv(t)
	// The test client must not use the environment either: httpsGet sets
	// its proxy explicitly, and the proxy dials the checked address.
	_, err := e.httpsGet("https://pypi.org/")
	require.NoError(t, err)
	assert.Equal(t, []netip.AddrPort{netip.AddrPortFrom(pypiAddr, 443)}, e.Dials())
}

func TestProxyRefusesItsOwnMachine(t *testing.T) {
	p, err := egress.New(egress.Options{Allow: func(string) (bool, string) { return true, "" }})
	require.NoError(t, err)
	assert.True(t, p.IsSelf(netip.MustParseAddr("127.0.0.1")), "interface addresses are known")
	assert.False(t, p.IsSelf(pypiAddr))
}

func TestConcurrentConnectionLimit(t *testing.T) {
	e := newEnv(t, envOpts{contract: allowlist("pypi.org"), dns: map[string][]netip.Addr{"pypi.org": {pypiAddr}}, opts: egress.Options{MaxConns: 2}})
	e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 443))
	// Two connections that have not finished their header hold both slots.
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", e.addr)
		require.NoError(t, err)
		_, err = io.WriteString(c, "CONNECT pypi.org:443 HTTP/1.1\r\n")
		require.NoError(t, err)
		held = append(held, c)
	}
	time.Sleep(50 * time.Millisecond) // let the proxy accept both
	resp, _, br := e.rawConnect("pypi.org:443")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a third is refused")
	b, _ := io.ReadAll(io.LimitReader(br, 4096))
	assert.Contains(t, string(b), "too many connections")

	for _, c := range held {
		c.Close()
	}
	require.Eventually(t, func() bool {
		resp, c, _ := e.rawConnect("pypi.org:443")
		defer c.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond, "slots free up when connections end")
}

func TestIdleTunnelIsClosed(t *testing.T) {
	e := newEnv(t, envOpts{contract: allowlist("pypi.org"), dns: map[string][]netip.Addr{"pypi.org": {pypiAddr}}, opts: egress.Options{IdleTimeout: 200 * time.Millisecond}})
	e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 443))
	resp, c, _ := e.rawConnect("pypi.org:443")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	tc, err := tlsOver(c, "pypi.org")
	require.NoError(t, err)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = tc.Read(make([]byte, 1))
	require.Error(t, err, "the quiet tunnel ends well before the test deadline")
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "closed by the proxy, not by the client's deadline: %v", err)
}

func TestSlowHeaderIsDropped(t *testing.T) {
	e := newEnv(t, envOpts{contract: allowlist("pypi.org"), opts: egress.Options{HeaderTimeout: 200 * time.Millisecond}})
	c, err := net.Dial("tcp", e.addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "CONNECT pypi.org:443 HTTP/1.1\r\n")
	require.NoError(t, err)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
}

func TestCloseEndsServeAndTunnels(t *testing.T) {
	e := pypiEnv(t)
	resp, c, _ := e.rawConnect("pypi.org:443")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	tc, err := tlsOver(c, "pypi.org")
	require.NoError(t, err)
	require.NoError(t, e.proxy.Close())
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = tc.Read(make([]byte, 1))
	require.Error(t, err)
	_, err = net.DialTimeout("tcp", e.addr, time.Second)
	assert.Error(t, err, "the listener is closed")
}

func TestStressHundredClients(t *testing.T) {
	e := newEnv(t, envOpts{contract: allowlist("pypi.org"), dns: map[string][]netip.Addr{"pypi.org": {pypiAddr}, "evil.com": {pypiAddr}}, opts: egress.Options{MaxConns: 64}})
	e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 443))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := "pypi.org"
			if i%4 == 3 {
				host = "evil.com"
			}
			outcome := stressOne(ctx, e.addr, host)
			mu.Lock()
			counts[host+" "+outcome]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "100 clients finished within the bound")
	t.Logf("outcomes: %v", counts)
	assert.Equal(t, 25, counts["evil.com 403"]+counts["evil.com 503"], "every disallowed request was refused or shed")
	assert.Equal(t, 75, counts["pypi.org ok"]+counts["pypi.org 503"], "every allowed request was served or shed")
	assert.Positive(t, counts["pypi.org ok"])
	require.Eventually(t, func() bool { return len(e.Decisions()) >= counts["evil.com 403"]+counts["pypi.org ok"] }, 5*time.Second, 10*time.Millisecond)
	for _, d := range e.Decisions() {
		assert.Equal(t, d.Host == "pypi.org", d.Allow, "decision for %s", d.Host)
	}
}

// stressOne runs CONNECT, TLS and one request, and names the outcome.
func stressOne(ctx context.Context, addr, host string) string {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	fmt.Fprintf(c, "CONNECT %s:443 HTTP/1.1\r\n\r\n", host)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return "read: " + err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprint(resp.StatusCode)
	}
	tc, err := tlsOver(c, host)
	if err != nil {
		return "tls: " + err.Error()
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	b, _ := io.ReadAll(tc)
	if !strings.Contains(string(b), "hello "+host) {
		return "body: " + string(b)
	}
	return "ok"
}

// blockingResolver never answers before its context ends.
type blockingResolver struct{ started chan struct{} }

func (r blockingResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	close(r.started)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestCloseCancelsAResolutionInProgress(t *testing.T) {
	r := blockingResolver{started: make(chan struct{})}
	p, err := egress.New(egress.Options{Allow: policyAllow(allowlist("pypi.org")), Resolver: r, ConnectTimeout: time.Hour})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- p.Serve(context.Background(), ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "CONNECT pypi.org:443 HTTP/1.1\r\n\r\n")
	require.NoError(t, err)
	<-r.started
	closed := make(chan struct{})
	go func() { _ = p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited for a resolution with an hour's timeout")
	}
	require.NoError(t, <-served)
}

func TestPlainHTTPBodiesBothWays(t *testing.T) {
	e := newEnv(t, envOpts{contract: allowlist("pypi.org"), dns: map[string][]netip.Addr{"pypi.org": {pypiAddr}}})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusCreated)
		for i := 0; i < len(b); i += 8192 { // chunked, flushed in pieces
			_, _ = w.Write(b[i:min(i+8192, len(b))])
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(s.Close)
	e.route(netip.AddrPortFrom(pypiAddr, 80), s.Listener.Addr().String())
	proxyURL, _ := url.Parse("http://" + e.addr)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), ExpectContinueTimeout: 10 * time.Second}}
	defer client.CloseIdleConnections()
	body := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16*4) // 256 KiB
	req, err := http.NewRequest(http.MethodPost, "http://pypi.org/upload", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Expect", "100-continue")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, fmt.Sprint(len(body)), resp.Header.Get("X-Got"))
	assert.True(t, bytes.Equal(body, got), "got %d bytes", len(got))
}
