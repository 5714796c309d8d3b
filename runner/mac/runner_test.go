package mac_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sandbox-mcp/sandbox-mcp/runner/mac"
	"github.com/sandbox-mcp/sandbox-mcp/runner/mac/mactest"
	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

func newRunner(t *testing.T, d *mactest.SSHD, mod func(*mac.Options)) *mac.Runner {
	t.Helper()
	o := mac.Options{Target: d.Target(), HostKey: d.HostKey, Signer: d.Signer, PollInterval: 100 * time.Millisecond, ReconnectFor: 20 * time.Second}
	if mod != nil {
		mod(&o)
	}
	r, err := mac.New(o)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

func input(name string, data []byte) tools.MacInput {
	sum := sha256.Sum256(data)
	return tools.MacInput{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)),
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var jobN int

func job(t *testing.T, inputs ...tools.MacInput) tools.MacJob {
	jobN++
	return tools.MacJob{TaskID: "task-mac", HandoffID: fmt.Sprintf("h%d-%d", time.Now().UnixNano(), jobN), Inputs: inputs}
}

func step(timeout time.Duration, outputs []string, argv ...string) tools.MacStep {
	return tools.MacStep{Name: "test", Argv: argv, Timeout: timeout, Outputs: outputs}
}

// onMac is a path on the stand-in Mac (this machine) inside the runner
// user's home.
func onMac(d *mactest.SSHD, rel string) string { return filepath.Join(d.Home, rel) }

func TestRunnerRunsAStepAndReturnsHashedOutputs(t *testing.T) {
	d := mactest.Start(t)
	r := newRunner(t, d, nil)
	ctx := context.Background()
	data := []byte("input bytes\n")
	j := job(t, input("a.txt", data))
	ws, err := r.Prepare(ctx, j)
	require.NoError(t, err)
	assert.Equal(t, r.Workspace(j.TaskID, j.HandoffID), ws.Dir)
	assert.Contains(t, ws.Dir, j.TaskID+"-"+j.HandoffID, "the workspace is named after the task and handoff")
	assert.Equal(t, "sha256sum", ws.HashTool)

	var log bytes.Buffer
	st := step(time.Minute, []string{"out/copy.txt", "tree"}, "sh", "-c",
		`mkdir -p out tree/sub && cp inputs/a.txt out/copy.txt && echo nested > tree/sub/f && echo "hello from $GREETING"; echo to-stderr >&2`)
	st.Env = map[string]string{"GREETING": "the step's env"}
	res, err := r.Run(ctx, ws, st, &log)
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)
	assert.False(t, res.TimedOut)
	assert.Equal(t, "hello from the step's env\nto-stderr\n", log.String())
	assert.Equal(t, sha(log.Bytes()), res.LogSHA256)
	assert.Equal(t, int64(log.Len()), res.LogBytes)

	require.Len(t, res.Outputs, 2)
	assert.Equal(t, tools.MacOutput{Path: "out/copy.txt", SHA256: sha(data), Size: int64(len(data)), Remote: "out/copy.txt"}, res.Outputs[0])
	assert.True(t, res.Outputs[1].Dir)
	for _, o := range res.Outputs {
		var got bytes.Buffer
		require.NoError(t, r.Download(ctx, ws, o, &got))
		assert.Equal(t, o.SHA256, sha(got.Bytes()), "downloaded %s hashes as the Mac said", o.Path)
		assert.Equal(t, o.Size, int64(got.Len()))
	}

	require.DirExists(t, onMac(d, ws.Dir))
	c := r.Release(ctx, ws)
	assert.Equal(t, tools.MacCleanup{WorkspaceRemoved: true, ProcessesGone: true}, c)
	assert.NoDirExists(t, onMac(d, ws.Dir), "the workspace is gone afterwards")
}

func TestRunnerArgvIsPassedLiterally(t *testing.T) {
	d := mactest.Start(t)
	r := newRunner(t, d, nil)
	ctx := context.Background()
	ws, err := r.Prepare(ctx, job(t))
	require.NoError(t, err)
	defer r.Release(ctx, ws)
	hostile := "$(touch pwned) `touch pwned2` 'q' \"d\" ; touch pwned3 & | > pwned4 \\ \n$HOME"
	var log bytes.Buffer
	res, err := r.Run(ctx, ws, step(time.Minute, nil, "printf", "%s|", hostile, "two words"), &log)
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, hostile+"|two words|", log.String(), "every argument arrives as one literal argument")
	for _, f := range []string{"pwned", "pwned2", "pwned3", "pwned4"} {
		assert.NoFileExists(t, onMac(d, filepath.Join(ws.Dir, f)), "nothing in an argument ran")
	}
}

func TestRunnerRecordsAFailingStep(t *testing.T) {
	d := mactest.Start(t)
	r := newRunner(t, d, nil)
	ctx := context.Background()
	ws, err := r.Prepare(ctx, job(t))
	require.NoError(t, err)
	defer r.Release(ctx, ws)
	var log bytes.Buffer
	res, err := r.Run(ctx, ws, step(time.Minute, nil, "sh", "-c", "echo failing >&2; exit 7"), &log)
	require.NoError(t, err)
	assert.Equal(t, 7, res.ExitCode)
	assert.Equal(t, "failing\n", log.String())
}

func TestRunnerRefusesAWrongHostKey(t *testing.T) {
	d := mactest.Start(t)
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	other, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	wrong := ssh.FingerprintSHA256(other)
	ctx := context.Background()

	t.Run("another-fingerprint-is-refused-and-nothing-is-created", func(t *testing.T) {
		r := newRunner(t, d, func(o *mac.Options) { o.HostKey = wrong })
		j := job(t, input("a.txt", []byte("x")))
		_, err := r.Prepare(ctx, j)
		require.ErrorIs(t, err, tools.ErrMacHostKey)
		assert.Contains(t, err.Error(), d.HostKey, "the error names the key the server offered")
		assert.NoDirExists(t, onMac(d, r.Workspace(j.TaskID, j.HandoffID)))
	})
	t.Run("the-pinned-fingerprint-is-accepted", func(t *testing.T) {
		r := newRunner(t, d, nil)
		ws, err := r.Prepare(ctx, job(t, input("a.txt", []byte("x"))))
		require.NoError(t, err)
		r.Release(ctx, ws)
	})
}

func TestRunnerRefusesAnInputChangedOnTheMac(t *testing.T) {
	d := mactest.Start(t)
	r := newRunner(t, d, nil)
	ctx := context.Background()
	good, bad := input("good.bin", []byte("good")), input("bad.bin", []byte("original"))
	ws, err := r.Stage(ctx, job(t, good, bad))
	require.NoError(t, err)
	defer r.Release(ctx, ws)
	require.NoError(t, r.Verify(ctx, ws, []tools.MacInput{good, bad}), "untouched inputs verify")

	// Tamper with the uploaded file on the "Mac" before the check.
	require.NoError(t, os.WriteFile(onMac(d, ws.Staged["bad.bin"]), []byte("tampered"), 0o600))
	err = r.Verify(ctx, ws, []tools.MacInput{good, bad})
	require.ErrorIs(t, err, tools.ErrMacInputMismatch)
	assert.Contains(t, err.Error(), "bad.bin")
	assert.NotContains(t, err.Error(), "good.bin")

	t.Run("an-extra-file-is-refused", func(t *testing.T) {
		require.NoError(t, os.WriteFile(onMac(d, ws.Staged["bad.bin"]), []byte("original"), 0o600))
		require.NoError(t, r.Verify(ctx, ws, []tools.MacInput{good, bad}))
		require.NoError(t, os.WriteFile(onMac(d, ws.Dir+"/inputs/extra"), []byte("x"), 0o600))
		require.ErrorIs(t, r.Verify(ctx, ws, []tools.MacInput{good, bad}), tools.ErrMacInputMismatch)
	})
}

func TestRunnerKillsAStepAtItsTimeout(t *testing.T) {
	d := mactest.Start(t)
	r := newRunner(t, d, nil)
	ctx := context.Background()
	ws, err := r.Prepare(ctx, job(t))
	require.NoError(t, err)
	defer r.Release(ctx, ws)
	marker := fmt.Sprintf("%d", 100000+time.Now().UnixNano()%800000)
	var log bytes.Buffer
	// A child in the background and one in the foreground: the whole group
	// must go.
	res, err := r.Run(ctx, ws, step(2*time.Second, nil, "sh", "-c", "echo started; sleep "+marker+" & sleep "+marker+"; echo never"), &log)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.True(t, res.Killed, res.KillDetail)
	assert.Equal(t, -1, res.ExitCode)
	assert.Equal(t, "started\n", log.String())
	out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
	assert.Empty(t, strings.TrimSpace(string(out)), "no process of the step is left on the Mac")
}

// syncWriter lets the test watch the log while Run writes it.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
	on func(string)
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.b.Write(p)
	s := w.b.String()
	w.mu.Unlock()
	if w.on != nil {
		w.on(s)
	}
	return len(p), nil
}

func TestRunnerSurvivesADroppedConnection(t *testing.T) {
	d := mactest.Start(t)
	p := mactest.NewProxy(t, d.Addr)
	r := newRunner(t, d, func(o *mac.Options) { o.Target = d.User + "@" + p.Addr })
	ctx := context.Background()
	ws, err := r.Prepare(ctx, job(t))
	require.NoError(t, err)
	defer r.Release(ctx, ws)

	var once sync.Once
	cut := 0
	w := &syncWriter{on: func(s string) {
		if strings.Contains(s, "line 2\n") {
			once.Do(func() { cut = p.Cut() })
		}
	}}
	res, err := r.Run(ctx, ws, step(time.Minute, nil, "sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.3; done"), w)
	require.NoError(t, err)
	assert.Equal(t, 1, cut, "the test cut the runner's connection mid-step")
	assert.GreaterOrEqual(t, res.Reconnects, 1)
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\n", w.b.String(), "the log is whole, in order, each line once")
	assert.Equal(t, sha(w.b.Bytes()), res.LogSHA256)
}

func TestRunnerRefusesSymlinkedOutputs(t *testing.T) {
	d := mactest.Start(t)
	r := newRunner(t, d, nil)
	ctx := context.Background()
	ws, err := r.Prepare(ctx, job(t))
	require.NoError(t, err)
	defer r.Release(ctx, ws)
	res, err := r.Run(ctx, ws, step(time.Minute, []string{"ok.txt", "leak", "up/passwd", "absent"}, "sh", "-c",
		"echo ok > ok.txt && ln -s /etc/passwd leak && ln -s /etc up"), io.Discard)
	require.ErrorIs(t, err, tools.ErrMacOutputMissing)
	require.Len(t, res.Outputs, 4)
	assert.False(t, res.Outputs[0].Missing, "a plain file next to them is returned")
	assert.Equal(t, sha([]byte("ok\n")), res.Outputs[0].SHA256)
	for _, o := range res.Outputs[1:] {
		assert.True(t, o.Missing, o.Path)
		assert.ErrorIs(t, r.Download(ctx, ws, o, io.Discard), tools.ErrMacOutputMissing)
	}
	assert.Contains(t, err.Error(), "leak (a symlink)")
	assert.Contains(t, err.Error(), "up/passwd (resolves outside the workspace)")
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct{ in, user, addr string }{
		{"runner@mac-1.example.com:22", "runner", "mac-1.example.com:22"},
		{"runner@[::1]:2222", "runner", "[::1]:2222"},
		{"r@127.0.0.1:1", "r", "127.0.0.1:1"},
	} {
		u, a, err := mac.ParseTarget(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.user, u)
		assert.Equal(t, tc.addr, a)
	}
	for _, bad := range []string{"", "host:22", "runner@host", "runner@:22", "a b@h:22", "runner@h/x:22"} {
		_, _, err := mac.ParseTarget(bad)
		assert.Error(t, err, bad)
	}
}

func TestRunnerStepKillsItselfWhenTheServerIsGone(t *testing.T) {
	d := mactest.Start(t)
	p := mactest.NewProxy(t, d.Addr)
	r := newRunner(t, d, func(o *mac.Options) {
		o.Target = d.User + "@" + p.Addr
		o.WatchdogGrace = time.Second
		o.ReconnectFor = time.Second
	})
	ctx := context.Background()
	ws, err := r.Prepare(ctx, job(t))
	require.NoError(t, err)
	defer newRunner(t, d, nil).Release(ctx, ws)
	marker := fmt.Sprintf("%d", 100000+time.Now().UnixNano()%800000)
	w := &syncWriter{}
	var once sync.Once
	w.on = func(s string) {
		if strings.Contains(s, "started") {
			once.Do(p.Close) // the server loses the Mac for good
		}
	}
	_, err = r.Run(ctx, ws, step(time.Second, nil, "sh", "-c", "echo started; sleep "+marker), w)
	require.Error(t, err, "the server cannot follow the step")
	alive := func() bool {
		out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
		return strings.TrimSpace(string(out)) != ""
	}
	deadline := time.Now().Add(15 * time.Second)
	for alive() && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	assert.False(t, alive(), "the Mac-side watchdog killed the step after its timeout and grace")
}

// TestRunnerOnAMacLikeHost hides sha256sum and setsid, as on macOS: inputs
// and outputs are hashed with shasum and the step gets its own process group
// from perl.
func TestRunnerOnAMacLikeHost(t *testing.T) {
	d := mactest.StartWith(t, mactest.Options{Hide: []string{"sha256sum", "setsid"}})
	r := newRunner(t, d, nil)
	ctx := context.Background()
	data := []byte("mac-like\n")
	good := input("a.txt", data)
	ws, err := r.Stage(ctx, job(t, good))
	require.NoError(t, err)
	defer r.Release(ctx, ws)
	assert.Equal(t, "shasum", ws.HashTool)
	require.NoError(t, r.Verify(ctx, ws, []tools.MacInput{good}))
	require.NoError(t, os.WriteFile(onMac(d, ws.Staged["a.txt"]), []byte("changed\n"), 0o600))
	require.ErrorIs(t, r.Verify(ctx, ws, []tools.MacInput{good}), tools.ErrMacInputMismatch, "shasum catches a change too")
	require.NoError(t, os.WriteFile(onMac(d, ws.Staged["a.txt"]), data, 0o600))

	var log bytes.Buffer
	res, err := r.Run(ctx, ws, step(time.Minute, []string{"out.txt"}, "sh", "-c",
		`command -v setsid || echo no-setsid; command -v sha256sum || echo no-sha256sum; cp inputs/a.txt out.txt; ps -o pgid= -p $$ | tr -d ' ' > pgid.seen`), &log)
	require.NoError(t, err)
	assert.Equal(t, "no-setsid\nno-sha256sum\n", log.String(), "the session really lacks both")
	assert.Equal(t, 0, res.ExitCode)
	require.Len(t, res.Outputs, 1)
	assert.Equal(t, sha(data), res.Outputs[0].SHA256)
	seen, err := os.ReadFile(onMac(d, ws.Dir+"/pgid.seen"))
	require.NoError(t, err)
	rec, err := os.ReadFile(onMac(d, ws.Dir+"/.smcp/pgid"))
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(rec)), strings.TrimSpace(string(seen)), "the step runs in the process group perl made")

	t.Run("a-timeout-still-kills-the-whole-group", func(t *testing.T) {
		ws2, err := r.Prepare(ctx, job(t))
		require.NoError(t, err)
		defer r.Release(ctx, ws2)
		marker := fmt.Sprintf("%d", 100000+time.Now().UnixNano()%800000)
		res, err := r.Run(ctx, ws2, step(time.Second, nil, "sh", "-c", "sleep "+marker+" & sleep "+marker), io.Discard)
		require.NoError(t, err)
		assert.True(t, res.TimedOut)
		assert.True(t, res.Killed, res.KillDetail)
		out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
		assert.Empty(t, strings.TrimSpace(string(out)))
	})
}

func TestRunnerKillsTheStepWhenTheCallIsCancelled(t *testing.T) {
	d := mactest.Start(t)
	r := newRunner(t, d, nil)
	ctx := context.Background()
	ws, err := r.Prepare(ctx, job(t))
	require.NoError(t, err)
	defer r.Release(ctx, ws)
	marker := fmt.Sprintf("%d", 100000+time.Now().UnixNano()%800000)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &syncWriter{on: func(s string) {
		if strings.Contains(s, "started") {
			cancel()
		}
	}}
	res, err := r.Run(cctx, ws, step(time.Hour, nil, "sh", "-c", "echo started; sleep "+marker), w)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, res.TimedOut)
	assert.True(t, res.Killed, res.KillDetail)
	out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
	assert.Empty(t, strings.TrimSpace(string(out)), "the step is gone from the Mac")
}
