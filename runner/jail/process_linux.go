package jail

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is one command running in a sandbox, in its own pid namespace:
// when the command ends, everything it left running in the background ends
// with it.
type Process struct {
	s      *Sandbox
	pid    int      // host pid of the command's jail init
	pidfd  *os.File // pidfd of that init: signals cannot hit a reused pid
	pidMu  sync.Mutex
	killed bool // we sent the init SIGKILL (under pidMu)
	stdout *os.File
	stderr *os.File
	stdin  *os.File // nil unless Cmd.Stdin
	ctl    *os.File // signal requests to the jail's init
	ctlMu  sync.Mutex

	done   chan struct{}
	status ExitStatus
	err    error
}

// maxCommandBytes bounds a command's path, arguments and environment
// together (one message to the namespace holder; Linux's own ARG_MAX is
// about 2 MiB).
const maxCommandBytes = 128 << 10

// initMsg is what the jail's init reports on its status pipe.
type initMsg struct {
	Started bool   `json:"started,omitempty"`
	Error   string `json:"error,omitempty"`
	Exited  bool   `json:"exited,omitempty"`
	Code    int    `json:"code,omitempty"`
	Signal  string `json:"signal,omitempty"`
}

// Start runs c in the sandbox as the unprivileged user. ctx bounds only the
// start; the command lives until it exits, Signal kills it or the sandbox
// closes.
func (s *Sandbox) Start(ctx context.Context, c Cmd) (*Process, error) {
	if c.Path == "" {
		return nil, errors.New("jail: start: Cmd.Path is empty")
	}
	s.mu.Lock()
	closed, paused, running := s.closed, s.paused, len(s.procs)
	s.mu.Unlock()
	if closed {
		return nil, errors.New("jail: start: sandbox is closed")
	}
	if paused {
		return nil, errors.New("jail: start: sandbox is paused; Resume it first")
	}
	if running >= s.limits.Processes {
		return nil, fmt.Errorf("jail: start: %d commands are already running, the sandbox's process limit", running)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := initConfig{
		Hostname:  s.hostname,
		Network:   s.network,
		Limits:    s.limits,
		NprocRlim: s.cg == nil || !s.cg.pids,
		DataRlim:  s.cg == nil || !s.cg.memory,
		Path:      c.Path,
		Args:      c.Args,
		Env:       commandEnv(c.Env),
		Dir:       c.Dir,
	}
	if cfg.Dir == "" {
		cfg.Dir = HomeDir
	} else if !path.IsAbs(cfg.Dir) {
		cfg.Dir = path.Join(HomeDir, cfg.Dir)
	}
	size := len(cfg.Path) + len(cfg.Dir)
	for _, a := range cfg.Args {
		size += len(a) + 1
	}
	for _, e := range cfg.Env {
		size += len(e) + 1
	}
	if size > maxCommandBytes {
		return nil, fmt.Errorf("jail: start: arguments and environment take %d bytes; the most is %d", size, maxCommandBytes)
	}
	p, err := s.spawn(ctx, cfg, c.Stdin)
	if err != nil {
		s.logger.Warn("jail: start failed", "path", c.Path, "error", err)
		return nil, err
	}
	return p, nil
}

func (s *Sandbox) spawn(ctx context.Context, cfg initConfig, wantStdin bool) (p *Process, err error) {
	var closers []*os.File // child ends: closed when spawn returns
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	var parentEnds []*os.File // ours: closed only on failure
	defer func() {
		if err != nil {
			for _, f := range parentEnds {
				f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("jail: start: %w", err)
		}
		return r, w, nil
	}
	p = &Process{s: s, done: make(chan struct{})}
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	closers, parentEnds = append(closers, outW), append(parentEnds, outR)
	errR, errW, err := pipe()
	if err != nil {
		return nil, err
	}
	closers, parentEnds = append(closers, errW), append(parentEnds, errR)
	var stdin *os.File
	if wantStdin {
		inR, inW, err := pipe()
		if err != nil {
			return nil, err
		}
		closers, parentEnds = append(closers, inR), append(parentEnds, inW)
		stdin, p.stdin = inR, inW
	} else {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return nil, fmt.Errorf("jail: start: %w", err)
		}
		closers = append(closers, devnull)
		stdin = devnull
	}
	stR, stW, err := pipe()
	if err != nil {
		return nil, err
	}
	closers, parentEnds = append(closers, stW), append(parentEnds, stR)
	ctlR, ctlW, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("jail: start: %w", err)
	}
	closers, parentEnds = append(closers, ctlR), append(parentEnds, ctlW)
	p.stdout, p.stderr, p.ctl = outR, errR, ctlW

	pid, pidfd, err := s.zygote.spawn(cfg, []*os.File{stdin, outW, errW, stW, ctlR})
	if err != nil {
		return nil, err
	}
	p.pid, p.pidfd = pid, pidfd
	parentEnds = append(parentEnds, pidfd)
	for _, f := range closers {
		f.Close()
	}
	closers = nil

	status := bufio.NewReader(stR)
	first := make(chan initMsg, 1)
	go func() {
		var m initMsg
		line, err := status.ReadBytes('\n')
		if err != nil || json.Unmarshal(line, &m) != nil {
			m = initMsg{Error: "the jail's init ended before starting the command (is the sandbox at its process or memory limit?)"}
		}
		first <- m
	}()
	select {
	case m := <-first:
		if !m.Started {
			_ = p.kill()
			p.waitExit()
			return nil, fmt.Errorf("jail: start %s: %s", cfg.Path, m.Error)
		}
	case <-ctx.Done():
		_ = p.kill()
		p.waitExit()
		return nil, ctx.Err()
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = p.kill()
		p.waitExit()
		return nil, errors.New("jail: start: sandbox is closed")
	}
	s.procs[p] = struct{}{}
	s.mu.Unlock()
	go p.reap(status, stR)
	return p, nil
}

// waitExit blocks until the jail's init has exited, which the kernel only
// lets happen after every other process of its pid namespace is gone. Only
// the goroutine that will close the pidfd calls it.
func (p *Process) waitExit() {
	fds := []unix.PollFd{{Fd: int32(p.pidfd.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err != unix.EINTR {
			return
		}
	}
}

// reap waits for the jail's init to end and records how the command ended.
func (p *Process) reap(status *bufio.Reader, stR *os.File) {
	var final *initMsg
	for {
		line, err := status.ReadBytes('\n')
		if len(line) > 0 {
			var m initMsg
			if json.Unmarshal(line, &m) == nil && m.Exited {
				final = &m
			}
		}
		if err != nil {
			break
		}
	}
	stR.Close()
	p.waitExit()
	if final != nil {
		p.status = statusOf(final.Code, final.Signal)
	} else {
		// Only SIGKILL ends the init without a report: from Signal or
		// Close, or from outside (the OOM killer, the end of the sandbox's
		// namespace holder), which the error reports.
		p.status = statusOf(-1, "killed")
		p.pidMu.Lock()
		killed := p.killed
		p.pidMu.Unlock()
		if !killed {
			p.err = errors.New("jail: the command's jail was killed from outside (the OOM killer, or the sandbox's namespace holder ended)")
		}
	}
	p.ctlMu.Lock()
	p.ctl.Close()
	p.ctl = nil
	p.ctlMu.Unlock()
	p.pidMu.Lock()
	p.pidfd.Close()
	p.pidfd = nil
	p.pidMu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
	}
	p.s.mu.Lock()
	delete(p.s.procs, p)
	p.s.mu.Unlock()
	close(p.done)
}

// Pid is the host pid of the jail's init for this command: unique while the
// command runs.
func (p *Process) Pid() int { return p.pid }

// Stdout is the command's standard output. Read it to the end (EOF comes
// when the command's whole tree has ended; the pipe is closed then); an
// unread pipe stalls the command once its buffer is full.
func (p *Process) Stdout() io.Reader { return closeAtEOF{p.stdout} }

// Stderr is the command's standard error; see Stdout.
func (p *Process) Stderr() io.Reader { return closeAtEOF{p.stderr} }

// closeAtEOF closes the pipe once it has been read to the end, so callers
// that read output to EOF leak no descriptor.
type closeAtEOF struct{ f *os.File }

func (c closeAtEOF) Read(b []byte) (int, error) {
	n, err := c.f.Read(b)
	if err == io.EOF {
		c.f.Close()
	}
	if errors.Is(err, os.ErrClosed) {
		err = io.EOF
	}
	return n, err
}

// Stdin is a pipe to the command's standard input, or nil if Cmd.Stdin was
// false. Close it to send EOF.
func (p *Process) Stdin() io.WriteCloser {
	if p.stdin == nil {
		return nil
	}
	return p.stdin
}

// Signal sends sig to every process of this command's tree. SIGKILL ends
// the tree at once, background and daemonised processes included.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return errors.New("jail: signal: process already finished")
	default:
	}
	if sig == syscall.SIGKILL {
		return p.kill()
	}
	return p.forward(sig)
}

// kill ends the jail's init, which takes its pid namespace down with it.
func (p *Process) kill() error {
	p.pidMu.Lock()
	defer p.pidMu.Unlock()
	if p.pidfd == nil { // reaped already
		return nil
	}
	p.killed = true
	err := unix.PidfdSendSignal(int(p.pidfd.Fd()), unix.SIGKILL, nil, 0)
	if err != nil && err != unix.ESRCH {
		return fmt.Errorf("jail: kill: %w", err)
	}
	return nil
}

// forward asks the jail's init to send sig to every process in its pid
// namespace.
func (p *Process) forward(sig syscall.Signal) error {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	if p.ctl == nil {
		return errors.New("jail: signal: process already finished")
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(sig))
	_ = p.ctl.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := p.ctl.Write(b[:]); err != nil {
		return fmt.Errorf("jail: signal: %w", err)
	}
	// The init answers once kill(2) has returned: the signal is delivered
	// when Signal returns.
	if _, err := io.ReadFull(p.ctl, b[:1]); err != nil {
		return fmt.Errorf("jail: signal: no answer from the jail's init: %w", err)
	}
	return nil
}

// Wait waits for the command to end and returns how it ended. The error is
// for failures of the jail itself, not for a non-zero exit.
func (p *Process) Wait() (ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

// socketPair returns two connected unix stream sockets: the init's end
// (blocking, inherited) and the server's (non-blocking, with deadlines).
func socketPair() (child, parent *os.File, err error) {
	return socketPairType(unix.SOCK_STREAM)
}

func socketPairType(typ int) (child, parent *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(fds[1], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "jail-control"), os.NewFile(uintptr(fds[1]), "jail-control"), nil
}

// startOnOwnThread starts cmd from a dedicated OS thread whose working
// directory is dirFD, so the child starts there, and keeps that thread alive
// until release is closed: Pdeathsig fires when the thread that forked the
// child ends, and the thread's private working directory must never serve
// another goroutine (the locked thread is discarded when its goroutine
// returns).
func startOnOwnThread(cmd *exec.Cmd, dirFD int, release <-chan struct{}) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare fs: %w", err)
			return
		}
		if err := unix.Fchdir(dirFD); err != nil {
			errc <- fmt.Errorf("chdir to sandbox dir: %w", err)
			return
		}
		if err := cmd.Start(); err != nil {
			errc <- err
			return
		}
		errc <- nil
		<-release
	}()
	return <-errc
}
