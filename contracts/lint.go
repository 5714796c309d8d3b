package contracts

import (
	"fmt"
	"net/netip"
	"path"
	"sort"
	"strings"
)

// kind is what a program can do beyond its own job.
type kind int

const (
	kindPlain       kind = iota
	kindInterpreter      // runs code it is given: arbitrary code
	kindPackager         // installs and runs package code
	kindRunner           // runs code from the workdir (tests, build files)
	kindPrinter          // prints its environment or files such as /proc/self/environ
	kindGit              // runs what the repository's .git/config and hooks say
)

// programs maps a program's base name, without a version suffix
// (python3.12 -> python), to what it can do. safe lists subcommands that do
// not run project or package code; a rule limited to them is not flagged.
var programs = map[string]struct {
	kind kind
	safe []string
}{
	"python": {kind: kindInterpreter}, "pypy": {kind: kindInterpreter}, "node": {kind: kindInterpreter},
	"nodejs": {kind: kindInterpreter}, "deno": {kind: kindInterpreter}, "bun": {kind: kindInterpreter},
	"ruby": {kind: kindInterpreter}, "irb": {kind: kindInterpreter}, "perl": {kind: kindInterpreter},
	"php": {kind: kindInterpreter}, "lua": {kind: kindInterpreter}, "luajit": {kind: kindInterpreter},
	"tclsh": {kind: kindInterpreter}, "Rscript": {kind: kindInterpreter}, "R": {kind: kindInterpreter},
	"julia": {kind: kindInterpreter}, "java": {kind: kindInterpreter}, "jshell": {kind: kindInterpreter},
	"groovy": {kind: kindInterpreter}, "osascript": {kind: kindInterpreter}, "pwsh": {kind: kindInterpreter},
	"sh": {kind: kindInterpreter}, "bash": {kind: kindInterpreter}, "dash": {kind: kindInterpreter},
	"zsh": {kind: kindInterpreter}, "ksh": {kind: kindInterpreter}, "mksh": {kind: kindInterpreter},
	"fish": {kind: kindInterpreter}, "csh": {kind: kindInterpreter}, "tcsh": {kind: kindInterpreter},
	"busybox": {kind: kindInterpreter}, "expect": {kind: kindInterpreter}, "vim": {kind: kindInterpreter},
	"vi": {kind: kindInterpreter}, "nvim": {kind: kindInterpreter}, "emacs": {kind: kindInterpreter},
	"gdb": {kind: kindInterpreter}, "eval": {kind: kindInterpreter}, "exec": {kind: kindInterpreter},
	"source": {kind: kindInterpreter}, "builtin": {kind: kindInterpreter}, "command": {kind: kindInterpreter},
	"sudo": {kind: kindInterpreter}, "su": {kind: kindInterpreter}, "doas": {kind: kindInterpreter},

	"pip":  {kind: kindPackager, safe: []string{"list", "show", "freeze", "check", "help"}},
	"pipx": {kind: kindPackager}, "uv": {kind: kindPackager}, "poetry": {kind: kindPackager},
	"pdm": {kind: kindPackager}, "conda": {kind: kindPackager}, "gem": {kind: kindPackager},
	"bundle":   {kind: kindPackager},
	"composer": {kind: kindPackager},
	"npm":      {kind: kindPackager, safe: []string{"ls", "list", "view", "outdated", "audit", "explain", "why", "help"}},
	"npx":      {kind: kindPackager}, "yarn": {kind: kindPackager}, "pnpm": {kind: kindPackager},
	"bunx":  {kind: kindPackager},
	"go":    {kind: kindPackager, safe: []string{"version", "env", "list", "doc", "fmt", "build", "help"}},
	"cargo": {kind: kindPackager, safe: []string{"fmt", "metadata", "tree", "version", "help"}},

	"pytest": {kind: kindRunner}, "py.test": {kind: kindRunner}, "tox": {kind: kindRunner},
	"nox": {kind: kindRunner}, "jest": {kind: kindRunner}, "mocha": {kind: kindRunner},
	"vitest": {kind: kindRunner}, "rspec": {kind: kindRunner}, "phpunit": {kind: kindRunner},
	"make": {kind: kindRunner}, "gmake": {kind: kindRunner}, "cmake": {kind: kindRunner},
	"ctest": {kind: kindRunner}, "ninja": {kind: kindRunner}, "meson": {kind: kindRunner},
	"bazel": {kind: kindRunner}, "gradle": {kind: kindRunner}, "gradlew": {kind: kindRunner},
	"mvn": {kind: kindRunner}, "ant": {kind: kindRunner}, "rake": {kind: kindRunner},
	"just": {kind: kindRunner}, "task": {kind: kindRunner}, "xcodebuild": {kind: kindRunner},
	"swift": {kind: kindRunner},

	"git": {kind: kindGit},

	"echo": {kind: kindPrinter}, "printf": {kind: kindPrinter}, "printenv": {kind: kindPrinter},
	"env": {kind: kindPrinter}, "cat": {kind: kindPrinter}, "tee": {kind: kindPrinter},
	"head": {kind: kindPrinter}, "tail": {kind: kindPrinter}, "less": {kind: kindPrinter},
	"more": {kind: kindPrinter}, "od": {kind: kindPrinter}, "xxd": {kind: kindPrinter},
	"hexdump": {kind: kindPrinter}, "base64": {kind: kindPrinter}, "strings": {kind: kindPrinter},
	"grep": {kind: kindPrinter}, "dd": {kind: kindPrinter}, "cp": {kind: kindPrinter},
	"set": {kind: kindPrinter}, "export": {kind: kindPrinter}, "declare": {kind: kindPrinter},
	"awk": {kind: kindPrinter}, "gawk": {kind: kindPrinter}, "xargs": {kind: kindPrinter},
	"curl": {kind: kindPrinter}, "wget": {kind: kindPrinter},
}

// programKind returns what the rule's program can do, given the
// subcommands it is limited to.
func programKind(r CommandRule) kind {
	base := path.Base(r.Run)
	name := strings.TrimRight(base, "0123456789.")
	if name == "" {
		name = base
	}
	p, ok := programs[name]
	if !ok {
		p, ok = programs[base]
	}
	if !ok {
		return kindPlain
	}
	if len(p.safe) > 0 && len(r.Subcommands) > 0 {
		all := true
		for _, s := range r.Subcommands {
			all = all && contains(p.safe, s)
		}
		if all {
			return kindPlain
		}
	}
	return p.kind
}

// sharedHosts accept uploads from anyone: an allowlist entry for them is an
// exfiltration channel.
var sharedHosts = map[string]bool{
	"github.com": true, "*.github.com": true, "gist.github.com": true, "*.githubusercontent.com": true,
	"*.amazonaws.com": true, "*.s3.amazonaws.com": true, "*.googleapis.com": true,
	"storage.googleapis.com": true, "*.blob.core.windows.net": true, "*.cloudfront.net": true,
	"pastebin.com": true, "*.ngrok.io": true, "*.ngrok-free.app": true, "transfer.sh": true,
	"*.r2.cloudflarestorage.com": true, "*.workers.dev": true, "*.herokuapp.com": true,
}

// lint returns what a valid contract allows that its author should choose
// knowingly. It never makes a contract invalid.
func lint(c *Contract) []Warning {
	var ws []Warning
	warn := func(p, format string, args ...any) {
		ws = append(ws, Warning{Path: p, Msg: fmt.Sprintf(format, args...)})
	}
	wd := c.Sandbox.Workdir
	writesWorkdir := -1
	for i, w := range c.Paths.Write {
		if within(wd, w) || within(w, wd) {
			writesWorkdir = i
			break
		}
	}

	// arbitrary[run] says the program can run code the agent chooses.
	arbitrary := map[string]bool{}
	for i, r := range c.Commands.Allow {
		p := fmt.Sprintf("commands.allow[%d]", i)
		switch programKind(r) {
		case kindInterpreter:
			arbitrary[r.Run] = true
			warn(p, "%s is allowed: that is arbitrary code; network and file confinement rest on the sandbox alone", r.Run)
		case kindPackager:
			arbitrary[r.Run] = true
			warn(p, "%s is allowed: it installs or runs package and project code (install scripts, build scripts, tests), which is arbitrary code; confinement rests on the sandbox alone", r.Run)
			if writesWorkdir >= 0 {
				warn(p, "%s runs code from the workdir, which paths.write[%d] (%s) makes writable: the agent can write a file and have it run (write-then-execute)", r.Run, writesWorkdir, c.Paths.Write[writesWorkdir])
			}
		case kindRunner:
			if writesWorkdir >= 0 {
				arbitrary[r.Run] = true
				warn(p, "%s runs code from the workdir, which paths.write[%d] (%s) makes writable: the agent can write a test or build file and have it run (write-then-execute); confinement rests on the sandbox alone", r.Run, writesWorkdir, c.Paths.Write[writesWorkdir])
			}
		case kindGit:
			gitDir := path.Join(wd, ".git")
			for j, w := range c.Paths.Write {
				if within(gitDir, w) || within(w, gitDir) {
					arbitrary[r.Run] = true
					warn(p, "%s reads %s/config and runs its hooks, which paths.write[%d] (%s) makes writable: the agent can set core.fsmonitor, core.pager or a hook and have even git status run it (write-then-execute); make only the source directories writable", r.Run, gitDir, j, w)
					break
				}
			}
		}
		if strings.Contains(r.Run, "/") {
			abs := r.Run
			if !path.IsAbs(abs) {
				abs = path.Join(wd, abs)
			}
			if j := coveredBy(abs, c.Paths.Write); j >= 0 {
				arbitrary[r.Run] = true
				warn(p+".run", "%s is inside writable paths.write[%d] (%s): the agent can rewrite it and then run it (write-then-execute)", r.Run, j, c.Paths.Write[j])
			}
		}
		if r.Wrapper {
			arbitrary[r.Run] = true
			warn(p+".wrapper", "%s may wrap other programs: each wrapped command is still checked against the other rules, but every allowed program can now be run through %s, with the arguments and environment it supplies", r.Run, r.Run)
		}
		for j, f := range r.AllowFlags {
			warn(fmt.Sprintf("%s.allow_flags[%d]", p, j), "%s %s is opted in: that flag runs programs or writes files where the command policy cannot see", r.Run, f)
		}
	}

	ws = append(ws, shadowedRules(c.Commands.Allow)...)
	for i, w := range c.Paths.Write {
		p := fmt.Sprintf("paths.write[%d]", i)
		for _, sys := range systemDirs {
			if within(sys.dir, w) || within(w, sys.dir) {
				warn(p, "%s overlaps %s, %s", w, sys.dir, sys.why)
				break
			}
		}
		if within(userHome, w) {
			warn(p, "%s covers the home directory %s: the agent can write dotfiles (.bashrc, .gitconfig, .npmrc, pip.conf) that allowed programs read and obey", w, userHome)
		}
	}

	if c.Commands.DefaultTimeout > c.Sandbox.Lifetime {
		warn("commands.default_timeout", "%s is longer than sandbox.lifetime (%s): a command would be killed with its sandbox first", c.Commands.DefaultTimeout, c.Sandbox.Lifetime)
	}
	if c.Commands.MaxTimeout > c.Sandbox.Lifetime {
		warn("commands.max_timeout", "%s is longer than sandbox.lifetime (%s): a command would be killed with its sandbox first", c.Commands.MaxTimeout, c.Sandbox.Lifetime)
	}

	switch c.Network.Egress {
	case EgressOpen:
		warn("network.egress", "open: the sandbox can reach any host, so anything the agent can read can leave; prefer an allowlist")
	case EgressAllowlist:
		for i, h := range c.Network.Allow {
			p := fmt.Sprintf("network.allow[%d]", i)
			if pr, err := netip.ParsePrefix(h); err == nil && pr.Bits() == 0 {
				warn(p, "%s covers every address: that is open egress", h)
			} else if sharedHosts[strings.ToLower(strings.TrimSuffix(h, "."))] {
				warn(p, "%s stores anyone's uploads: an agent can send data out through it", h)
			}
		}
	}

	for i, cr := range c.Credentials {
		for j, g := range cr.Grant {
			p := fmt.Sprintf("credentials[%d].grant[%d]", i, j)
			if arbitrary[g.Run] || programKind(CommandRule{Run: g.Run}) == kindPrinter {
				warn(p, "%s is given to %s, which can print it or send it anywhere; scrubbing the output is then the only defence", cr.Name, g.Run)
			}
		}
	}

	if m := c.Mac; m != nil && m.Approval == "none" {
		warn("mac.approval", "none: steps run on the Mac with no human approving their inputs")
	}
	return ws
}

// systemDirs hold what every program in the sandbox loads and runs.
var systemDirs = []struct{ dir, why string }{
	{"/bin", "which holds programs: the agent can replace an allowed program (write-then-execute)"},
	{"/sbin", "which holds programs: the agent can replace an allowed program (write-then-execute)"},
	{"/usr", "which holds programs and libraries: the agent can replace an allowed program (write-then-execute)"},
	{"/lib", "which holds libraries every program loads (write-then-execute)"},
	{"/lib64", "which holds libraries every program loads (write-then-execute)"},
	{"/etc", "which holds configuration every program obeys (/etc/ld.so.preload loads code into all of them)"},
	{"/opt", "which holds installed programs: the agent can replace an allowed program (write-then-execute)"},
}

// userHome is the sandbox user's home directory (E2B's convention, and the
// local sandbox's).
const userHome = "/home/user"

// shadowedRules finds rules that have no effect because another rule for
// the same program allows at least as much.
func shadowedRules(allow []CommandRule) []Warning {
	var ws []Warning
	for i, r := range allow {
		for j, o := range allow {
			if i == j || o.Run != r.Run {
				continue
			}
			// o allows every subcommand r does (or any), and every flag;
			// ties go to the earlier rule.
			covers := len(o.Subcommands) == 0 || (len(r.Subcommands) > 0 && subset(r.Subcommands, o.Subcommands))
			covers = covers && subset(r.AllowFlags, o.AllowFlags) && (o.Wrapper || !r.Wrapper)
			same := len(o.Subcommands) == len(r.Subcommands) && len(o.AllowFlags) == len(r.AllowFlags) && o.Wrapper == r.Wrapper
			if covers && (!same || j < i) {
				ws = append(ws, Warning{
					Path: fmt.Sprintf("commands.allow[%d]", i),
					Msg:  fmt.Sprintf("has no effect: commands.allow[%d] already allows %s at least as widely", j, r.Run),
				})
				break
			}
		}
	}
	return ws
}

func subset(a, b []string) bool {
	for _, s := range a {
		if !contains(b, s) {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
