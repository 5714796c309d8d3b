package redact_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sandbox-mcp/sandbox-mcp/redact"
)

// benchInput returns about size bytes of log-like text with a secret every
// 64 KiB or so.
func benchInput(size int, secrets []redact.Secret) []byte {
	words := strings.Fields("the quick brown fox jumps over lazy dog go test build ok FAIL " +
		"PASS error warning info debug 0x1f 404 200 GET POST /usr/lib/python3 import module " +
		"package main func return nil true false =%#& {} [] () 12345 67890 abcdef ABCDEF")
	rng := rand.New(rand.NewPCG(7, 7))
	var b bytes.Buffer
	b.Grow(size + 100)
	for b.Len() < size {
		if rng.IntN(10000) == 0 {
			b.WriteString(secrets[rng.IntN(len(secrets))].Value)
		} else {
			b.WriteString(words[rng.IntN(len(words))])
		}
		if rng.IntN(12) == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.Bytes()[:size]
}

func benchSecrets() []redact.Secret {
	var ss []redact.Secret
	for i := range 5 {
		ss = append(ss, redact.Secret{Name: fmt.Sprintf("FAKE_%d", i), Value: fmt.Sprintf("fake-secret-%d-0123456789abcdefXYZ", i)})
	}
	return ss
}

// BenchmarkRedactWriter streams 10 MiB of log-like text with 5 secrets
// through a redacting writer in 32 KiB chunks, the size of an output chunk.
func BenchmarkRedactWriter(b *testing.B) {
	ss := benchSecrets()
	r := redact.New(ss)
	in := benchInput(10<<20, ss)
	const chunk = 32 << 10
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := r.Writer(io.Discard)
		for off := 0; off < len(in); off += chunk {
			if _, err := w.Write(in[off:min(off+chunk, len(in))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRedactString redacts a 4 KiB tool result held in memory.
func BenchmarkRedactString(b *testing.B) {
	ss := benchSecrets()
	r := redact.New(ss)
	in := string(benchInput(4<<10, ss))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		_ = r.String(in)
	}
}

// BenchmarkNew measures building a Redactor for 5 secrets (done once per task).
func BenchmarkNew(b *testing.B) {
	ss := benchSecrets()
	b.ReportAllocs()
	for b.Loop() {
		_ = redact.New(ss)
	}
}
