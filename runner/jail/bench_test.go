//go:build linux

package jail

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// echo runs /bin/echo hi in s and checks its output.
func echo(b *testing.B, s *Sandbox) {
	p, err := s.Start(context.Background(), Cmd{Path: "/bin/echo", Args: []string{"hi"}})
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		b.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil || st.Code != 0 || string(out) != "hi\n" {
		b.Fatalf("echo: %q %+v %v", out, st, err)
	}
}

// BenchmarkStartEcho measures one command in an existing sandbox.
func BenchmarkStartEcho(b *testing.B) {
	if err := Check(); err != nil {
		b.Skip(err)
	}
	s, err := New(context.Background(), Config{Dir: filepath.Join(b.TempDir(), "sb")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		echo(b, s)
	}
}

// BenchmarkNewAndEcho measures create → first echo → close, the latency a
// new task sees before its first command answers (plus cleanup).
func BenchmarkNewAndEcho(b *testing.B) {
	if err := Check(); err != nil {
		b.Skip(err)
	}
	base := b.TempDir()
	b.ReportAllocs()
	var toEcho time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := New(context.Background(), Config{Dir: filepath.Join(base, "sb")})
		if err != nil {
			b.Fatal(err)
		}
		echo(b, s)
		toEcho += time.Since(t0)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	// The product target: create → first echo answered, without Close.
	b.ReportMetric(float64(toEcho.Milliseconds())/float64(b.N), "ms-to-first-echo/op")
}
