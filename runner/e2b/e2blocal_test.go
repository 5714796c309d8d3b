package e2b_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2blocal"
)

// localKey is an obviously fake API key for the in-process e2blocal.
const localKey = "e2b_local_test_key_not_a_secret"

// startLocal serves an in-process e2blocal on a loopback httptest server
// and returns a client for it (envd reached through SandboxURL).
func startLocal(tb testing.TB, protoJSON bool) (*e2b.Client, string) {
	tb.Helper()
	srv, err := e2blocal.New(e2blocal.Options{Dir: tb.TempDir(), APIKey: localKey})
	require.NoError(tb, err)
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			tb.Errorf("closing e2blocal: %v", err)
		}
	})
	c, err := e2b.New(e2b.Options{APIURL: ts.URL, SandboxURL: ts.URL, APIKey: localKey, EnvdProtoJSON: protoJSON})
	require.NoError(tb, err)
	return c, ts.URL
}

func TestClientAgainstE2BLocal(t *testing.T) {
	c, url := startLocal(t, false)

	t.Run("lifecycle", func(t *testing.T) { testLifecycle(t, c) })

	for _, mode := range []struct {
		name      string
		protoJSON bool
	}{{"binary-protobuf", false}, {"connect-json", true}} {
		t.Run(mode.name, func(t *testing.T) {
			mc, err := e2b.New(e2b.Options{APIURL: url, SandboxURL: url, APIKey: localKey, EnvdProtoJSON: mode.protoJSON})
			require.NoError(t, err)
			sb := create(t, mc, e2b.CreateParams{})
			t.Run("commands", func(t *testing.T) { testCommands(t, sb) })
			t.Run("files", func(t *testing.T) { testFiles(t, sb) })
		})
	}

	t.Run("egress-allowlist-is-enforced-by-the-local-sandbox", func(t *testing.T) {
		// e2blocal serves an allowlist through its filtering proxy: the
		// sandbox is created, and a host outside the list is refused.
		sb := create(t, c, e2b.CreateParams{Timeout: time.Minute, AllowOut: []string{"pypi.org"}})
		var stderr []byte
		res, err := sb.Run(context.Background(), e2b.RunParams{Command: "curl -sS --max-time 10 https://evil.example"}, nil, func(b []byte) { stderr = append(stderr, b...) })
		require.NoError(t, err)
		assert.Equal(t, 56, res.ExitCode, string(stderr))
		assert.Contains(t, string(stderr), "403")
		// A partial deny list it cannot enforce is refused, typed and readable.
		_, err = c.Create(context.Background(), e2b.CreateParams{Timeout: time.Minute, DenyOut: []string{"10.0.0.0/8"}})
		require.ErrorIs(t, err, e2b.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "e2b: create sandbox: ")
		assert.Contains(t, err.Error(), "partial deny list")
	})

	t.Run("wrong-api-key-is-unauthorized", func(t *testing.T) {
		bad, err := e2b.New(e2b.Options{APIURL: url, SandboxURL: url, APIKey: "e2b_wrong_key"})
		require.NoError(t, err)
		_, err = bad.Create(context.Background(), e2b.CreateParams{Timeout: time.Minute})
		require.ErrorIs(t, err, e2b.ErrUnauthorized)
		assert.NotContains(t, err.Error(), "e2b_wrong_key")
		_, err = bad.List(context.Background(), nil)
		require.ErrorIs(t, err, e2b.ErrUnauthorized)
	})
}

// heapPeak samples the live heap until stopped and reports the highest
// value above the baseline taken at start.
type heapPeak struct {
	base, peak atomic.Uint64
	stop       chan struct{}
	done       sync.WaitGroup
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapPeak() *heapPeak {
	runtime.GC()
	h := &heapPeak{stop: make(chan struct{})}
	h.base.Store(heapObjects())
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := heapObjects(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// growth stops sampling and returns the peak growth in bytes.
func (h *heapPeak) growth() uint64 {
	close(h.stop)
	h.done.Wait()
	if p, b := h.peak.Load(), h.base.Load(); p > b {
		return p - b
	}
	return 0
}

// seeded returns n deterministic pseudo-random bytes as a stream, never
// held in memory.
func seeded(n int64, seed uint64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed)}), n)
}

func sha256Of(t testing.TB, r io.Reader) string {
	h := sha256.New()
	_, err := io.Copy(h, r)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

// TestStreamingDoesNotBuffer moves 100 MiB each way and checks that the
// heap (client and the in-process server together) never grows by more
// than 32 MiB: the transfer is streamed, not held. The same code path
// carries a 1 GiB file with the same bounded memory; moving 1 GiB here would
// only cost CI time and disk.
func TestStreamingDoesNotBuffer(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 200 MiB through the local sandbox")
	}
	const size = 100 << 20
	const limit = 32 << 20
	c, _ := startLocal(t, false)
	sb := create(t, c, e2b.CreateParams{})
	ctx := context.Background()
	want := sha256Of(t, seeded(size, 1))

	t.Run("upload-of-100-mib-stays-under-32-mib-of-heap", func(t *testing.T) {
		h := startHeapPeak()
		err := sb.WriteFile(ctx, "/home/user/big.bin", seeded(size, 1))
		grew := h.growth()
		require.NoError(t, err)
		t.Logf("peak heap growth during a 100 MiB upload: %.1f MiB", float64(grew)/(1<<20))
		assert.Less(t, grew, uint64(limit))
	})

	t.Run("download-of-100-mib-stays-under-32-mib-of-heap", func(t *testing.T) {
		h := startHeapPeak()
		rc, err := sb.ReadFile(ctx, "/home/user/big.bin")
		require.NoError(t, err)
		got := sha256Of(t, rc)
		require.NoError(t, rc.Close())
		grew := h.growth()
		t.Logf("peak heap growth during a 100 MiB download: %.1f MiB", float64(grew)/(1<<20))
		assert.Equal(t, want, got, "downloaded content differs from what was uploaded")
		assert.Less(t, grew, uint64(limit))
	})

	t.Run("heap-probe-sees-a-download-held-whole", func(t *testing.T) {
		// The control for the two checks above: buffering the same
		// transfer is caught by the same probe.
		h := startHeapPeak()
		rc, err := sb.ReadFile(ctx, "/home/user/big.bin")
		require.NoError(t, err)
		whole, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		grew := h.growth()
		assert.Len(t, whole, size)
		assert.Greater(t, grew, uint64(size))
	})

	t.Run("abandoned-download-releases-the-stream", func(t *testing.T) {
		rc, err := sb.ReadFile(ctx, "/home/user/big.bin")
		require.NoError(t, err)
		buf := make([]byte, 1<<20)
		_, err = io.ReadFull(rc, buf)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		// The sandbox still answers after a half-read transfer.
		assert.Equal(t, "ok\n", mustRun(t, sb, "echo ok"))
	})
}

func BenchmarkClientEchoRoundTrip(b *testing.B) {
	c, _ := startLocal(b, false)
	sb := create(b, c, e2b.CreateParams{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := sb.Run(ctx, e2b.RunParams{Command: "echo hi"}, nil, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("echo hi: %+v, %v", res, err)
		}
	}
}

func BenchmarkClientUpload100MiB(b *testing.B) {
	const size = 100 << 20
	c, _ := startLocal(b, false)
	sb := create(b, c, e2b.CreateParams{})
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	var worst uint64
	for b.Loop() {
		h := startHeapPeak()
		if err := sb.WriteFile(ctx, "/home/user/bench.bin", seeded(size, 2)); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, h.growth())
	}
	b.ReportMetric(float64(worst)/(1<<20), "peak-heap-MiB")
}

func BenchmarkClientDownload100MiB(b *testing.B) {
	const size = 100 << 20
	c, _ := startLocal(b, false)
	sb := create(b, c, e2b.CreateParams{})
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "/home/user/bench.bin", seeded(size, 3)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	var worst uint64
	for b.Loop() {
		h := startHeapPeak()
		rc, err := sb.ReadFile(ctx, "/home/user/bench.bin")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		_ = rc.Close()
		if err != nil || n != size {
			b.Fatalf("read %d bytes: %v", n, err)
		}
		worst = max(worst, h.growth())
	}
	b.ReportMetric(float64(worst)/(1<<20), "peak-heap-MiB")
}
