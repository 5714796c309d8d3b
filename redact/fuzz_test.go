package redact_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandbox-mcp/sandbox-mcp/redact"
)

// FuzzWriterMatchesBytes checks that streaming in arbitrary chunks gives
// exactly what redacting the whole input gives, and that no plain secret
// value survives either.
func FuzzWriterMatchesBytes(f *testing.F) {
	f.Add([]byte("x "+fakeToken+" y"), uint8(3), uint8(7))
	f.Add([]byte(fakeKey+fakeKey+"tail"), uint8(1), uint8(1))
	f.Add([]byte(strings.Repeat("ghp_FAKE", 20)), uint8(5), uint8(200))
	r := redact.New(secrets())
	f.Fuzz(func(t *testing.T, in []byte, a, b uint8) {
		want := r.Bytes(in)
		var out bytes.Buffer
		w := r.Writer(&out)
		sizes := []int{int(a) + 1, int(b) + 1}
		for i, rest := 0, in; len(rest) > 0; i++ {
			n := min(len(rest), sizes[i%2])
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, out.Bytes()) {
			t.Fatalf("streamed output differs from Bytes:\nwant %q\ngot  %q", want, out.Bytes())
		}
		for _, s := range secrets() {
			if bytes.Contains(want, []byte(s.Value)) {
				t.Fatalf("secret %s survived redaction: %q", s.Name, want)
			}
		}
	})
}
