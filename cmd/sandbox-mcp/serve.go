package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/audit"
	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/redact"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2blocal"
	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
	"github.com/sandbox-mcp/sandbox-mcp/server"
	"github.com/sandbox-mcp/sandbox-mcp/store"
	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

func init() {
	commands["serve"] = command{
		summary: "run the MCP server for one contract (stdio, or --http / --sse)",
		run:     runServe,
	}
}

// serveFlags are serve's settings, parsed from the command line and the
// environment. Only this file reads them.
type serveFlags struct {
	contract  string
	state     string
	httpAddr  string
	sseAddr   string
	tokenFile string
	logLevel  string
	hosts     string
	origins   string
	macKey    string
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.contract, "contract", "", "the task's contract `FILE` (YAML or JSON); required")
	fs.StringVar(&f.state, "state", "", "state `DIR` for task records, artifacts and the audit log (default: $XDG_STATE_HOME/sandbox-mcp/<task-id>)")
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP on `ADDR` (endpoint /mcp) instead of stdio")
	fs.StringVar(&f.sseAddr, "sse", "", "serve the legacy SSE transport on `ADDR` (/sse, /message) instead of stdio")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the HTTP bearer token from `FILE` (else $SANDBOX_MCP_TOKEN; on loopback one is generated and printed)")
	fs.StringVar(&f.logLevel, "log-level", "info", "operator log level on stderr: debug, info, warn, error")
	fs.StringVar(&f.hosts, "allowed-hosts", "", "comma-separated extra Host names accepted over HTTP (loopback names always are)")
	fs.StringVar(&f.origins, "allowed-origins", "", "comma-separated browser origins accepted over HTTP (loopback origins always are)")
	fs.StringVar(&f.macKey, "mac-key", "", "the Mac runner's SSH private key `FILE` for handoff_to_mac (else $SANDBOX_MCP_MAC_KEY_FILE)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sandbox-mcp serve --contract FILE [--http ADDR | --sse ADDR] [--state DIR]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, exitCode(2, "")
	}
	if f.contract == "" || fs.NArg() > 0 {
		fs.Usage()
		return nil, exitCode(2, "serve: --contract FILE is required and takes no other arguments")
	}
	if f.httpAddr != "" && f.sseAddr != "" {
		return nil, exitCode(2, "serve: use --http or --sse, not both")
	}
	return f, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, f.logLevel)
	if err != nil {
		return exitCode(2, err.Error())
	}
	// Settle the HTTP token before anything starts: a refusal must not
	// first open state or start a sandbox service.
	var token string
	if addr := f.httpAddr + f.sseAddr; addr != "" {
		if token, err = httpToken(f.tokenFile, addr, stderr); err != nil {
			return err
		}
	}
	c, warnings, err := contracts.Load(f.contract)
	if err != nil {
		return exitCode(1, err.Error())
	}
	for _, w := range warnings {
		logger.Warn("contract lint", "path", w.Path, "warning", w.Msg)
	}
	creds, err := readCredentials(c)
	if err != nil {
		return exitCode(1, err.Error())
	}
	macRunner, err := openMacRunner(c, f.macKey, logger)
	if err != nil {
		return err
	}
	state := f.state
	if state == "" {
		if state, err = defaultStateDir(c.Task.ID); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}

	st, err := store.Open(filepath.Join(state, "store"), store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	red := redact.New(creds)
	for _, name := range red.Weak() {
		logger.Warn("credential is shorter than 8 bytes: only its literal value can be redacted", "credential", name)
	}
	alog, err := audit.Open(filepath.Join(state, "audit.jsonl"), audit.Options{Redactor: red})
	if err != nil {
		return err
	}
	defer alog.Close()
	if aside := alog.SetAside(); aside != "" {
		logger.Warn("the audit log failed verification and was set aside; a new chain was started", "previous", aside)
	}

	client, stopBackend, err := openBackend(ctx, c, state, logger, alog.Logger())
	if err != nil {
		return err
	}
	defer stopBackend()

	task, err := tools.NewTask(tools.Options{
		Contract: c, E2B: client, Store: st, Credentials: creds, Mac: macRunner,
		Audit: alog.Logger(), Logger: logger,
	})
	if err != nil {
		return err
	}
	srv := server.New(server.Options{Version: version, Logger: logger, Instructions: tools.Instructions(c)})
	if err := task.Register(srv.MCP()); err != nil {
		return err
	}
	logger.Info("serving", "task_id", c.Task.ID, "contract", task.Hash(), "backend", c.Sandbox.Backend, "state", state)

	serveErr := serveTransport(ctx, srv, f, c, token, logger)

	// Whatever ended serving (EOF, a signal, an error), the sandbox ends as
	// the contract says, with its own deadline.
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := task.Close(closeCtx); err != nil {
		logger.Error("ending the sandbox failed", "error", red.String(err.Error()))
		if serveErr == nil {
			serveErr = err
		}
	}
	return serveErr
}

func serveTransport(ctx context.Context, srv *server.Server, f *serveFlags, c *contracts.Contract, token string, logger *slog.Logger) error {
	addr, sse := f.httpAddr, false
	if f.sseAddr != "" {
		addr, sse = f.sseAddr, true
	}
	if addr == "" {
		return srv.ServeStdio(ctx, os.Stdin, os.Stdout)
	}
	// A write_file call carries at most file_bytes of content, a third more
	// in base64; anything much larger is not a legitimate request.
	maxBody := int64(c.Limits.FileBytes)*4/3 + 1<<20
	return srv.ServeHTTP(ctx, server.HTTPOptions{
		Addr: addr, Token: token, SSE: sse, MaxBodyBytes: maxBody,
		AllowedHosts: splitList(f.hosts), AllowedOrigins: splitList(f.origins),
		OnListen: func(a net.Addr) {
			path := "/mcp"
			if sse {
				path = "/sse"
			}
			logger.Info("listening", "url", "http://"+a.String()+path)
		},
	})
}

// httpToken returns the bearer token for HTTP. On a loopback address with
// no token configured it generates one and prints it once to stderr; on any
// other address a configured token is required.
func httpToken(file, addr string, stderr io.Writer) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 {
			return "", exitCode(1, "token file: the token must be at least 16 characters")
		}
		return tok, nil
	}
	if tok := os.Getenv("SANDBOX_MCP_TOKEN"); tok != "" {
		if len(tok) < 16 {
			return "", exitCode(1, "SANDBOX_MCP_TOKEN must be at least 16 characters")
		}
		return tok, nil
	}
	if !server.IsLoopbackAddr(addr) {
		return "", exitCode(1, fmt.Sprintf("refusing to listen on %s without a bearer token: set SANDBOX_MCP_TOKEN or --token-file", addr))
	}
	tok := randomHex(24)
	fmt.Fprintf(stderr, "sandbox-mcp: generated bearer token for this run (send it as 'Authorization: Bearer <token>'):\n%s\n", tok)
	return tok, nil
}

// openBackend returns the E2B client the task uses. For backend local it
// starts the embedded E2B-compatible sandbox on a loopback port of its own;
// for e2b it reaches E2B_API_URL (default E2B's cloud) with E2B_API_KEY.
func openBackend(ctx context.Context, c *contracts.Contract, state string, logger, auditLog *slog.Logger) (*e2b.Client, func(), error) {
	if c.Sandbox.Backend == contracts.BackendE2B {
		key := os.Getenv("E2B_API_KEY")
		if key == "" {
			return nil, nil, exitCode(1, "the contract's backend is e2b: set E2B_API_KEY (and E2B_API_URL / E2B_SANDBOX_URL for a self-hosted or local E2B)")
		}
		client, err := e2b.New(e2b.Options{
			APIURL: os.Getenv("E2B_API_URL"), SandboxURL: os.Getenv("E2B_SANDBOX_URL"),
			APIKey: e2b.Secret(key), Logger: logger,
		})
		return client, func() {}, err
	}
	key := "e2b_" + randomHex(20)
	local, err := e2blocal.New(e2blocal.Options{
		Dir: filepath.Join(state, "sandboxes"), APIKey: key, Logger: logger,
		// Every connection the allowlist proxy decides is a side effect
		// of the agent's commands: it goes in the audit log too.
		OnEgressDecision: func(sandboxID string, d egress.Decision) {
			decision := "deny"
			if d.Allow {
				decision = "allow"
			}
			auditLog.Info("egress", "task_id", c.Task.ID, "sandbox_id", sandboxID, "decision", decision,
				"rule", "network.allow", "host", d.Host, "port", d.Port, "method", d.Method, "sni", d.SNI, "reason", d.Reason)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("local sandbox: %w", err)
	}
	hs := &http.Server{Handler: local.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	url := "http://" + ln.Addr().String()
	client, err := e2b.New(e2b.Options{APIURL: url, SandboxURL: url, APIKey: e2b.Secret(key), Logger: logger})
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := local.Close(sctx); err != nil {
			logger.Error("local sandbox cleanup", "error", err)
		}
		hs.Shutdown(sctx)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return client, stop, nil
}

// readCredentials reads every credential's value from where the contract
// says: env:NAME or file:/path. A missing one is an error: a task must not
// start without the credentials its author granted, nor guess them.
func readCredentials(c *contracts.Contract) ([]redact.Secret, error) {
	var out []redact.Secret
	for _, cr := range c.Credentials {
		kind, src, _ := strings.Cut(cr.From, ":")
		var val string
		switch kind {
		case "env":
			v, ok := os.LookupEnv(src)
			if !ok || v == "" {
				return nil, fmt.Errorf("credential %s: environment variable %s is not set", cr.Name, src)
			}
			val = v
		case "file":
			b, err := os.ReadFile(src)
			if err != nil {
				return nil, fmt.Errorf("credential %s: %w", cr.Name, err)
			}
			val = strings.TrimRight(string(b), "\r\n")
			if val == "" {
				return nil, fmt.Errorf("credential %s: %s is empty", cr.Name, src)
			}
		default:
			return nil, fmt.Errorf("credential %s: from must be env:NAME or file:/path", cr.Name)
		}
		out = append(out, redact.Secret{Name: cr.Name, Value: val})
	}
	return out, nil
}

func defaultStateDir(taskID string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", errors.New("no --state given and no home directory to default to")
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "sandbox-mcp", taskID), nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"
