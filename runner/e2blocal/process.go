package e2blocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process/processconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
	"github.com/sandbox-mcp/sandbox-mcp/runner/jail"
)

const (
	chunkSize         = 32 << 10         // largest data event, as envd sends
	defaultKeepalive  = 90 * time.Second // envd's keepalive when the header is absent
	drainGrace        = 200 * time.Millisecond
	maxProcesses      = 256 // tracked processes per sandbox
	maxCommandBytes   = 1 << 20
	stdinWriteTimeout = 30 * time.Second
	defaultSandboxEnv = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// processService implements envd's process.Process. Update (PTY resize) and
// StreamInput (client-streamed stdin) are not implemented: PTYs do not exist
// in the local sandbox, and SendInput covers stdin.
type processService struct {
	s *Server
}

var _ processconnect.ProcessHandler = processService{}

// processTable holds a sandbox's running processes.
type processTable struct {
	sb     *sandbox
	mu     sync.Mutex
	procs  map[uint32]*proc
	closed bool
}

func newProcessTable(sb *sandbox) *processTable {
	return &processTable{sb: sb, procs: map[uint32]*proc{}}
}

// proc is one process started through envd, with the streams attached to it.
type proc struct {
	pid    uint32
	tag    *string
	config *process.ProcessConfig
	jp     *jail.Process
	stdin  io.WriteCloser // nil when started without stdin

	stdinMu sync.Mutex

	mu    sync.Mutex
	subs  map[*subscriber]struct{}
	ended bool
	timer *time.Timer // the command deadline
}

// subscriber is one stream attached to a process. The pump blocks on a
// subscriber until it takes the event or leaves, which gives the process
// back-pressure from a slow client.
type subscriber struct {
	ch   chan *process.ProcessEvent
	gone chan struct{}
	once sync.Once
}

func (s *subscriber) leave() { s.once.Do(func() { close(s.gone) }) }

// proxyVars are the environment variables that steer programs' proxies.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "NODE_USE_ENV_PROXY"}

func isProxyVar(k string) bool {
	return slices.ContainsFunc(proxyVars, func(v string) bool { return strings.EqualFold(k, v) })
}

// start launches a process and attaches its first subscriber before any
// output can be produced.
func (t *processTable) start(ctx context.Context, cfg *process.ProcessConfig, tag *string, stdin bool, deadline time.Time) (*proc, *subscriber, error) {
	sb := t.sb
	// envd's order: the user's basics, then the sandbox's variables, then
	// the request's; a later layer replaces a name, never duplicates it.
	merged := map[string]string{
		"PATH":    defaultSandboxEnv,
		"HOME":    homeDir,
		"USER":    sandboxUser,
		"LOGNAME": sandboxUser,
	}
	maps.Copy(merged, sb.spec.envVars)
	maps.Copy(merged, cfg.GetEnvs())
	if len(sb.spec.allowOut) > 0 {
		// An allowlist sandbox's one way out is its egress proxy: its
		// settings replace any the caller sent (a program that ignores them
		// has no network at all).
		for k := range merged {
			if isProxyVar(k) {
				delete(merged, k)
			}
		}
		for _, kv := range egress.SandboxEnv(egress.SandboxAddr) {
			k, v, _ := strings.Cut(kv, "=")
			merged[k] = v
		}
	}
	env := make([]string, 0, len(merged))
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		env = append(env, k+"="+merged[k])
	}
	dir := homeDir
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		dir = sandboxPath(*cfg.Cwd)
	}

	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, nil, connect.NewError(connect.CodeUnavailable, errors.New("the sandbox is shutting down"))
	}
	if len(t.procs) >= maxProcesses {
		t.mu.Unlock()
		return nil, nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the sandbox already runs %d processes started through envd (the maximum)", maxProcesses))
	}
	t.mu.Unlock()

	jp, err := sb.jail.Start(context.WithoutCancel(ctx), jail.Cmd{
		Path:  cfg.GetCmd(),
		Args:  cfg.GetArgs(),
		Env:   env,
		Dir:   dir,
		Stdin: stdin,
	})
	if err != nil {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("start %q: %v", cfg.GetCmd(), err))
	}
	p := &proc{
		pid:    uint32(jp.Pid()),
		tag:    tag,
		config: cfg,
		jp:     jp,
		subs:   map[*subscriber]struct{}{},
	}
	if stdin {
		p.stdin = jp.Stdin()
	}
	sub := p.subscribe()
	if !deadline.IsZero() {
		p.timer = time.AfterFunc(time.Until(deadline), func() {
			sb.s.log.Info("e2blocal: command deadline reached; killing it", "sandbox_id", sb.id, "pid", p.pid)
			_ = jp.Signal(syscall.SIGKILL)
		})
	}
	t.mu.Lock()
	t.procs[p.pid] = p
	t.mu.Unlock()
	go t.pump(p)
	return p, sub, nil
}

type chunk struct {
	data   []byte
	stderr bool
	eof    bool
}

// pump forwards a process's output to its subscribers in arrival order,
// then exactly one end event.
func (t *processTable) pump(p *proc) {
	events := make(chan chunk, 8)
	stop := make(chan struct{})
	// Each reader drains its pipe to EOF even after the pump stopped
	// forwarding: the jail closes a pipe only once it was read to the end.
	read := func(r io.Reader, stderr bool) {
		buf := make([]byte, chunkSize)
		forwarding := true
		for {
			n, err := r.Read(buf)
			if n > 0 && forwarding {
				select {
				case events <- chunk{data: slices.Clone(buf[:n]), stderr: stderr}:
				case <-stop:
					forwarding = false
				}
			}
			if err != nil {
				if forwarding {
					select {
					case events <- chunk{eof: true}:
					case <-stop:
					}
				}
				return
			}
		}
	}
	go read(p.jp.Stdout(), false)
	go read(p.jp.Stderr(), true)

	type exit struct {
		st  jail.ExitStatus
		err error
	}
	exited := make(chan exit, 1)
	go func() {
		st, err := p.jp.Wait()
		exited <- exit{st, err}
	}()

	open := 2
	var res *exit
	var grace <-chan time.Time
	for open > 0 || res == nil {
		select {
		case c := <-events:
			if c.eof {
				open--
				continue
			}
			ev := &process.ProcessEvent_DataEvent{}
			if c.stderr {
				ev.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: c.data}
			} else {
				ev.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: c.data}
			}
			p.broadcast(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: ev}})
		case e := <-exited:
			res = &e
			if open > 0 {
				// A background child may hold the pipes open forever; envd
				// stops reading when the process exits, so do we after a grace.
				grace = time.After(drainGrace)
			}
		case <-grace:
			open = 0
		}
	}
	close(stop)
	if p.timer != nil {
		p.timer.Stop()
	}
	end := endEvent(res.st, res.err)
	t.mu.Lock()
	delete(t.procs, p.pid)
	t.mu.Unlock()
	p.finish(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}})
}

func endEvent(st jail.ExitStatus, err error) *process.ProcessEvent_EndEvent {
	end := &process.ProcessEvent_EndEvent{ExitCode: int32(st.Code), Exited: !st.Signaled, Status: st.Status}
	if err != nil {
		msg := err.Error()
		end.ExitCode, end.Exited, end.Error = -1, false, &msg
		if end.Status == "" {
			end.Status = msg
		}
		return end
	}
	if st.Signaled {
		end.ExitCode = -1
		if end.Status == "" {
			end.Status = "signal: " + st.Signal
		}
	} else if end.Status == "" {
		end.Status = "exit status " + strconv.Itoa(st.Code)
	}
	if end.ExitCode != 0 {
		msg := end.Status
		end.Error = &msg
	}
	return end
}

func (p *proc) subscribe() *subscriber {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil
	}
	s := &subscriber{ch: make(chan *process.ProcessEvent), gone: make(chan struct{})}
	p.subs[s] = struct{}{}
	return s
}

func (p *proc) unsubscribe(s *subscriber) {
	s.leave()
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
}

func (p *proc) broadcast(ev *process.ProcessEvent) {
	p.mu.Lock()
	subs := slices.Collect(maps.Keys(p.subs))
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.gone:
		}
	}
}

// finish sends the end event and closes every subscriber's channel.
func (p *proc) finish(ev *process.ProcessEvent) {
	p.broadcast(ev)
	p.mu.Lock()
	p.ended = true
	subs := p.subs
	p.subs = nil
	p.mu.Unlock()
	for s := range subs {
		close(s.ch)
	}
}

func (t *processTable) find(sel *process.ProcessSelector) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch v := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if p, ok := t.procs[v.Pid]; ok {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", v.Pid))
	case *process.ProcessSelector_Tag:
		for _, pid := range slices.Sorted(maps.Keys(t.procs)) {
			if p := t.procs[pid]; p.tag != nil && *p.tag == v.Tag {
				return p, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", v.Tag))
	}
	return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a process selector (pid or tag) is required"))
}

// closeAll refuses new processes; the jail's Close kills the running ones,
// which ends their streams.
func (t *processTable) closeAll() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// sandboxPath resolves a path from a request against the user's home.
func sandboxPath(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(homeDir, p)
	}
	return path.Clean(p)
}

// envdSandbox returns the request's sandbox and checks its user.
func envdSandbox(ctx context.Context, h http.Header) (*sandbox, error) {
	sb := sandboxFrom(ctx)
	if sb == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("no sandbox for this request"))
	}
	if _, err := userFromAuthorization(h.Get("Authorization")); err != nil {
		return nil, connectUserError(err)
	}
	return sb, nil
}

func keepaliveInterval(h http.Header) time.Duration {
	if v := h.Get("Keepalive-Ping-Interval"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return time.Duration(min(n, 3600)) * time.Second
		}
	}
	return defaultKeepalive
}

func validateConfig(cfg *process.ProcessConfig) error {
	if cfg == nil || cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	n := len(cfg.GetCmd()) + len(cfg.GetCwd())
	for _, a := range cfg.GetArgs() {
		n += len(a)
	}
	for k, v := range cfg.GetEnvs() {
		n += len(k) + len(v)
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid environment variable %q", k))
		}
	}
	if n > maxCommandBytes {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the command, arguments and environment exceed %d bytes", maxCommandBytes))
	}
	return nil
}

type eventSender interface {
	Send(*process.ProcessEvent) error
}

type startSender struct {
	s *connect.ServerStream[process.StartResponse]
}

func (s startSender) Send(ev *process.ProcessEvent) error {
	return s.s.Send(&process.StartResponse{Event: ev})
}

type connectSender struct {
	s *connect.ServerStream[process.ConnectResponse]
}

func (s connectSender) Send(ev *process.ProcessEvent) error {
	return s.s.Send(&process.ConnectResponse{Event: ev})
}

// follow streams a process's events to one client: start first, then data
// and keepalives, then the end. A client that leaves does not stop the
// process; the command deadline does.
func follow(ctx context.Context, p *proc, sub *subscriber, out eventSender, keepalive time.Duration) error {
	defer p.unsubscribe(sub)
	if err := out.Send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: p.pid}}}); err != nil {
		return err
	}
	ping := time.NewTimer(keepalive)
	defer ping.Stop()
	for {
		select {
		case ev, ok := <-sub.ch:
			if !ok {
				return nil
			}
			if _, end := ev.GetEvent().(*process.ProcessEvent_End); end {
				// The deadline's kill can land before ctx notices the
				// deadline: the caller must still see deadline_exceeded.
				if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
					return deadlineError(p)
				}
			}
			if err := out.Send(ev); err != nil {
				return err
			}
			if _, end := ev.GetEvent().(*process.ProcessEvent_End); end {
				return nil
			}
			ping.Reset(keepalive)
		case <-ping.C:
			if err := out.Send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
			ping.Reset(keepalive)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return deadlineError(p)
			}
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		}
	}
}

func deadlineError(p *proc) error {
	return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("the command's deadline passed; process %d was killed", p.pid))
}

func (ps processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	sb, err := envdSandbox(ctx, req.Header())
	if err != nil {
		return err
	}
	msg := req.Msg
	if msg.Pty != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("PTYs are not supported by the local sandbox; run the command without a pty"))
	}
	if err := validateConfig(msg.GetProcess()); err != nil {
		return err
	}
	stdin := msg.Stdin == nil || *msg.Stdin
	deadline, _ := ctx.Deadline()
	p, sub, err := sb.procs.start(ctx, msg.GetProcess(), msg.Tag, stdin, deadline)
	if err != nil {
		return err
	}
	return follow(ctx, p, sub, startSender{stream}, keepaliveInterval(req.Header()))
}

func (ps processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	sb, err := envdSandbox(ctx, req.Header())
	if err != nil {
		return err
	}
	p, err := sb.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sub := p.subscribe()
	if sub == nil {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d has already exited", p.pid))
	}
	return follow(ctx, p, sub, connectSender{stream}, keepaliveInterval(req.Header()))
}

func (ps processService) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	sb, err := envdSandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	t := sb.procs
	t.mu.Lock()
	defer t.mu.Unlock()
	out := &process.ListResponse{}
	for _, pid := range slices.Sorted(maps.Keys(t.procs)) {
		p := t.procs[pid]
		out.Processes = append(out.Processes, &process.ProcessInfo{Config: p.config, Pid: p.pid, Tag: p.tag})
	}
	return connect.NewResponse(out), nil
}

func (ps processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	sb, err := envdSandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unsupported signal %v: want SIGNAL_SIGKILL or SIGNAL_SIGTERM", req.Msg.GetSignal()))
	}
	p, err := sb.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.jp.Signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("signal process %d: %v", p.pid, err))
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (ps processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	sb, err := envdSandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	p, err := sb.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	in, ok := req.Msg.GetInput().GetInput().(*process.ProcessInput_Stdin)
	if !ok {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("input.stdin is required (the local sandbox has no PTYs)"))
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no stdin (it was started with stdin:false, or stdin was closed)", p.pid))
	}
	// A process that never reads its stdin must not hold this call forever.
	if d, ok := p.stdin.(interface{ SetWriteDeadline(time.Time) error }); ok {
		dl := time.Now().Add(stdinWriteTimeout)
		if cd, ok := ctx.Deadline(); ok && cd.Before(dl) {
			dl = cd
		}
		_ = d.SetWriteDeadline(dl)
	}
	if _, err := p.stdin.Write(in.Stdin); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("process %d is not reading its stdin", p.pid))
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("write to process %d: %v", p.pid, err))
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (ps processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	sb, err := envdSandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	p, err := sb.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no open stdin", p.pid))
	}
	err = p.stdin.Close()
	p.stdin = nil
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("close stdin of process %d: %v", p.pid, err))
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

func (ps processService) Update(context.Context, *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("process.Process/Update (PTY resize) is not supported by the local sandbox"))
}

func (ps processService) StreamInput(context.Context, *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("process.Process/StreamInput is not supported by the local sandbox; use SendInput"))
}
