package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/runner/mac"
	"github.com/sandbox-mcp/sandbox-mcp/store"
	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

func init() {
	commands["handoff"] = command{
		summary: "list, show, approve or deny handoff_to_mac requests (works while the server runs)",
		run:     runHandoff,
	}
}

// macKeyEnv names the file holding the Mac runner's SSH private key when
// serve has no --mac-key.
const macKeyEnv = "SANDBOX_MCP_MAC_KEY_FILE"

// openMacRunner returns the runner for the contract's mac section, with the
// private key from --mac-key or $SANDBOX_MCP_MAC_KEY_FILE; nil (and no
// handoff_to_mac) when the contract has no mac section.
func openMacRunner(c *contracts.Contract, keyFile string, logger *slog.Logger) (tools.MacRunner, error) {
	if c.Mac == nil {
		return nil, nil
	}
	if keyFile == "" {
		keyFile = os.Getenv(macKeyEnv)
	}
	if keyFile == "" {
		return nil, exitCode(1, "the contract has a mac section: give the Mac runner's SSH private key with serve --mac-key FILE or $"+macKeyEnv)
	}
	fi, err := os.Stat(keyFile)
	if err != nil {
		return nil, exitCode(1, fmt.Sprintf("mac key: %v", err))
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, exitCode(1, fmt.Sprintf("mac key %s is readable by others (mode %v); chmod 600 it", keyFile, fi.Mode().Perm()))
	}
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, exitCode(1, fmt.Sprintf("mac key: %v", err))
	}
	signer, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, exitCode(1, fmt.Sprintf("mac key %s is protected by a passphrase; give an unencrypted key readable only by the server's user (chmod 600)", keyFile))
	}
	if err != nil {
		return nil, exitCode(1, fmt.Sprintf("mac key %s: %v", keyFile, err))
	}
	r, err := mac.New(mac.Options{Target: c.Mac.Runner.SSH, HostKey: c.Mac.Runner.HostKey, Signer: signer, Logger: logger})
	if err != nil {
		return nil, exitCode(1, err.Error())
	}
	return r, nil
}

const handoffUsage = `usage:
  sandbox-mcp handoff list    --state DIR
  sandbox-mcp handoff show    --state DIR HANDOFF_ID
  sandbox-mcp handoff approve --state DIR [--as NAME] [--digest sha256:...] HANDOFF_ID
  sandbox-mcp handoff deny    --state DIR [--as NAME] [--reason TEXT] HANDOFF_ID

DIR is the serve --state directory. approve and deny leave the decision for
the server, which applies it on the agent's next handoff_to_mac or
handoff_status call; they work while the server runs. An approval binds the
request's approval digest: if the inputs or the step change, it no longer
applies.
`

func runHandoff(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		io.WriteString(stderr, handoffUsage)
		if len(args) == 0 {
			return exitCode(2, "handoff: expected list, show, approve or deny")
		}
		return nil
	}
	sub := args[0]
	fs := flag.NewFlagSet("handoff "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, handoffUsage) }
	state := fs.String("state", "", "the serve --state `DIR`")
	as := fs.String("as", "", "who decides (default: the current user)")
	digest := fs.String("digest", "", "approve only if the request's approval digest is this")
	reason := fs.String("reason", "", "why the handoff is denied")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitCode(2, "")
	}
	if *state == "" {
		return exitCode(2, "handoff "+sub+": --state DIR is required (the serve --state directory)")
	}
	dir := filepath.Join(*state, "store")
	recs, err := store.ReadHandoffRecords(dir)
	if err != nil {
		return exitCode(1, err.Error())
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return exitCode(2, "handoff list takes no arguments")
		}
		tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "HANDOFF\tTASK\tSTATE\tSTEP\tINPUTS\tDIGEST\tUPDATED")
		for _, h := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", h.ID, h.TaskID, h.State, h.Step.Name, len(h.Inputs), h.ApprovalDigest, h.UpdatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	case "show", "approve", "deny":
	default:
		io.WriteString(stderr, handoffUsage)
		return exitCode(2, fmt.Sprintf("handoff: unknown subcommand %q", sub))
	}
	if len(pos) != 1 {
		return exitCode(2, "handoff "+sub+": expected exactly one HANDOFF_ID")
	}
	id := pos[0]
	var h *store.Handoff
	for i := range recs {
		if recs[i].ID == id {
			h = &recs[i]
		}
	}
	if h == nil {
		return exitCode(1, fmt.Sprintf("handoff %s: no such handoff in %s", id, dir))
	}
	if sub == "show" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(h)
	}
	if h.State != store.HandoffPending {
		return exitCode(1, fmt.Sprintf("handoff %s is %s, not pending_approval; nothing to decide", id, h.State))
	}
	if *digest != "" && *digest != h.ApprovalDigest {
		return exitCode(1, fmt.Sprintf("handoff %s: its approval digest is %s, not %s; nothing was decided", id, h.ApprovalDigest, *digest))
	}
	by := *as
	if by == "" {
		by = currentUser()
	}
	d := store.Decision{HandoffID: h.ID, TaskID: h.TaskID, Digest: h.ApprovalDigest, Approve: sub == "approve", By: by, Reason: *reason, At: time.Now().UTC()}
	if err := store.WriteDecision(dir, d); err != nil {
		return exitCode(1, err.Error())
	}
	summary(stdout, *h)
	if d.Approve {
		fmt.Fprintf(stdout, "approved by %s: digest %s. The server applies it on the agent's next handoff_to_mac or handoff_status call.\n", by, h.ApprovalDigest)
	} else {
		fmt.Fprintf(stdout, "denied by %s. Nothing of handoff %s will run.\n", by, h.ID)
	}
	return nil
}

// summary prints what is being decided.
func summary(w io.Writer, h store.Handoff) {
	fmt.Fprintf(w, "handoff %s of task %s (owner %s), requested by %s\n", h.ID, h.TaskID, h.Owner, h.RequestedBy)
	fmt.Fprintf(w, "runner %s, host key %s\n", h.Runner.SSH, h.Runner.HostKey)
	fmt.Fprintf(w, "step %s: %s (timeout %s)\n", h.Step.Name, strings.Join(h.Step.Argv, " "), h.Step.Timeout)
	for _, in := range h.Inputs {
		fmt.Fprintf(w, "input %s  %d bytes  sha256 %s\n", in.Name, in.Size, in.SHA256)
	}
	if h.Note != "" {
		fmt.Fprintf(w, "agent's note (untrusted): %q\n", h.Note)
	}
}

func currentUser() string {
	u, err := user.Current()
	if err != nil {
		return fmt.Sprintf("uid %d", os.Getuid())
	}
	host, _ := os.Hostname()
	if host == "" {
		return u.Username
	}
	return u.Username + "@" + host
}

// parseInterspersed parses flags placed before or after positional
// arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
