package e2b

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	"connectrpc.com/connect"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem/filesystemconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process/processconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envdapi"
)

const (
	// envdPort is the port envd listens on inside every sandbox.
	envdPort = "49983"
	// defaultDomain is used when neither the server nor the API URL names one.
	defaultDomain = "e2b.app"
	// defaultUser is the sandbox user commands and file operations run as.
	defaultUser = "user"
	// defaultRunTimeout applies when RunParams.Timeout is zero (the SDK's).
	defaultRunTimeout = 60 * time.Second
	// keepaliveSeconds asks envd for a keepalive event after this much
	// silence on a command stream, so idle proxies keep the stream open.
	keepaliveSeconds = "50"
	// maxRPCMessage bounds one envd RPC message (ListDir of a big tree).
	maxRPCMessage = 32 << 20
	// killTimeout bounds the SIGKILL sent when a Run is abandoned.
	killTimeout = 10 * time.Second
)

// Sandbox is a handle to one running sandbox: its envd, reached with the
// sandbox's access token. It is safe for concurrent use.
type Sandbox struct {
	// ID is the sandbox id ("i" followed by 20 characters on E2B).
	ID string
	// TemplateID is the template the sandbox was created from.
	TemplateID string
	// EnvdVersion is the version of envd inside the sandbox.
	EnvdVersion string
	// Domain is the domain the sandbox's envd is reached under.
	Domain string

	c *Client
	// token is behind a pointer so that fmt, which cannot call methods on
	// unexported fields, prints an address rather than the value.
	token   *Secret
	envdURL string
	proc    processconnect.ProcessClient
	fs      filesystemconnect.FilesystemClient
	files   *envdapi.Client
	// plain performs /files and /health requests: envd headers added, no
	// status translation.
	plain *envdTransport
}

// newSandbox builds the handle from a create or connect response.
func (c *Client) newSandbox(op string, s api.Sandbox) (*Sandbox, error) {
	if s.SandboxID == "" {
		return nil, &Error{Op: op, Message: "server returned no sandbox id"}
	}
	if err := checkID(op, s.SandboxID); err != nil {
		return nil, err
	}
	sb := &Sandbox{ID: s.SandboxID, TemplateID: s.TemplateID, EnvdVersion: s.EnvdVersion, c: c, token: new(Secret)}
	if s.EnvdAccessToken != nil {
		*sb.token = Secret(*s.EnvdAccessToken)
	}
	sb.Domain = c.domainFor(s.Domain)
	if sb.Domain == "" || strings.ContainsAny(sb.Domain, "/@?#\\:% \t\r\n") {
		return nil, &Error{Op: op, SandboxID: s.SandboxID, Kind: ErrInvalidArgument, Message: fmt.Sprintf("server gave a malformed sandbox domain %q", truncate(sb.Domain))}
	}
	if c.sandboxURL != "" {
		sb.envdURL = c.sandboxURL
	} else {
		sb.envdURL = "https://" + envdPort + "-" + s.SandboxID + "." + sb.Domain
	}
	sb.plain = &envdTransport{c: c.http, sandboxID: s.SandboxID, token: string(*sb.token), routed: c.sandboxURL != ""}
	rpc := &rpcTransport{envdTransport: sb.plain, now: c.now}
	opts := []connect.ClientOption{connect.WithReadMaxBytes(maxRPCMessage), connect.WithSendMaxBytes(maxRPCMessage)}
	if c.protoJSON {
		opts = append(opts, connect.WithProtoJSON())
	}
	sb.proc = processconnect.NewProcessClient(rpc, sb.envdURL, opts...)
	sb.fs = filesystemconnect.NewFilesystemClient(rpc, sb.envdURL, opts...)
	var err error
	sb.files, err = envdapi.NewClient(sb.envdURL, envdapi.WithHTTPClient(sb.plain))
	if err != nil {
		return nil, &Error{Op: op, SandboxID: s.SandboxID, Message: err.Error(), Err: err}
	}
	return sb, nil
}

// domainFor picks the sandbox domain: the server's, else the API URL's
// ("api.example.dev" → "example.dev"), else e2b.app.
func (c *Client) domainFor(server *string) string {
	if server != nil && *server != "" {
		return *server
	}
	if host := c.apiURL.Hostname(); strings.HasPrefix(host, "api.") {
		return strings.TrimPrefix(host, "api.")
	}
	return defaultDomain
}

// secrets lists what must never appear in an error from this sandbox.
func (s *Sandbox) secrets() []string { return []string{string(*s.token), string(*s.c.apiKey)} }

// String names the sandbox; it keeps fmt from printing the fields, which
// hold the access token.
func (s *Sandbox) String() string { return "e2b sandbox " + s.ID }

// LogValue logs the sandbox as its id.
func (s *Sandbox) LogValue() slog.Value { return slog.StringValue(s.ID) }

// envdTransport adds envd's headers to every request: the access token,
// the routing headers in SandboxURL mode and a default user.
type envdTransport struct {
	c         *http.Client
	sandboxID string
	token     string
	routed    bool
}

func (t *envdTransport) Do(req *http.Request) (*http.Response, error) {
	if t.token != "" {
		req.Header.Set("X-Access-Token", t.token)
	}
	if t.routed {
		req.Header.Set("E2b-Sandbox-Id", t.sandboxID)
		req.Header.Set("E2b-Sandbox-Port", envdPort)
	}
	if req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", basicUser(defaultUser))
	}
	return t.c.Do(req)
}

// rpcTransport is envdTransport for Connect RPCs: it turns the statuses
// that come from the sandbox proxy rather than envd's Connect handler (502
// sandbox gone, 429 with Retry-After, 507) into *Error, which connect-go
// passes through (errors.As still finds it).
type rpcTransport struct {
	*envdTransport
	now func() time.Time
}

func (t *rpcTransport) Do(req *http.Request) (*http.Response, error) {
	resp, err := t.envdTransport.Do(req)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusTooManyRequests, http.StatusInsufficientStorage:
		defer resp.Body.Close()
		return nil, statusError("", t.sandboxID, resp, scopeSandbox, t.now, t.token)
	}
	return resp, nil
}

// basicUser is the Authorization header envd reads the user from.
func basicUser(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// checkUser refuses user names that cannot be a Unix user.
func checkUser(user string) error {
	if user == "" || len(user) > 64 || strings.ContainsRune(user, ':') {
		return fmt.Errorf("malformed user name %q", user)
	}
	for _, r := range user {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("malformed user name %q", user)
		}
	}
	return nil
}

// RunParams describes one command.
type RunParams struct {
	// Command is a shell command line, run as /bin/bash -l -c Command.
	Command string
	// Cwd is the working directory. If empty, the template's (usually
	// /home/user).
	Cwd string
	// Env is added to the sandbox's environment for this command.
	Env map[string]string
	// User runs the command. If empty, "user". Always sent.
	User string
	// Timeout is how long the command may run; envd kills it then
	// (ErrCommandTimeout). If zero, 60s.
	Timeout time.Duration
}

// RunResult is how a command ended. A non-zero exit is a result, not an
// error.
type RunResult struct {
	// ExitCode is the process's exit code, -1 when a signal ended it.
	ExitCode int
	// Signaled is true when a signal ended the process.
	Signaled bool
	// Status is envd's description, such as "exit status 1" or
	// "signal: killed".
	Status string
	// Error is envd's error text for a failed command, if any.
	Error string
	// PID is the process id inside the sandbox.
	PID uint32
}

// Run runs a command and streams its output: onStdout and onStderr (either
// may be nil) receive each chunk as it arrives, in order, from this
// goroutine; the slice is valid only during the call. If ctx ends first,
// Run sends SIGKILL to the process (envd does not kill on disconnect) and
// returns ctx.Err(). Run is never retried.
func (s *Sandbox) Run(ctx context.Context, p RunParams, onStdout, onStderr func([]byte)) (RunResult, error) {
	const op = "run command"
	if strings.TrimSpace(p.Command) == "" {
		return RunResult{}, &Error{Op: op, SandboxID: s.ID, Kind: ErrInvalidArgument, Message: "empty command"}
	}
	if p.Timeout < 0 {
		return RunResult{}, &Error{Op: op, SandboxID: s.ID, Kind: ErrInvalidArgument, Message: "negative timeout"}
	}
	timeout := p.Timeout
	if timeout == 0 {
		timeout = defaultRunTimeout
	}
	user := p.User
	if user == "" {
		user = defaultUser
	}
	if err := checkUser(user); err != nil {
		return RunResult{}, &Error{Op: op, SandboxID: s.ID, Kind: ErrInvalidArgument, Message: err.Error()}
	}
	if err := ctx.Err(); err != nil {
		return RunResult{}, err
	}
	tag := newTag()
	cfg := &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", p.Command}, Envs: p.Env}
	if p.Cwd != "" {
		cfg.Cwd = ptr(p.Cwd)
	}
	req := connect.NewRequest(&process.StartRequest{Process: cfg, Tag: &tag, Stdin: ptr(false)})
	req.Header().Set("Authorization", basicUser(user))
	req.Header().Set("Keepalive-Ping-Interval", keepaliveSeconds)

	// The deadline travels as Connect-Timeout-Ms: envd kills the process
	// at it even if this client is gone.
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var (
		res    RunResult
		pid    uint32
		gotEnd bool
	)
	stream, err := s.proc.Start(runCtx, req)
	if err == nil {
		for stream.Receive() {
			ev := stream.Msg().GetEvent()
			switch e := ev.GetEvent().(type) {
			case *process.ProcessEvent_Start:
				pid = e.Start.GetPid()
			case *process.ProcessEvent_Data:
				switch o := e.Data.GetOutput().(type) {
				case *process.ProcessEvent_DataEvent_Stdout:
					if onStdout != nil {
						onStdout(o.Stdout)
					}
				case *process.ProcessEvent_DataEvent_Stderr:
					if onStderr != nil {
						onStderr(o.Stderr)
					}
				case *process.ProcessEvent_DataEvent_Pty:
					if onStdout != nil {
						onStdout(o.Pty)
					}
				}
			case *process.ProcessEvent_End:
				end := e.End
				res = RunResult{ExitCode: int(end.GetExitCode()), Status: end.GetStatus(), Error: end.GetError(), PID: pid}
				res.Signaled = end.GetExitCode() == -1 || strings.HasPrefix(end.GetStatus(), "signal:")
				gotEnd = true
			}
		}
		err = stream.Err()
		_ = stream.Close()
	}
	log := s.c.logger.With("sandbox_id", s.ID, "duration_ms", time.Since(start).Milliseconds())
	switch {
	case gotEnd:
		log.DebugContext(ctx, "e2b: command ended", "exit_code", res.ExitCode)
		return res, nil
	case ctx.Err() != nil:
		s.killProcess(ctx, pid, tag)
		log.DebugContext(ctx, "e2b: command abandoned", "error", ctx.Err().Error())
		return RunResult{PID: pid}, ctx.Err()
	case runCtx.Err() != nil || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
		// envd kills at the deadline; the signal covers a deadline that
		// fired here first.
		s.killProcess(ctx, pid, tag)
		log.DebugContext(ctx, "e2b: command timed out")
		return RunResult{PID: pid}, &Error{Op: op, SandboxID: s.ID, Kind: ErrCommandTimeout, Code: connect.CodeDeadlineExceeded.String(), Message: fmt.Sprintf("killed after %s", timeout)}
	default:
		var out error = &Error{Op: op, SandboxID: s.ID, Message: "stream ended before the command did"}
		if err != nil {
			out = connectError(op, s.ID, err, s.secrets()...)
		}
		out = s.explainLostStream(ctx, out)
		if !errors.Is(out, ErrSandboxGone) && !errors.Is(out, ErrUnauthorized) && !errors.Is(out, ErrInvalidArgument) {
			// The caller will treat the command as failed: do not leave it
			// running unseen until its deadline.
			s.killProcess(ctx, pid, tag)
		}
		log.DebugContext(ctx, "e2b: command stream failed", "error", out.Error())
		return RunResult{PID: pid}, out
	}
}

// explainLostStream checks /health after a stream broke, as the SDKs do: a
// sandbox that is gone turns the error into ErrSandboxGone.
func (s *Sandbox) explainLostStream(ctx context.Context, err error) error {
	if errors.Is(err, ErrSandboxGone) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrInvalidArgument) {
		return err
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if running, herr := s.IsRunning(hctx); herr == nil && !running {
		var e *Error
		if errors.As(err, &e) {
			out := *e
			out.Kind = ErrSandboxGone
			return &out
		}
	}
	return err
}

// killProcess sends SIGKILL to the command, by pid when its start event
// arrived, else by its tag (retried briefly in case envd has not started it
// yet). Failures are logged, not returned: the caller is already failing.
func (s *Sandbox) killProcess(ctx context.Context, pid uint32, tag string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}}
	if pid != 0 {
		sel = &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	}
	for attempt := 0; attempt < 5; attempt++ {
		req := connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL})
		req.Header().Set("Authorization", basicUser(defaultUser))
		_, err := s.proc.SendSignal(kctx, req)
		if err == nil {
			return
		}
		if pid != 0 || connect.CodeOf(err) != connect.CodeNotFound {
			if connect.CodeOf(err) != connect.CodeNotFound {
				s.c.logger.WarnContext(ctx, "e2b: killing abandoned command failed", "sandbox_id", s.ID, "error", redact(err.Error(), s.secrets()...))
			}
			return
		}
		if sleepCtx(kctx, 200*time.Millisecond) != nil {
			return
		}
	}
}

// Process is a command envd is running in the sandbox.
type Process struct {
	PID  uint32
	Tag  string // Run tags its commands "sandbox-mcp-<random>"
	Cmd  string
	Args []string
	Cwd  string
}

// Processes lists the commands envd is running (started through envd; not
// every process in the sandbox).
func (s *Sandbox) Processes(ctx context.Context) ([]Process, error) {
	resp, err := s.proc.List(ctx, rpcReq(&process.ListRequest{}))
	if err != nil {
		return nil, s.rpcError(ctx, "list processes", err)
	}
	out := make([]Process, 0, len(resp.Msg.GetProcesses()))
	for _, p := range resp.Msg.GetProcesses() {
		cfg := p.GetConfig()
		out = append(out, Process{PID: p.GetPid(), Tag: p.GetTag(), Cmd: cfg.GetCmd(), Args: cfg.GetArgs(), Cwd: cfg.GetCwd()})
	}
	return out, nil
}

// IsRunning reports whether the sandbox's envd answers its health check; a
// 502 from the sandbox proxy means the sandbox is gone.
func (s *Sandbox) IsRunning(ctx context.Context) (bool, error) {
	const op = "check sandbox health"
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := s.files.Health(rctx)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, transportError(op, s.ID, err, s.secrets()...)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusBadGateway:
		return false, nil
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return true, nil
	}
	return false, statusError(op, s.ID, resp, scopeSandbox, s.c.now, s.secrets()...)
}

// Kill kills this sandbox (Client.Kill).
func (s *Sandbox) Kill(ctx context.Context) error { return s.c.Kill(ctx, s.ID) }

// SetTimeout sets this sandbox to expire timeout from now (Client.SetTimeout).
func (s *Sandbox) SetTimeout(ctx context.Context, timeout time.Duration) error {
	return s.c.SetTimeout(ctx, s.ID, timeout)
}

// newTag returns a random process tag, so an abandoned command can be
// killed even before its pid is known.
func newTag() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "sandbox-mcp-" + hex.EncodeToString(b[:])
}
