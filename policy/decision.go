package policy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// Decision is the outcome of checking one tool call against a contract.
type Decision struct {
	// Allow is true only when every part of the call is allowed.
	Allow bool `json:"allow"`
	// Rule names what decided: a contract path such as "commands.allow[1]"
	// or "paths.write", or a built-in rule such as "builtin.substitution".
	// An allowed command that used several rules lists them, comma-separated.
	Rule string `json:"rule"`
	// Reason is one line for the agent: what was refused and what is allowed
	// instead, or what was allowed and any value that was changed.
	Reason string `json:"reason"`
	// Effective holds the values to act on when allowed: *RunEffective,
	// *FileEffective, *ExportEffective or *HandoffEffective. Callers must use
	// these rather than the raw arguments.
	Effective any `json:"effective,omitempty"`
}

// Rule names that are not contract paths.
const (
	RuleDefaultDeny = "default-deny"
)

// RunCall is one run_command request.
type RunCall struct {
	Command        string            // the shell command line
	Cwd            string            // working directory; empty means the workdir
	Env            map[string]string // extra environment; names must be in commands.env.pass
	TimeoutSeconds float64           // 0 means commands.default_timeout
}

// WriteCall is one write_file request.
type WriteCall struct {
	Path string
	Size int64 // bytes to be written
}

// ReadCall is one read_file request.
type ReadCall struct {
	Path   string
	Offset int64
	Length int64 // 0 means up to limits.file_bytes
}

// ExportCall is one export_artifact request.
type ExportCall struct {
	Path string
	Name string // artifact name; empty means the file's base name
}

// HandoffCall is one handoff_to_mac request.
type HandoffCall struct {
	Step           string
	Artifacts      []string
	Known          []string // artifact names exported in this task (server state, never agent input)
	SourceRevision string
	Note           string
}

// RunEffective is what an allowed run_command runs with.
type RunEffective struct {
	Command        string            `json:"command"`               // the original command line, validated
	Cwd            string            `json:"cwd"`                   // clean absolute working directory
	Env            map[string]string `json:"env,omitempty"`         // agent-supplied variables that passed
	Credentials    []string          `json:"credentials,omitempty"` // credential names to inject
	Timeout        time.Duration     `json:"-"`
	TimeoutClamped bool              `json:"timeout_clamped,omitempty"` // the request exceeded max_timeout
	Network        NetworkPlan       `json:"network"`
	Programs       []string          `json:"programs"` // every program the command line runs, in order
}

// MarshalJSON writes Timeout as a duration string such as "1m0s".
func (e RunEffective) MarshalJSON() ([]byte, error) {
	type plain RunEffective
	return json.Marshal(struct {
		plain
		Timeout string `json:"timeout"`
	}{plain(e), e.Timeout.String()})
}

// FileEffective is what an allowed write_file or read_file touches.
type FileEffective struct {
	Path    string `json:"path"`              // clean absolute path
	Offset  int64  `json:"offset,omitempty"`  // read_file only
	Length  int64  `json:"length,omitempty"`  // read_file: bytes to read at most; write_file: size
	Clamped bool   `json:"clamped,omitempty"` // read_file: Length was cut to limits.file_bytes
}

// ExportEffective is what an allowed export_artifact exports.
type ExportEffective struct {
	Path string `json:"path"` // clean absolute path
	Name string `json:"name"` // validated artifact name
}

// HandoffEffective is what an allowed handoff_to_mac hands over.
type HandoffEffective struct {
	Step           string   `json:"step"`
	Artifacts      []string `json:"artifacts"`
	SourceRevision string   `json:"source_revision,omitempty"`
	Note           string   `json:"note,omitempty"`
}

// The MCP tool names Decide knows.
const (
	ToolRunCommand     = "run_command"
	ToolWriteFile      = "write_file"
	ToolReadFile       = "read_file"
	ToolExportArtifact = "export_artifact"
	ToolHandoffToMac   = "handoff_to_mac"
)

// maxArgsBytes bounds the JSON arguments Decide accepts.
const maxArgsBytes = 16 << 20

// Decide decodes one tool call's JSON arguments strictly and decides it.
// Unknown, duplicate or mistyped fields are an error (the call is malformed,
// not merely denied); an unknown tool is a default-deny decision. For
// handoff_to_mac no artifacts are known, so any artifact is denied: servers
// call DecideHandoff with the task's exported names.
//
// Argument shapes:
//
//	run_command     {"command": str, "cwd": str?, "env": {str: str}?, "timeout_seconds": num?}
//	write_file      {"path": str, "content": str, "encoding": "utf8"|"base64"?}
//	read_file       {"path": str, "offset": int?, "length": int?}
//	export_artifact {"path": str, "name": str?}
//	handoff_to_mac  {"step": str, "artifacts": [str]?, "source_revision": str?, "note": str?}
func Decide(c *contracts.Contract, tool string, args []byte) (Decision, error) {
	if c == nil {
		return deny(RuleDefaultDeny, "no contract is loaded for this task"), nil
	}
	if len(args) > maxArgsBytes {
		return Decision{}, fmt.Errorf("policy: %s: arguments are %d bytes, more than %d", tool, len(args), maxArgsBytes)
	}
	switch tool {
	case ToolRunCommand:
		var a struct {
			Command        *string           `json:"command"`
			Cwd            string            `json:"cwd"`
			Env            map[string]string `json:"env"`
			TimeoutSeconds float64           `json:"timeout_seconds"`
		}
		if err := decodeStrict(args, &a, "command", "cwd", "env", "timeout_seconds"); err != nil {
			return Decision{}, fmt.Errorf("policy: %s: %w", tool, err)
		}
		if a.Command == nil {
			return Decision{}, fmt.Errorf("policy: %s: missing required field \"command\"", tool)
		}
		return DecideRun(c, RunCall{Command: *a.Command, Cwd: a.Cwd, Env: a.Env, TimeoutSeconds: a.TimeoutSeconds}), nil
	case ToolWriteFile:
		var a struct {
			Path     *string `json:"path"`
			Content  *string `json:"content"`
			Encoding string  `json:"encoding"`
		}
		if err := decodeStrict(args, &a, "path", "content", "encoding"); err != nil {
			return Decision{}, fmt.Errorf("policy: %s: %w", tool, err)
		}
		if a.Path == nil || a.Content == nil {
			return Decision{}, fmt.Errorf("policy: %s: \"path\" and \"content\" are required", tool)
		}
		size := int64(len(*a.Content))
		switch strings.ToLower(a.Encoding) {
		case "", "utf-8", "utf8", "text":
		case "base64":
			n, err := base64.StdEncoding.DecodeString(*a.Content)
			if err != nil {
				return Decision{}, fmt.Errorf("policy: %s: content is not valid base64: %w", tool, err)
			}
			size = int64(len(n))
		default:
			return Decision{}, fmt.Errorf("policy: %s: encoding %q is not utf-8 or base64", tool, a.Encoding)
		}
		return DecideWrite(c, WriteCall{Path: *a.Path, Size: size}), nil
	case ToolReadFile:
		var a struct {
			Path   *string `json:"path"`
			Offset int64   `json:"offset"`
			Length int64   `json:"length"`
		}
		if err := decodeStrict(args, &a, "path", "offset", "length"); err != nil {
			return Decision{}, fmt.Errorf("policy: %s: %w", tool, err)
		}
		if a.Path == nil {
			return Decision{}, fmt.Errorf("policy: %s: missing required field \"path\"", tool)
		}
		return DecideRead(c, ReadCall{Path: *a.Path, Offset: a.Offset, Length: a.Length}), nil
	case ToolExportArtifact:
		var a struct {
			Path *string `json:"path"`
			Name string  `json:"name"`
		}
		if err := decodeStrict(args, &a, "path", "name"); err != nil {
			return Decision{}, fmt.Errorf("policy: %s: %w", tool, err)
		}
		if a.Path == nil {
			return Decision{}, fmt.Errorf("policy: %s: missing required field \"path\"", tool)
		}
		return DecideExport(c, ExportCall{Path: *a.Path, Name: a.Name}), nil
	case ToolHandoffToMac:
		var a struct {
			Step           *string  `json:"step"`
			Artifacts      []string `json:"artifacts"`
			SourceRevision string   `json:"source_revision"`
			Note           string   `json:"note"`
		}
		if err := decodeStrict(args, &a, "step", "artifacts", "source_revision", "note"); err != nil {
			return Decision{}, fmt.Errorf("policy: %s: %w", tool, err)
		}
		if a.Step == nil {
			return Decision{}, fmt.Errorf("policy: %s: missing required field \"step\"", tool)
		}
		return DecideHandoff(c, HandoffCall{Step: *a.Step, Artifacts: a.Artifacts, SourceRevision: a.SourceRevision, Note: a.Note}), nil
	}
	return deny(RuleDefaultDeny, "unknown tool %q; the tools are run_command, write_file, read_file, export_artifact, handoff_to_mac", tool), nil
}

// decodeStrict decodes one JSON object into v. It refuses trailing data,
// fields other than fields (compared exactly: encoding/json alone would
// accept "Command" for "command"), and duplicate keys at any depth, so that
// no other JSON reader can see a different call than the one decided here.
func decodeStrict(data []byte, v any, fields ...string) error {
	if err := checkJSONKeys(data, fields); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid arguments: data after the JSON object")
	}
	return nil
}

// maxJSONDepth bounds nesting in tool arguments.
const maxJSONDepth = 32

func checkJSONKeys(data []byte, fields []string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("invalid arguments: not a JSON object")
	}
	return walkJSONObject(dec, fields, 1)
}

// walkJSONObject reads an object's members after its '{'. top, if not nil,
// lists the only keys allowed.
func walkJSONObject(dec *json.Decoder, top []string, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("invalid arguments: nested too deeply")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid arguments: %w", err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("invalid arguments: duplicate key %q", key)
		}
		seen[key] = true
		if top != nil && !contains(top, key) {
			return fmt.Errorf("invalid arguments: unknown field %q; fields are %s", key, strings.Join(top, ", "))
		}
		if err := walkJSONValue(dec, depth); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	if err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

func walkJSONValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		return walkJSONObject(dec, nil, depth+1)
	case '[':
		if depth+1 > maxJSONDepth {
			return errors.New("invalid arguments: nested too deeply")
		}
		for dec.More() {
			if err := walkJSONValue(dec, depth+1); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid arguments: %w", err)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deny builds a denial.
func deny(rule, format string, args ...any) Decision {
	return Decision{Allow: false, Rule: rule, Reason: "denied by " + rule + ": " + fmt.Sprintf(format, args...)}
}
