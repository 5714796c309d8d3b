package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/store"
)

type handoffStatusArgs struct {
	HandoffID string `json:"handoff_id"`
}

const handoffStatusInputSchema = `{
  "type": "object",
  "properties": {
    "handoff_id": {"type": "string", "minLength": 1, "maxLength": 256, "description": "The handoff_id handoff_to_mac returned."}
  },
  "required": ["handoff_id"],
  "additionalProperties": false
}`

func (t *Task) handoffStatusTool() mcpserver.ServerTool {
	tool := newTool("handoff_status", "The state of a handoff_to_mac request: pending_approval until the owner decides, then approved (call handoff_to_mac again with the same arguments to run it), denied or expired; for one that ran, its exit code, checks, outputs and cleanup.",
		handoffStatusInputSchema, handoffOutputSchema, hints{
			title:    "Check a Mac handoff",
			readOnly: true, destructive: false, idempotent: true, openWorld: false,
		})
	return mcpserver.ServerTool{Tool: tool, Handler: t.handoffStatus}
}

func (t *Task) handoffStatus(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	const tool = "handoff_status"
	var a handoffStatusArgs
	if err := decodeArgs(req, &a); err != nil {
		return t.badArgs(ctx, tool, err), nil
	}
	if !store.ValidName.MatchString(a.HandoffID) {
		return mcp.NewToolResultError(fmt.Sprintf("handoff_status: %q is not a handoff id (task %s, contract %s)", printableID(a.HandoffID), t.c.Task.ID, t.hash)), nil
	}
	// Decisions are taken under the handoff lock, so a decision is never
	// applied to a record a running handoff is updating.
	if t.hmu.TryLock() {
		t.applyDecisions(ctx)
		t.hmu.Unlock()
	}
	h, err := t.store.GetHandoff(ctx, t.c.Task.ID, a.HandoffID)
	if errors.Is(err, store.ErrNotFound) {
		return mcp.NewToolResultError(fmt.Sprintf("handoff_status: no handoff %s (task %s, contract %s)", a.HandoffID, t.c.Task.ID, t.hash)), nil
	}
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	var msg string
	switch h.State {
	case store.HandoffPending:
		msg = "waiting for the owner's approval; nothing has run. " + approveHint(h)
	case store.HandoffApproved:
		msg = fmt.Sprintf("approved by %s until %s; call handoff_to_mac again with the same arguments to run it", h.Approval.By, h.Approval.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"))
	case store.HandoffDenied, store.HandoffExpired:
		msg = "nothing ran: " + lastDetail(h)
	case store.HandoffDone:
		msg = "the step ran and its outputs are stored as artifacts"
	case store.HandoffFailed:
		msg = h.Error
	default:
		msg = "in progress: " + string(h.State)
	}
	return t.handoffResult(h, false, msg), nil
}

func lastDetail(h store.Handoff) string {
	if n := len(h.History); n > 0 {
		return h.History[n-1].Detail
	}
	return string(h.State)
}

func printableID(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}
