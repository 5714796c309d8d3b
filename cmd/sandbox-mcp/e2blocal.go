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
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2blocal"
)

func init() {
	commands["e2b-local"] = command{
		summary: "serve the embedded E2B-compatible local sandbox (for the E2B SDKs)",
		run:     runE2BLocal,
	}
}

// runE2BLocal serves e2blocal until ctx ends, then kills every sandbox.
func runE2BLocal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("e2b-local", flag.ContinueOnError)
	fl.SetOutput(stderr)
	listen := fl.String("listen", "127.0.0.1:3000", "address to serve the E2B API and envd on (loopback only unless --allow-remote)")
	apiKey := fl.String("api-key", "", "API key clients must send (default: $E2B_API_KEY, else a fresh key printed once)")
	dir := fl.String("dir", "", "state directory for sandboxes (default: a temporary directory removed on exit)")
	allowRemote := fl.Bool("allow-remote", false, "allow a non-loopback --listen address")
	maxSandboxes := fl.Int("max-sandboxes", 0, "most sandboxes at once (default 32)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: sandbox-mcp e2b-local [--listen 127.0.0.1:3000] [--api-key KEY] [--dir DIR]")
		fmt.Fprintln(stderr, "\nServes the E2B control-plane API and envd on one address, running sandboxes in")
		fmt.Fprintln(stderr, "Linux namespaces on this machine. Point the E2B SDKs at it with E2B_API_URL and")
		fmt.Fprintln(stderr, "E2B_SANDBOX_URL (both the printed URL) and E2B_API_KEY.")
		fmt.Fprintln(stderr)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitCode(2, "")
	}
	if fl.NArg() > 0 {
		fl.Usage()
		return exitCode(2, fmt.Sprintf("e2b-local: unexpected argument %q", fl.Arg(0)))
	}
	if err := checkListen(*listen, *allowRemote); err != nil {
		return exitCode(2, "e2b-local: "+err.Error())
	}

	key, generated := *apiKey, false
	if key == "" {
		key = os.Getenv("E2B_API_KEY")
	}
	if key == "" {
		var b [20]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("e2b-local: generate an API key: %w", err)
		}
		key, generated = "e2b_"+hex.EncodeToString(b[:]), true
	}

	stateDir := *dir
	if stateDir == "" {
		d, err := os.MkdirTemp("", "sandbox-mcp-e2b-local-")
		if err != nil {
			return fmt.Errorf("e2b-local: state directory: %w", err)
		}
		defer os.RemoveAll(d)
		stateDir = d
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := e2blocal.New(e2blocal.Options{
		Dir:          stateDir,
		APIKey:       key,
		Logger:       logger,
		MaxSandboxes: *maxSandboxes,
	})
	if err != nil {
		return fmt.Errorf("e2b-local: %w", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		_ = srv.Close(context.Background())
		return fmt.Errorf("e2b-local: %w", err)
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stderr, "e2b-local: serving the E2B API and envd on %s (state in %s)\n", url, stateDir)
	fmt.Fprintf(stderr, "export E2B_API_URL=%s\nexport E2B_SANDBOX_URL=%s\n", url, url)
	if generated {
		fmt.Fprintf(stderr, "export E2B_API_KEY=%s\n", key)
	} else {
		fmt.Fprintln(stderr, "# E2B_API_KEY: the key you gave")
	}

	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	var runErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "e2b-local: stopping: killing every sandbox")
	case err := <-serveErr:
		runErr = fmt.Errorf("e2b-local: serve: %w", err)
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Sandboxes first: that ends the command streams Shutdown would wait for.
	if err := srv.Close(closeCtx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("e2b-local: cleanup: %w", err))
	}
	shutCtx, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShut()
	if err := hs.Shutdown(shutCtx); err != nil {
		_ = hs.Close()
	}
	if runErr == nil {
		fmt.Fprintln(stderr, "e2b-local: stopped; every sandbox was removed")
	}
	return runErr
}

// checkListen refuses addresses other hosts could reach unless allowed.
func checkListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %v", addr, err)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %q is not a loopback address: the local sandbox API runs commands on this machine; use 127.0.0.1, or pass --allow-remote if you really mean it", addr)
}
