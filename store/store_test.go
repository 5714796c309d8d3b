package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/store"
)

func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	return s
}

func newTask(t testing.TB, s *store.Store, id string) store.Task {
	t.Helper()
	task, err := s.PutTask(context.Background(), store.Task{
		ID: id, ContractHash: "sha256:c0ffee", Backend: "local", Status: store.StatusCreating,
	})
	require.NoError(t, err)
	return task
}

// files lists the regular files under dir/blobs, relative to dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(filepath.Join(dir, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	}))
	return out
}

func TestTasksSurviveARestart(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := store.Open(dir, store.Options{Now: func() time.Time { return clock }})
	require.NoError(t, err)
	created := newTask(t, s, "task-1842")
	assert.Equal(t, clock, created.CreatedAt)
	newTask(t, s, "task-0001")

	clock = clock.Add(time.Minute)
	updated, err := s.PutTask(ctx, store.Task{ID: "task-1842", ContractHash: "sha256:c0ffee", SandboxID: "sbx-42", Backend: "local", Status: store.StatusRunning})
	require.NoError(t, err)
	assert.Equal(t, created.CreatedAt, updated.CreatedAt, "an update keeps the creation time")
	assert.Equal(t, clock, updated.UpdatedAt)
	require.NoError(t, s.Close())

	s = openStore(t, dir)
	defer s.Close()
	got, err := s.GetTask(ctx, "task-1842")
	require.NoError(t, err)
	assert.Equal(t, updated, got)
	all, err := s.ListTasks(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "task-0001", all[0].ID)

	_, err = s.GetTask(ctx, "task-9999")
	assert.ErrorIs(t, err, store.ErrNotFound)

	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())
}

func TestNamesCannotEscapeTheDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	newTask(t, s, "task-1")

	bad := []string{"", "..", "../x", "a/b", `a\b`, ".hidden", "-flag", "x\x00y", "x y", strings.Repeat("a", 129), "é"}
	for _, name := range bad {
		t.Run(fmt.Sprintf("artifact-name-%q-is-refused", name), func(t *testing.T) {
			_, err := s.PutArtifact(ctx, "task-1", name, strings.NewReader("x"), 10, store.ArtifactMeta{})
			assert.ErrorIs(t, err, store.ErrInvalidName)
			_, err = s.PutTask(ctx, store.Task{ID: name, Status: store.StatusCreating})
			assert.ErrorIs(t, err, store.ErrInvalidName)
			_, _, err = store.ParseURI("artifact://task-1/" + name)
			assert.Error(t, err)
		})
	}
	for _, name := range []string{"a", "dist.tar.gz", "App_1.2-beta", strings.Repeat("a", 128)} {
		t.Run(fmt.Sprintf("artifact-name-%q-is-accepted", name), func(t *testing.T) {
			a, err := s.PutArtifact(ctx, "task-1", name, strings.NewReader("x"), 10, store.ArtifactMeta{})
			require.NoError(t, err)
			task, n, err := store.ParseURI(a.URI)
			require.NoError(t, err)
			assert.Equal(t, "task-1", task)
			assert.Equal(t, name, n)
		})
	}
	t.Run("a-bad-status-is-refused", func(t *testing.T) {
		_, err := s.PutTask(ctx, store.Task{ID: "task-2", Status: "exploded"})
		assert.ErrorContains(t, err, "unknown status")
	})
}

func TestPutArtifact(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	newTask(t, s, "task-1")
	content := bytes.Repeat([]byte("wheel bytes\n"), 5000)
	meta := store.ArtifactMeta{SourcePath: "/home/user/work/dist/app.whl", Command: "python3 -m build", ExitCode: 0, ContractHash: "sha256:c0ffee"}

	a, err := s.PutArtifact(ctx, "task-1", "app.whl", bytes.NewReader(content), int64(len(content)), meta)
	require.NoError(t, err, "an artifact of exactly the limit is accepted")
	sum := sha256.Sum256(content)
	assert.Equal(t, hex.EncodeToString(sum[:]), a.SHA256)
	assert.EqualValues(t, len(content), a.Size)
	assert.Equal(t, "artifact://task-1/app.whl", a.URI)
	assert.Equal(t, meta.SourcePath, a.SourcePath)
	assert.Equal(t, meta.Command, a.Command)
	assert.Equal(t, meta.ContractHash, a.ContractHash)
	assert.EqualValues(t, 1, a.Version)

	t.Run("the-blob-matches-sha256sum", func(t *testing.T) {
		blob := filepath.Join(dir, "blobs", "sha256", a.SHA256[:2], a.SHA256[2:])
		out, err := exec.Command("sha256sum", blob).Output()
		require.NoError(t, err)
		assert.Equal(t, a.SHA256, strings.Fields(string(out))[0])
		info, err := os.Stat(blob)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	})

	t.Run("the-manifest-and-bytes-survive-a-restart", func(t *testing.T) {
		require.NoError(t, s.Close())
		s = openStore(t, dir)
		rc, got, err := s.OpenArtifact(ctx, "task-1", "app.whl")
		require.NoError(t, err)
		defer rc.Close()
		assert.Equal(t, a, got)
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		assert.Equal(t, content, b)
		list, err := s.ListArtifacts(ctx, "task-1")
		require.NoError(t, err)
		assert.Equal(t, []store.Artifact{a}, list)
	})

	t.Run("re-export-replaces-the-current-version-and-keeps-history", func(t *testing.T) {
		a2, err := s.PutArtifact(ctx, "task-1", "app.whl", strings.NewReader("version two"), 1<<20, meta)
		require.NoError(t, err)
		assert.EqualValues(t, 2, a2.Version)
		cur, err := s.GetArtifact(ctx, "task-1", "app.whl")
		require.NoError(t, err)
		assert.Equal(t, a2, cur)
		hist, err := s.ArtifactHistory(ctx, "task-1", "app.whl")
		require.NoError(t, err)
		assert.Equal(t, []store.Artifact{a, a2}, hist)
		old, size, err := s.OpenBlob(ctx, a.SHA256)
		require.NoError(t, err, "a frozen digest stays readable")
		defer old.Close()
		assert.EqualValues(t, len(content), size)
	})

	t.Run("an-export-for-an-unknown-task-is-refused", func(t *testing.T) {
		_, err := s.PutArtifact(ctx, "task-404", "x", strings.NewReader("x"), 10, meta)
		assert.ErrorIs(t, err, store.ErrNotFound)
	})
	require.NoError(t, s.Close())
}

type failingReader struct {
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	n := min(len(p), f.n)
	clear(p[:n])
	f.n -= n
	return n, nil
}

func TestAFailedExportLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	boom := errors.New("sandbox connection reset")
	tests := []struct {
		name    string
		ctx     context.Context
		r       io.Reader
		max     int64
		wantErr error
	}{
		{"one-byte-over-the-limit", ctx, bytes.NewReader(make([]byte, 1001)), 1000, store.ErrTooLarge},
		{"far-over-the-limit", ctx, &failingReader{n: 10 << 20, err: io.EOF}, 1 << 20, store.ErrTooLarge},
		{"a-reader-error-midway", ctx, &failingReader{n: 100 << 10, err: boom}, 1 << 20, boom},
		{"a-canceled-context", canceled, strings.NewReader("data"), 100, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name+"-records-nothing", func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			defer s.Close()
			newTask(t, s, "task-1")
			_, err := s.PutArtifact(tt.ctx, "task-1", "out.bin", tt.r, tt.max, store.ArtifactMeta{})
			require.ErrorIs(t, err, tt.wantErr)
			assert.Empty(t, files(t, dir), "no blob and no temporary file")
			_, err = s.GetArtifact(ctx, "task-1", "out.bin")
			assert.ErrorIs(t, err, store.ErrNotFound)
			list, err := s.ListArtifacts(ctx, "task-1")
			require.NoError(t, err)
			assert.Empty(t, list)
		})
	}
}

func TestCorruptBlobsAreReported(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	newTask(t, s, "task-1")
	a, err := s.PutArtifact(ctx, "task-1", "out.txt", strings.NewReader("original content"), 100, store.ArtifactMeta{})
	require.NoError(t, err)
	blob := filepath.Join(dir, "blobs", "sha256", a.SHA256[:2], a.SHA256[2:])

	t.Run("same-size-different-bytes-fails-at-eof", func(t *testing.T) {
		require.NoError(t, os.WriteFile(blob, []byte("ORIGINAL CONTENT"), 0o600))
		rc, _, err := s.OpenArtifact(ctx, "task-1", "out.txt")
		require.NoError(t, err)
		defer rc.Close()
		_, err = io.ReadAll(rc)
		assert.ErrorIs(t, err, store.ErrCorrupt)
	})
	t.Run("a-different-size-fails-on-open", func(t *testing.T) {
		require.NoError(t, os.WriteFile(blob, []byte("short"), 0o600))
		_, _, err := s.OpenArtifact(ctx, "task-1", "out.txt")
		assert.ErrorIs(t, err, store.ErrCorrupt)
	})
	t.Run("re-exporting-the-same-bytes-repairs-the-blob", func(t *testing.T) {
		_, err := s.PutArtifact(ctx, "task-1", "out.txt", strings.NewReader("original content"), 100, store.ArtifactMeta{})
		require.NoError(t, err)
		rc, _, err := s.OpenArtifact(ctx, "task-1", "out.txt")
		require.NoError(t, err)
		defer rc.Close()
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		assert.Equal(t, "original content", string(b))
	})
}

func TestOpen(t *testing.T) {
	t.Run("a-second-open-of-the-same-directory-fails-clearly", func(t *testing.T) {
		dir := t.TempDir()
		s := openStore(t, dir)
		defer s.Close()
		_, err := store.Open(dir, store.Options{LockTimeout: 100 * time.Millisecond})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "in use by another process")
		_, err = s.ListTasks(context.Background())
		assert.NoError(t, err, "the first store keeps working")
	})
	t.Run("the-directory-can-be-opened-again-after-close", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, openStore(t, dir).Close())
		require.NoError(t, openStore(t, dir).Close())
	})
	t.Run("a-directory-others-can-read-is-restricted-to-its-owner", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.Chmod(dir, 0o755))
		require.NoError(t, openStore(t, dir).Close())
		info, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())
	})
	t.Run("a-directory-owned-by-another-user-is-refused", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a directory away")
		}
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.Chown(dir, 65534, 65534))
		_, err := store.Open(dir, store.Options{})
		assert.ErrorContains(t, err, "belongs to uid 65534")
	})
	t.Run("leftover-temporary-files-are-removed", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, openStore(t, dir).Close())
		require.NoError(t, os.WriteFile(filepath.Join(dir, "blobs", "tmp", "export-123"), []byte("half"), 0o600))
		s := openStore(t, dir)
		defer s.Close()
		assert.Empty(t, files(t, dir))
	})
}

func TestConcurrentExportsOfTheSameContent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	newTask(t, s, "task-1")
	content := bytes.Repeat([]byte("same bytes "), 20000)
	const n = 8
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := range n {
		wg.Go(func() {
			for _, name := range []string{fmt.Sprintf("copy-%d", i), "shared"} {
				if _, err := s.PutArtifact(ctx, "task-1", name, bytes.NewReader(content), 1<<20, store.ArtifactMeta{}); err != nil {
					t.Error(err)
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failures.Load())
	assert.Len(t, files(t, dir), 1, "one blob for one content")
	list, err := s.ListArtifacts(ctx, "task-1")
	require.NoError(t, err)
	assert.Len(t, list, n+1)
	hist, err := s.ArtifactHistory(ctx, "task-1", "shared")
	require.NoError(t, err)
	require.Len(t, hist, n)
	for i, a := range hist {
		assert.EqualValues(t, i+1, a.Version)
	}
	rc, _, err := s.OpenArtifact(ctx, "task-1", "shared")
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	assert.Equal(t, content, b)
}

// randReader yields size pseudo-random bytes without holding them.
type randReader struct {
	src  *rand.ChaCha8
	left int64
}

func (r *randReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.left)]
	n, _ := r.src.Read(p)
	r.left -= int64(n)
	return n, nil
}

// exportMeasured exports size bytes and returns the peak growth of the Go
// heap in use (sampled every millisecond) and the bytes allocated meanwhile.
func exportMeasured(t testing.TB, s *store.Store, name string, size int64) (peak, allocated uint64, a store.Artifact) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var maxInUse atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > maxInUse.Load() {
				maxInUse.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	a, err := s.PutArtifact(context.Background(), "task-1", name, &randReader{src: rand.NewChaCha8([32]byte{1}), left: size}, size, store.ArtifactMeta{})
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	peak = 0
	if m := maxInUse.Load(); m > before.HeapInuse {
		peak = m - before.HeapInuse
	}
	return peak, after.TotalAlloc - before.TotalAlloc, a
}

// TestExportOf200MiBUsesLittleMemory measures a 200 MiB export. It asserts
// memory, never time.
func TestExportOf200MiBUsesLittleMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MiB")
	}
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	newTask(t, s, "task-1")
	const size = 200 << 20
	peak, allocated, a := exportMeasured(t, s, "big.bin", size)
	t.Logf("200 MiB export: peak heap-in-use growth %.2f MiB, total allocated %.2f MiB", float64(peak)/(1<<20), float64(allocated)/(1<<20))
	assert.EqualValues(t, size, a.Size)
	assert.Less(t, peak, uint64(32<<20))
	assert.Less(t, allocated, uint64(32<<20), "even the sum of all allocations stays under the bound")

	// The digest is right: recompute it independently from the generator.
	h := sha256.New()
	_, err := io.Copy(h, &randReader{src: rand.NewChaCha8([32]byte{1}), left: size})
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(h.Sum(nil)), a.SHA256)
}

// BenchmarkPutArtifact200MiB reports throughput and the same memory figures
// as the test, per export.
func BenchmarkPutArtifact200MiB(b *testing.B) {
	dir := b.TempDir()
	s := openStore(b, dir)
	defer s.Close()
	newTask(b, s, "task-1")
	const size = 200 << 20
	b.SetBytes(size)
	b.ReportAllocs()
	var peak uint64
	i := 0
	for b.Loop() {
		p, _, _ := exportMeasured(b, s, fmt.Sprintf("big-%d.bin", i), size)
		peak = max(peak, p)
		i++
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}
