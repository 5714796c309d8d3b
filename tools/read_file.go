package tools

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
)

// readPage is how many bytes read_file returns when the call does not say.
const readPage = 256 << 10

type readArgs struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset,omitempty"`
	Length int64  `json:"length,omitempty"`
}

// ReadResult is read_file's structured result.
type ReadResult struct {
	Path         string `json:"path"`
	Offset       int64  `json:"offset"`
	Length       int64  `json:"length"`
	Size         int64  `json:"size"`
	EOF          bool   `json:"eof"`
	NextOffset   int64  `json:"next_offset,omitempty"`
	Encoding     string `json:"encoding"`
	Content      string `json:"content"`
	TaskID       string `json:"task_id"`
	ContractHash string `json:"contract_hash"`
}

const readInputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File path in the sandbox; relative paths resolve against the workdir."},
    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start at (default 0)."},
    "length": {"type": "integer", "minimum": 1, "description": "Bytes to return at most (default 262144, at most the contract's file limit)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

const readOutputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "offset": {"type": "integer"},
    "length": {"type": "integer"},
    "size": {"type": "integer"},
    "eof": {"type": "boolean"},
    "next_offset": {"type": "integer"},
    "encoding": {"type": "string", "enum": ["utf8", "base64"]},
    "content": {"type": "string"},
    "task_id": {"type": "string"},
    "contract_hash": {"type": "string"}
  },
  "required": ["path", "offset", "length", "size", "eof", "encoding", "content", "task_id", "contract_hash"]
}`

func (t *Task) readFileTool() mcpserver.ServerTool {
	tool := newTool("read_file", "Read part of a file in this task's sandbox (paged: use offset and next_offset). Text comes back as utf8, anything else as base64. "+rules(t.c), readInputSchema, readOutputSchema, hints{
		title:    "Read a file in the sandbox",
		readOnly: true, destructive: false, idempotent: true, openWorld: false,
	})
	return mcpserver.ServerTool{Tool: tool, Handler: t.readFile}
}

func (t *Task) readFile(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	const tool = "read_file"
	var a readArgs
	if err := decodeArgs(req, &a); err != nil {
		return t.badArgs(ctx, tool, err), nil
	}
	if a.Length == 0 {
		a.Length = readPage
	}
	d := policy.DecideRead(t.c, policy.ReadCall{Path: a.Path, Offset: a.Offset, Length: a.Length})
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
	info, exists, err := checkNoSymlink(ctx, sb, eff.Path)
	if err != nil {
		return t.refusedAtUse(ctx, tool, err), nil
	}
	if !exists {
		return mcp.NewToolResultError(fmt.Sprintf("read_file: %s does not exist (task %s)", eff.Path, t.c.Task.ID)), nil
	}
	if info.Type != e2b.TypeFile {
		return mcp.NewToolResultError(fmt.Sprintf("read_file: %s is not a regular file (task %s)", eff.Path, t.c.Task.ID)), nil
	}
	rc, err := sb.ReadFile(ctx, eff.Path)
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, eff.Offset); err != nil && err != io.EOF {
		return t.failed(ctx, tool, err), nil
	}
	buf, err := io.ReadAll(io.LimitReader(rc, eff.Length))
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	out := ReadResult{
		Path: eff.Path, Offset: eff.Offset, Length: int64(len(buf)), Size: info.Size,
		TaskID: t.c.Task.ID, ContractHash: t.hash,
	}
	out.EOF = eff.Offset+out.Length >= info.Size
	if !out.EOF {
		out.NextOffset = eff.Offset + out.Length
	}
	if utf8.Valid(buf) {
		out.Encoding, out.Content = "utf8", string(buf)
	} else {
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(buf)
	}
	t.audit.Info("file read", "session_id", sessionID(ctx), "tool", tool, "decision", "allow", "rule", d.Rule,
		"sandbox_id", sb.ID, "path", eff.Path, "offset", eff.Offset, "length", out.Length)
	text := out.Content
	if out.Encoding == "base64" {
		text = fmt.Sprintf("%d bytes of binary data from %s at offset %d, base64 in structured content", out.Length, eff.Path, eff.Offset)
	}
	return t.structured(out, text), nil
}
