package tools

import (
	"fmt"
	"strings"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/policy"
)

// rules summarises the contract for the model, so it knows what is allowed
// before it tries. It names programs, paths, network and limits; never a
// credential's value or source.
func rules(c *contracts.Contract) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task %s. Sandbox workdir %s.", c.Task.ID, c.Sandbox.Workdir)
	b.WriteString(" Allowed programs: ")
	b.WriteString(policy.AllowedPrograms(c))
	b.WriteString(".")
	fmt.Fprintf(&b, " Readable: %s. Writable: %s. Exportable: %s.",
		list(c.Paths.Read), list(c.Paths.Write), list(c.Paths.Export))
	switch c.Network.Egress {
	case contracts.EgressNone:
		b.WriteString(" Network: none.")
	case contracts.EgressAllowlist:
		fmt.Fprintf(&b, " Network: only %s.", strings.Join(c.Network.Allow, ", "))
	case contracts.EgressOpen:
		b.WriteString(" Network: open.")
	}
	fmt.Fprintf(&b, " Command timeout %s by default, %s at most; output kept up to %s per stream.",
		c.Commands.DefaultTimeout, c.Commands.MaxTimeout, c.Limits.OutputBytes)
	b.WriteString(" Shell features such as $(...), backticks, eval, background jobs and redirections outside writable paths are refused.")
	return b.String()
}

func list(paths []string) string {
	if len(paths) == 0 {
		return "none"
	}
	return strings.Join(paths, ", ")
}

// Instructions is the server's initialize instructions: what the server is
// and the rules of this task.
func Instructions(c *contracts.Contract) string {
	return "sandbox-mcp runs commands and file operations in an isolated sandbox for this task only. " +
		"Every call is checked against the task's contract before it runs; a refusal names the rule and what is allowed instead. " +
		rules(c)
}
