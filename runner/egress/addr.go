package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// target is a destination the proxy may connect to: a canonical ASCII name
// (lower case, no trailing dot) or an address, and a port.
type target struct {
	name string // empty for an address
	ip   netip.Addr
	port int
}

func (t target) host() string {
	if t.name != "" {
		return t.name
	}
	return t.ip.String()
}

// splitAuthority splits host:port as sent in a CONNECT line or a URL. The
// port must be plain decimal in 1..65535. When defaultPort is non-zero a
// missing port takes it.
func splitAuthority(authority string, defaultPort int) (host string, port int, why string) {
	if authority == "" {
		return "", 0, "no host"
	}
	h, p, err := net.SplitHostPort(authority)
	if err != nil {
		if defaultPort == 0 || strings.HasSuffix(authority, ":") {
			return "", 0, fmt.Sprintf("%q is not host:port", printable(authority))
		}
		// No port: a bare name, [v6] or a v6 address in brackets only.
		h, p = authority, strconv.Itoa(defaultPort)
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		} else if strings.ContainsAny(h, "[]:") {
			return "", 0, fmt.Sprintf("%q is not host:port", printable(authority))
		}
	}
	if len(p) == 0 || len(p) > 5 {
		return "", 0, fmt.Sprintf("bad port %q", printable(p))
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return "", 0, fmt.Sprintf("bad port %q", printable(p))
		}
	}
	n, _ := strconv.Atoi(p)
	if n < 1 || n > 65535 {
		return "", 0, fmt.Sprintf("bad port %q", printable(p))
	}
	if h == "" {
		return "", 0, "no host"
	}
	if strings.Contains(h, ":") {
		h = "[" + h + "]" // SplitHostPort strips the brackets of a v6 address
	}
	return h, n, ""
}

// dialForm turns a host the client sent (no port) into what the proxy will
// resolve or connect to. It accepts only spellings whose meaning is not in
// doubt: ASCII names (lower-cased, one trailing dot dropped) whose last label
// is not numeric, dotted-quad IPv4 and bracketed or plain IPv6 (an
// IPv4-mapped address is unmapped). Everything else — inet_aton forms such
// as 2130706433, 0x7f000001, 0177.0.0.1 and 127.1, Unicode names, zones,
// percent signs — is refused. The policy decides first, on the raw host,
// and again on this form, so the two spellings can never disagree about
// what is allowed.
func dialForm(raw string) (name string, ip netip.Addr, why string) {
	s := raw
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") || len(s) < 3 {
			return "", netip.Addr{}, fmt.Sprintf("malformed host %q", printable(raw))
		}
		a, err := netip.ParseAddr(s[1 : len(s)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", netip.Addr{}, fmt.Sprintf("malformed IPv6 address %q", printable(raw))
		}
		return "", a.Unmap(), ""
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, fmt.Sprintf("address %q has a zone", printable(raw))
		}
		return "", a.Unmap(), ""
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return "", netip.Addr{}, fmt.Sprintf("malformed host %q", printable(raw))
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.':
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		default:
			return "", netip.Addr{}, fmt.Sprintf("host %q is not in canonical form: send an ASCII (punycode) name, a dotted-quad IPv4 or a bracketed IPv6 address", printable(raw))
		}
	}
	s = string(b)
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", netip.Addr{}, fmt.Sprintf("malformed host %q", printable(raw))
		}
	}
	last := labels[len(labels)-1]
	if last[0] >= '0' && last[0] <= '9' {
		// Resolvers read a name ending in a number as an IPv4 address in
		// some inet_aton spelling: never hand one to a resolver.
		return "", netip.Addr{}, fmt.Sprintf("host %q looks like an IPv4 address in a non-standard spelling; use dotted-quad form", printable(raw))
	}
	return s, netip.Addr{}, ""
}

var (
	// blocked4 are IPv4 ranges that are not globally reachable unicast
	// (RFC 6890 and successors): E2B always blocks the private, loopback,
	// link-local and CGNAT ones; the rest are never a legitimate public
	// destination either.
	blocked4 = prefixes(
		"0.0.0.0/8",          // this network
		"10.0.0.0/8",         // private
		"100.64.0.0/10",      // CGNAT (shared address space)
		"127.0.0.0/8",        // loopback
		"169.254.0.0/16",     // link-local (cloud metadata at 169.254.169.254)
		"172.16.0.0/12",      // private
		"192.0.0.0/24",       // IETF protocol assignments
		"192.0.2.0/24",       // documentation
		"192.31.196.0/24",    // AS112
		"192.52.193.0/24",    // AMT
		"192.88.99.0/24",     // 6to4 relay anycast
		"192.168.0.0/16",     // private
		"192.175.48.0/24",    // AS112
		"198.18.0.0/15",      // benchmarking
		"198.51.100.0/24",    // documentation
		"203.0.113.0/24",     // documentation
		"224.0.0.0/4",        // multicast
		"240.0.0.0/4",        // reserved
		"255.255.255.255/32", // broadcast
	)
	// blocked6 are IPv6 ranges inside 2000::/3 that are not globally
	// reachable; addresses outside 2000::/3 are refused except NAT64.
	blocked6 = prefixes(
		"2001::/23",     // IETF protocol assignments (Teredo 2001::/32 included)
		"2001:db8::/32", // documentation
		"2002::/16",     // 6to4: embeds an IPv4 address, often private
		"3fff::/20",     // documentation
	)
	global6 = netip.MustParsePrefix("2000::/3")
	nat64   = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64 prefix
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// publicAddr reports whether a is a globally reachable unicast address the
// sandbox may connect to, and if not, why. IPv4-mapped addresses are judged
// as IPv4, and well-known-prefix NAT64 addresses by the IPv4 address they
// carry (64:ff9b::a9fe:a9fe is 169.254.169.254).
func publicAddr(a netip.Addr) (bool, string) {
	if !a.IsValid() {
		return false, "invalid address"
	}
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		for _, p := range blocked4 {
			if p.Contains(a) {
				return false, fmt.Sprintf("address %s is in %s (%s), which the sandbox may never reach", a, p, rangeName(a))
			}
		}
		return true, ""
	}
	if nat64.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if ok, why := publicAddr(v4); !ok {
			return false, fmt.Sprintf("NAT64 address %s carries %s: %s", a, v4, why)
		}
		return true, ""
	}
	if !global6.Contains(a) {
		return false, fmt.Sprintf("address %s is not a global unicast IPv6 address (%s)", a, rangeName(a))
	}
	for _, p := range blocked6 {
		if p.Contains(a) {
			return false, fmt.Sprintf("address %s is in %s, which the sandbox may never reach", a, p)
		}
	}
	return true, ""
}

func rangeName(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case a.IsUnspecified():
		return "unspecified"
	case a.Is4() && netip.MustParsePrefix("100.64.0.0/10").Contains(a):
		return "CGNAT"
	}
	return "special-purpose"
}

// printable quotes at most 100 bytes of s for a message.
func printable(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}
