package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
)

// maxArgBytes bounds one call's JSON arguments. The transport bounds a whole
// request too; this keeps a stdio client (which has no body limit) from
// handing a handler more than a file's worth of data.
const maxArgBytes = 32 << 20

// decodeArgs decodes the call's arguments into v, refusing unknown fields,
// trailing data and oversized input.
func decodeArgs(req mcp.CallToolRequest, v any) error {
	raw, err := json.Marshal(req.GetRawArguments())
	if err != nil {
		return fmt.Errorf("arguments are not JSON: %v", err)
	}
	if len(raw) > maxArgBytes {
		return fmt.Errorf("arguments are %d bytes; at most %d are accepted", len(raw), maxArgBytes)
	}
	if string(raw) == "null" {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	return nil
}

// sessionID returns the MCP session of the call, or "" outside one.
func sessionID(ctx context.Context) string {
	if s := mcpserver.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return ""
}

// decided records a decision in the audit log.
func (t *Task) decided(ctx context.Context, tool string, d policy.Decision) {
	decision := "deny"
	if d.Allow {
		decision = "allow"
	}
	t.audit.Info("decision", "session_id", sessionID(ctx), "tool", tool,
		"decision", decision, "rule", d.Rule, "reason", t.redactor.String(d.Reason))
}

// denied is the result for a refused call: it names the rule and says what
// is allowed instead.
func (t *Task) denied(d policy.Decision) *mcp.CallToolResult {
	reason := d.Reason
	if !strings.HasPrefix(reason, "denied by ") {
		reason = "denied by " + d.Rule + ": " + reason
	}
	return mcp.NewToolResultError(t.redactor.String(fmt.Sprintf("%s (task %s, contract %s)", reason, t.c.Task.ID, t.hash)))
}

// badArgs is the result for arguments that cannot be decoded.
func (t *Task) badArgs(ctx context.Context, tool string, err error) *mcp.CallToolResult {
	t.audit.Info("decision", "session_id", sessionID(ctx), "tool", tool, "decision", "deny", "rule", "arguments", "reason", err.Error())
	return mcp.NewToolResultError(fmt.Sprintf("%s: %v (task %s, contract %s)", tool, err, t.c.Task.ID, t.hash))
}

// failed is the result for an allowed call that the backend could not carry
// out. The agent gets a short message and a reference; the operator log gets
// the whole cause under the same reference.
func (t *Task) failed(ctx context.Context, tool string, err error) *mcp.CallToolResult {
	ref := newRef()
	t.log.Error("tool failed", "tool", tool, "ref", ref, "session_id", sessionID(ctx), "error", t.redactor.String(err.Error()))
	t.audit.Info("side effect failed", "session_id", sessionID(ctx), "tool", tool, "ref", ref, "error", t.redactor.String(err.Error()))
	return mcp.NewToolResultError(fmt.Sprintf("%s failed (ref %s): %s (task %s, contract %s)", tool, ref, agentMessage(ctx, err), t.c.Task.ID, t.hash))
}

// agentMessage says what went wrong in terms the agent can act on.
func agentMessage(ctx context.Context, err error) string {
	var rl *e2b.RateLimitError
	switch {
	case ctx.Err() != nil:
		return "the call was cancelled"
	case errors.Is(err, e2b.ErrSandboxGone):
		return "the sandbox is gone (expired or killed); retry to start a new one"
	case errors.Is(err, e2b.ErrNotFound):
		return "no such file or directory"
	case errors.Is(err, e2b.ErrDiskFull):
		return "the sandbox's disk is full"
	case errors.As(err, &rl):
		return "the sandbox backend is rate limiting; retry later"
	case errors.Is(err, e2b.ErrInvalidArgument):
		return "the sandbox refused the request: " + lastLine(err.Error())
	}
	return "internal error; the operator's log has the details"
}

func lastLine(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

func newRef() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// structured returns a result with v as structuredContent and text as the
// readable block, both redacted.
func (t *Task) structured(v any, text string) *mcp.CallToolResult {
	raw, err := json.Marshal(v)
	if err != nil {
		return mcp.NewToolResultError("internal error: " + err.Error())
	}
	var clean any
	if err := json.Unmarshal(t.redactor.Bytes(raw), &clean); err != nil {
		return mcp.NewToolResultError("internal error: " + err.Error())
	}
	return mcp.NewToolResultStructured(clean, t.redactor.String(text))
}

// progressFunc returns a function that sends progress notifications for the
// call, or nil when the client asked for none.
func progressFunc(ctx context.Context, req mcp.CallToolRequest) func(int, string) {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	srv := mcpserver.ServerFromContext(ctx)
	if srv == nil {
		return nil
	}
	token := req.Params.Meta.ProgressToken
	return func(n int, msg string) {
		// Sends never block; a full channel drops the notification, which
		// the throttle makes unlikely. Progress is best-effort by nature.
		_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
			"progressToken": token,
			"progress":      n,
			"message":       msg,
		})
	}
}

// hints are a tool's annotations. mcp-go's defaults claim every tool is
// destructive and open-world, so every tool states all four.
type hints struct {
	title                                        string
	readOnly, destructive, idempotent, openWorld bool
}

// newTool builds a tool from its hand-written input and output schemas
// (mcp.NewTool would add a generated input schema too, which mcp-go then
// refuses to marshal) and its annotations.
func newTool(name, description, inputSchema, outputSchema string, h hints) mcp.Tool {
	tool := mcp.NewToolWithRawSchema(name, description, []byte(inputSchema))
	for _, opt := range []mcp.ToolOption{
		mcp.WithRawOutputSchema([]byte(outputSchema)),
		mcp.WithTitleAnnotation(h.title),
		mcp.WithReadOnlyHintAnnotation(h.readOnly),
		mcp.WithDestructiveHintAnnotation(h.destructive),
		mcp.WithIdempotentHintAnnotation(h.idempotent),
		mcp.WithOpenWorldHintAnnotation(h.openWorld),
	} {
		opt(&tool)
	}
	return tool
}

// effective returns an allowed decision's effective values as E. An allowed
// decision without them is a policy bug; the call then fails closed.
func effective[E any](ctx context.Context, t *Task, tool string, d policy.Decision) (*E, *mcp.CallToolResult) {
	eff, ok := d.Effective.(*E)
	if !ok || eff == nil {
		return nil, t.failed(ctx, tool, fmt.Errorf("policy allowed %s without effective values (%T)", tool, d.Effective))
	}
	return eff, nil
}
