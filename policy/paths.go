package policy

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// maxPathBytes bounds one path an agent sends.
const maxPathBytes = 4096

// defaultWorkdir is used when a contract was built without defaults.
const defaultWorkdir = "/home/user/work"

func workdir(c *contracts.Contract) string {
	if c.Sandbox.Workdir == "" {
		return defaultWorkdir
	}
	return path.Clean(c.Sandbox.Workdir)
}

// aliasRoots are directories whose entries alias other files or processes
// (/proc/self/root is the root, /dev/fd/N any open file, /dev/tcp/H/P a
// socket in bash redirections). They are refused wherever they appear.
var aliasRoots = []string{"/proc", "/dev/fd", "/dev/tcp", "/dev/udp", "/dev/pts", "/dev/shm", "/sys"}

// cleanPath validates p and makes it clean and absolute, resolving a relative
// path against base. It returns a reason when p is unusable.
func cleanPath(p, base string) (string, string) {
	switch {
	case p == "":
		return "", "the path is empty"
	case len(p) > maxPathBytes:
		return "", fmt.Sprintf("the path is longer than %d bytes", maxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "", "the path contains a NUL byte"
	case !utf8.ValidString(p):
		return "", "the path is not valid UTF-8"
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Sprintf("the path contains the control character %U", r)
		}
	}
	if !strings.HasPrefix(p, "/") {
		p = base + "/" + p
	}
	p = path.Clean(p)
	for _, a := range aliasRoots {
		if within(p, a) {
			return "", fmt.Sprintf("%s is under %s, which aliases other files or processes", p, a)
		}
	}
	return p, ""
}

// within reports whether p is root or below it. Both must be clean and
// absolute; /work does not contain /work2.
func within(p, root string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root) && p[len(root)] == '/'
}

// withinAny reports whether p is inside one of roots (cleaned first).
func withinAny(p string, roots []string) bool {
	for _, r := range roots {
		if r == "" || !strings.HasPrefix(r, "/") {
			continue
		}
		if within(p, path.Clean(r)) {
			return true
		}
	}
	return false
}

// listRoots formats roots for a reason.
func listRoots(roots []string) string {
	if len(roots) == 0 {
		return "none"
	}
	return strings.Join(roots, ", ")
}

// Harmless devices allowed outside the path lists in redirections and
// read_file. /dev/stdin, /dev/stdout and /dev/stderr name the command's own
// descriptors, which only redirections (themselves checked) can point
// elsewhere; write_file never writes them (they are not in paths.write).
var (
	readableDevices = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/urandom": true, "/dev/random": true, "/dev/stdin": true}
	writableDevices = map[string]bool{"/dev/null": true, "/dev/stdout": true, "/dev/stderr": true}
)

// execTarget reports why writing p would let the agent choose code that an
// allowed program later runs (write-then-execute), or "" if it would not:
// the file of a path-qualified allow rule (./scripts/test.sh), and the
// configuration files of allowed programs that can name programs to run or
// hosts to reach (.git/config and .git/hooks for git, .npmrc for npm ...).
func execTarget(c *contracts.Contract, p string) string {
	for _, r := range c.Commands.Allow {
		if !strings.Contains(r.Run, "/") {
			continue
		}
		want := r.Run
		if !strings.HasPrefix(want, "/") {
			want = workdir(c) + "/" + want
		}
		if path.Clean(want) == p {
			return fmt.Sprintf("%s is the program of an allow rule; changing it would change what that rule runs", p)
		}
	}
	if !strings.Contains(p, "/.") && !strings.Contains(p, "/etc/") && !strings.Contains(p, "/pip.conf") {
		return "" // every file below is a dot file, in a dot directory or in /etc
	}
	for _, part := range shellStartupFiles {
		if containsFragment(p, part) {
			return fmt.Sprintf("%s is a shell start-up file, which the sandbox's shell runs before every command", p)
		}
	}
	for prog, parts := range configFiles {
		for _, part := range parts {
			if containsFragment(p, part) && programAllowed(c, prog) {
				return fmt.Sprintf("%s is configuration %s reads (it can make %s run other programs or reach other hosts)", p, prog, prog)
			}
		}
	}
	return ""
}

// containsFragment reports whether p+"/" contains part (which ends in "/").
func containsFragment(p, part string) bool {
	i := strings.Index(p, part[:len(part)-1])
	for i >= 0 {
		end := i + len(part) - 1
		if end == len(p) || p[end] == '/' {
			return true
		}
		next := strings.Index(p[i+1:], part[:len(part)-1])
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// programAllowed reports whether some rule runs a program with this base name.
func programAllowed(c *contracts.Contract, prog string) bool {
	for _, r := range c.Commands.Allow {
		if path.Base(r.Run) == prog {
			return true
		}
	}
	return false
}

// shellStartupFiles are read by the shell that runs every command (E2B runs
// commands as bash -l -c, a login shell).
var shellStartupFiles = []string{"/.bashrc/", "/.bash_profile/", "/.bash_login/", "/.profile/", "/.bash_logout/",
	"/etc/profile/", "/etc/profile.d/", "/etc/bash.bashrc/", "/etc/environment/"}

// configFiles are, per program, the configuration files it reads from the
// working tree or the home directory, matched as path fragments.
var configFiles = map[string][]string{
	"git":  {"/.git/hooks/", "/.git/config/", "/.git/info/attributes/", "/.gitconfig/", "/.config/git/"},
	"npm":  {"/.npmrc/"},
	"npx":  {"/.npmrc/"},
	"pip":  {"/pip.conf/", "/.pip/", "/.config/pip/"},
	"pip3": {"/pip.conf/", "/.pip/", "/.config/pip/"},
	"curl": {"/.curlrc/"},
	"wget": {"/.wgetrc/"},
	"ssh":  {"/.ssh/config/", "/.ssh/rc/"},
	"scp":  {"/.ssh/config/"},
}
