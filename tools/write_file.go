package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
)

type writeArgs struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	Mode     string `json:"mode,omitempty"`
}

// WriteResult is write_file's structured result.
type WriteResult struct {
	Path         string `json:"path"`
	Size         int64  `json:"size"`
	Mode         string `json:"mode,omitempty"`
	TaskID       string `json:"task_id"`
	ContractHash string `json:"contract_hash"`
	Notice       string `json:"notice,omitempty"`
}

const writeInputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File path in the sandbox; relative paths resolve against the workdir. Parent directories are created."},
    "content": {"type": "string", "description": "The file's content, in the given encoding."},
    "encoding": {"type": "string", "enum": ["utf8", "base64"], "description": "utf8 (default) or base64 for binary content."},
    "mode": {"type": "string", "pattern": "^0?[0-7]{3}$", "description": "Octal permissions such as 0644 or 0755; no setuid, setgid or sticky bits."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

const fileOutputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "size": {"type": "integer"},
    "mode": {"type": "string"},
    "task_id": {"type": "string"},
    "contract_hash": {"type": "string"},
    "notice": {"type": "string"}
  },
  "required": ["path", "size", "task_id", "contract_hash"]
}`

func (t *Task) writeFileTool() mcpserver.ServerTool {
	tool := newTool("write_file", "Write a file in this task's sandbox, replacing it if it exists. "+rules(t.c), writeInputSchema, fileOutputSchema, hints{
		title:    "Write a file in the sandbox",
		readOnly: false, destructive: true, idempotent: true, openWorld: false,
	})
	return mcpserver.ServerTool{Tool: tool, Handler: t.writeFile}
}

func (t *Task) writeFile(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	const tool = "write_file"
	var a writeArgs
	if err := decodeArgs(req, &a); err != nil {
		return t.badArgs(ctx, tool, err), nil
	}
	data, err := decodeContent(a.Content, a.Encoding, int64(t.c.Limits.FileBytes))
	if err != nil {
		return t.badArgs(ctx, tool, err), nil
	}
	mode, err := parseMode(a.Mode)
	if err != nil {
		return t.badArgs(ctx, tool, err), nil
	}
	d := policy.DecideWrite(t.c, policy.WriteCall{Path: a.Path, Size: int64(len(data))})
	t.decided(ctx, tool, d)
	if !d.Allow {
		return t.denied(d), nil
	}
	eff, fail := effective[policy.FileEffective](ctx, t, tool, d)
	if fail != nil {
		return fail, nil
	}
	sb, err := t.sandbox(ctx)
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	if info, exists, err := checkNoSymlink(ctx, sb, eff.Path); err != nil {
		return t.refusedAtUse(ctx, tool, err), nil
	} else if exists && info.Type == e2b.TypeDir {
		return mcp.NewToolResultError(fmt.Sprintf("write_file: %s is a directory (task %s)", eff.Path, t.c.Task.ID)), nil
	}
	start := t.now()
	if err := sb.WriteFile(ctx, eff.Path, bytes.NewReader(data)); err != nil {
		return t.failed(ctx, tool, err), nil
	}
	if a.Mode != "" {
		if err := t.chmod(ctx, sb, eff.Path, mode); err != nil {
			return t.failed(ctx, tool, err), nil
		}
	}
	t.audit.Info("file written", "session_id", sessionID(ctx), "tool", tool, "decision", "allow", "rule", d.Rule,
		"sandbox_id", sb.ID, "path", eff.Path, "size", len(data), "mode", a.Mode,
		"duration_ms", t.now().Sub(start).Milliseconds())
	out := WriteResult{Path: eff.Path, Size: int64(len(data)), TaskID: t.c.Task.ID, ContractHash: t.hash, Notice: t.takeNotice()}
	if a.Mode != "" {
		out.Mode = fmt.Sprintf("%04o", mode)
	}
	return t.structured(out, fmt.Sprintf("wrote %d bytes to %s", len(data), eff.Path)), nil
}

// refusedAtUse is the result when a check at use time (a symlink) refuses
// what the static policy allowed.
func (t *Task) refusedAtUse(ctx context.Context, tool string, err error) *mcp.CallToolResult {
	if !errors.Is(err, errSymlink) {
		return t.failed(ctx, tool, err)
	}
	t.audit.Info("decision", "session_id", sessionID(ctx), "tool", tool, "decision", "deny", "rule", "builtin.symlink", "reason", err.Error())
	return mcp.NewToolResultError(fmt.Sprintf("denied by builtin.symlink: %v (task %s, contract %s)", err, t.c.Task.ID, t.hash))
}

// decodeContent decodes content and checks its size before and after
// decoding, so a huge argument is refused without a second copy.
func decodeContent(content, encoding string, max int64) ([]byte, error) {
	switch encoding {
	case "", "utf8":
		if int64(len(content)) > max {
			return nil, fmt.Errorf("content is %d bytes; limits.file_bytes is %d", len(content), max)
		}
		return []byte(content), nil
	case "base64":
		if int64(base64.StdEncoding.DecodedLen(len(content))) > max+2 {
			return nil, fmt.Errorf("content decodes to more than limits.file_bytes (%d bytes)", max)
		}
		data, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, fmt.Errorf("content is not valid base64: %v", err)
		}
		if int64(len(data)) > max {
			return nil, fmt.Errorf("content is %d bytes; limits.file_bytes is %d", len(data), max)
		}
		return data, nil
	}
	return nil, fmt.Errorf("encoding must be utf8 or base64, got %q", encoding)
}

// parseMode parses an octal mode, refusing setuid, setgid and sticky bits.
func parseMode(s string) (uint32, error) {
	if s == "" {
		return 0, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("mode must be octal permissions such as 0644, at most 0777; got %q", s)
	}
	return uint32(m), nil
}

// chmod sets a file's mode. envd has no chmod call, so the server runs
// chmod itself: the path is the policy's clean absolute path, quoted, and
// the mode a parsed number, so nothing the agent sent reaches the shell.
func (t *Task) chmod(ctx context.Context, sb *e2b.Sandbox, p string, mode uint32) error {
	cmd := fmt.Sprintf("chmod %04o -- %s", mode, shellQuote(p))
	var stderr bytes.Buffer
	res, err := sb.Run(ctx, e2b.RunParams{Command: cmd, Timeout: 10 * time.Second}, nil, func(b []byte) {
		if stderr.Len() < 4096 {
			stderr.Write(b)
		}
	})
	if err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("chmod: exit %d: %s", res.ExitCode, stderr.String())
	}
	return nil
}
