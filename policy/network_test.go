package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

func TestHostAllowed(t *testing.T) {
	c := devContract()
	cases := []struct {
		name  string
		host  string
		allow bool
	}{
		{"exact-host-is-allowed", "pypi.org", true},
		{"upper-case-host-is-allowed", "PyPI.ORG", true},
		{"trailing-dot-host-is-allowed", "pypi.org.", true},
		{"two-trailing-dots-are-denied", "pypi.org..", false},
		{"host-with-port-is-allowed", "pypi.org:443", true},
		{"subdomain-of-exact-host-is-denied", "evil.pypi.org", false},
		{"suffix-lookalike-is-denied", "evilpypi.org", false},
		{"wildcard-subdomain-is-allowed", "api.github.com", true},
		{"wildcard-deep-subdomain-is-allowed", "a.b.github.com", true},
		{"wildcard-lookalike-is-denied", "api.github.com.evil.example", false},
		{"unicode-lookalike-is-denied", "pypі.org", false}, // Cyrillic i
		{"fullwidth-dot-is-canonicalised", "pypi\u3002org", true},
		{"punycode-of-other-host-is-denied", "xn--pypi-7ve.org", false},
		{"ip-in-allowed-cidr-is-allowed", "10.1.200.3", true},
		{"ip-outside-cidr-is-denied", "10.2.0.1", false},
		{"loopback-is-denied", "127.0.0.1", false},
		{"decimal-loopback-is-denied", "2130706433", false},
		{"hex-loopback-is-denied", "0x7f000001", false},
		{"octal-loopback-is-denied", "0177.0.0.1", false},
		{"short-loopback-is-denied", "127.1", false},
		{"decimal-form-of-allowed-ip-is-allowed", "167838211", true}, // 10.1.0.3
		{"octal-form-of-allowed-ip-is-allowed", "012.1.0.3", true},
		{"invalid-numeric-host-is-denied", "1.2.3.999", false},
		{"ipv6-loopback-is-denied", "[::1]", false},
		{"ipv4-mapped-loopback-is-denied", "[::ffff:127.0.0.1]", false},
		{"ipv4-mapped-allowed-ip-is-allowed", "[::ffff:10.1.0.1]", true},
		{"nat64-metadata-address-is-denied", "[64:ff9b::a9fe:a9fe]", false},
		{"six-to-four-loopback-is-denied", "[2002:7f00:1::]", false},
		{"ipv6-in-allowed-cidr-is-allowed", "[2001:db8::1]", true},
		{"ipv6-with-zone-is-checked", "[fe80::1%25eth0]", false},
		{"metadata-ip-is-denied", "169.254.169.254", false},
		{"host-with-userinfo-is-denied", "pypi.org@evil.example", false},
		{"empty-host-is-denied", "", false},
		{"underscore-host-is-denied", "a_b.github.com", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := HostAllowed(c, tc.host)
			assert.Equal(t, tc.allow, ok, why)
			if !ok {
				assert.NotEmpty(t, why)
			}
		})
	}
	t.Run("egress-none-denies-every-host", func(t *testing.T) {
		ok, why := HostAllowed(offlineContract(), "pypi.org")
		assert.False(t, ok)
		assert.Contains(t, why, "egress none")
	})
	t.Run("egress-open-allows-valid-hosts", func(t *testing.T) {
		c := devContract()
		c.Network = contracts.Network{Egress: contracts.EgressOpen}
		ok, _ := HostAllowed(c, "example.com")
		assert.True(t, ok)
	})
}

func TestParseIPv4Loose(t *testing.T) {
	for in, want := range map[string]string{
		"2130706433": "127.0.0.1", "0x7f000001": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "0x7f.1": "127.0.0.1", "10.0x10.1": "10.16.0.1",
	} {
		h, why := canonicalName(in)
		if assert.Empty(t, why, in) {
			assert.Equal(t, want, h.ip.String(), in)
		}
	}
	for _, in := range []string{"256.0.0.1", "1.2.3.4.5", "0x100000000", "08.1.1.1", "1..1"} {
		_, why := canonicalName(in)
		assert.NotEmpty(t, why, in)
	}
}

func TestNetworkPlanFor(t *testing.T) {
	assert.Equal(t, NetworkPlan{AllowInternet: false}, NetworkPlanFor(offlineContract()))
	open := devContract()
	open.Network = contracts.Network{Egress: contracts.EgressOpen}
	assert.Equal(t, NetworkPlan{AllowInternet: true}, NetworkPlanFor(open))
	c := devContract()
	c.Network.Allow = append(c.Network.Allow, "PyPI.org.", "not a host", "127.1")
	assert.Equal(t, NetworkPlan{
		AllowInternet: true,
		DenyOut:       []string{"0.0.0.0/0"},
		AllowOut:      []string{"pypi.org", "files.pythonhosted.org", "*.github.com", "github.com", "10.1.0.0/16", "2001:db8::/32", "pypi.org", "127.0.0.1/32"},
	}, NetworkPlanFor(c))
}
