package egress_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

// captureHello returns the first flight crypto/tls's client sends with cfg:
// a real ClientHello, in one record.
func captureHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		_ = tls.Client(b, cfg).Handshake()
		b.Close()
	}()
	_ = a.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := a.Read(buf)
	require.NoError(t, err)
	return buf[:n]
}

// ext is one ClientHello extension: its type and raw data.
type ext struct {
	typ  uint16
	data []byte
}

// buildHello builds a ClientHello record carrying exts.
func buildHello(exts ...ext) []byte {
	var body []byte
	body = append(body, 3, 3)
	body = append(body, make([]byte, 32)...)
	body = append(body, 0)                // session id
	body = append(body, 0, 2, 0x13, 0x01) // one cipher suite
	body = append(body, 1, 0)             // null compression
	var e []byte
	for _, x := range exts {
		e = append(e, byte(x.typ>>8), byte(x.typ), byte(len(x.data)>>8), byte(len(x.data)))
		e = append(e, x.data...)
	}
	body = append(body, byte(len(e)>>8), byte(len(e)))
	body = append(body, e...)
	msg := append([]byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	return record(msg)
}

func record(frag []byte) []byte {
	return append([]byte{22, 3, 1, byte(len(frag) >> 8), byte(len(frag))}, frag...)
}

// sniExt is a server_name extension holding the given (type, name) entries.
func sniExt(entries ...any) ext {
	var list []byte
	for i := 0; i+1 < len(entries); i += 2 {
		typ, name := entries[i].(int), entries[i+1].(string)
		list = append(list, byte(typ), byte(len(name)>>8), byte(len(name)))
		list = append(list, name...)
	}
	return ext{0, append([]byte{byte(len(list) >> 8), byte(len(list))}, list...)}
}

func TestReadClientHello(t *testing.T) {
	real := captureHello(t, &tls.Config{ServerName: "pypi.org"})
	noSNI := captureHello(t, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the hello is used
	tls12 := captureHello(t, &tls.Config{ServerName: "Files.PythonHosted.org", MaxVersion: tls.VersionTLS12})
	// The same hello with its handshake message split over two records.
	msg := real[5:]
	split := append(record(msg[:3]), record(msg[3:])...)

	cases := []struct {
		name string
		in   []byte
		sni  string
		ech  bool
		err  string
	}{
		{"real-hello-names-its-server", real, "pypi.org", false, ""},
		{"real-hello-without-server-name-has-none", noSNI, "", false, ""},
		{"tls12-hello-keeps-the-name-as-sent", tls12, "Files.PythonHosted.org", false, ""},
		{"hello-split-over-records-is-reassembled", split, "pypi.org", false, ""},
		{"built-hello-with-one-name-is-read", buildHello(sniExt(0, "a.example")), "a.example", false, ""},
		{"hello-without-extensions-has-no-name", buildHello(), "", false, ""},
		{"encrypted-client-hello-is-flagged", buildHello(sniExt(0, "public.example"), ext{0xfe0d, []byte{1, 2}}), "public.example", true, ""},
		{"draft-esni-is-flagged", buildHello(ext{0xffce, []byte{1}}), "", true, ""},
		{"duplicate-server-name-extensions-are-refused", buildHello(sniExt(0, "a.example"), sniExt(0, "b.example")), "", false, "duplicate"},
		{"two-names-in-one-list-are-refused", buildHello(sniExt(0, "a.example", 0, "b.example")), "", false, "more than one"},
		{"unknown-name-type-is-refused", buildHello(sniExt(1, "a.example")), "", false, "unknown type"},
		{"empty-name-is-refused", buildHello(sniExt(0, "")), "", false, "bad server_name"},
		{"trailing-bytes-in-server-name-are-refused", buildHello(ext{0, append(sniExt(0, "a.example").data, 0)}), "", false, "bad server_name"},
		{"application-data-record-is-refused", append([]byte{23, 3, 3, 0, 1}, 0), "", false, "not a TLS handshake"},
		{"ssh-banner-is-refused", []byte("SSH-2.0-OpenSSH_9.6\r\n"), "", false, "not a TLS handshake"},
		{"server-hello-is-refused", record([]byte{2, 0, 0, 0}), "", false, "not a ClientHello"},
		{"zero-length-record-is-refused", record(nil), "", false, "bad TLS record length"},
		{"truncated-hello-is-refused", real[:len(real)-10], "", false, "unexpected EOF"},
		{"oversized-hello-is-refused", record([]byte{1, 0xff, 0xff, 0xff}), "", false, "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, hello, err := egress.ReadClientHello(bytes.NewReader(tc.in))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.sni, hello.ServerName)
			assert.Equal(t, tc.ech, hello.ECH)
			assert.Equal(t, tc.in, raw, "every byte read is returned to be forwarded")
			// Byte-at-a-time arrival reads the same.
			raw2, hello2, err := egress.ReadClientHello(iotest.OneByteReader(bytes.NewReader(tc.in)))
			require.NoError(t, err)
			assert.Equal(t, hello, hello2)
			assert.Equal(t, raw, raw2)
		})
	}
	t.Run("bytes-after-the-hello-are-not-consumed", func(t *testing.T) {
		in := append(append([]byte{}, real...), "next"...)
		raw, _, err := egress.ReadClientHello(bytes.NewReader(in))
		require.NoError(t, err)
		assert.Equal(t, real, raw)
	})
}

// tlsServerName is the oracle: the server name crypto/tls's server reads
// from data, and whether it got that far.
func tlsServerName(data []byte) (string, bool) {
	var name string
	var saw bool
	stop := errors.New("stop")
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, saw = h.ServerName, true
		return nil, stop
	}}
	_ = tls.Server(&readOnlyConn{r: bytes.NewReader(data)}, cfg).Handshake()
	return name, saw
}

// readOnlyConn feeds bytes to a TLS server and swallows its replies.
type readOnlyConn struct{ r *bytes.Reader }

func (c *readOnlyConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *readOnlyConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *readOnlyConn) Close() error                     { return nil }
func (c *readOnlyConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *readOnlyConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c *readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c *readOnlyConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzSNI feeds arbitrary bytes to the ClientHello reader: it must never
// panic, must return exactly the prefix it read, and whenever it accepts a
// hello that crypto/tls's server also parses, both must read the same
// server name (a proxy and a server that disagree about the name is
// domain fronting).
func FuzzSNI(f *testing.F) {
	for _, cfg := range []*tls.Config{
		{ServerName: "pypi.org"},
		{ServerName: "files.pythonhosted.org", MaxVersion: tls.VersionTLS12},
		{InsecureSkipVerify: true}, //nolint:gosec // only the hello is used
	} {
		f.Add(captureHello(f, cfg))
	}
	f.Add(buildHello(sniExt(0, "a.example"), ext{0xfe0d, []byte{1}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, hello, err := egress.ReadClientHello(bytes.NewReader(data))
		require.LessOrEqual(t, len(raw), len(data))
		require.True(t, bytes.Equal(data[:len(raw)], raw), "returned bytes are not the prefix read")
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(raw), 32<<10)
		if name, saw := tlsServerName(data); saw {
			require.Equal(t, name, hello.ServerName, "crypto/tls reads another server name")
		}
	})
}

// TestWriteFuzzSeeds refreshes testdata/fuzz/FuzzSNI from real and built
// hellos when EGRESS_WRITE_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("EGRESS_WRITE_SEEDS") != "1" {
		t.Skip("set EGRESS_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzSNI")
	}
	seeds := map[string][]byte{
		"real-sni":          captureHello(t, &tls.Config{ServerName: "pypi.org"}),
		"real-no-sni":       captureHello(t, &tls.Config{InsecureSkipVerify: true}), //nolint:gosec // only the hello is used
		"real-tls12":        captureHello(t, &tls.Config{ServerName: "files.pythonhosted.org", MaxVersion: tls.VersionTLS12}),
		"built-one-name":    buildHello(sniExt(0, "a.example")),
		"built-no-ext":      buildHello(),
		"built-ech":         buildHello(sniExt(0, "public.example"), ext{0xfe0d, []byte{1, 2}}),
		"built-dup":         buildHello(sniExt(0, "a.example"), sniExt(0, "b.example")),
		"built-two-names":   buildHello(sniExt(0, "a.example", 0, "b.example")),
		"built-other-type":  buildHello(sniExt(1, "a.example")),
		"built-split":       nil,
		"not-tls":           []byte("SSH-2.0-OpenSSH_9.6\r\n"),
		"built-zero-record": record(nil),
	}
	r := seeds["real-sni"]
	seeds["built-split"] = append(record(r[5:8]), record(r[8:])...)
	dir := filepath.Join("testdata", "fuzz", "FuzzSNI")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, b := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
}
