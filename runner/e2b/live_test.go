package e2b_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
)

// TestLiveE2B runs the same scenarios as TestClientAgainstE2BLocal against
// the E2B cloud (or E2B_API_URL and E2B_SANDBOX_URL, as the SDKs read
// them). Every sandbox it makes is short-lived and
// killed in t.Cleanup. Set E2B_LIVE_PROTO_JSON=true to use Connect+JSON for
// envd, as the official SDKs do.
func TestLiveE2B(t *testing.T) {
	key := os.Getenv("E2B_API_KEY")
	if key == "" {
		t.Skip("E2B_API_KEY not set: live E2B test skipped")
	}
	c, err := e2b.New(e2b.Options{
		APIURL:        os.Getenv("E2B_API_URL"),
		SandboxURL:    os.Getenv("E2B_SANDBOX_URL"),
		APIKey:        e2b.Secret(key),
		EnvdProtoJSON: os.Getenv("E2B_LIVE_PROTO_JSON") == "true",
	})
	require.NoError(t, err)

	t.Run("lifecycle", func(t *testing.T) { testLifecycle(t, c) })
	t.Run("create-with-an-egress-allowlist-is-accepted", func(t *testing.T) {
		sb := create(t, c, e2b.CreateParams{AllowOut: []string{"pypi.org", "*.pythonhosted.org"}})
		require.Equal(t, "ok\n", mustRun(t, sb, "echo ok"))
	})
	sb := create(t, c, e2b.CreateParams{Timeout: 5 * time.Minute})
	t.Run("commands", func(t *testing.T) { testCommands(t, sb) })
	t.Run("files", func(t *testing.T) { testFiles(t, sb) })
}
