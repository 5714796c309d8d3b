package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process/processconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/jail"
)

// e2bLocalProc is a running `sandbox-mcp e2b-local` process.
type e2bLocalProc struct {
	cmd    *exec.Cmd
	url    string
	key    string // only when the process generated it
	stderr *lockedBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit, once done is closed
}

// lockedBuffer is a bytes.Buffer safe to read while the process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// launchE2BLocal runs the subcommand and waits for its export lines.
func launchE2BLocal(t *testing.T, env []string, args ...string) *e2bLocalProc {
	t.Helper()
	bin := buildBinary(t)
	cmd := exec.Command(bin, append([]string{"e2b-local", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	l := &e2bLocalProc{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = l.stderr
	require.NoError(t, cmd.Start())
	go func() { l.err = cmd.Wait(); close(l.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-l.done
	})
	require.Eventually(t, func() bool {
		out := l.stderr.String()
		return strings.Contains(out, "export E2B_API_KEY=") || strings.Contains(out, "# E2B_API_KEY")
	}, 30*time.Second, 10*time.Millisecond, "e2b-local did not print its address")
	for _, line := range strings.Split(l.stderr.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "export E2B_API_URL="); ok {
			l.url = v
		}
		if v, ok := strings.CutPrefix(line, "export E2B_API_KEY="); ok {
			l.key = v
		}
	}
	require.NotEmpty(t, l.url)
	return l
}

func (l *e2bLocalProc) post(t *testing.T, key, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, l.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type sandboxHeaders struct{ id, token string }

func (h sandboxHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.id)
	r.Header.Set("X-Access-Token", h.token)
	return http.DefaultTransport.RoundTrip(r)
}

func pidsWith(marker string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), marker) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestE2BLocalServesAndCleansUpOnSIGTERM(t *testing.T) {
	if err := jail.Check(); err != nil {
		t.Skipf("process isolation is unavailable here: %v", err)
	}
	dir := t.TempDir()
	l := launchE2BLocal(t, []string{"E2B_API_KEY="}, "--dir", dir)

	t.Run("a-generated-key-is-printed-once", func(t *testing.T) {
		assert.Regexp(t, regexp.MustCompile(`^e2b_[0-9a-f]{40}$`), l.key)
		assert.Equal(t, 1, strings.Count(l.stderr.String(), l.key))
		assert.Contains(t, l.stderr.String(), "export E2B_SANDBOX_URL="+l.url)
	})

	code, body := l.post(t, "e2b_wrong", "/sandboxes", `{"templateID":"base"}`)
	require.Equal(t, http.StatusUnauthorized, code, string(body))

	code, body = l.post(t, l.key, "/sandboxes", `{"templateID":"base","timeout":300,"allow_internet_access":false}`)
	require.Equal(t, http.StatusCreated, code, string(body))
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	require.NoError(t, json.Unmarshal(body, &sb))
	require.DirExists(t, filepath.Join(dir, sb.SandboxID))

	marker := fmt.Sprintf("4242.%d", os.Getpid())
	pc := processconnect.NewProcessClient(&http.Client{Transport: sandboxHeaders{sb.SandboxID, sb.EnvdAccessToken}}, l.url, connect.WithProtoJSON())
	stream, err := pc.Start(context.Background(), connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "sleep 1" + marker + " & sleep " + marker}},
	}))
	require.NoError(t, err)
	defer stream.Close()
	require.True(t, stream.Receive())
	require.Eventually(t, func() bool { return len(pidsWith(marker)) >= 2 }, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, l.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-l.done:
		require.NoError(t, l.err, "e2b-local must exit 0 after SIGTERM: %s", l.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("e2b-local did not stop: %s", l.stderr.String())
	}
	assert.Empty(t, pidsWith(marker), "no sandbox process may outlive the service")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no sandbox directory may outlive the service")
	assert.Contains(t, l.stderr.String(), "every sandbox was removed")
}

func TestE2BLocalKeyFromEnvironmentIsNotPrinted(t *testing.T) {
	const key = "e2b_1111111111111111111111111111111111111111" // obviously fake
	l := launchE2BLocal(t, []string{"E2B_API_KEY=" + key})
	assert.Empty(t, l.key)
	assert.NotContains(t, l.stderr.String(), key)
	code, _ := l.post(t, key, "/v2/sandboxes?", `{`)
	assert.Equal(t, http.StatusBadRequest, code, "the environment's key is accepted")
	require.NoError(t, l.cmd.Process.Signal(syscall.SIGINT))
	<-l.done
	require.NoError(t, l.err)
}

func TestE2BLocalFlags(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"non-loopback-listen-is-refused", []string{"--listen", "0.0.0.0:3000"}, 2, "not a loopback address"},
		{"empty-host-is-refused", []string{"--listen", ":3000"}, 2, "not a loopback address"},
		{"bad-address-is-refused", []string{"--listen", "nonsense"}, 2, "--listen"},
		{"stray-argument-is-refused", []string{"extra"}, 2, "unexpected argument"},
		{"help-exits-zero", []string{"-h"}, 0, "E2B_SANDBOX_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runBinary(t, bin, append([]string{"e2b-local"}, tc.args...)...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Contains(t, stderr, tc.msg)
		})
	}
}
