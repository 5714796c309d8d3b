package e2blocal

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
	"github.com/sandbox-mcp/sandbox-mcp/runner/jail"
)

// reportMedian adds the median of ds as a metric.
func reportMedian(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "median-ms")
}

// BenchmarkCreateToFirstEcho measures REST create, then envd Start
// `echo hi` to its end event (the kill afterwards is not timed).
func BenchmarkCreateToFirstEcho(b *testing.B) {
	requireJail(b)
	e := newEnv(b)
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		sb := e.create(api.NewSandbox{})
		r := run(ctx, e.processClient(sb, true), "echo hi")
		ds = append(ds, time.Since(t0))
		if r.err != nil || r.stdout != "hi\n" {
			b.Fatalf("echo: %v %q", r.err, r.stdout)
		}
		b.StopTimer()
		if _, err := e.srv.kill(ctx, sb.SandboxID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportMedian(b, ds)
}

// BenchmarkEchoRoundTrip is envd Start `echo hi` to its end event in a
// running sandbox, through HTTP and Connect JSON.
func BenchmarkEchoRoundTrip(b *testing.B) {
	requireJail(b)
	e := newEnv(b)
	ctx := context.Background()
	sb := e.create(api.NewSandbox{})
	pc := e.processClient(sb, true)
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		r := run(ctx, pc, "echo hi")
		ds = append(ds, time.Since(t0))
		if r.err != nil || r.stdout != "hi\n" {
			b.Fatalf("echo: %v %q", r.err, r.stdout)
		}
	}
	reportMedian(b, ds)
}

// BenchmarkEchoJailDirect is the same command through the jail alone: the
// difference to BenchmarkEchoRoundTrip is this package's overhead.
func BenchmarkEchoJailDirect(b *testing.B) {
	requireJail(b)
	ctx := context.Background()
	j, err := jail.New(ctx, jail.Config{Dir: filepath.Join(b.TempDir(), "j")})
	require.NoError(b, err)
	defer j.Close()
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		p, err := j.Start(ctx, jail.Cmd{Path: "/bin/bash", Args: []string{"-l", "-c", "echo hi"}})
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout())
		_, _ = io.ReadAll(p.Stderr())
		if _, err := p.Wait(); err != nil || string(out) != "hi\n" {
			b.Fatalf("echo: %v %q", err, out)
		}
		ds = append(ds, time.Since(t0))
	}
	reportMedian(b, ds)
}

// BenchmarkEchoOverhead runs `echo hi` through envd and through the jail
// alone back to back in each op, so machine load hits both alike; the
// median of the per-pair differences is this package's overhead.
func BenchmarkEchoOverhead(b *testing.B) {
	requireJail(b)
	ctx := context.Background()
	e := newEnv(b)
	sb := e.create(api.NewSandbox{})
	pc := e.processClient(sb, true)
	j, err := jail.New(ctx, jail.Config{Dir: filepath.Join(b.TempDir(), "j")})
	require.NoError(b, err)
	defer j.Close()
	var diffs []time.Duration
	for b.Loop() {
		t0 := time.Now()
		r := run(ctx, pc, "echo hi")
		viaEnvd := time.Since(t0)
		if r.err != nil || r.stdout != "hi\n" {
			b.Fatalf("echo: %v %q", r.err, r.stdout)
		}
		t0 = time.Now()
		p, err := j.Start(ctx, jail.Cmd{Path: "/bin/bash", Args: []string{"-l", "-c", "echo hi"}})
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.ReadAll(p.Stdout())
		_, _ = io.ReadAll(p.Stderr())
		_, _ = p.Wait()
		diffs = append(diffs, viaEnvd-time.Since(t0))
	}
	slices.Sort(diffs)
	b.ReportMetric(float64(diffs[len(diffs)/2].Microseconds())/1000, "overhead-median-ms")
}

// vmHWM returns the process's peak resident set size in bytes.
func vmHWM(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	require.NoError(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(b, err)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// resetHWM resets the peak RSS to the current RSS (Linux clear_refs 5).
func resetHWM(b *testing.B) bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// patternReader yields n bytes without holding them.
type patternReader struct{ left int64 }

func (p *patternReader) Read(buf []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(buf)), p.left)
	for i := range buf[:n] {
		buf[i] = byte(i)
	}
	p.left -= n
	return int(n), nil
}

const benchFileBytes = 100 << 20

// BenchmarkFilesUpload streams 100 MiB to /files per op; peak-rss-MiB is how
// much the whole test process's peak RSS grew (client included).
func BenchmarkFilesUpload(b *testing.B) {
	requireJail(b)
	e := newEnv(b)
	sb := e.create(api.NewSandbox{})
	client := e.envdHTTP(sb, "")
	b.SetBytes(benchFileBytes)
	canReset := resetHWM(b)
	before := vmHWM(b)
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, e.ts.URL+"/files?"+url.Values{"path": {"/home/user/big.bin"}}.Encode(), &patternReader{left: benchFileBytes})
		require.NoError(b, err)
		req.ContentLength = benchFileBytes
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := client.Do(req)
		require.NoError(b, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(b, 200, resp.StatusCode)
	}
	if canReset {
		b.ReportMetric(float64(vmHWM(b)-before)/(1<<20), "peak-rss-MiB")
	}
}

// BenchmarkFilesDownload streams 100 MiB from /files per op.
func BenchmarkFilesDownload(b *testing.B) {
	requireJail(b)
	e := newEnv(b)
	sb := e.create(api.NewSandbox{})
	client := e.envdHTTP(sb, "")
	code, body := e.upload(sb, "/home/user/big.bin", &patternReader{left: benchFileBytes})
	require.Equal(b, 200, code, body)
	b.SetBytes(benchFileBytes)
	canReset := resetHWM(b)
	before := vmHWM(b)
	for b.Loop() {
		resp, err := client.Get(e.ts.URL + "/files?path=/home/user/big.bin")
		require.NoError(b, err)
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, int64(benchFileBytes), n)
	}
	if canReset {
		b.ReportMetric(float64(vmHWM(b)-before)/(1<<20), "peak-rss-MiB")
	}
}
