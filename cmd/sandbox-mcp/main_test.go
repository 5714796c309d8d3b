package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tests in this package run the real binary as a process. It is built once
// per test run, shared by every test, and removed at the end.
var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildOut  []byte
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildBinary returns the path of the sandbox-mcp binary built from this
// package, building it on first use.
func buildBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "sandbox-mcp-bin-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "sandbox-mcp")
		buildOut, buildErr = exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
	})
	require.NoError(t, buildErr, "go build: %s", buildOut)
	return builtBin
}

// runBinary runs the binary with args and returns its output and exit code.
func runBinary(t testing.TB, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		require.NoError(t, err)
	}
	return o.String(), e.String(), code
}
