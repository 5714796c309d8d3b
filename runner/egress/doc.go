// Package egress enforces a sandbox's network allowlist for the embedded
// local sandbox: a filtering HTTP forward proxy on the host side (Proxy)
// and the few lines that carry connections to it out of the sandbox's
// network namespace (Bridge, SandboxEnv).
//
// # Model
//
// The sandbox keeps an empty network namespace: loopback only, no route,
// no DNS. Its one way out is an HTTP proxy at 127.0.0.1:3128 inside that
// namespace (SandboxAddr): the namespace holder opens that listener and
// hands it to the server, whose Proxy serves it directly (runner/jail's
// Config.Egress; Bridge is the alternative when a listener cannot be
// passed, forwarding to a unix socket). The Proxy accepts CONNECT host:port (HTTPS, or any TCP on
// an allowed port) and absolute-form plain HTTP requests (GET
// http://host/...), and for each:
//
//   - checks the port (80 and 443 unless configured);
//   - asks Options.Allow about the host as the client sent it (in
//     production policy.HostAllowed for the task's contract, which
//     canonicalises names and refuses IP literals in any spelling unless
//     a CIDR allows them), then again about the form it will dial; only
//     unambiguous spellings are dialled (ASCII names, dotted-quad IPv4,
//     IPv6): inet_aton forms such as 2130706433 or 127.1 never reach a
//     resolver;
//   - resolves the name itself and refuses the connection if any address
//     is loopback, private, link-local, CGNAT, multicast, unspecified,
//     reserved or documentation space, a NAT64 or IPv4-mapped form of one,
//     or an address of the proxy's own machine — so an allowed name that
//     resolves (or is rebound) to an internal address gets nowhere;
//   - connects to the checked address, never to the name again;
//   - on TLS ports (443) requires the tunnel to begin with a TLS
//     ClientHello whose server name equals the CONNECT host, and refuses
//     hellos with no name, another name (domain fronting) or an encrypted
//     ClientHello (the real name hidden); a CONNECT to an IP literal
//     must carry no name;
//   - for plain HTTP requires the Host header, if any, to name the URL's
//     host and port, strips hop-by-hop and proxy headers, and forwards one
//     request per connection; CONNECT to port 80 is refused (inside a
//     tunnel a request could name another site on the same server), and
//     plain HTTP to port 443 too.
//
// Refusals are HTTP 403 (400, 502, 503 or 504 where those fit) with a
// one-line reason; after a tunnel was granted, a TLS access_denied alert.
// Every decision is logged and passed to Options.OnDecision. The proxy
// never uses the host's proxy settings (it dials directly, so no chained
// proxying) and cannot reach itself (loopback and its own addresses are
// refused). Connections are bounded in number, idle time, header size and
// connect time.
//
// # What it enforces and what not
//
// Kernel-enforced, not environment-based: a program that ignores
// HTTP_PROXY has no network at all. UDP, QUIC and raw sockets have no path
// out. There is no DNS in the sandbox, so no DNS exfiltration; clients must
// let the proxy resolve (CONNECT host:port, as curl, pip, git, npm, Go and
// Python do), and tools that insist on resolving locally fail closed.
//
// It does not stop exfiltration through an allowed destination: a gist
// on an allowed github.com, a package upload to an allowed registry, an
// object in a bucket on an allowed cloud domain. The contract author
// chooses the allowlist and with it that risk. Over a granted TLS tunnel
// the proxy sees only the name, not the requests: classic domain fronting
// (SNI of an allowed site, an encrypted Host header naming another site
// served by the same CDN) is not stopped, as in E2B. A port listed in
// Options.Ports that is neither a TLS nor an HTTP port carries any TCP to
// the checked address, unexamined. Bytes per connection are not limited.
//
// The package imports only the standard library and makes no decision of
// its own about which hosts are allowed: that is Options.Allow.
package egress
