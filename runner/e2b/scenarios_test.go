package e2b_test

// The scenarios every E2B backend must pass with this client: run against
// the embedded e2blocal (e2blocal_test.go) and, when E2B_API_KEY is set,
// against the E2B cloud (live_test.go). They mirror the official JS SDK's
// suite in runner/e2blocal/sdktest.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
)

// newTaskID returns a metadata value unique to this test run.
func newTaskID(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

// create makes a sandbox that is killed when the test ends.
func create(t testing.TB, c *e2b.Client, p e2b.CreateParams) *e2b.Sandbox {
	t.Helper()
	if p.Timeout == 0 {
		p.Timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, p)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Kill(ctx); err != nil && !errors.Is(err, e2b.ErrSandboxGone) {
			t.Errorf("killing sandbox %s: %v", sb.ID, err)
		}
	})
	return sb
}

// collect runs a command and returns its result and output.
func collect(t *testing.T, sb *e2b.Sandbox, p e2b.RunParams) (e2b.RunResult, string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := sb.Run(ctx, p, func(b []byte) { stdout.Write(b) }, func(b []byte) { stderr.Write(b) })
	return res, stdout.String(), stderr.String(), err
}

// mustRun runs a command that must exit 0 and returns its stdout.
func mustRun(t *testing.T, sb *e2b.Sandbox, cmd string) string {
	t.Helper()
	res, out, errOut, err := collect(t, sb, e2b.RunParams{Command: cmd})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "command %q failed: %s", cmd, errOut)
	return out
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// processCount counts the commands envd runs whose command line contains
// marker.
func processCount(t *testing.T, sb *e2b.Sandbox, marker string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	procs, err := sb.Processes(ctx)
	require.NoError(t, err)
	n := 0
	for _, p := range procs {
		if strings.Contains(p.Cmd+" "+strings.Join(p.Args, " "), marker) {
			n++
		}
	}
	return n
}

// testLifecycle covers create, get, list, connect, timeouts and kill.
func testLifecycle(t *testing.T, c *e2b.Client) {
	t.Run("create-without-internet-sends-the-lifetime-and-metadata", func(t *testing.T) {
		task := newTaskID(t)
		sb := create(t, c, e2b.CreateParams{Timeout: 150 * time.Second, Metadata: map[string]string{"task_id": task}})
		ctx := context.Background()
		running, err := sb.IsRunning(ctx)
		require.NoError(t, err)
		assert.True(t, running)

		info, err := c.Get(ctx, sb.ID)
		require.NoError(t, err)
		assert.Equal(t, sb.ID, info.ID)
		assert.Equal(t, "running", info.State)
		assert.Equal(t, task, info.Metadata["task_id"])
		life := info.EndAt.Sub(info.StartedAt)
		assert.True(t, life > 140*time.Second && life <= 160*time.Second,
			"lifetime %s is not the 150s sent (the server defaults are 15s and 300s)", life)

		listed, err := c.List(ctx, map[string]string{"task_id": task})
		require.NoError(t, err)
		require.Len(t, listed, 1)
		assert.Equal(t, sb.ID, listed[0].ID)
		others, err := c.List(ctx, map[string]string{"task_id": task + "-other"})
		require.NoError(t, err)
		assert.Empty(t, others)
	})

	t.Run("connect-by-id-gives-a-working-handle", func(t *testing.T) {
		sb := create(t, c, e2b.CreateParams{})
		again, err := c.Connect(context.Background(), sb.ID, 2*time.Minute)
		require.NoError(t, err)
		assert.Equal(t, sb.ID, again.ID)
		assert.Equal(t, "hi\n", mustRun(t, again, "echo hi"))
	})

	t.Run("paused-sandbox-resumes-on-connect-with-its-files", func(t *testing.T) {
		sb := create(t, c, e2b.CreateParams{})
		ctx := context.Background()
		require.NoError(t, sb.WriteFile(ctx, "/home/user/kept.txt", strings.NewReader("kept")))
		require.NoError(t, c.Pause(ctx, sb.ID))
		info, err := c.Get(ctx, sb.ID)
		require.NoError(t, err)
		assert.Equal(t, "paused", info.State)
		assert.ErrorIs(t, c.Pause(ctx, sb.ID), e2b.ErrConflict, "pausing a paused sandbox")

		resumed, err := c.Connect(ctx, sb.ID, 2*time.Minute)
		require.NoError(t, err)
		info, err = c.Get(ctx, sb.ID)
		require.NoError(t, err)
		assert.Equal(t, "running", info.State)
		assert.Equal(t, "kept", readAll(t, resumed, "/home/user/kept.txt"))
	})

	t.Run("sandbox-created-to-pause-on-expiry-pauses", func(t *testing.T) {
		sb := create(t, c, e2b.CreateParams{Timeout: 2 * time.Second, OnExpiry: "pause"})
		eventually(t, "sandbox pauses after its timeout", 60*time.Second, func() bool {
			info, err := c.Get(context.Background(), sb.ID)
			return err == nil && info.State == "paused"
		})
		info, err := c.Get(context.Background(), sb.ID)
		require.NoError(t, err)
		if info.OnExpiry != "" {
			assert.Equal(t, "pause", info.OnExpiry)
		}
	})

	t.Run("killed-sandbox-is-gone-everywhere", func(t *testing.T) {
		sb := create(t, c, e2b.CreateParams{})
		ctx := context.Background()
		require.NoError(t, c.Kill(ctx, sb.ID))
		running, err := sb.IsRunning(ctx)
		require.NoError(t, err)
		assert.False(t, running)
		_, err = c.Get(ctx, sb.ID)
		assert.ErrorIs(t, err, e2b.ErrSandboxGone)
		assert.ErrorIs(t, c.Kill(ctx, sb.ID), e2b.ErrSandboxGone)
		_, _, _, err = collect(t, sb, e2b.RunParams{Command: "true"})
		assert.ErrorIs(t, err, e2b.ErrSandboxGone)
		_, err = sb.ReadFile(ctx, "/home/user/x")
		assert.ErrorIs(t, err, e2b.ErrSandboxGone)
	})

	t.Run("sandbox-with-a-short-timeout-expires", func(t *testing.T) {
		sb := create(t, c, e2b.CreateParams{Timeout: 2 * time.Second})
		eventually(t, "sandbox stops after its timeout", 60*time.Second, func() bool {
			running, err := sb.IsRunning(context.Background())
			return err == nil && !running
		})
	})

	t.Run("set-timeout-can-shorten-the-lifetime", func(t *testing.T) {
		sb := create(t, c, e2b.CreateParams{Timeout: 10 * time.Minute})
		require.NoError(t, c.SetTimeout(context.Background(), sb.ID, time.Second))
		eventually(t, "sandbox stops after its shortened timeout", 60*time.Second, func() bool {
			_, err := c.Get(context.Background(), sb.ID)
			return errors.Is(err, e2b.ErrSandboxGone)
		})
	})

	t.Run("unknown-sandbox-is-gone", func(t *testing.T) {
		_, err := c.Get(context.Background(), "inotasandbox000000000")
		assert.ErrorIs(t, err, e2b.ErrSandboxGone)
		assert.Contains(t, err.Error(), "e2b: get sandbox inotasandbox000000000: ")
	})
}

// testCommands covers Run on one sandbox.
func testCommands(t *testing.T, sb *e2b.Sandbox) {
	t.Run("run-returns-stdout-stderr-and-exit-code", func(t *testing.T) {
		res, out, errOut, err := collect(t, sb, e2b.RunParams{Command: "echo out; echo err >&2; exit 3"})
		require.NoError(t, err, "a non-zero exit is a result, not an error")
		assert.Equal(t, 3, res.ExitCode)
		assert.False(t, res.Signaled)
		assert.Equal(t, "out\n", out)
		assert.Equal(t, "err\n", errOut)
	})

	t.Run("run-passes-env-cwd-and-user", func(t *testing.T) {
		res, out, _, err := collect(t, sb, e2b.RunParams{Command: `echo "$GREETING"; pwd; id -un`, Cwd: "/tmp", Env: map[string]string{"GREETING": "hello"}})
		require.NoError(t, err)
		assert.Equal(t, 0, res.ExitCode)
		assert.Equal(t, "hello\n/tmp\nuser\n", out)
	})

	t.Run("output-streams-before-the-command-ends", func(t *testing.T) {
		// The command prints "a" and then waits for a file that only the
		// stdout callback writes once it has seen "a": it can finish only
		// if its output reached us while it was still running.
		gate := "/home/user/.gate-" + newTaskID(t)
		var once sync.Once
		var gateErr error
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := sb.Run(ctx, e2b.RunParams{Command: fmt.Sprintf(
			`echo a; for i in $(seq 300); do [ -e %[1]s ] && break; sleep 0.1; done; [ -e %[1]s ] || exit 7; echo b`, gate)},
			func(b []byte) {
				out.Write(b)
				if bytes.Contains(b, []byte("a")) {
					once.Do(func() { gateErr = sb.WriteFile(ctx, gate, strings.NewReader("go")) })
				}
			}, nil)
		require.NoError(t, err)
		require.NoError(t, gateErr)
		assert.Equal(t, 0, res.ExitCode, "the command never saw the gate: output did not stream")
		assert.Equal(t, "a\nb\n", out.String())
	})

	t.Run("command-past-its-timeout-is-killed", func(t *testing.T) {
		marker := "3" + strconv.Itoa(int(time.Now().UnixNano()%100000)+100000)
		errc := make(chan error, 1)
		go func() {
			_, err := sb.Run(context.Background(), e2b.RunParams{Command: "sleep " + marker, Timeout: 3 * time.Second}, nil, nil)
			errc <- err
		}()
		// Seen running first, so that "gone" below is not vacuous.
		eventually(t, "command is listed while it runs", 30*time.Second, func() bool { return processCount(t, sb, "sleep "+marker) == 1 })
		err := <-errc
		require.ErrorIs(t, err, e2b.ErrCommandTimeout)
		assert.Contains(t, err.Error(), "e2b: run command in sandbox "+sb.ID+": ")
		eventually(t, "timed-out command is gone", 30*time.Second, func() bool { return processCount(t, sb, "sleep "+marker) == 0 })
	})

	t.Run("cancelled-run-kills-the-remote-process", func(t *testing.T) {
		marker := "4" + strconv.Itoa(int(time.Now().UnixNano()%100000)+100000)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := make(chan struct{})
		var once sync.Once
		errc := make(chan error, 1)
		go func() {
			_, err := sb.Run(ctx, e2b.RunParams{Command: "echo started; sleep " + marker + "; echo finished", Timeout: 5 * time.Minute},
				func(b []byte) { once.Do(func() { close(started) }) }, nil)
			errc <- err
		}()
		select {
		case <-started:
		case err := <-errc:
			t.Fatalf("the command ended before it was cancelled: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("the command never started")
		}
		require.Equal(t, 1, processCount(t, sb, "sleep "+marker), "the command should be running before the cancel")
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		eventually(t, "cancelled command is killed in the sandbox", 30*time.Second, func() bool { return processCount(t, sb, "sleep "+marker) == 0 })
	})

	t.Run("empty-command-is-refused", func(t *testing.T) {
		_, _, _, err := collect(t, sb, e2b.RunParams{Command: "  "})
		assert.ErrorIs(t, err, e2b.ErrInvalidArgument)
	})

	t.Run("unknown-user-is-refused", func(t *testing.T) {
		_, _, _, err := collect(t, sb, e2b.RunParams{Command: "true", User: "nosuchuser"})
		assert.ErrorIs(t, err, e2b.ErrUnauthorized)
	})
}

// testFiles covers the /files transfers and the filesystem RPCs.
func testFiles(t *testing.T, sb *e2b.Sandbox) {
	ctx := context.Background()
	dir := "/home/user/" + newTaskID(t)

	t.Run("text-file-round-trips", func(t *testing.T) {
		path := dir + "/sub/hello.txt"
		require.NoError(t, sb.WriteFile(ctx, path, strings.NewReader("hello, sandbox\n")))
		assert.Equal(t, "hello, sandbox\n", readAll(t, sb, path))
		assert.Equal(t, "hello, sandbox\n", mustRun(t, sb, "cat "+path))
		assert.Equal(t, "user\n", mustRun(t, sb, "stat -c %U "+path), "uploads belong to the sandbox user")
	})

	t.Run("binary-file-of-10-mib-round-trips-byte-for-byte", func(t *testing.T) {
		data := make([]byte, 10<<20)
		_, _ = rand.Read(data)
		path := dir + "/random.bin"
		require.NoError(t, sb.WriteFile(ctx, path, bytes.NewReader(data)))
		back := readAll(t, sb, path)
		require.Equal(t, len(data), len(back))
		assert.True(t, bytes.Equal(data, []byte(back)), "downloaded bytes differ")
		sum := sha256.Sum256(data)
		assert.Equal(t, hex.EncodeToString(sum[:])+"\n", mustRun(t, sb, "sha256sum "+path+" | cut -d' ' -f1"))
	})

	t.Run("stat-list-move-and-remove", func(t *testing.T) {
		sub := dir + "/tree"
		require.NoError(t, sb.MakeDir(ctx, sub+"/deep"))
		require.NoError(t, sb.MakeDir(ctx, sub+"/deep"), "making an existing directory is not an error")
		require.NoError(t, sb.WriteFile(ctx, sub+"/a.txt", strings.NewReader("aaa")))
		require.NoError(t, sb.WriteFile(ctx, sub+"/deep/b.txt", strings.NewReader("b")))

		st, err := sb.Stat(ctx, sub+"/a.txt")
		require.NoError(t, err)
		assert.Equal(t, e2b.TypeFile, st.Type)
		assert.Equal(t, int64(3), st.Size)
		assert.Equal(t, "a.txt", st.Name)
		assert.Equal(t, sub+"/a.txt", st.Path)

		top, err := sb.List(ctx, sub, 1)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"a.txt", "deep"}, names(top))
		all, err := sb.List(ctx, sub, 2)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"a.txt", "deep", "b.txt"}, names(all))

		require.NoError(t, sb.Move(ctx, sub+"/a.txt", sub+"/c.txt"))
		_, err = sb.Stat(ctx, sub+"/a.txt")
		assert.ErrorIs(t, err, e2b.ErrNotFound)
		assert.Equal(t, "aaa", readAll(t, sb, sub+"/c.txt"))

		require.NoError(t, sb.Remove(ctx, sub+"/c.txt"))
		require.NoError(t, sb.Remove(ctx, sub+"/deep"))
		left, err := sb.List(ctx, sub, 1)
		require.NoError(t, err)
		assert.Empty(t, left)
	})

	t.Run("stat-reports-a-symlink-without-following-it", func(t *testing.T) {
		link := dir + "/link"
		mustRun(t, sb, "mkdir -p "+dir+" && ln -s /etc/hostname "+link)
		st, err := sb.Stat(ctx, link)
		require.NoError(t, err)
		assert.Equal(t, e2b.TypeSymlink, st.Type)
		assert.Equal(t, "/etc/hostname", st.SymlinkTarget)
	})

	t.Run("missing-and-wrong-paths-are-typed", func(t *testing.T) {
		_, err := sb.ReadFile(ctx, dir+"/nope.txt")
		assert.ErrorIs(t, err, e2b.ErrNotFound)
		assert.NotErrorIs(t, err, e2b.ErrSandboxGone)
		assert.Contains(t, err.Error(), "e2b: read file "+dir+"/nope.txt in sandbox "+sb.ID+": ")
		_, err = sb.ReadFile(ctx, "/home/user")
		assert.ErrorIs(t, err, e2b.ErrInvalidArgument)
		_, err = sb.Stat(ctx, dir+"/nope")
		assert.ErrorIs(t, err, e2b.ErrNotFound)
	})
}

func readAll(t *testing.T, sb *e2b.Sandbox, path string) string {
	t.Helper()
	rc, err := sb.ReadFile(context.Background(), path)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

func names(entries []e2b.EntryInfo) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}
