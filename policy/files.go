package policy

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// defaultFileBytes is used when a contract was built without defaults.
const defaultFileBytes = 10 << 20

func fileLimit(c *contracts.Contract) int64 {
	if c.Limits.FileBytes <= 0 {
		return defaultFileBytes
	}
	return int64(c.Limits.FileBytes)
}

// DecideWrite decides a write_file call: the path must be inside
// paths.write and the size within limits.file_bytes.
func DecideWrite(c *contracts.Contract, call WriteCall) Decision {
	if c == nil {
		return deny(RuleDefaultDeny, "no contract is loaded for this task")
	}
	if strings.HasSuffix(call.Path, "/") {
		return deny("paths.write", "%q names a directory; write_file writes a file", call.Path)
	}
	p, why := cleanPath(call.Path, workdir(c))
	if why != "" {
		return deny("paths.write", "%s; writable: %s", why, listRoots(c.Paths.Write))
	}
	if !withinAny(p, c.Paths.Write) {
		return deny("paths.write", "%s is outside the writable paths; writable: %s", p, listRoots(c.Paths.Write))
	}
	if why := execTarget(c, p); why != "" {
		return deny("builtin.exec-target", "%s", why)
	}
	if call.Size < 0 {
		return deny("limits.file_bytes", "negative size %d", call.Size)
	}
	if limit := fileLimit(c); call.Size > limit {
		return deny("limits.file_bytes", "%d bytes is more than the %d-byte limit on one file", call.Size, limit)
	}
	return Decision{Allow: true, Rule: "paths.write", Reason: "allowed by paths.write: " + p,
		Effective: &FileEffective{Path: p, Length: call.Size}}
}

// DecideRead decides a read_file call: the path must be inside paths.read;
// Length is clamped to limits.file_bytes (0 means that limit).
func DecideRead(c *contracts.Contract, call ReadCall) Decision {
	if c == nil {
		return deny(RuleDefaultDeny, "no contract is loaded for this task")
	}
	p, why := cleanPath(call.Path, workdir(c))
	if why != "" {
		return deny("paths.read", "%s; readable: %s", why, listRoots(c.Paths.Read))
	}
	if !withinAny(p, c.Paths.Read) {
		return deny("paths.read", "%s is outside the readable paths; readable: %s", p, listRoots(c.Paths.Read))
	}
	if call.Offset < 0 || call.Length < 0 {
		return deny("paths.read", "offset and length must not be negative")
	}
	limit := fileLimit(c)
	eff := &FileEffective{Path: p, Offset: call.Offset, Length: call.Length}
	reason := "allowed by paths.read: " + p
	switch {
	case call.Length == 0:
		eff.Length = limit
	case call.Length > limit:
		eff.Length, eff.Clamped = limit, true
		reason += fmt.Sprintf("; length clamped to %d bytes (limits.file_bytes)", limit)
	}
	return Decision{Allow: true, Rule: "paths.read", Reason: reason, Effective: eff}
}

// artifactName is the form of an artifact name.
var artifactName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// validArtifactName reports whether name may name an artifact.
func validArtifactName(name string) bool {
	return artifactName.MatchString(name) && !strings.Contains(name, "..")
}

// DecideExport decides an export_artifact call: the path must be inside
// paths.export and the name (default: the path's base name) a valid artifact
// name.
func DecideExport(c *contracts.Contract, call ExportCall) Decision {
	if c == nil {
		return deny(RuleDefaultDeny, "no contract is loaded for this task")
	}
	if strings.HasSuffix(call.Path, "/") {
		return deny("paths.export", "%q names a directory; export_artifact exports a file", call.Path)
	}
	p, why := cleanPath(call.Path, workdir(c))
	if why != "" {
		return deny("paths.export", "%s; exportable: %s", why, listRoots(c.Paths.Export))
	}
	if !withinAny(p, c.Paths.Export) {
		return deny("paths.export", "%s is outside the exportable paths; exportable: %s", p, listRoots(c.Paths.Export))
	}
	name := call.Name
	if name == "" {
		name = path.Base(p)
	}
	if !validArtifactName(name) {
		return deny("builtin.artifact-name", "artifact name %q must match [A-Za-z0-9][A-Za-z0-9._-]{0,127} without \"..\"; pass a name", printable(name))
	}
	return Decision{Allow: true, Rule: "paths.export", Reason: fmt.Sprintf("allowed by paths.export: %s as %s", p, name),
		Effective: &ExportEffective{Path: p, Name: name}}
}

// maxHandoffText bounds the free-text fields of a handoff.
const maxHandoffText = 4096

// DecideHandoff decides a handoff_to_mac call: the step must be one of the
// contract's mac.steps, named exactly, and every artifact a distinct valid
// name in call.Known.
func DecideHandoff(c *contracts.Contract, call HandoffCall) Decision {
	if c == nil {
		return deny(RuleDefaultDeny, "no contract is loaded for this task")
	}
	if c.Mac == nil || len(c.Mac.Steps) == 0 {
		return deny("mac", "this contract has no mac section; handoff_to_mac is not available")
	}
	steps := make([]string, 0, len(c.Mac.Steps))
	for name := range c.Mac.Steps {
		steps = append(steps, name)
	}
	slices.Sort(steps)
	s := call.Step
	if s == "" || strings.ContainsAny(s, "/\\\x00") || strings.Contains(s, "..") || !utf8.ValidString(s) || strings.IndexFunc(s, isSpaceOrControl) >= 0 {
		return deny("mac.steps", "%q is not a step name; steps: %s", printable(s), strings.Join(steps, ", "))
	}
	if _, ok := c.Mac.Steps[s]; !ok {
		return deny("mac.steps", "%q is not a step of this contract; steps: %s", s, strings.Join(steps, ", "))
	}
	if len(call.Artifacts) > 256 {
		return deny("builtin.limits", "%d artifacts; at most 256", len(call.Artifacts))
	}
	if len(call.SourceRevision) > maxHandoffText || len(call.Note) > maxHandoffText {
		return deny("builtin.limits", "source_revision and note are limited to %d bytes", maxHandoffText)
	}
	if !utf8.ValidString(call.SourceRevision) || !utf8.ValidString(call.Note) ||
		strings.IndexByte(call.SourceRevision, 0) >= 0 || strings.IndexByte(call.Note, 0) >= 0 {
		return deny("builtin.limits", "source_revision and note must be valid UTF-8 without NUL bytes")
	}
	seen := map[string]bool{}
	for _, a := range call.Artifacts {
		switch {
		case !validArtifactName(a):
			return deny("builtin.artifact-name", "%q is not an artifact name", printable(a))
		case seen[a]:
			return deny("builtin.artifact-name", "artifact %q is listed twice", a)
		case !contains(call.Known, a):
			return deny("builtin.artifacts", "artifact %q was not exported in this task; export it with export_artifact first", a)
		}
		seen[a] = true
	}
	arts := append([]string{}, call.Artifacts...)
	return Decision{Allow: true, Rule: "mac.steps." + s, Reason: fmt.Sprintf("allowed by mac.steps: %s with %d artifact(s)", s, len(arts)),
		Effective: &HandoffEffective{Step: s, Artifacts: arts, SourceRevision: call.SourceRevision, Note: call.Note}}
}

func isSpaceOrControl(r rune) bool {
	return r <= 0x20 || r == 0x7f || r == 0x85 || r == 0xa0 || r == 0x2028 || r == 0x2029 || (r >= 0x2000 && r <= 0x200f) || r == 0x3000 || r == 0xfeff
}

// printable quotes s safely for a reason, shortening it.
func printable(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
