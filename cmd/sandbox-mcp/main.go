// Command sandbox-mcp is an MCP server that checks every agent tool call
// against a per-task sandbox contract before it reaches a sandbox or a Mac.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// exitError carries a process exit code out of a subcommand. Its message, if
// any, has already been printed or is printed by main.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// exitCode returns an error that makes main exit with code and print msg (if
// not empty) to stderr.
func exitCode(code int, msg string) error { return &exitError{code: code, msg: msg} }

// command is one subcommand. run receives the arguments after the command's
// name; it writes results to stdout and diagnostics to stderr.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is filled by each subcommand's file in its init function, so that
// adding a subcommand touches only its own file.
var commands = map[string]command{}

func main() {
	// A host may close our stderr (mcp-go's client does on Close) while we
	// still log the sandbox's shutdown. By default Go dies of SIGPIPE on a
	// write to a broken fd 1 or 2, which would skip that shutdown; ignored,
	// the write just fails and cleanup goes on.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "sandbox-mcp:", ee.msg)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "sandbox-mcp:", err)
	os.Exit(1)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		usage(stderr)
		return exitCode(2, fmt.Sprintf("unknown command %q", args[0]))
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: sandbox-mcp COMMAND [ARGS]\n\ncommands:\n")
	for _, name := range names {
		fmt.Fprintf(&b, "  %-12s %s\n", name, commands[name].summary)
	}
	b.WriteString("\nRun 'sandbox-mcp COMMAND -h' for a command's flags.\n")
	io.WriteString(w, b.String())
}
