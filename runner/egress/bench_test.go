package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

// benchUpstream serves raw TCP: it echoes each TLS-framed record it
// reads (5-byte header, length in bytes 3-4), and answers a lone "G" with
// 1 MiB.
func benchUpstream(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	mib := make([]byte, 1<<20)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					first, err := br.Peek(1)
					if err != nil {
						return
					}
					if first[0] == 'G' {
						_, _ = br.ReadByte()
						if _, err := c.Write(mib); err != nil {
							return
						}
						continue
					}
					hdr, err := br.Peek(5)
					if err != nil {
						return
					}
					rec := make([]byte, 5+(int(hdr[3])<<8|int(hdr[4])))
					if _, err := io.ReadFull(br, rec); err != nil {
						return
					}
					if _, err := c.Write(rec); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// benchProxy starts a proxy (TLS check per tlsPorts) routing pypi.org:443 to
// a benchUpstream, and returns the address clients dial: the proxy's own,
// or a Bridge in front of its unix socket.
func benchProxy(b *testing.B, tlsPorts []int, viaBridge bool) string {
	b.Helper()
	up := benchUpstream(b)
	opts := egress.Options{
		Allow:    policyAllow(allowlist("pypi.org")),
		Resolver: &mapResolver{m: map[string][]netip.Addr{"pypi.org": {pypiAddr}}},
		TLSPorts: tlsPorts,
		MaxConns: 1024,
	}
	opts = egress.WithTestDial(opts, func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", up)
	})
	p, err := egress.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	if !viaBridge {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = p.Serve(context.Background(), ln) }()
		return ln.Addr().String()
	}
	sock := filepath.Join(b.TempDir(), "egress.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = p.Serve(context.Background(), uln) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = egress.Bridge(ctx, ln, egress.UnixDialer(sock)); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// benchConnect opens one tunnel to pypi.org:443, sending hello (if any)
// and reading its echo.
func benchConnect(b *testing.B, addr string, hello []byte) (net.Conn, *bufio.Reader) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(c, "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n"); err != nil {
		b.Fatal(err)
	}
	br := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	if len(hello) > 0 {
		if _, err := c.Write(hello); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(br, make([]byte, len(hello))); err != nil {
			b.Fatal(err)
		}
	}
	return c, br
}

// BenchmarkConnect measures a tunnel's set-up (dial, CONNECT, policy,
// resolution, upstream dial, and on the TLS port reading the ClientHello)
// and a tunnel carrying 1 MiB, directly and through the Bridge.
func BenchmarkConnect(b *testing.B) {
	hello := captureHello(b, &tls.Config{ServerName: "pypi.org"})
	for _, via := range []bool{false, true} {
		path := "direct"
		if via {
			path = "via-bridge"
		}
		b.Run("setup-plain-tunnel-"+path, func(b *testing.B) {
			addr := benchProxy(b, []int{}, via)
			b.ReportAllocs()
			for b.Loop() {
				c, _ := benchConnect(b, addr, []byte{22, 3, 1, 0, 1, 'x'})
				c.Close()
			}
		})
		b.Run("setup-with-sni-check-"+path, func(b *testing.B) {
			addr := benchProxy(b, nil, via)
			b.ReportAllocs()
			for b.Loop() {
				c, _ := benchConnect(b, addr, hello)
				c.Close()
			}
		})
		b.Run("setup-and-1MiB-"+path, func(b *testing.B) {
			addr := benchProxy(b, nil, via)
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			buf := make([]byte, 1<<20)
			for b.Loop() {
				c, br := benchConnect(b, addr, hello)
				if _, err := io.WriteString(c, "G"); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(br, buf); err != nil {
					b.Fatal(fmt.Errorf("read 1 MiB: %w", err))
				}
				c.Close()
			}
		})
	}
}
