package jail

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newSandbox creates a sandbox in a test directory and closes it at the end.
func newSandbox(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	if err := Check(); err != nil {
		t.Skipf("isolation unavailable here: %v", err)
	}
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "sandbox")
	}
	s, err := New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

type result struct {
	stdout, stderr string
	status         ExitStatus
}

// run runs bash -c script in s and collects its output.
func run(t *testing.T, s *Sandbox, script string) result {
	t.Helper()
	p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-c", script}})
	require.NoError(t, err)
	var stderr []byte
	errDone := make(chan struct{})
	go func() { stderr, _ = io.ReadAll(p.Stderr()); close(errDone) }()
	stdout, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	<-errDone
	st, err := p.Wait()
	require.NoError(t, err)
	return result{string(stdout), string(stderr), st}
}

func TestLoginShellRunsAsUnprivilegedUser(t *testing.T) {
	s := newSandbox(t, Config{})
	p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-l", "-c", "echo hi; id -u; id -un; echo $HOME; pwd"}})
	require.NoError(t, err)
	out, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	st, err := p.Wait()
	require.NoError(t, err)
	assert.Equal(t, "hi\n1000\nuser\n/home/user\n/home/user\n", string(out))
	assert.Equal(t, ExitStatus{Code: 0, Status: "exit status 0"}, st)
}
