package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
)

type runArgs struct {
	Command        string            `json:"command"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
}

// RunResult is run_command's structured result.
type RunResult struct {
	ExitCode     int    `json:"exit_code"`
	Stdout       string `json:"stdout"`
	Stderr       string `json:"stderr"`
	Truncated    bool   `json:"truncated"`
	TimedOut     bool   `json:"timed_out"`
	DurationMS   int64  `json:"duration_ms"`
	TaskID       string `json:"task_id"`
	ContractHash string `json:"contract_hash"`
	Notice       string `json:"notice,omitempty"`
}

const runInputSchema = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "maxLength": 65536, "description": "A shell command line. Every program in it must be allowed by the task's contract."},
    "cwd": {"type": "string", "maxLength": 4096, "description": "Working directory inside the sandbox; relative paths resolve against the workdir."},
    "env": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 65536}, "maxProperties": 64, "description": "Extra environment variables; only names the contract lists are accepted."},
    "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "description": "Less than the contract's maximum; larger values are cut to it."}
  },
  "required": ["command"],
  "additionalProperties": false
}`

const runOutputSchema = `{
  "type": "object",
  "properties": {
    "exit_code": {"type": "integer", "description": "-1 when the command was killed (timeout or signal)"},
    "stdout": {"type": "string"},
    "stderr": {"type": "string"},
    "truncated": {"type": "boolean", "description": "output beyond the contract's limit was dropped"},
    "timed_out": {"type": "boolean"},
    "duration_ms": {"type": "integer"},
    "task_id": {"type": "string"},
    "contract_hash": {"type": "string"},
    "notice": {"type": "string"}
  },
  "required": ["exit_code", "stdout", "stderr", "truncated", "timed_out", "duration_ms", "task_id", "contract_hash"]
}`

func (t *Task) runCommandTool() mcpserver.ServerTool {
	tool := newTool("run_command", "Run a shell command line in this task's sandbox and return its exit code and output. "+rules(t.c), runInputSchema, runOutputSchema, hints{
		title:    "Run a command in the sandbox",
		readOnly: false, destructive: true, idempotent: false, openWorld: t.c.Network.Egress != "none",
	})
	return mcpserver.ServerTool{Tool: tool, Handler: t.runCommand}
}

func (t *Task) runCommand(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	const tool = "run_command"
	var a runArgs
	if err := decodeArgs(req, &a); err != nil {
		return t.badArgs(ctx, tool, err), nil
	}
	d := policy.DecideRun(t.c, policy.RunCall{Command: a.Command, Cwd: a.Cwd, Env: a.Env, TimeoutSeconds: a.TimeoutSeconds})
	t.decided(ctx, tool, d)
	if !d.Allow {
		return t.denied(d), nil
	}
	eff, fail := effective[policy.RunEffective](ctx, t, tool, d)
	if fail != nil {
		return fail, nil
	}
	select {
	case t.cmdSlots <- struct{}{}:
		defer func() { <-t.cmdSlots }()
	case <-ctx.Done():
		return t.failed(ctx, tool, ctx.Err()), nil
	}
	sb, err := t.sandbox(ctx)
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}

	env := make(map[string]string, len(eff.Env)+len(eff.Credentials))
	for k, v := range eff.Env {
		env[k] = v
	}
	for _, name := range eff.Credentials {
		if v, ok := t.secrets[name]; ok {
			env[name] = v
		}
	}

	limit := int(t.c.Limits.OutputBytes)
	stdout, stderr := &capture{max: limit}, &capture{max: limit}
	prog := newProgress(progressFunc(ctx, req), t.interval, t.now)
	outW := t.redactor.Writer(teeProgress{stdout, prog})
	errW := t.redactor.Writer(teeProgress{stderr, prog})

	stopBeat := make(chan struct{})
	if prog.send != nil {
		go func() {
			tick := time.NewTicker(t.interval)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					prog.tick()
				case <-stopBeat:
					return
				}
			}
		}()
	}

	start := t.now()
	res, err := sb.Run(ctx, e2b.RunParams{Command: eff.Command, Cwd: eff.Cwd, Env: env, Timeout: eff.Timeout},
		func(b []byte) { outW.Write(b) }, func(b []byte) { errW.Write(b) })
	close(stopBeat)
	outW.Close()
	errW.Close()
	elapsed := t.now().Sub(start)

	timedOut := errors.Is(err, e2b.ErrCommandTimeout)
	if err != nil && !timedOut {
		return t.failed(ctx, tool, err), nil
	}
	exit := res.ExitCode
	if timedOut {
		exit = -1
	}
	t.mu.Lock()
	t.lastCmd, t.lastExit = eff.Command, exit
	t.mu.Unlock()
	t.audit.Info("command ran", "session_id", sessionID(ctx), "tool", tool, "decision", "allow", "rule", d.Rule,
		"sandbox_id", sb.ID, "command", t.redactor.String(eff.Command), "exit_code", exit,
		"timed_out", timedOut, "duration_ms", elapsed.Milliseconds(),
		"stdout_bytes", stdout.total, "stderr_bytes", stderr.total, "credentials", eff.Credentials)

	out := RunResult{
		ExitCode:     exit,
		Stdout:       validUTF8(stdout.buf),
		Stderr:       validUTF8(stderr.buf),
		Truncated:    stdout.truncated() || stderr.truncated(),
		TimedOut:     timedOut,
		DurationMS:   elapsed.Milliseconds(),
		TaskID:       t.c.Task.ID,
		ContractHash: t.hash,
		Notice:       t.takeNotice(),
	}
	return t.structured(out, runText(out, eff.Timeout, eff.TimeoutClamped)), nil
}

// teeProgress writes to a capture and feeds the progress throttle.
type teeProgress struct {
	c *capture
	p *progress
}

func (w teeProgress) Write(b []byte) (int, error) {
	w.c.Write(b)
	w.p.add(b)
	return len(b), nil
}

var _ io.Writer = teeProgress{}

func runText(r RunResult, timeout time.Duration, clamped bool) string {
	var b strings.Builder
	switch {
	case r.TimedOut:
		fmt.Fprintf(&b, "timed out after %s and was killed", timeout)
	default:
		fmt.Fprintf(&b, "exit code %d", r.ExitCode)
	}
	fmt.Fprintf(&b, " (%d ms)", r.DurationMS)
	if clamped {
		fmt.Fprintf(&b, "; the timeout was cut to the contract's maximum, %s", timeout)
	}
	if r.Truncated {
		b.WriteString("; output was truncated at the contract's limit")
	}
	if r.Notice != "" {
		b.WriteString("\nnote: " + r.Notice)
	}
	if r.Stdout != "" {
		b.WriteString("\n--- stdout ---\n" + r.Stdout)
	}
	if r.Stderr != "" {
		b.WriteString("\n--- stderr ---\n" + r.Stderr)
	}
	return b.String()
}

// validUTF8 returns b as a string with invalid bytes replaced, so the JSON
// result says plainly what the agent gets.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
