package egress_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

// unixServer serves handle on a unix socket in a temp dir.
func unixServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); handle(c) }()
		}
	}()
	return path
}

// startBridge runs Bridge on a loopback listener and returns its address,
// a cancel and Bridge's result.
func startBridge(t *testing.T, dial func(context.Context) (net.Conn, error)) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- egress.Bridge(ctx, ln, dial)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String(), cancel, done
}

func TestBridgeCopiesBothWays(t *testing.T) {
	upper := unixServer(t, func(c net.Conn) {
		b, _ := io.ReadAll(c) // until the client's half-close
		_, _ = c.Write(bytes.ToUpper(b))
	})
	echo := unixServer(t, func(c net.Conn) { _, _ = io.Copy(c, c) })

	t.Run("half-close-reaches-the-host-side-and-the-answer-comes-back", func(t *testing.T) {
		addr, _, _ := startBridge(t, egress.UnixDialer(upper))
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "hello from the sandbox")
		require.NoError(t, err)
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		require.NoError(t, err)
		assert.Equal(t, "HELLO FROM THE SANDBOX", string(b))
	})
	t.Run("a-mebibyte-streams-both-ways-at-once", func(t *testing.T) {
		addr, _, _ := startBridge(t, egress.UnixDialer(echo))
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		want := make([]byte, 1<<20)
		_, _ = rand.Read(want)
		go func() {
			_, _ = c.Write(want)
			_ = c.(*net.TCPConn).CloseWrite()
		}()
		got, err := io.ReadAll(c)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "got %d bytes back", len(got))
	})
	t.Run("unreachable-host-side-closes-the-client", func(t *testing.T) {
		addr, _, _ := startBridge(t, egress.UnixDialer(filepath.Join(t.TempDir(), "missing.sock")))
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		assert.ErrorIs(t, err, io.EOF)
	})
	t.Run("cancel-ends-bridge-and-every-carried-connection", func(t *testing.T) {
		addr, cancel, done := startBridge(t, egress.UnixDialer(echo))
		var conns []net.Conn
		for range 5 {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			_, err = io.WriteString(c, "ping")
			require.NoError(t, err)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b := make([]byte, 4)
			_, err = io.ReadFull(c, b)
			require.NoError(t, err)
			conns = append(conns, c)
		}
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Bridge did not return after cancel")
		}
		for _, c := range conns {
			_, err := c.Read(make([]byte, 1))
			require.Error(t, err)
			var ne net.Error
			assert.False(t, errors.As(err, &ne) && ne.Timeout(), "closed by the bridge: %v", err)
		}
		_, err := net.DialTimeout("tcp", addr, time.Second)
		assert.Error(t, err, "the listener is closed")
	})
}

func TestBridgeToProxyOverUnixSocket(t *testing.T) {
	// The production path: sandbox → Bridge (TCP) → unix socket → Proxy.
	e := pypiEnv(t)
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	go func() { _ = e.proxy.Serve(context.Background(), ln) }()
	addr, _, _ := startBridge(t, egress.UnixDialer(sock))

	proxied := &env{t: t, addr: addr}
	body, err := proxied.httpsGet("https://pypi.org/simple/")
	require.NoError(t, err)
	assert.Equal(t, "hello pypi.org ", body)
	_, err = proxied.httpsGet("https://example.org/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Forbidden")
	ds := e.Decisions()
	require.Len(t, ds, 2)
	assert.True(t, ds[0].Allow)
	assert.False(t, ds[1].Allow)
}

func TestSandboxEnv(t *testing.T) {
	got := map[string]string{}
	for _, kv := range egress.SandboxEnv(egress.SandboxAddr) {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok)
		got[k] = v
	}
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		assert.Equal(t, "http://127.0.0.1:3128", got[k], k)
	}
	assert.Equal(t, "localhost,127.0.0.1,::1", got["NO_PROXY"])
	assert.NotContains(t, got, "ALL_PROXY")
}

// syncBuffer is a bytes.Buffer safe for a process's output and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
