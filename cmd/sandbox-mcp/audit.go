package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sandbox-mcp/sandbox-mcp/audit"
)

func init() {
	commands["audit"] = command{
		summary: "check an audit log's hash chain (audit verify [-anchor HASH] FILE)",
		run:     runAudit,
	}
}

const auditUsage = `usage: sandbox-mcp audit verify [-anchor SHA256] FILE

Checks that FILE's hash chain is intact and prints the number of lines and
the sha256 of the last line (the head). Keep the head somewhere else and pass
it later as -anchor to also detect lines cut from the end.

Exit status: 0 chain intact, 1 chain broken (the first bad line is printed),
2 usage or read error.
`

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		io.WriteString(stderr, auditUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return exitCode(2, "audit: expected the subcommand 'verify'")
	}
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, auditUsage) }
	anchor := fs.String("anchor", "", "sha256 `HASH` of a line that must be present (from an earlier head)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitCode(2, "")
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitCode(2, "audit verify: expected exactly one FILE")
	}
	path := fs.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		return exitCode(2, fmt.Sprintf("audit verify: %v", err))
	}
	defer f.Close()

	var rep audit.Report
	if *anchor != "" {
		rep, err = audit.VerifyAnchor(f, *anchor)
	} else {
		rep, err = audit.Verify(f)
	}
	var ve *audit.VerifyError
	switch {
	case errors.As(err, &ve):
		return exitCode(1, fmt.Sprintf("audit verify: %s: chain broken at %v (%d lines before it verified)", path, ve, rep.Lines))
	case err != nil:
		return exitCode(2, fmt.Sprintf("audit verify: %s: %v", path, err))
	}
	fmt.Fprintf(stdout, "ok: %d lines, chain intact, head %s\n", rep.Lines, rep.Head)
	return nil
}
