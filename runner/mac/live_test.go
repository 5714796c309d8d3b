package mac_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sandbox-mcp/sandbox-mcp/runner/mac"
	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

// TestLiveMac runs a harmless step on a real Mac when MAC_RUNNER_SSH
// (user@host:port), MAC_RUNNER_HOST_KEY (SHA256:...) and
// MAC_RUNNER_KEY_FILE are set; see docs/mac-runner.md.
func TestLiveMac(t *testing.T) {
	target, hostKey, keyFile := os.Getenv("MAC_RUNNER_SSH"), os.Getenv("MAC_RUNNER_HOST_KEY"), os.Getenv("MAC_RUNNER_KEY_FILE")
	if target == "" || hostKey == "" || keyFile == "" {
		t.Skip("live Mac test: set MAC_RUNNER_SSH, MAC_RUNNER_HOST_KEY and MAC_RUNNER_KEY_FILE to run it")
	}
	pem, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	signer, err := ssh.ParsePrivateKey(pem)
	require.NoError(t, err)
	r, err := mac.New(mac.Options{Target: target, HostKey: hostKey, Signer: signer})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	data := []byte("live smoke input\n")
	ws, err := r.Prepare(ctx, job(t, input("a.txt", data)))
	require.NoError(t, err)
	defer func() {
		c := r.Release(ctx, ws)
		assert.True(t, c.WorkspaceRemoved && c.ProcessesGone, c.Error)
	}()
	t.Logf("system %s, hash tool %s", ws.System, ws.HashTool)
	var log bytes.Buffer
	res, err := r.Run(ctx, ws, tools.MacStep{Name: "smoke", Argv: []string{"sh", "-c", "uname -a; (sw_vers || true); cp inputs/a.txt out.txt"},
		Timeout: time.Minute, Outputs: []string{"out.txt"}}, &log)
	require.NoError(t, err)
	t.Logf("log:\n%s", log.String())
	assert.Equal(t, 0, res.ExitCode)
	require.Len(t, res.Outputs, 1)
	assert.Equal(t, sha(data), res.Outputs[0].SHA256)
}
