package policy

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// NetworkPlan is a sandbox's egress configuration, in E2B's terms: the
// create parameter allow_internet_access and network.allowOut / denyOut.
// The local sandbox derives the same: no network at all, or only a filtering
// proxy that calls HostAllowed.
type NetworkPlan struct {
	AllowInternet bool     `json:"allow_internet_access"`
	AllowOut      []string `json:"allow_out,omitempty"` // canonical host names, *.domain wildcards, CIDRs
	DenyOut       []string `json:"deny_out,omitempty"`  // CIDRs
}

// NetworkPlanFor turns a contract's network section into a NetworkPlan:
// egress none gives no internet; open gives internet with no lists; an
// allowlist gives internet with every IPv4 address denied and the allowed
// entries (canonicalised; invalid ones dropped) allowed, since in E2B an
// allowOut match wins over denyOut.
func NetworkPlanFor(c *contracts.Contract) NetworkPlan {
	if c == nil {
		return NetworkPlan{}
	}
	switch c.Network.Egress {
	case contracts.EgressOpen:
		return NetworkPlan{AllowInternet: true}
	case contracts.EgressAllowlist:
		plan := NetworkPlan{AllowInternet: true, DenyOut: []string{"0.0.0.0/0"}}
		for _, e := range c.Network.Allow {
			if m, ok := parseAllowEntry(e); ok {
				plan.AllowOut = append(plan.AllowOut, m.String())
			}
		}
		return plan
	}
	return NetworkPlan{AllowInternet: false}
}

// allowEntry is one parsed network.allow entry.
type allowEntry struct {
	host     string       // exact canonical host name
	suffix   string       // "*.example.com" → ".example.com"
	prefix   netip.Prefix // CIDR or single address
	isPrefix bool
}

func (m allowEntry) String() string {
	switch {
	case m.isPrefix:
		return m.prefix.String()
	case m.suffix != "":
		return "*" + m.suffix
	}
	return m.host
}

func parseAllowEntry(e string) (allowEntry, bool) {
	e = strings.TrimSpace(e)
	if p, err := netip.ParsePrefix(e); err == nil {
		return allowEntry{prefix: p.Masked(), isPrefix: true}, true
	}
	if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
		a = a.Unmap().WithZone("")
		return allowEntry{prefix: netip.PrefixFrom(a, a.BitLen()), isPrefix: true}, true
	}
	if rest, ok := strings.CutPrefix(e, "*."); ok {
		h, why := canonicalName(rest)
		if why != "" || h.isIP {
			return allowEntry{}, false
		}
		return allowEntry{suffix: "." + h.name}, true
	}
	h, why := canonicalName(e)
	if why != "" {
		return allowEntry{}, false
	}
	if h.isIP {
		return allowEntry{prefix: netip.PrefixFrom(h.ip, h.ip.BitLen()), isPrefix: true}, true
	}
	return allowEntry{host: h.name}, true
}

// host is a canonical destination: a lower-case ASCII name or an address.
type host struct {
	name string
	ip   netip.Addr
	isIP bool
}

// canonicalName canonicalises a host (no port): brackets and zones removed,
// lower case, one trailing dot stripped, IDNA to ASCII, and every IPv4
// spelling that resolvers accept (2130706433, 0x7f000001, 0177.0.0.1, 127.1)
// turned into the address. It returns a reason when the host is invalid or
// ambiguous.
func canonicalName(raw string) (host, string) {
	s := raw
	if s == "" {
		return host{}, "empty host"
	}
	if len(s) > 253+2 {
		return host{}, "host name too long"
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return host{}, fmt.Sprintf("malformed host %q", printable(raw))
		}
		s = s[1 : len(s)-1]
	}
	if strings.Contains(s, ":") {
		if i := strings.Index(s, "%25"); i >= 0 {
			s = s[:i]
		} else if i := strings.IndexByte(s, '%'); i >= 0 {
			s = s[:i]
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return host{}, fmt.Sprintf("malformed IPv6 address %q", printable(raw))
		}
		return host{ip: a.Unmap(), isIP: true}, ""
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= 0x20 || b == 0x7f || b == '%' || b == '\\' || b == '/' || b == '@' {
			return host{}, fmt.Sprintf("host %q contains a forbidden character", printable(raw))
		}
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return host{}, fmt.Sprintf("malformed host %q", printable(raw))
	}
	ascii, err := idna.Lookup.ToASCII(s)
	if err != nil {
		return host{}, fmt.Sprintf("host %q is not a valid domain name: %v", printable(raw), err)
	}
	ascii = strings.ToLower(strings.TrimSuffix(ascii, "."))
	if ascii == "" || strings.Contains(ascii, "..") {
		return host{}, fmt.Sprintf("malformed host %q", printable(raw))
	}
	for i := 0; i < len(ascii); i++ {
		b := ascii[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '.') {
			return host{}, fmt.Sprintf("host %q contains a forbidden character", printable(raw))
		}
	}
	labels := strings.Split(ascii, ".")
	last := labels[len(labels)-1]
	if looksNumeric(last) {
		a, ok := parseIPv4Loose(labels)
		if !ok {
			return host{}, fmt.Sprintf("host %q looks like an IPv4 address but is not a valid one", printable(raw))
		}
		return host{ip: a, isIP: true}, ""
	}
	return host{name: ascii}, ""
}

// looksNumeric is the URL standard's "ends in a number" test for a label.
func looksNumeric(label string) bool {
	if label == "" {
		return false
	}
	if strings.HasPrefix(label, "0x") {
		for _, c := range label[2:] {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
		return true
	}
	for _, c := range label {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseIPv4Loose parses inet_aton forms: 1 to 4 parts, each decimal, octal
// (leading 0) or hex (0x), the last part filling the remaining bytes.
func parseIPv4Loose(parts []string) (netip.Addr, bool) {
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		case p == "":
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, base, 64)
		if err != nil || v > 0xffffffff {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var ip uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		ip |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	ip |= last
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries by a
// translation mechanism (NAT64, 6to4, Teredo, ISATAP, IPv4-compatible), so
// that a CIDR allowing the IPv6 form does not silently allow the IPv4 one.
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	var out []netip.Addr
	last4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case netip.MustParsePrefix("64:ff9b::/96").Contains(a), netip.MustParsePrefix("64:ff9b:1::/48").Contains(a):
		out = append(out, last4)
	case b[0] == 0x20 && b[1] == 0x02: // 6to4
		out = append(out, netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0: // Teredo
		out = append(out, netip.AddrFrom4([4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}))
	case netip.MustParsePrefix("::/96").Contains(a) && !a.IsUnspecified() && !a.IsLoopback(): // IPv4-compatible
		out = append(out, last4)
	}
	if (b[8]|0x02) == 0x02 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe { // ISATAP
		out = append(out, last4)
	}
	return out
}

// HostAllowed reports whether the contract lets the sandbox reach host (a
// name or IP literal in any spelling; a trailing :port is ignored), and why
// not. Filtering proxies call it for every connection; the policy engine
// calls it for URLs it finds in command lines.
func HostAllowed(c *contracts.Contract, rawHost string) (bool, string) {
	if c == nil {
		return false, "network: no contract is loaded for this task"
	}
	h := stripPort(rawHost)
	switch c.Network.Egress {
	case contracts.EgressOpen:
		if _, why := canonicalName(h); why != "" {
			return false, "network: " + why
		}
		return true, ""
	case contracts.EgressAllowlist:
	default:
		return false, "network: egress none: this task has no network access"
	}
	ch, why := canonicalName(h)
	if why != "" {
		return false, "network: " + why
	}
	allowed := "allowed hosts: " + listRoots(c.Network.Allow)
	if ch.isIP {
		addrs := append([]netip.Addr{ch.ip}, embeddedIPv4(ch.ip)...)
		for _, a := range addrs {
			if !ipAllowed(c, a) {
				return false, fmt.Sprintf("network.allow: IP address %s is not covered by an allowed CIDR; %s", a, allowed)
			}
		}
		return true, ""
	}
	for _, e := range c.Network.Allow {
		m, ok := parseAllowEntry(e)
		if !ok || m.isPrefix {
			continue
		}
		if m.host == ch.name || m.suffix != "" && strings.HasSuffix(ch.name, m.suffix) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("network.allow: host %s is not allowed; %s", ch.name, allowed)
}

func ipAllowed(c *contracts.Contract, a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, e := range c.Network.Allow {
		if m, ok := parseAllowEntry(e); ok && m.isPrefix && m.prefix.Contains(a) {
			return true
		}
	}
	return false
}

// stripPort removes a trailing :port from host:port or [v6]:port.
func stripPort(h string) string {
	if strings.HasPrefix(h, "[") {
		if i := strings.LastIndex(h, "]:"); i >= 0 && allDigits(h[i+2:]) {
			return h[:i+1]
		}
		return h
	}
	if strings.Count(h, ":") == 1 {
		i := strings.IndexByte(h, ':')
		if allDigits(h[i+1:]) {
			return h[:i]
		}
	}
	return h
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// checkURL checks a URL a network tool will fetch. schemes lists the
// schemes allowed; a URL without a scheme gets defaultScheme.
func checkURL(c *contracts.Contract, raw, defaultScheme string, schemes ...string) string {
	if strings.ContainsAny(raw, "\\ \t\r\n") {
		return fmt.Sprintf("network: URL %q contains a backslash or white space", printable(raw))
	}
	if !strings.Contains(raw, "://") {
		raw = defaultScheme + "://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Sprintf("network: cannot parse URL %q: %v", printable(raw), err)
	}
	if !contains(schemes, strings.ToLower(u.Scheme)) {
		return fmt.Sprintf("network: URL scheme %q is not allowed here; use %s", u.Scheme, strings.Join(schemes, " or "))
	}
	if u.Host == "" {
		return fmt.Sprintf("network: URL %q has no host", printable(raw))
	}
	if ok, why := HostAllowed(c, u.Host); !ok {
		return why
	}
	return ""
}
