package egress

import (
	"context"
	"net"
	"net/netip"
)

// WithTestDial returns opts with the network dial replaced, so tests can
// send an allowed, checked public address to a loopback test server. The
// address checks before the dial stay in force.
func WithTestDial(opts Options, dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)) Options {
	opts.testDial = dial
	return opts
}

// Exported for tests.
var (
	ReadClientHello  = readClientHello
	ParseClientHello = parseClientHello
	PublicAddr       = publicAddr
	DialForm         = dialForm
)

// ClientHelloInfo is clientHello for tests.
type ClientHelloInfo = clientHello

// IsSelf is Proxy.isSelf for tests.
func (p *Proxy) IsSelf(a netip.Addr) bool { return p.isSelf(a) }
