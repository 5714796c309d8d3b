//go:build linux

package jail

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzArea checks the mapping of agent-supplied sandbox paths to host areas:
// it never panics, and what it accepts is always beneath /home/user or /tmp
// and cleanly relative, whatever "..", slashes or NUL bytes it is given.
func FuzzArea(f *testing.F) {
	for _, seed := range []string{
		"/home/user", "/home/user/a/b", "/tmp", "/tmp/x", "/home/user/../../etc/passwd",
		"/home/user/..", "/tmpx", "/home/user2", "relative", "", "/", "//home//user//x",
		"/home/user/./a/../b", "/tmp/\x00", "/home/user/a/../../user/b",
	} {
		f.Add(seed)
	}
	s := &Sandbox{dir: "/srv/sb", home: "/srv/sb/home", tmp: "/srv/sb/tmp"}
	f.Fuzz(func(t *testing.T, p string) {
		base, rel, err := s.area(p)
		if err != nil {
			return
		}
		if base != s.home && base != s.tmp {
			t.Fatalf("%q mapped to base %q", p, base)
		}
		if rel != "." && (filepath.IsAbs(rel) || rel != filepath.Clean(rel) || rel == ".." || strings.HasPrefix(rel, "../")) {
			t.Fatalf("%q mapped to unclean relative path %q", p, rel)
		}
		if strings.ContainsRune(rel, 0) {
			t.Fatalf("%q kept a NUL byte", p)
		}
		host := filepath.Join(base, rel)
		if host != base && !strings.HasPrefix(host, base+"/") {
			t.Fatalf("%q escapes to %q", p, host)
		}
	})
}
