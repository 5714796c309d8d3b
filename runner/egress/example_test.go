package egress_test

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

// Example shows the production wiring for one sandbox: the proxy decides
// with the contract's policy and serves the listener that sits in the
// sandbox's network namespace; commands get SandboxEnv.
func Example() {
	var c *contracts.Contract  // the task's contract
	var inSandbox net.Listener // 127.0.0.1:3128 in the sandbox's netns (see the package report)
	logger := slog.Default()
	p, err := egress.New(egress.Options{
		Allow:  func(h string) (bool, string) { return policy.HostAllowed(c, h) },
		Logger: logger.With("sandbox_id", "sbx-1"),
		OnDecision: func(d egress.Decision) {
			// audit: d.Host, d.Port, d.Allow, d.Reason, d.Addr
		},
	})
	if err != nil {
		return
	}
	defer p.Close()
	go func() { _ = p.Serve(context.Background(), inSandbox) }()
	_ = egress.SandboxEnv(egress.SandboxAddr) // appended last to every command's environment
}

// TestAllowOutRoundTripsThroughPolicy pins the mapping the local E2B
// service uses: a create request carries the plan's allowOut (with denyOut
// 0.0.0.0/0), and a contract rebuilt from allowOut decides every host as
// the task's own contract does.
func TestAllowOutRoundTripsThroughPolicy(t *testing.T) {
	orig := allowlist("PyPI.org.", "*.pythonhosted.org", "151.101.0.0/16", "bücher.de", "not a host")
	plan := policy.NetworkPlanFor(orig)
	assert.Equal(t, []string{"0.0.0.0/0"}, plan.DenyOut)
	rebuilt := allowlist(plan.AllowOut...)
	for _, h := range []string{"pypi.org", "PYPI.ORG.", "files.pythonhosted.org", "pythonhosted.org", "151.101.0.223", "2540044511", "xn--bcher-kva.de", "bücher.de", "evil.com", "127.0.0.1"} {
		t.Run("host-"+h+"-is-decided-alike", func(t *testing.T) {
			a, _ := policy.HostAllowed(orig, h)
			b, _ := policy.HostAllowed(rebuilt, h)
			assert.Equal(t, a, b)
		})
	}
}
