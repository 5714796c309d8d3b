package mac

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

var _ tools.MacRunner = (*Runner)(nil)

// Options configure New.
type Options struct {
	// Target is the Mac's SSH server as user@host:port (contract
	// mac.runner.ssh). Required.
	Target string
	// HostKey is the pinned host-key fingerprint, "SHA256:..." (contract
	// mac.runner.host_key). Required.
	HostKey string
	// Signer is the client key the runner logs in with; it comes from the
	// server's configuration, never from the agent. Required.
	Signer ssh.Signer
	// BaseDir is the directory on the Mac that holds workspaces, relative to
	// the runner user's home unless absolute. If empty, ".sandbox-mcp/work".
	BaseDir string
	// DialTimeout bounds one TCP connect plus SSH handshake. If zero, 15s.
	DialTimeout time.Duration
	// CommandTimeout bounds one short remote command (not a step, not an
	// upload or download). If zero, 60s.
	CommandTimeout time.Duration
	// PollInterval is the time between two reads of a running step's log.
	// If zero, 500ms.
	PollInterval time.Duration
	// ReconnectFor is how long a lost connection is re-dialled before the
	// runner gives up on a step (the step keeps its timeout). If zero, 2m.
	ReconnectFor time.Duration
	// WatchdogGrace is how long after a step's timeout the Mac kills the
	// step's process group by itself, in case the server is gone by then.
	// If zero, 1m.
	WatchdogGrace time.Duration
	// Dial opens the TCP connection. If nil, a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives diagnostics. If nil, discarded.
	Logger *slog.Logger
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

// Runner reaches one Mac. It is safe for concurrent use; it dials lazily,
// so New makes no connection.
type Runner struct {
	o    Options
	user string
	addr string
	log  *slog.Logger

	mu     sync.Mutex
	client *ssh.Client
	algos  []string // host-key algorithms of the pinned key, once found
}

var targetRE = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})@(.+):([0-9]{1,5})$`)

// ParseTarget splits user@host:port (host may be a [bracketed] IPv6
// address) into the user and a dialable host:port.
func ParseTarget(target string) (user, addr string, err error) {
	m := targetRE.FindStringSubmatch(target)
	if m == nil {
		return "", "", fmt.Errorf("mac: runner %q: want user@host:port", target)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(m[2], "["), "]")
	if host == "" || strings.ContainsAny(host, "@/ \t") {
		return "", "", fmt.Errorf("mac: runner %q: bad host", target)
	}
	return m[1], net.JoinHostPort(host, m[3]), nil
}

var fingerprintRE = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)

// New returns a runner for the Mac at o.Target. It does not connect.
func New(o Options) (*Runner, error) {
	user, addr, err := ParseTarget(o.Target)
	if err != nil {
		return nil, err
	}
	if !fingerprintRE.MatchString(o.HostKey) {
		return nil, fmt.Errorf("mac: host key %q: want SHA256:<43 base64 characters> as printed by ssh-keygen -lf", o.HostKey)
	}
	if o.Signer == nil {
		return nil, errors.New("mac: no client key: the server needs the runner's SSH private key (serve --mac-key FILE)")
	}
	if o.BaseDir == "" {
		o.BaseDir = ".sandbox-mcp/work"
	}
	if strings.ContainsAny(o.BaseDir, "\x00\n") {
		return nil, fmt.Errorf("mac: base directory %q", o.BaseDir)
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 15 * time.Second
	}
	if o.CommandTimeout == 0 {
		o.CommandTimeout = 60 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = 500 * time.Millisecond
	}
	if o.ReconnectFor == 0 {
		o.ReconnectFor = 2 * time.Minute
	}
	if o.WatchdogGrace == 0 {
		o.WatchdogGrace = time.Minute
	}
	if o.Dial == nil {
		d := &net.Dialer{}
		o.Dial = d.DialContext
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Runner{o: o, user: user, addr: addr, log: o.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.log = r.log.With("runner", o.Target)
	return r, nil
}

// KeyFingerprint returns the SHA256 fingerprint of the client key.
func (r *Runner) KeyFingerprint() string { return ssh.FingerprintSHA256(r.o.Signer.PublicKey()) }

// HostKey returns the pinned host-key fingerprint.
func (r *Runner) HostKey() string { return r.o.HostKey }

// Close drops the connection, if any.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == nil {
		return nil
	}
	err := r.client.Close()
	r.client = nil
	return err
}

// hostKeyGroups are tried in order until the Mac offers a key with the
// pinned fingerprint; from then on only that group is accepted.
var hostKeyGroups = [][]string{
	{ssh.KeyAlgoED25519},
	{ssh.KeyAlgoECDSA256},
	{ssh.KeyAlgoECDSA384},
	{ssh.KeyAlgoECDSA521},
	{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256},
}

// conn returns the live client, dialling if there is none.
func (r *Runner) conn(ctx context.Context) (*ssh.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return r.client, nil
	}
	groups := hostKeyGroups
	if r.algos != nil {
		groups = [][]string{r.algos}
	}
	var seen []string
	for _, algos := range groups {
		c, got, err := r.dial(ctx, algos)
		if err == nil {
			r.client, r.algos = c, algos
			return c, nil
		}
		if got != "" {
			seen = append(seen, got)
			continue // this type's key is not the pinned one; try another type
		}
		if isNoCommonAlgo(err) {
			continue
		}
		return nil, err
	}
	if len(seen) > 0 {
		return nil, fmt.Errorf("mac: connect %s: %w: pinned %s, the server offered %s", r.addr, tools.ErrMacHostKey, r.o.HostKey, strings.Join(seen, ", "))
	}
	return nil, fmt.Errorf("mac: connect %s: %w: pinned %s, the server offered no key of a supported type", r.addr, tools.ErrMacHostKey, r.o.HostKey)
}

func isNoCommonAlgo(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no common algorithm for host key")
}

// dial opens one SSH connection accepting only the given host-key
// algorithms and the pinned key. When the server's key of that type has
// another fingerprint, got names it and err is set.
func (r *Runner) dial(ctx context.Context, algos []string) (c *ssh.Client, got string, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.DialTimeout)
	defer cancel()
	nc, err := r.o.Dial(ctx, "tcp", r.addr)
	if err != nil {
		return nil, "", fmt.Errorf("mac: connect %s: %w", r.addr, err)
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	cfg := &ssh.ClientConfig{
		User: r.user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(r.o.Signer)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			fp := ssh.FingerprintSHA256(key)
			if fp != r.o.HostKey {
				got = key.Type() + " " + fp
				return tools.ErrMacHostKey
			}
			return nil
		},
		HostKeyAlgorithms: algos,
		Timeout:           r.o.DialTimeout,
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, r.addr, cfg)
	if err != nil {
		nc.Close()
		if ctx.Err() != nil && got == "" {
			return nil, "", fmt.Errorf("mac: connect %s: handshake: %w", r.addr, ctx.Err())
		}
		return nil, got, fmt.Errorf("mac: connect %s: %w", r.addr, err)
	}
	r.log.Debug("connected", "host_key_algorithms", strings.Join(algos, ","))
	return ssh.NewClient(sc, chans, reqs), "", nil
}

// drop forgets c if it is still the current client, so the next call
// re-dials.
func (r *Runner) drop(c *ssh.Client) {
	r.mu.Lock()
	if r.client == c {
		r.client = nil
	}
	r.mu.Unlock()
	c.Close()
}

// exitError is a remote command that ran and exited non-zero.
type exitError struct {
	code   int
	stderr string
}

func (e *exitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if len(msg) > 2000 {
		msg = msg[:2000] + "..."
	}
	if msg == "" {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return fmt.Sprintf("exit status %d: %s", e.code, msg)
}

// errConnection marks a failure of the transport (not of the command), after
// which the command may be retried on a new connection if it is idempotent.
var errConnection = errors.New("connection lost")

// exec runs cmd on the Mac with stdin (may be nil) and returns its stdout.
// If out is non-nil stdout goes there instead. timeout bounds the whole
// command (0: CommandTimeout); on expiry the connection is closed, which
// ends the session.
func (r *Runner) exec(ctx context.Context, cmd string, stdin io.Reader, out io.Writer, timeout time.Duration) ([]byte, error) {
	if timeout == 0 {
		timeout = r.o.CommandTimeout
	}
	c, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := c.NewSession()
	if err != nil {
		r.drop(c)
		return nil, fmt.Errorf("mac: new session: %w: %v", errConnection, err)
	}
	defer sess.Close()
	var stdout bytes.Buffer
	var stderr limitedBuffer
	stderr.max = 8 << 10
	if out == nil {
		out = &stdout
	}
	sess.Stdin, sess.Stdout, sess.Stderr = stdin, out, &stderr
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { r.drop(c) })
	defer stop()
	err = sess.Run(cmd)
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), nil
	case errors.As(err, &ee):
		return stdout.Bytes(), &exitError{code: ee.ExitStatus(), stderr: stderr.String()}
	case ctx.Err() != nil:
		return nil, fmt.Errorf("mac: remote command: %w: %v", errConnection, ctx.Err())
	default:
		r.drop(c)
		return nil, fmt.Errorf("mac: remote command: %w: %v", errConnection, err)
	}
}

// execRetry runs an idempotent command, re-dialling after a lost
// connection until ReconnectFor has passed. It reports how many times it
// reconnected.
func (r *Runner) execRetry(ctx context.Context, cmd string, timeout time.Duration) ([]byte, int, error) {
	deadline := r.o.Now().Add(r.o.ReconnectFor)
	reconnects := 0
	backoff := 200 * time.Millisecond
	for {
		out, err := r.exec(ctx, cmd, nil, nil, timeout)
		if err == nil || !errors.Is(err, errConnection) && !isDialError(err) {
			return out, reconnects, err
		}
		if ctx.Err() != nil || r.o.Now().After(deadline) {
			return nil, reconnects, err
		}
		r.log.Warn("connection lost; reconnecting", "error", err)
		select {
		case <-ctx.Done():
			return nil, reconnects, ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
		reconnects++
	}
}

// isDialError: connecting failed for a reason other than the host key
// (which retrying cannot fix).
func isDialError(err error) bool {
	return err != nil && !errors.Is(err, tools.ErrMacHostKey) && strings.HasPrefix(err.Error(), "mac: connect ")
}

type limitedBuffer struct {
	b   bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		if len(p) > room {
			l.b.Write(p[:room])
		} else {
			l.b.Write(p)
		}
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return l.b.String() }

// quote single-quotes s for a POSIX shell.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// quoteArgv quotes every argument and joins them with spaces.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}
