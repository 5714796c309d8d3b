package tools

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
	"github.com/sandbox-mcp/sandbox-mcp/store"
)

type exportArgs struct {
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
}

// ExportResult is export_artifact's structured result.
type ExportResult struct {
	Name         string `json:"name"`
	SHA256       string `json:"sha256"`
	Size         int64  `json:"size"`
	URI          string `json:"uri"`
	TaskID       string `json:"task_id"`
	ContractHash string `json:"contract_hash"`
}

const exportInputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File in the sandbox to export; it must be under an export path of the contract."},
    "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", "description": "Artifact name (default: the file's name)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

const exportOutputSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "sha256": {"type": "string"},
    "size": {"type": "integer"},
    "uri": {"type": "string"},
    "task_id": {"type": "string"},
    "contract_hash": {"type": "string"}
  },
  "required": ["name", "sha256", "size", "uri", "task_id", "contract_hash"]
}`

func (t *Task) exportArtifactTool() mcpserver.ServerTool {
	tool := newTool("export_artifact", "Copy a file out of the sandbox into the task's artifact store; returns its sha256 and an artifact:// URI the host can read. "+rules(t.c), exportInputSchema, exportOutputSchema, hints{
		title:    "Export an artifact from the sandbox",
		readOnly: false, destructive: false, idempotent: true, openWorld: false,
	})
	return mcpserver.ServerTool{Tool: tool, Handler: t.exportArtifact}
}

func (t *Task) exportArtifact(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	const tool = "export_artifact"
	var a exportArgs
	if err := decodeArgs(req, &a); err != nil {
		return t.badArgs(ctx, tool, err), nil
	}
	d := policy.DecideExport(t.c, policy.ExportCall{Path: a.Path, Name: a.Name})
	t.decided(ctx, tool, d)
	if !d.Allow {
		return t.denied(d), nil
	}
	eff, fail := effective[policy.ExportEffective](ctx, t, tool, d)
	if fail != nil {
		return fail, nil
	}
	sb, err := t.sandbox(ctx)
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	info, exists, err := checkNoSymlink(ctx, sb, eff.Path)
	if err != nil {
		return t.refusedAtUse(ctx, tool, err), nil
	}
	if !exists || info.Type != e2b.TypeFile {
		return mcp.NewToolResultError(fmt.Sprintf("export_artifact: %s is not an existing regular file (task %s)", eff.Path, t.c.Task.ID)), nil
	}
	max := int64(t.c.Limits.ArtifactBytes)
	if info.Size > max {
		return mcp.NewToolResultError(fmt.Sprintf("export_artifact: %s is %d bytes; limits.artifact_bytes is %d (task %s)", eff.Path, info.Size, max, t.c.Task.ID)), nil
	}
	start := t.now()
	rc, err := sb.ReadFile(ctx, eff.Path)
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	defer rc.Close()
	t.mu.Lock()
	lastCmd, lastExit := t.lastCmd, t.lastExit
	t.mu.Unlock()
	art, err := t.store.PutArtifact(ctx, t.c.Task.ID, eff.Name, rc, max, store.ArtifactMeta{
		SourcePath:   eff.Path,
		Command:      t.redactor.String(lastCmd),
		ExitCode:     lastExit,
		ContractHash: t.hash,
	})
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	t.audit.Info("artifact exported", "session_id", sessionID(ctx), "tool", tool, "decision", "allow", "rule", d.Rule,
		"sandbox_id", sb.ID, "path", eff.Path, "artifact", art.Name, "sha256", art.SHA256, "size", art.Size,
		"duration_ms", t.now().Sub(start).Milliseconds())
	if t.onArtifact != nil {
		t.onArtifact(art)
	}
	out := ExportResult{Name: art.Name, SHA256: art.SHA256, Size: art.Size, URI: art.URI, TaskID: t.c.Task.ID, ContractHash: t.hash}
	return t.structured(out, fmt.Sprintf("exported %s as %s (%d bytes, sha256 %s)", eff.Path, art.URI, art.Size, art.SHA256)), nil
}
