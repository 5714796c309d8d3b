package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/policy"
)

func init() {
	contractCommands["explain"] = command{
		summary: "dry-run one tool call against a contract and print the decision as JSON",
		run:     runContractExplain,
	}
}

const contractExplainUsage = `usage: sandbox-mcp contract explain [--known NAMES] FILE TOOL ARGS_JSON

Decides one tool call (run_command, write_file, read_file, export_artifact,
handoff_to_mac) against the contract in FILE, exactly as the server would,
and prints the decision as one JSON object: allow, rule, reason, effective.

  --known NAMES   comma-separated artifact names taken as already exported,
                  for handoff_to_mac (default none)

Example:
  sandbox-mcp contract explain task.yaml run_command '{"command":"pytest -q"}'

Exit status: 0 allowed, 3 denied, 1 invalid contract or arguments, 2 usage.
`

func runContractExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("contract explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, contractExplainUsage) }
	known := fs.String("known", "", "comma-separated artifact names already exported (handoff_to_mac)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitCode(2, "")
	}
	if fs.NArg() != 3 {
		fs.Usage()
		return exitCode(2, "contract explain: expected FILE TOOL ARGS_JSON")
	}
	file, tool, raw := fs.Arg(0), fs.Arg(1), []byte(fs.Arg(2))
	c, warnings, err := contracts.Load(file)
	if err != nil {
		var errs contracts.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintln(stderr, e)
			}
		}
		return exitCode(1, fmt.Sprintf("contract explain: invalid contract %s: %v", file, err))
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", file, w)
	}
	var d policy.Decision
	if tool == policy.ToolHandoffToMac && *known != "" {
		d, err = explainHandoff(c, raw, strings.Split(*known, ","))
	} else {
		d, err = policy.Decide(c, tool, raw)
	}
	if err != nil {
		return exitCode(1, fmt.Sprintf("contract explain: %v", err))
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return err
	}
	if !d.Allow {
		return exitCode(3, "")
	}
	return nil
}

// explainHandoff decides handoff_to_mac with the artifact names --known
// says were exported, after the same strict decoding Decide uses.
func explainHandoff(c *contracts.Contract, raw []byte, known []string) (policy.Decision, error) {
	if _, err := policy.Decide(c, policy.ToolHandoffToMac, raw); err != nil {
		return policy.Decision{}, err
	}
	var a struct {
		Step           string   `json:"step"`
		Artifacts      []string `json:"artifacts"`
		SourceRevision string   `json:"source_revision"`
		Note           string   `json:"note"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return policy.Decision{}, err
	}
	return policy.DecideHandoff(c, policy.HandoffCall{Step: a.Step, Artifacts: a.Artifacts, Known: known,
		SourceRevision: a.SourceRevision, Note: a.Note}), nil
}
