package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Resolver looks up the addresses of a host name. *net.Resolver (and so
// net.DefaultResolver) satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configures a Proxy.
type Options struct {
	// Allow decides whether the sandbox may reach host, a host name or IP
	// literal exactly as the client sent it (no port; IPv6 in brackets),
	// and says why not. Required. In production it is the contract's
	// policy: func(h string) (bool, string) { return policy.HostAllowed(c, h) }.
	Allow func(host string) (allowed bool, reason string)
	// Resolver resolves allowed host names; the client's own resolution is
	// never used. If nil, net.DefaultResolver.
	Resolver Resolver
	// Ports are the destination ports the sandbox may reach. If empty, 80
	// and 443.
	Ports []int
	// TLSPorts are the ports on which a CONNECT tunnel must begin with a
	// TLS ClientHello whose server name (SNI) is the CONNECT host. If nil,
	// 443; an empty non-nil slice turns the check off.
	TLSPorts []int
	// HTTPPorts are the ports on which only plain proxied HTTP requests
	// are served, so that every request's Host is checked; CONNECT to them
	// is refused (inside a tunnel a request could name another host on
	// the same server). If nil, 80; an empty non-nil slice allows CONNECT
	// to every allowed port.
	HTTPPorts []int
	// MaxConns is the most client connections served at once; more are
	// answered 503. If zero, 64.
	MaxConns int
	// IdleTimeout closes a connection on which no byte has moved in either
	// direction for this long. If zero, 5 minutes.
	IdleTimeout time.Duration
	// HeaderTimeout bounds the wait for a request's header and, in a TLS
	// tunnel, for the ClientHello. If zero, 10 seconds.
	HeaderTimeout time.Duration
	// ConnectTimeout bounds name resolution plus the connection to the
	// destination. If zero, 10 seconds.
	ConnectTimeout time.Duration
	// MaxHeaderBytes bounds a request's (and a response's) header block.
	// If zero, 32 KiB.
	MaxHeaderBytes int
	// Logger receives one line per decision. If nil, nothing is logged.
	Logger *slog.Logger
	// OnDecision, if set, is called once per request with its decision, for
	// the audit log. It must not block for long.
	OnDecision func(Decision)

	// Dial, if set, opens the connection to a destination the proxy has
	// checked: network is "tcp" and addr the checked address ("ip:port",
	// never a name), after every check of this package. If nil, a
	// net.Dialer. It exists for tests that must reach a loopback server
	// standing in for a public address; production leaves it nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// testDial replaces the network dial, for tests only (export_test.go):
	// the address checks before it stay in force.
	testDial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
}

// Decision is the proxy's verdict on one request.
type Decision struct {
	Time   time.Time
	Client string // the client connection's remote address
	Method string // CONNECT, GET, POST ...
	Host   string // the destination host as the client sent it
	Port   int
	Allow  bool
	// Status is the HTTP status the client was given for a refusal (403,
	// 400, 502 ...), 0 when allowed or when the refusal came after the
	// tunnel was set up (a TLS alert then closes it).
	Status int
	Reason string         // why not; empty when allowed
	Addr   netip.AddrPort // the address connected to, when one was
	SNI    string         // the TLS server name, in TLS tunnels
}

// Proxy is the host side of a sandbox's egress: an HTTP forward proxy that
// decides every connection with Options.Allow and the address checks of
// this package. One Proxy serves one sandbox (one policy).
type Proxy struct {
	opts Options
	log  *slog.Logger

	active atomic.Int64
	// life ends with Close; every connection's context derives from it
	// too, so Close also cancels resolutions and dials in progress.
	life    context.Context
	endLife context.CancelFunc
	mu      sync.Mutex
	closed  bool
	lns     map[net.Listener]struct{}
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup

	selfMu   sync.Mutex
	selfAt   time.Time
	selfAddr map[netip.Addr]bool
}

// New returns a Proxy. It fails if Options.Allow is missing or a port is
// out of range.
func New(opts Options) (*Proxy, error) {
	if opts.Allow == nil {
		return nil, errors.New("egress: new: Options.Allow is required")
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if len(opts.Ports) == 0 {
		opts.Ports = []int{80, 443}
	}
	if opts.TLSPorts == nil {
		opts.TLSPorts = []int{443}
	}
	if opts.HTTPPorts == nil {
		opts.HTTPPorts = []int{80}
	}
	for _, p := range slices.Concat(opts.Ports, opts.TLSPorts, opts.HTTPPorts) {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("egress: new: port %d out of range", p)
		}
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 64
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 5 * time.Minute
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = 10 * time.Second
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = 32 << 10
	}
	if opts.MaxHeaderBytes < 1024 {
		opts.MaxHeaderBytes = 1024
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	life, endLife := context.WithCancel(context.Background())
	return &Proxy{
		opts:    opts,
		log:     log,
		life:    life,
		endLife: endLife,
		lns:     map[net.Listener]struct{}{},
		conns:   map[net.Conn]struct{}{},
	}, nil
}

// Serve accepts connections on ln until ln fails, ctx is done or Close is
// called, and serves each in its own goroutine. It closes ln when it
// returns, and returns nil after Close or ctx's end. Connections it
// accepted end with ctx.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	p.lns[ln] = struct{}{}
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopLife := context.AfterFunc(p.life, cancel)
	defer stopLife()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer func() {
		stop()
		ln.Close()
		p.mu.Lock()
		delete(p.lns, ln)
		p.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.isClosed() || ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				p.log.Warn("egress: accept", "error", err)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("egress: serve: %w", err)
		}
		backoff = 0
		if !p.track(c) {
			c.Close()
			return nil
		}
		n := p.active.Add(1)
		if n > 2*int64(p.opts.MaxConns) { // a flood: not even a 503
			p.active.Add(-1)
			p.untrack(c)
			c.Close()
			p.wg.Done()
			continue
		}
		busy := n > int64(p.opts.MaxConns)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			defer p.active.Add(-1)
			defer c.Close()
			if busy {
				p.refuse(c, http.StatusServiceUnavailable, fmt.Sprintf("too many connections through the sandbox's proxy (limit %d); retry later", p.opts.MaxConns))
				return
			}
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			p.handle(ctx, c)
		}()
	}
}

// Close stops every Serve and ends every connection, and waits for them.
func (p *Proxy) Close() error {
	p.endLife()
	p.mu.Lock()
	p.closed = true
	for ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track registers a connection (its goroutine counted in wg) unless the
// proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// handle serves one client connection: one CONNECT, or one plain HTTP
// request (the connection closes after its response).
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	d := Decision{Client: c.RemoteAddr().String()}
	br := bufio.NewReaderSize(c, p.opts.MaxHeaderBytes)
	_ = c.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
	hdr, err := peekHeader(br)
	if err != nil {
		if errors.Is(err, errHeaderTooLarge) {
			p.deny(c, d, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request header larger than %d bytes", p.opts.MaxHeaderBytes))
		}
		return // a client that sent nothing complete gets nothing
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		p.deny(c, d, http.StatusBadRequest, "malformed request: "+err.Error())
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	d.Method = req.Method
	if req.Method == http.MethodConnect {
		p.connect(ctx, c, br, req, d)
		return
	}
	p.forward(ctx, c, req, hostHeaders(hdr), d)
}

// connect serves CONNECT host:port.
func (p *Proxy) connect(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request, d Decision) {
	host, port, why := splitAuthority(req.RequestURI, 0)
	d.Host, d.Port = printable(req.RequestURI), port
	if why != "" {
		p.deny(c, d, http.StatusBadRequest, "CONNECT target: "+why)
		return
	}
	d.Host = host
	if slices.Contains(p.opts.HTTPPorts, port) {
		p.deny(c, d, http.StatusForbidden, fmt.Sprintf("CONNECT to port %d is refused: send plain http:// requests to the proxy instead (set HTTP_PROXY), so each request's host can be checked", port))
		return
	}
	t, status, why := p.check(host, port)
	if why != "" {
		p.deny(c, d, status, why)
		return
	}
	up, addr, status, why := p.dial(ctx, t)
	if why != "" {
		p.deny(c, d, status, why)
		return
	}
	defer up.Close()
	d.Addr = addr
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var first []byte
	if slices.Contains(p.opts.TLSPorts, port) {
		_ = c.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
		raw, hello, err := readClientHello(br)
		_ = c.SetReadDeadline(time.Time{})
		d.SNI = printable(hello.ServerName)
		var why string
		switch {
		case err != nil:
			why = fmt.Sprintf("port %d takes TLS only: %v", port, err)
		case hello.ECH:
			why = "the TLS ClientHello hides its server name (encrypted ClientHello), so the name cannot be checked"
		case t.name != "" && hello.ServerName == "":
			why = fmt.Sprintf("the TLS ClientHello names no server (no SNI); it must name %s", t.name)
		case t.name == "" && hello.ServerName != "":
			why = fmt.Sprintf("the TLS server name %q does not match the CONNECT address %s", printable(hello.ServerName), t.ip)
		case t.name != "" && !sniMatches(hello.ServerName, t.name):
			why = fmt.Sprintf("the TLS server name %q does not match the CONNECT host %s (domain fronting)", printable(hello.ServerName), t.name)
		}
		if why != "" {
			d.Reason = why
			p.decided(d)
			// The client has its 200: a fatal access_denied alert tells it.
			_, _ = c.Write([]byte{21, 3, 3, 0, 2, 2, 49})
			return
		}
		first = raw
	}
	d.Allow = true
	p.decided(d)
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		first = append(first, b...)
	}
	if len(first) > 0 {
		if _, err := up.Write(first); err != nil {
			return
		}
	}
	splice(c, up, p.opts.IdleTimeout)
}

// forward serves one absolute-form plain HTTP request.
func (p *Proxy) forward(ctx context.Context, c net.Conn, req *http.Request, hostHdr []string, d Decision) {
	u := req.URL
	d.Host = printable(u.Host)
	if u.Host == "" || !u.IsAbs() {
		p.deny(c, d, http.StatusBadRequest, "this is a forward proxy: send CONNECT host:port, or an absolute http:// URL")
		return
	}
	if !strings.EqualFold(u.Scheme, "http") {
		p.deny(c, d, http.StatusBadRequest, fmt.Sprintf("only http:// URLs are forwarded as plain requests; for %s use CONNECT (set HTTPS_PROXY)", printable(u.Scheme)))
		return
	}
	if u.User != nil {
		p.deny(c, d, http.StatusBadRequest, "user information in the URL is not forwarded")
		return
	}
	host, port, why := splitAuthority(u.Host, 80)
	if why != "" {
		p.deny(c, d, http.StatusBadRequest, "URL host: "+why)
		return
	}
	d.Host, d.Port = host, port
	if slices.Contains(p.opts.TLSPorts, port) {
		p.deny(c, d, http.StatusForbidden, fmt.Sprintf("port %d takes TLS only: use https:// (CONNECT)", port))
		return
	}
	if len(hostHdr) > 1 {
		p.deny(c, d, http.StatusBadRequest, "more than one Host header")
		return
	}
	if len(hostHdr) == 1 {
		if !sameAuthority(hostHdr[0], host, port) {
			p.deny(c, d, http.StatusForbidden, fmt.Sprintf("the Host header %q does not match the URL's host %s:%d (domain fronting)", printable(hostHdr[0]), host, port))
			return
		}
	}
	if req.Header.Get("Upgrade") != "" {
		p.deny(c, d, http.StatusForbidden, "protocol upgrades over plain HTTP are not proxied; use https:// (CONNECT)")
		return
	}
	t, status, why := p.check(host, port)
	if why != "" {
		p.deny(c, d, status, why)
		return
	}
	up, addr, status, why := p.dial(ctx, t)
	if why != "" {
		p.deny(c, d, status, why)
		return
	}
	defer up.Close()
	d.Addr = addr
	d.Allow = true
	p.decided(d)

	w := newIdleWatch(p.opts.IdleTimeout, func() { c.Close(); up.Close() })
	defer w.stop()
	ac, aup := &activeConn{Conn: c, w: w}, &activeConn{Conn: up, w: w}

	removeHopHeaders(req.Header)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = nil // keep net/http from adding its own
	}
	req.RequestURI = ""
	req.Host = u.Host
	req.Close = true
	werr := make(chan error, 1)
	go func() {
		bw := bufio.NewWriter(aup)
		err := req.Write(bw)
		if err == nil {
			err = bw.Flush()
		}
		werr <- err
	}()
	ubr := bufio.NewReaderSize(aup, p.opts.MaxHeaderBytes)
	for {
		if _, err := peekHeader(ubr); err != nil {
			p.upstreamFailed(ac, fmt.Sprintf("bad response from %s: %v", t.host(), err))
			return
		}
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			p.upstreamFailed(ac, fmt.Sprintf("bad response from %s: %v", t.host(), err))
			return
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				p.upstreamFailed(ac, "the server switched protocols unasked")
				return
			}
			var b bytes.Buffer
			fmt.Fprintf(&b, "HTTP/1.1 %s\r\n", resp.Status)
			_ = resp.Header.Write(&b)
			b.WriteString("\r\n")
			if _, err := ac.Write(b.Bytes()); err != nil {
				return
			}
			continue
		}
		removeHopHeaders(resp.Header)
		resp.Close = true
		_ = resp.Write(ac)
		resp.Body.Close()
		break
	}
	closeWrite(c)
	select { // let an upload the server did not read end before closing
	case <-werr:
	case <-time.After(time.Second):
	}
}

// check runs the policy and the address checks on a destination before any
// resolution: the port, Allow on the raw host and on its dial form, and
// for an IP literal whether it is public.
func (p *Proxy) check(host string, port int) (target, int, string) {
	if !slices.Contains(p.opts.Ports, port) {
		return target{}, http.StatusForbidden, fmt.Sprintf("port %d is not allowed; allowed ports: %s", port, joinInts(p.opts.Ports))
	}
	if ok, why := p.opts.Allow(host); !ok {
		if why == "" {
			why = "host " + host + " is not allowed"
		}
		return target{}, http.StatusForbidden, why
	}
	name, ip, why := dialForm(host)
	if why != "" {
		return target{}, http.StatusForbidden, why
	}
	t := target{name: name, ip: ip, port: port}
	if canon := t.host(); canon != host {
		if ok, why := p.opts.Allow(canon); !ok {
			return target{}, http.StatusForbidden, fmt.Sprintf("host %q is allowed but its canonical form %s is not: %s", printable(host), canon, why)
		}
	}
	if ip.IsValid() {
		if ok, why := publicAddr(ip); !ok {
			return target{}, http.StatusForbidden, why
		}
	}
	return t, 0, ""
}

// dial resolves t itself, refuses if any address is not public or is this
// machine's own, and connects to the checked addresses (never to the name
// again).
func (p *Proxy) dial(ctx context.Context, t target) (net.Conn, netip.AddrPort, int, string) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ConnectTimeout)
	defer cancel()
	addrs := []netip.Addr{t.ip}
	if t.name != "" {
		got, err := p.opts.Resolver.LookupNetIP(ctx, "ip", t.name+".")
		if err != nil {
			if ctx.Err() != nil {
				return nil, netip.AddrPort{}, http.StatusGatewayTimeout, fmt.Sprintf("resolving %s timed out", t.name)
			}
			return nil, netip.AddrPort{}, http.StatusBadGateway, fmt.Sprintf("cannot resolve %s: %v", t.name, err)
		}
		if len(got) == 0 {
			return nil, netip.AddrPort{}, http.StatusBadGateway, fmt.Sprintf("%s has no addresses", t.name)
		}
		addrs = addrs[:0]
		for _, a := range got {
			a = a.Unmap().WithZone("")
			if ok, why := publicAddr(a); !ok {
				return nil, netip.AddrPort{}, http.StatusForbidden, fmt.Sprintf("%s resolves to a non-public address: %s", t.name, why)
			}
			if !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	for _, a := range addrs {
		if p.isSelf(a) {
			return nil, netip.AddrPort{}, http.StatusForbidden, fmt.Sprintf("address %s belongs to the machine the proxy runs on", a)
		}
	}
	var lastErr error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, uint16(t.port))
		var c net.Conn
		var err error
		switch {
		case p.opts.testDial != nil:
			c, err = p.opts.testDial(ctx, ap)
		case p.opts.Dial != nil:
			c, err = p.opts.Dial(ctx, "tcp", ap.String())
		default:
			var dl net.Dialer
			c, err = dl.DialContext(ctx, "tcp", ap.String())
		}
		if err == nil {
			return c, ap, 0, ""
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return nil, netip.AddrPort{}, http.StatusGatewayTimeout, fmt.Sprintf("connecting to %s:%d timed out", t.host(), t.port)
	}
	return nil, netip.AddrPort{}, http.StatusBadGateway, fmt.Sprintf("cannot connect to %s:%d: %v", t.host(), t.port, lastErr)
}

// isSelf reports whether a is an address of this machine's interfaces
// (refreshed at most every two seconds), so an allowed name pointing at
// the proxy's own host cannot reach services bound to 0.0.0.0 there.
func (p *Proxy) isSelf(a netip.Addr) bool {
	p.selfMu.Lock()
	defer p.selfMu.Unlock()
	if p.selfAddr == nil || time.Since(p.selfAt) > 2*time.Second {
		m := map[netip.Addr]bool{}
		if ifAddrs, err := net.InterfaceAddrs(); err == nil {
			for _, ia := range ifAddrs {
				if pfx, err := netip.ParsePrefix(ia.String()); err == nil {
					m[pfx.Addr().Unmap().WithZone("")] = true
				}
			}
		}
		p.selfAddr, p.selfAt = m, time.Now()
	}
	return p.selfAddr[a]
}

// deny records a refusal and answers it with status and a one-line body.
func (p *Proxy) deny(c net.Conn, d Decision, status int, why string) {
	d.Status, d.Reason = status, why
	p.decided(d)
	p.refuse(c, status, why)
}

// upstreamFailed answers 502 after a request was allowed and sent.
func (p *Proxy) upstreamFailed(c net.Conn, why string) {
	p.log.Info("egress: upstream failed", "error", why)
	p.refuse(c, http.StatusBadGateway, why)
}

// refuse writes a short response, lets the client finish sending, and
// leaves closing to the caller.
func (p *Proxy) refuse(c net.Conn, status int, why string) {
	body := "sandbox egress: " + strings.ReplaceAll(why, "\n", " ") + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	closeWrite(c)
	// Drain what the client already sent, so closing does not reset the
	// connection before the client reads the answer.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 256<<10))
}

func (p *Proxy) decided(d Decision) {
	d.Time = time.Now()
	decision := "deny"
	if d.Allow {
		decision = "allow"
	}
	attrs := []any{"decision", decision, "host", d.Host, "port", d.Port, "method", d.Method, "client", d.Client}
	if d.Reason != "" {
		attrs = append(attrs, "reason", d.Reason)
	}
	if d.Addr.IsValid() {
		attrs = append(attrs, "addr", d.Addr.String())
	}
	if d.SNI != "" {
		attrs = append(attrs, "sni", d.SNI)
	}
	p.log.Info("egress: decision", attrs...)
	if p.opts.OnDecision != nil {
		p.opts.OnDecision(d)
	}
}

var errHeaderTooLarge = errors.New("header too large")

// peekHeader returns the header block at the head of br (request or
// status line through the empty line) without consuming it. A block that
// does not fit br's buffer is errHeaderTooLarge.
func peekHeader(br *bufio.Reader) ([]byte, error) {
	from := 0
	var err error
	for {
		b, _ := br.Peek(br.Buffered())
		if i := headerEnd(b, from); i >= 0 {
			return b[:i], nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) >= br.Size() {
			return nil, errHeaderTooLarge
		}
		from = max(0, len(b)-2)
		_, err = br.Peek(len(b) + 1) // waits for more
	}
}

// headerEnd returns the index just past the empty line that ends a header
// block in b, searching from from, or -1.
func headerEnd(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

// hostHeaders returns the Host header values of a header block.
func hostHeaders(hdr []byte) []string {
	i := bytes.IndexByte(hdr, '\n')
	if i < 0 {
		return nil
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(hdr[i+1:])))
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil
	}
	return h.Values("Host")
}

// sameAuthority reports whether a Host header names host:port (port 80
// when it names none), both in dial form.
func sameAuthority(hostHdr, host string, port int) bool {
	hh, hp, why := splitAuthority(hostHdr, 80)
	if why != "" || hp != port {
		return false
	}
	n1, ip1, w1 := dialForm(hh)
	n2, ip2, w2 := dialForm(host)
	return w1 == "" && w2 == "" && n1 == n2 && ip1 == ip2
}

// hopHeaders are connection-level headers a proxy must not forward.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
