package e2blocal

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process"
	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

// pypiAddr is the public address the test resolver gives pypi.org. It is
// never dialled on the network: the test dial sends it to a loopback server.
var pypiAddr = netip.MustParseAddr("151.101.0.223")

// egressWorld is a local service whose allowlist sandboxes resolve
// pypi.org to pypiAddr, reach it as a loopback TLS server with a
// certificate for pypi.org, and record every proxy decision and dial.
type egressWorld struct {
	*testEnv
	caPEM []byte

	mu        sync.Mutex
	decisions []egress.Decision
	dials     []string
}

type mapResolver map[string][]netip.Addr

func (r mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[strings.TrimSuffix(host, ".")]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// selfSigned returns a certificate for name and its PEM.
func selfSigned(t *testing.T, name string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newEgressWorld(t *testing.T) *egressWorld {
	t.Helper()
	requireJail(t)
	cert, caPEM := selfSigned(t, "pypi.org")
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "simple index from %s%s", r.Host, r.URL.Path)
	}))
	upstream.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	upstream.Config.ErrorLog = log.New(io.Discard, "", 0)
	upstream.StartTLS()
	t.Cleanup(upstream.Close)
	w := &egressWorld{caPEM: caPEM}
	w.testEnv = newEnv(t, func(o *Options) {
		o.EgressResolver = mapResolver{"pypi.org": {pypiAddr}}
		o.EgressDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			w.mu.Lock()
			w.dials = append(w.dials, addr)
			w.mu.Unlock()
			if addr != netip.AddrPortFrom(pypiAddr, 443).String() {
				return nil, fmt.Errorf("test: no route to %s", addr) // never the real network
			}
			var d net.Dialer
			return d.DialContext(ctx, network, upstream.Listener.Addr().String())
		}
		o.OnEgressDecision = func(_ string, d egress.Decision) {
			w.mu.Lock()
			w.decisions = append(w.decisions, d)
			w.mu.Unlock()
		}
	})
	return w
}

func (w *egressWorld) Decisions() []egress.Decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]egress.Decision(nil), w.decisions...)
}

// createRaw creates a sandbox from a raw JSON body and returns it.
func (e *testEnv) createRaw(t *testing.T, body string) api.Sandbox {
	t.Helper()
	code, out := e.do(http.MethodPost, "/v2/sandboxes", body)
	require.Equal(t, http.StatusCreated, code, string(out))
	var sb api.Sandbox
	require.NoError(t, json.Unmarshal(out, &sb))
	return sb
}

const allowlistBody = `{"templateID":"base","timeout":600,"allow_internet_access":true,"network":{"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0"]}}`

// proxyServes counts the egress proxies serving in this process.
func proxyServes() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	n := 0
	for _, block := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(block, "runner/egress.(*Proxy).Serve") {
			// "N @ 0x..." heads each block of identical goroutines.
			var k int
			if _, err := fmt.Sscanf(block, "%d @", &k); err == nil {
				n += k
			}
		}
	}
	return n
}

func TestEgressAllowlistSandbox(t *testing.T) {
	w := newEgressWorld(t)
	ctx := context.Background()
	sb := w.createRaw(t, allowlistBody)
	pc := w.processClient(sb, false)
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, sb.SandboxID, "tmp", "ca.pem"), w.caPEM, 0o644))

	hostLn, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { hostLn.Close() })
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nhost secret\n")
			c.Close()
		}
	}()
	hostPort := hostLn.Addr().(*net.TCPAddr).Port

	t.Run("an-allowed-host-is-reached-through-the-proxy", func(t *testing.T) {
		start := time.Now()
		_ = run(ctx, pc, "curl --version >/dev/null")
		base := time.Since(start)
		start = time.Now()
		r := run(ctx, pc, "curl -sS --max-time 20 --cacert /tmp/ca.pem https://pypi.org/simple/")
		t.Logf("curl https://pypi.org/simple/ through the proxy: %v (curl --version alone: %v)", time.Since(start), base)
		require.NoError(t, r.err)
		assert.Equal(t, "simple index from pypi.org/simple/", r.stdout, r.stderr)
		assert.Equal(t, int32(0), r.end.GetExitCode())
	})
	t.Run("a-host-outside-the-allowlist-is-refused-by-the-proxy", func(t *testing.T) {
		n := len(w.Decisions())
		r := run(ctx, pc, "curl -sS --max-time 20 -o /dev/null -w '%{http_code}' https://not-allowed.example")
		require.NoError(t, r.err)
		assert.Equal(t, int32(56), r.end.GetExitCode(), r.stderr)
		assert.Contains(t, r.stderr, "CONNECT tunnel failed, response 403")
		d := w.Decisions()
		require.Greater(t, len(d), n)
		assert.Equal(t, "not-allowed.example", d[len(d)-1].Host)
		assert.False(t, d[len(d)-1].Allow)
	})
	t.Run("ignoring-the-proxy-reaches-nothing", func(t *testing.T) {
		r := run(ctx, pc, fmt.Sprintf("curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:%d/", hostPort))
		require.NoError(t, r.err)
		assert.NotEqual(t, int32(0), r.end.GetExitCode())
		assert.NotContains(t, r.stdout, "host secret")
		r = run(ctx, pc, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3", hostPort))
		assert.NotEqual(t, int32(0), r.end.GetExitCode())
		assert.NotContains(t, r.stdout, "host secret")
		// No DNS either: names resolve only at the proxy.
		r = run(ctx, pc, "getent hosts pypi.org")
		assert.NotEqual(t, int32(0), r.end.GetExitCode(), r.stdout)
	})
	t.Run("the-proxy-cannot-be-used-to-reach-the-host-loopback", func(t *testing.T) {
		r := run(ctx, pc, fmt.Sprintf("curl -sS --max-time 5 http://127.0.0.1:%d/ ; curl -sS --max-time 5 -x http://127.0.0.1:3128 http://127.0.0.1:%d/", hostPort, hostPort))
		require.NoError(t, r.err)
		assert.NotContains(t, r.stdout, "host secret")
	})
	t.Run("the-proxy-settings-replace-the-callers", func(t *testing.T) {
		r := run(ctx, pc, "env | grep -i -E '^(https?|no|all)_proxy=|^NODE_USE_ENV_PROXY=' | sort", func(req *connect.Request[process.StartRequest]) {
			req.Msg.Process.Envs = map[string]string{"HTTPS_PROXY": "http://10.0.0.1:8080", "https_proxy": "http://10.0.0.1:8080", "All_Proxy": "socks5://10.0.0.1:1080", "KEEP": "me"}
		})
		require.NoError(t, r.err)
		assert.Equal(t, strings.Join([]string{
			"HTTPS_PROXY=http://127.0.0.1:3128", "HTTP_PROXY=http://127.0.0.1:3128",
			"NODE_USE_ENV_PROXY=1", "NO_PROXY=localhost,127.0.0.1,::1",
			"http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
			"no_proxy=localhost,127.0.0.1,::1",
		}, "\n")+"\n", r.stdout)
	})
	t.Run("get-reports-the-network-config", func(t *testing.T) {
		code, out := w.do(http.MethodGet, "/sandboxes/"+sb.SandboxID, nil)
		require.Equal(t, http.StatusOK, code, string(out))
		var d api.SandboxDetail
		require.NoError(t, json.Unmarshal(out, &d))
		require.NotNil(t, d.Network)
		require.NotNil(t, d.Network.AllowOut)
		require.NotNil(t, d.Network.DenyOut)
		assert.Equal(t, []string{"pypi.org"}, *d.Network.AllowOut)
		assert.Equal(t, []string{"0.0.0.0/0"}, *d.Network.DenyOut)
	})
	t.Run("the-proxy-keeps-serving-across-pause-and-resume", func(t *testing.T) {
		code, out := w.do(http.MethodPost, "/sandboxes/"+sb.SandboxID+"/pause", nil)
		require.Equal(t, http.StatusNoContent, code, string(out))
		code, out = w.do(http.MethodPost, "/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":600}`)
		require.Equal(t, http.StatusCreated, code, string(out))
		r := run(ctx, pc, "curl -sS --max-time 20 --cacert /tmp/ca.pem https://pypi.org/simple/")
		require.NoError(t, r.err)
		assert.Equal(t, "simple index from pypi.org/simple/", r.stdout, r.stderr)
	})
	w.mu.Lock()
	for _, a := range w.dials {
		assert.Equal(t, "151.101.0.223:443", a, "only the allowed host's checked address is ever dialled")
	}
	w.mu.Unlock()
}

func TestSandboxWithoutAllowlistHasNoProxy(t *testing.T) {
	w := newEgressWorld(t)
	before := proxyServes()
	sb := w.create(api.NewSandbox{})
	assert.Equal(t, before, proxyServes())
	r := run(context.Background(), w.processClient(sb, false), "env | grep -ic proxy; exec 3<>/dev/tcp/127.0.0.1/3128")
	require.NoError(t, r.err)
	assert.Equal(t, "0\n", r.stdout)
	assert.NotEqual(t, int32(0), r.end.GetExitCode())
	assert.Contains(t, r.stderr, "Connection refused")
}

func TestEgressProxyEndsWithItsSandbox(t *testing.T) {
	w := newEgressWorld(t)
	before := proxyServes()
	t.Run("kill-stops-the-proxy", func(t *testing.T) {
		sb := w.createRaw(t, allowlistBody)
		require.Equal(t, before+1, proxyServes())
		code, out := w.do(http.MethodDelete, "/sandboxes/"+sb.SandboxID, nil)
		require.Equal(t, http.StatusNoContent, code, string(out))
		assert.Equal(t, before, proxyServes())
	})
	t.Run("expiry-stops-the-proxy", func(t *testing.T) {
		sb := w.createRaw(t, strings.Replace(allowlistBody, `"timeout":600`, `"timeout":1`, 1))
		require.Equal(t, before+1, proxyServes())
		// The directory goes last, after the proxy has stopped.
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(w.dir, sb.SandboxID))
			return os.IsNotExist(err)
		}, 15*time.Second, 20*time.Millisecond)
		assert.Equal(t, before, proxyServes())
	})
	t.Run("server-close-stops-the-proxy", func(t *testing.T) {
		other := newEgressWorld(t)
		other.createRaw(t, allowlistBody)
		require.Equal(t, before+1, proxyServes())
		require.NoError(t, other.srv.Close(context.Background()))
		assert.Equal(t, before, proxyServes())
	})
}

func TestNetworkRequestShapes(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name         string
		body         string
		hostNetwork  bool
		wantAllowOut []string
	}{
		{"allowlist-with-internet-true-is-the-contract-shape", `{"allow_internet_access":true,"network":{"allowOut":["pypi.org","*.pythonhosted.org"],"denyOut":["0.0.0.0/0"]}}`, false, []string{"pypi.org", "*.pythonhosted.org"}},
		{"allowlist-with-internet-false-still-allows-the-list", `{"allow_internet_access":false,"network":{"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0"]}}`, false, []string{"pypi.org"}},
		{"allowlist-with-internet-omitted-allows-the-list", `{"network":{"allowOut":["151.101.0.0/16"],"denyOut":["0.0.0.0/0"]}}`, false, []string{"151.101.0.0/16"}},
		{"extra-deny-entries-beside-deny-all-are-moot", `{"allow_internet_access":true,"network":{"allowOut":["pypi.org"],"denyOut":["10.0.0.0/8","0.0.0.0/0"]}}`, false, []string{"pypi.org"}},
		{"deny-all-without-an-allowlist-is-no-network-even-with-internet-true", `{"allow_internet_access":true,"network":{"denyOut":["0.0.0.0/0"]}}`, false, nil},
		{"internet-true-without-lists-is-the-host-network", `{"allow_internet_access":true}`, true, nil},
		{"internet-omitted-without-lists-is-no-network", `{}`, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var req newSandboxRequest
			require.NoError(t, json.Unmarshal([]byte(tc.body), &req))
			req.TemplateID = TemplateID
			spec, code, err := e.srv.specFromRequest(req, defaultTimeoutV2)
			require.NoError(t, err, "status %d", code)
			assert.Equal(t, tc.hostNetwork, spec.allowInternet)
			assert.Equal(t, tc.wantAllowOut, spec.allowOut)
		})
	}
}

func TestSandboxEnvVarsCannotRedirectTheProxy(t *testing.T) {
	w := newEgressWorld(t)
	sb := w.createRaw(t, strings.Replace(allowlistBody, `"timeout":600`, `"timeout":600,"envVars":{"HTTP_PROXY":"http://10.1.1.1:1","no_proxy":"*","KEEP":"me"}`, 1))
	r := run(context.Background(), w.processClient(sb, false), `echo "$HTTP_PROXY $no_proxy $KEEP"`)
	require.NoError(t, r.err)
	assert.Equal(t, "http://127.0.0.1:3128 localhost,127.0.0.1,::1 me\n", r.stdout)
}
