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
	cmd    *exec.Cmd
	stdout *os.File
	stderr *os.File
	stdin  *os.File // nil unless Cmd.Stdin
	ctl    *os.File // signal requests to the jail's init
	ctlMu  sync.Mutex

	exited chan struct{} // closed once the init is reaped; frees its thread
	done   chan struct{}
	status ExitStatus
	err    error
}

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
	if running >= s.limits.Processes {
		return nil, fmt.Errorf("jail: start: %d commands are already running, the sandbox's process limit", running)
	}
	if closed {
		return nil, errors.New("jail: start: sandbox is closed")
	}
	if paused {
		return nil, errors.New("jail: start: sandbox is paused; Resume it first")
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
	}
	p, err := s.spawn(ctx, cfg, c.Stdin)
	if err != nil {
		s.logger.Warn("jail: start failed", "path", c.Path, "error", err)
		return nil, err
	}
	return p, nil
}

func (s *Sandbox) spawn(ctx context.Context, cfg initConfig, wantStdin bool) (p *Process, err error) {
	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
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
	// Child ends are closed when spawn returns; parent ends on failure.
	var parentEnds []*os.File
	defer func() {
		if err != nil {
			for _, f := range parentEnds {
				f.Close()
			}
		}
	}()
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
	cfgR, cfgW, err := pipe()
	if err != nil {
		return nil, err
	}
	closers = append(closers, cfgR, cfgW)
	stR, stW, err := pipe()
	if err != nil {
		return nil, err
	}
	closers = append(closers, stR, stW)
	ctlR, ctlW, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("jail: start: %w", err)
	}
	closers, parentEnds = append(closers, ctlR), append(parentEnds, ctlW)
	// The jail's init starts with Dir as its working directory and binds
	// ./home and ./tmp from there: a descriptor of the host's mount namespace
	// cannot be bound in the new one, and the path to Dir may not be
	// searchable by the sandbox's host uid.
	dirFD, err := os.OpenFile(s.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("jail: start: %w", err)
	}
	closers = append(closers, dirFD)
	flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if s.network == NetworkNone {
		flags |= syscall.CLONE_NEWNET
	}
	attr := &syscall.SysProcAttr{
		Cloneflags:  flags,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.hostUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.hostGID, Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
		Setsid:      true,
	}
	if s.asRoot {
		// Drop the server's supplementary groups (root's include gid 0).
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"sandbox-mcp-jail-init"},
		Env:         stageEnvFor(stageInit),
		Stdin:       stdin,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{cfgR, stW, ctlR}, // fds 3..5
		SysProcAttr: attr,
	}
	p.exited = make(chan struct{})
	if err := startOnOwnThread(cmd, int(dirFD.Fd()), p.exited); err != nil {
		return nil, fmt.Errorf("jail: start: %w", err)
	}
	p.cmd = cmd
	p.stdout, p.stderr, p.ctl = outR, errR, ctlW
	// From here on the child exists: on failure, kill and reap it.
	fail := func(err error) (*Process, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		close(p.exited)
		return nil, err
	}
	// Close our copies of the child's ends so pipes see EOF when it dies.
	for _, f := range []*os.File{outW, errW, stW, cfgR, ctlR} {
		f.Close()
	}
	// The init builds the root from the config while we attach it to the
	// cgroups; it starts nothing before our go-ahead on the control socket.
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		return fail(fmt.Errorf("jail: start: send config: %w", err))
	}
	cfgW.Close()
	if s.cg != nil {
		if err := s.cg.attach(cmd.Process.Pid); err != nil {
			return fail(err)
		}
	}
	_ = ctlW.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := ctlW.Write([]byte{'g'}); err != nil {
		// The init failed early; its status line says why.
		s.logger.Debug("jail: init did not take the go-ahead", "error", err)
	}

	status := bufio.NewReader(stR)
	first := make(chan initMsg, 1)
	go func() {
		var m initMsg
		line, err := status.ReadBytes('\n')
		if err != nil || json.Unmarshal(line, &m) != nil {
			m = initMsg{Error: "the jail's init ended before starting the command"}
		}
		first <- m
	}()
	select {
	case m := <-first:
		if !m.Started {
			werr := cmd.Wait()
			close(p.exited)
			msg := m.Error
			if msg == "" {
				msg = "unknown failure"
			}
			if werr != nil && m.Error == "" {
				msg += " (" + werr.Error() + ")"
			}
			p.stdout.Close()
			p.stderr.Close()
			return nil, fmt.Errorf("jail: start %s: %s", cfg.Path, msg)
		}
	case <-ctx.Done():
		return fail(ctx.Err())
	}

	// stR must outlive spawn: take it off the closers list.
	for i, f := range closers {
		if f == stR {
			closers[i] = nil
		}
	}
	closers = compact(closers)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fail(errors.New("jail: start: sandbox is closed"))
	}
	s.procs[p] = struct{}{}
	s.mu.Unlock()
	go p.reap(status, stR)
	return p, nil
}

func compact(fs []*os.File) []*os.File {
	out := fs[:0]
	for _, f := range fs {
		if f != nil {
			out = append(out, f)
		}
	}
	return out
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
	werr := p.cmd.Wait()
	close(p.exited)
	switch {
	case final != nil:
		p.status = statusOf(final.Code, final.Signal)
	default:
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.status = statusOf(-1, signalName(ws.Signal()))
				break
			}
		}
		p.status = statusOf(-1, "killed")
		if werr != nil && !errors.As(werr, &ee) {
			p.err = fmt.Errorf("jail: wait: %w", werr)
		}
	}
	p.ctlMu.Lock()
	p.ctl.Close()
	p.ctl = nil
	p.ctlMu.Unlock()
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
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdout is the command's standard output. Read it to the end (EOF comes
// when the command's whole tree has ended); an unread pipe stalls the
// command once its buffer is full.
func (p *Process) Stdout() io.Reader { return p.stdout }

// Stderr is the command's standard error; see Stdout.
func (p *Process) Stderr() io.Reader { return p.stderr }

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
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
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

// socketPair returns two connected unix stream sockets: the init's end
// (blocking, inherited) and the server's (non-blocking, with deadlines).
func socketPair() (child, parent *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
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

// Wait waits for the command to end and returns how it ended. The error is
// for failures of the jail itself, not for a non-zero exit.
func (p *Process) Wait() (ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

// signalName names a signal the way os/exec's ProcessState does.
func signalName(sig syscall.Signal) string { return sig.String() }

// startOnOwnThread starts cmd from a dedicated OS thread whose working
// directory is dirFD, so the child starts there, and keeps that thread alive
// until exited is closed: Pdeathsig fires when the thread that forked the
// child ends, and the thread's private working directory must never serve
// another goroutine (the locked thread is discarded when its goroutine
// returns).
func startOnOwnThread(cmd *exec.Cmd, dirFD int, exited <-chan struct{}) error {
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
		<-exited
	}()
	return <-errc
}
