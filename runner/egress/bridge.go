package egress

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// SandboxAddr is where programs inside a sandbox reach the proxy: a TCP
// listener on the loopback of the sandbox's own (otherwise empty) network
// namespace.
const SandboxAddr = "127.0.0.1:3128"

// SandboxEnv returns the environment entries that send a sandbox's programs
// through the proxy listening at addr inside the sandbox (SandboxAddr), to
// be set after (over) anything else in a command's environment:
//
//   - HTTP_PROXY, HTTPS_PROXY and their lower-case twins: curl reads
//     http_proxy (lower case only) and HTTPS_PROXY/https_proxy; pip,
//     requests, urllib, git (via libcurl), npm, yarn, cargo, Go and wget
//     read one of the forms. https:// goes through CONNECT host:443, so the
//     client never resolves the name itself (the sandbox has no DNS).
//   - NO_PROXY/no_proxy = localhost,127.0.0.1,::1: the sandbox's own
//     loopback (servers a command started) stays direct; it is the
//     sandbox's, not the host's.
//   - NODE_USE_ENV_PROXY=1: Node.js 24+ then honours the variables in its
//     built-in fetch and http clients, which otherwise ignore them.
//
// ALL_PROXY is left unset: every other protocol (ssh://, git://, ftp://,
// raw sockets, UDP and QUIC) has no route out and fails at once, which is
// the intent. A program that ignores these variables gets no network.
func SandboxEnv(addr string) []string {
	u := "http://" + addr
	noProxy := "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + u, "http_proxy=" + u,
		"HTTPS_PROXY=" + u, "https_proxy=" + u,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
		"NODE_USE_ENV_PROXY=1",
	}
}

// bridgeMaxConns bounds the connections one Bridge carries at once; the
// proxy's own (smaller) limit answers the excess with a 503 first.
const bridgeMaxConns = 256

// Bridge carries the sandbox's proxy connections out of its network
// namespace. It accepts connections on ln — a TCP listener on SandboxAddr
// opened by a process inside the sandbox's network namespace — and, for
// each, opens a connection to the host-side Proxy with dial (in
// production a unix socket, which is reachable by path across network
// namespaces, see UnixDialer) and copies bytes both ways, half-closes
// included, until both directions end. It makes no decision: the Proxy
// decides everything. Bridge returns nil when ctx ends or ln is closed
// (closing ln and every carried connection), or an accept error.
func Bridge(ctx context.Context, ln net.Listener, dial func(context.Context) (net.Conn, error)) error {
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
		wg     sync.WaitGroup
		closed bool
	)
	shut := func() {
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		ln.Close()
	}
	stop := context.AfterFunc(ctx, shut)
	defer func() {
		stop()
		shut()
		wg.Wait()
	}()
	track := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return false
		}
		for _, c := range cs {
			conns[c] = struct{}{}
		}
		return true
	}
	untrack := func(cs ...net.Conn) {
		mu.Lock()
		for _, c := range cs {
			delete(conns, c)
		}
		mu.Unlock()
	}
	sem := make(chan struct{}, bridgeMaxConns)
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		select {
		case sem <- struct{}{}:
		default:
			c.Close() // over the limit
			continue
		}
		if !track(c) {
			c.Close()
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer untrack(c)
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			up, err := dial(dctx)
			cancel()
			if err != nil {
				c.Close()
				return
			}
			if !track(up) {
				up.Close()
				c.Close()
				return
			}
			defer untrack(up)
			splice(c, up, 0) // the proxy enforces idleness
		}()
	}
}

// UnixDialer returns a dial function for Bridge that connects to the unix
// socket at path. A relative path is resolved against the calling
// process's working directory at each dial.
func UnixDialer(path string) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
}
