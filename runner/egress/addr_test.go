package egress_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

func TestPublicAddr(t *testing.T) {
	cases := []struct {
		addr   string
		public bool
	}{
		{"151.101.0.223", true},
		{"8.8.8.8", true},
		{"::ffff:8.8.8.8", true},
		{"2a04:4e42::223", true},
		{"2606:4700:4700::1111", true},
		{"64:ff9b::808:808", true}, // NAT64 of 8.8.8.8
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"10.0.0.1", false},
		{"100.64.0.1", false},
		{"100.127.255.254", false},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"169.254.169.254", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.0.0.170", false},
		{"192.0.2.1", false},
		{"192.168.1.1", false},
		{"198.18.0.1", false},
		{"198.51.100.1", false},
		{"203.0.113.1", false},
		{"224.0.0.251", false},
		{"239.255.255.250", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		{"::", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::127.0.0.1", false}, // IPv4-compatible
		{"64:ff9b::7f00:1", false},
		{"64:ff9b::a9fe:a9fe", false},
		{"64:ff9b:1::a9fe:a9fe", false}, // local-use NAT64
		{"2002:a00:1::1", false},        // 6to4 of 10.0.0.1
		{"2002:808:808::1", false},      // 6to4 at all
		{"2001::1", false},              // Teredo
		{"2001:db8::1", false},
		{"3fff::1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"fe80::1", false},
		{"fec0::1", false},
		{"ff02::1", false},
		{"100::1", false}, // discard-only
	}
	for _, tc := range cases {
		name := tc.addr + "-is-not-public"
		if tc.public {
			name = tc.addr + "-is-public"
		}
		t.Run(name, func(t *testing.T) {
			ok, why := egress.PublicAddr(netip.MustParseAddr(tc.addr))
			assert.Equal(t, tc.public, ok, why)
			if !ok {
				assert.NotEmpty(t, why)
			}
		})
	}
}

func TestDialForm(t *testing.T) {
	cases := []struct {
		raw  string
		name string
		ip   string
		bad  bool
	}{
		{"pypi.org", "pypi.org", "", false},
		{"PyPI.ORG.", "pypi.org", "", false},
		{"xn--bcher-kva.de", "xn--bcher-kva.de", "", false},
		{"151.101.0.223", "", "151.101.0.223", false},
		{"[2a04:4e42::223]", "", "2a04:4e42::223", false},
		{"[::ffff:1.2.3.4]", "", "1.2.3.4", false},
		{"2130706433", "", "", true},
		{"0x7f000001", "", "", true},
		{"0177.0.0.1", "", "", true},
		{"127.1", "", "", true},
		{"1.2.3.0x4", "", "", true},
		{"example.123", "", "", true},
		{"bücher.de", "", "", true},
		{"pypi.org..", "", "", true},
		{".pypi.org", "", "", true},
		{"pypi..org", "", "", true},
		{"pypi.org%00", "", "", true},
		{"pypi_org.com", "", "", true},
		{"[fe80::1%25eth0]", "", "", true},
		{"[1.2.3.4]", "", "", true},
		{"", "", "", true},
	}
	for _, tc := range cases {
		t.Run("dial-form-of-"+tc.raw, func(t *testing.T) {
			name, ip, why := egress.DialForm(tc.raw)
			if tc.bad {
				assert.NotEmpty(t, why, "got %q %v", name, ip)
				return
			}
			assert.Empty(t, why)
			assert.Equal(t, tc.name, name)
			if tc.ip != "" {
				assert.Equal(t, netip.MustParseAddr(tc.ip), ip)
			}
		})
	}
}
