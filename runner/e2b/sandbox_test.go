package e2b

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
)

func TestEnvdURL(t *testing.T) {
	tests := []struct {
		name       string
		apiURL     string
		sandboxURL string
		domain     *string
		want       string
	}{
		{"cloud-default-uses-the-per-sandbox-host", "", "", nil, "https://49983-" + fakeID + ".e2b.app"},
		{"server-domain-wins", "", "", ptr("eu.e2b.dev"), "https://49983-" + fakeID + ".eu.e2b.dev"},
		{"self-hosted-domain-comes-from-the-api-host", "https://api.sandboxes.example.com", "", nil, "https://49983-" + fakeID + ".sandboxes.example.com"},
		{"sandbox-url-routes-every-sandbox-through-one-base", "http://127.0.0.1:3000", "http://127.0.0.1:3000/", nil, "http://127.0.0.1:3000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Options{APIURL: tt.apiURL, SandboxURL: tt.sandboxURL, APIKey: fakeKey})
			require.NoError(t, err)
			sb, err := c.newSandbox("test", api.Sandbox{SandboxID: fakeID, Domain: tt.domain, EnvdAccessToken: ptr(fakeToken)})
			require.NoError(t, err)
			assert.Equal(t, tt.want, sb.envdURL)
			assert.Equal(t, tt.sandboxURL != "", sb.plain.routed)
		})
	}
	t.Run("a-server-sandbox-id-that-would-change-the-host-is-refused", func(t *testing.T) {
		c, err := New(Options{APIKey: fakeKey})
		require.NoError(t, err)
		_, err = c.newSandbox("test", api.Sandbox{SandboxID: "x@evil.com"})
		require.ErrorIs(t, err, ErrInvalidArgument)
		_, err = c.newSandbox("test", api.Sandbox{SandboxID: fakeID, Domain: ptr("evil.com/x?")})
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
}
