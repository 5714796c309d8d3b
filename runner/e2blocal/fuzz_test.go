package e2blocal

import (
	"strings"
	"testing"
)

// FuzzResolve: whatever path a client sends, the files API resolves it
// inside /home/user or /tmp with a relative path that cannot climb out, or
// refuses it.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/../../b", "/home/user", "/home/user/../../etc", "/tmp/x/../../y", "/home/userx", "//home//user/./a", "/tmp\x00/a", "~/x"} {
		f.Add(s)
	}
	fsys := &sandboxFS{}
	f.Fuzz(func(t *testing.T, p string) {
		_, rel, clean, err := fsys.resolve(p)
		if err != nil {
			return
		}
		if clean != "/home/user" && clean != "/tmp" && !strings.HasPrefix(clean, "/home/user/") && !strings.HasPrefix(clean, "/tmp/") {
			t.Fatalf("resolve(%q) = %q: outside the areas", p, clean)
		}
		for _, part := range strings.Split(rel, "/") {
			if part == ".." || part == "" {
				t.Fatalf("resolve(%q): rel %q has a %q component", p, rel, part)
			}
		}
		if strings.HasPrefix(rel, "/") {
			t.Fatalf("resolve(%q): rel %q is absolute", p, rel)
		}
	})
}

// FuzzUntrustedHeaders: the Authorization user and the metadata filter never
// panic, and only "user" is ever accepted.
func FuzzUntrustedHeaders(f *testing.F) {
	f.Add("Basic dXNlcjo=", "k=v&k2=v2")
	f.Add("Basic cm9vdDo=", "a%3Db")
	f.Add("Bearer x", "%zz")
	f.Fuzz(func(t *testing.T, auth, filter string) {
		if u, err := userFromAuthorization(auth); err == nil && u != sandboxUser {
			t.Fatalf("userFromAuthorization(%q) accepted %q", auth, u)
		}
		_, _ = parseMetadataFilter(filter)
	})
}
