package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// contractCommands are the subcommands of "sandbox-mcp contract". Each
// registers itself from its own file's init, as the top-level commands do
// (explain.go adds "explain").
var contractCommands = map[string]command{}

func init() {
	commands["contract"] = command{
		summary: "check contract files or print the contract schema (contract -h)",
		run:     runContract,
	}
	contractCommands["check"] = command{
		summary: "validate contract files; print every error and the lint warnings",
		run:     runContractCheck,
	}
	contractCommands["schema"] = command{
		summary: "print the contract's JSON Schema (draft 2020-12)",
		run:     runContractSchema,
	}
}

func contractUsage(w io.Writer) {
	names := make([]string, 0, len(contractCommands))
	for name := range contractCommands {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: sandbox-mcp contract SUBCOMMAND [ARGS]\n\nsubcommands:\n")
	for _, name := range names {
		fmt.Fprintf(&b, "  %-8s %s\n", name, contractCommands[name].summary)
	}
	io.WriteString(w, b.String())
}

func runContract(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			contractUsage(stderr)
			return exitCode(2, "contract: expected a subcommand")
		}
		contractUsage(stdout)
		return nil
	}
	sub, ok := contractCommands[args[0]]
	if !ok {
		contractUsage(stderr)
		return exitCode(2, fmt.Sprintf("contract: unknown subcommand %q", args[0]))
	}
	return sub.run(ctx, args[1:], stdout, stderr)
}

const contractCheckUsage = `usage: sandbox-mcp contract check FILE...

Validates each contract file (YAML, or JSON for .json files) against the
schema and the rules the schema cannot express. Prints "FILE: ok HASH" on
stdout for each valid file, every problem as FILE:LINE:COL: field.path:
message, and lint warnings as FILE: warning: field.path: message on stderr.

Exit status: 0 all valid (warnings allowed), 1 any invalid, 2 usage error.
`

func runContractCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("contract check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, contractCheckUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitCode(2, "")
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitCode(2, "contract check: expected at least one FILE")
	}
	invalid := 0
	for _, file := range fs.Args() {
		c, warnings, err := contracts.Load(file)
		var errs contracts.Errors
		switch {
		case errors.As(err, &errs):
			invalid++
			for _, e := range errs {
				fmt.Fprintln(stderr, e)
			}
			continue
		case err != nil:
			invalid++
			fmt.Fprintf(stderr, "%s: %v\n", file, err)
			continue
		}
		for _, w := range warnings {
			fmt.Fprintf(stderr, "%s: warning: %s\n", file, w)
		}
		fmt.Fprintf(stdout, "%s: ok %s\n", file, c.Hash())
	}
	if invalid > 0 {
		return exitCode(1, fmt.Sprintf("contract check: %d of %d files invalid", invalid, fs.NArg()))
	}
	return nil
}

func runContractSchema(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			io.WriteString(stdout, "usage: sandbox-mcp contract schema\n\nPrints the contract's JSON Schema (draft 2020-12) for editors and other tools.\n")
			return nil
		}
		return exitCode(2, "contract schema: takes no arguments")
	}
	_, err := stdout.Write(contracts.Schema())
	return err
}
