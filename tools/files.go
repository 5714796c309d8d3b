package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
)

// errSymlink is returned when a path the agent named passes through a
// symbolic link. The policy checks paths lexically; a link inside the
// sandbox could point a write or an export somewhere the contract does not
// allow, so file tools refuse to follow one.
var errSymlink = errors.New("the path passes through a symbolic link; file tools do not follow links")

// checkNoSymlink stats every existing component of p (an absolute, clean
// path) and fails if one is a symbolic link. It returns the entry of p
// itself when it exists.
//
// This narrows, but cannot close, the window between check and use: a
// command running at the same moment could swap a directory for a link.
// What that could reach is still inside the sandbox, which is the boundary
// that holds.
func checkNoSymlink(ctx context.Context, sb *e2b.Sandbox, p string) (e2b.EntryInfo, bool, error) {
	// Directories above the sandbox user's writable areas (/, /home) are
	// the template's and owned by root: only what lies below /home/user or
	// /tmp can have been made a link by the agent.
	cur := ""
	for _, base := range []string{"/home/user", "/tmp"} {
		if strings.HasPrefix(p, base+"/") {
			cur = base
			break
		}
	}
	parts := strings.Split(strings.TrimPrefix(p, cur+"/"), "/")
	for i, part := range parts {
		cur += "/" + part
		info, err := sb.Stat(ctx, cur)
		if errors.Is(err, e2b.ErrNotFound) {
			return e2b.EntryInfo{}, false, nil
		}
		if err != nil {
			return e2b.EntryInfo{}, false, err
		}
		if info.Type == e2b.TypeSymlink || info.SymlinkTarget != "" {
			return e2b.EntryInfo{}, false, fmt.Errorf("%s: %w", cur, errSymlink)
		}
		if i == len(parts)-1 {
			return info, true, nil
		}
	}
	return e2b.EntryInfo{}, false, nil
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
