package policy

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// argContext is one simple command being checked against one rule.
type argContext struct {
	a    *analysis
	idx  int
	rule contracts.CommandRule
	prog string   // base name of argv[0], for built-in knowledge
	argv []string // argv[0] included
}

// checkRule checks argv against rule idx: subcommands, then the built-in
// knowledge about the program's exec-capable flags and network use.
func (a *analysis) checkRule(idx int, base string, argv []string, xargs bool) *denial {
	r := a.c.Commands.Allow[idx]
	if len(r.Subcommands) > 0 {
		sub := subcommandOf(base, argv)
		if sub == "" {
			return denyf(ruleName(idx), "%s needs one of its allowed subcommands as its first argument (before any flag): %s", base, strings.Join(r.Subcommands, ", "))
		}
		if !contains(r.Subcommands, sub) {
			return denyf(ruleName(idx), "%s %s is not allowed; allowed: %s %s", base, printable(sub), base, strings.Join(r.Subcommands, ", "))
		}
	}
	k := knowledge[base]
	if k == nil {
		return nil
	}
	if xargs {
		return denyf("builtin.wrapper", "%s behind xargs would receive flags that cannot be checked", base)
	}
	return k(&argContext{a: a, idx: idx, rule: r, prog: base, argv: argv})
}

// subcommandOf returns a program's subcommand: for git the first word after
// its global options, for other programs the first argument if it is not a
// flag (a flag first could take the would-be subcommand as its value).
func subcommandOf(base string, argv []string) string {
	if base == "git" {
		_, sub, _ := gitGlobal(argv)
		return sub
	}
	if len(argv) > 1 && !strings.HasPrefix(argv[1], "-") {
		return argv[1]
	}
	return ""
}

// knowledge holds the built-in argument checks, keyed by program base name.
var knowledge map[string]func(*argContext) *denial

func init() {
	knowledge = map[string]func(*argContext) *denial{
		"find": checkFind, "git": checkGit,
		"sed": checkSed, "gsed": checkSed,
		"awk": checkAwk, "gawk": checkAwk, "mawk": checkAwk, "nawk": checkAwk,
		"tar": checkTar, "gtar": checkTar, "bsdtar": checkTar,
		"rsync": checkRsync, "rg": checkRg, "fd": checkFd, "fdfind": checkFd,
		"curl": checkCurl, "wget": checkWget,
		"pip": checkPip, "pip3": checkPip, "npm": checkNpm,
		"ssh": checkSSH, "scp": checkSSH, "sftp": checkSSH,
		"sort": checkSort, "tee": checkTee, "dd": checkDd, "zip": checkZip,
		"less": checkPager, "more": checkPager, "most": checkPager, "pg": checkPager, "man": checkMan,
		"vi": checkVim, "vim": checkVim, "nvim": checkVim, "view": checkVim, "ex": checkVim, "vimdiff": checkVim, "gvim": checkVim,
		"emacs": checkEmacs, "base64": checkBase64,
		"unzip": checkUnzip, "cp": checkWriter, "mv": checkWriter, "install": checkWriter, "ln": checkWriter, "rm": checkWriter,
		"rmdir": checkWriter, "unlink": checkWriter, "touch": checkWriter, "mkdir": checkWriter, "truncate": checkWriter,
		"shred": checkWriter, "chmod": checkWriter, "chown": checkWriter, "chgrp": checkWriter,
		"nc": checkNetcat, "ncat": checkNetcat, "netcat": checkNetcat, "socat": checkNetcat, "telnet": checkNetcat, "ftp": checkNetcat,
	}
}

// checkDangers refuses any spelled option matching a danger the rule has not
// opted into.
func (x *argContext) checkDangers(flags []opt, dangers []danger) *denial {
	for _, f := range flags {
		for _, d := range dangers {
			if d.matches(f.name) && !d.allowedBy(x.rule.AllowFlags) {
				return denyf("builtin.flags", "%s %s %s; a rule must list %s in allow_flags to allow it", x.prog, f.name, d.why, d.names[0])
			}
		}
	}
	return nil
}

// writePath checks a file a program will write against paths.write.
func (x *argContext) writePath(p, what string) *denial {
	if p == "-" {
		return nil
	}
	return x.a.checkPath(p, true, x.prog+" "+what)
}

func (a *analysis) checkPath(p string, write bool, what string) *denial {
	rule, roots, verb := "paths.read", a.c.Paths.Read, "readable"
	if write {
		rule, roots, verb = "paths.write", a.c.Paths.Write, "writable"
	}
	if strings.HasPrefix(p, "~") || strings.ContainsAny(p, "*?[") {
		// The shell may expand a pattern in an argument (/work/.[.]/etc
		// names /etc); quoting is gone by now, so any pattern character is
		// refused.
		return denyf(rule, "%s %q: ~ and pattern characters (* ? [) are not supported in paths; write the path out; %s: %s", what, printable(p), verb, listRoots(roots))
	}
	for _, cwd := range a.cwds {
		cp, why := cleanPath(p, cwd)
		if why != "" {
			return denyf(rule, "%s: %s", what, why)
		}
		if write && writableDevices[cp] || !write && readableDevices[cp] {
			continue
		}
		if !withinAny(cp, roots) {
			return denyf(rule, "%s %s is outside the %s paths; %s: %s", what, cp, verb, verb, listRoots(roots))
		}
		if why := execTarget(a.c, cp); write && why != "" {
			return denyf("builtin.exec-target", "%s", why)
		}
	}
	return nil
}

// cwdWritable checks that a program writing into its working directory
// writes inside paths.write.
func (x *argContext) cwdWritable(what string) *denial { return x.writePath(".", what) }

// networkTool returns the egress-none denial for a tool about to use the
// network, or nil.
func (x *argContext) networkNone(what string) *denial {
	if x.a.c.Network.Egress == contracts.EgressOpen || x.a.c.Network.Egress == contracts.EgressAllowlist {
		return nil
	}
	return denyf("network.egress", "network: egress none: %s needs the network and this task has none", what)
}

func (x *argContext) url(raw, defScheme string, schemes ...string) *denial {
	if d := x.networkNone(x.prog + " " + printable(raw)); d != nil {
		return d
	}
	if why := checkURL(x.a.c, raw, defScheme, schemes...); why != "" {
		return denyf("network.allow", "%s: %s", x.prog, trimNetworkPrefix(why))
	}
	return nil
}

func (x *argContext) host(h string) *denial {
	if d := x.networkNone(x.prog + " " + printable(h)); d != nil {
		return d
	}
	if ok, why := HostAllowed(x.a.c, h); !ok {
		return denyf("network.allow", "%s: %s", x.prog, trimNetworkPrefix(why))
	}
	return nil
}

// trimNetworkPrefix drops the "network.allow: " or "network: " a
// HostAllowed reason starts with, which the denial's rule already says.
func trimNetworkPrefix(why string) string {
	for _, p := range []string{"network.allow: ", "network: "} {
		if r, ok := strings.CutPrefix(why, p); ok {
			return r
		}
	}
	return why
}

// --- find

var findDangers = []danger{
	{[]string{"-exec"}, "runs a program"}, {[]string{"-execdir"}, "runs a program"},
	{[]string{"-ok"}, "runs a program"}, {[]string{"-okdir"}, "runs a program"},
	{[]string{"-delete"}, "deletes files"},
	{[]string{"-fprint"}, "writes a file"}, {[]string{"-fprint0"}, "writes a file"},
	{[]string{"-fprintf"}, "writes a file"}, {[]string{"-fls"}, "writes a file"},
}

func checkFind(x *argContext) *denial {
	flags := make([]opt, 0, len(x.argv))
	for _, a := range x.argv[1:] {
		flags = append(flags, opt{name: a})
	}
	return x.checkDangers(flags, findDangers)
}

// --- git

// gitGlobal parses git's global options. It returns them, the subcommand
// and the index of the subcommand in argv (0 if none).
func gitGlobal(argv []string) ([]opt, string, int) {
	var opts []opt
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "-") {
			return opts, a, i
		}
		name, val, has := strings.Cut(a, "=")
		o := opt{name: name, value: val, hasValue: has}
		switch {
		case a == "-C" || a == "-c" || (!has && (a == "--git-dir" || a == "--work-tree" || a == "--namespace" || a == "--super-prefix" || a == "--config-env" || a == "--list-cmds" || a == "--attr-source")):
			if i+1 < len(argv) {
				i++
				o.value, o.hasValue = argv[i], true
			}
		case strings.HasPrefix(a, "-C") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			o = opt{name: "-C", value: a[2:], hasValue: true}
		case strings.HasPrefix(a, "-c") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			o = opt{name: "-c", value: a[2:], hasValue: true}
		case a == "--":
			return opts, "", 0
		}
		opts = append(opts, o)
	}
	return opts, "", 0
}

var gitSafeGlobal = map[string]bool{
	"--no-pager": true, "-P": true, "-p": true, "--paginate": true, "--no-replace-objects": true,
	"--literal-pathspecs": true, "--glob-pathspecs": true, "--noglob-pathspecs": true,
	"--icase-pathspecs": true, "--no-optional-locks": true, "--bare": true, "--version": true,
	"--help": true, "-h": true, "-v": true, "--no-lazy-fetch": true, "--no-advice": true, "-C": true,
}

// gitKnownGlobal reports whether name is a global option the engine knows
// (a danger a rule opted into, or a harmless one with a value).
func gitKnownGlobal(name string) bool {
	for _, d := range gitGlobalDangers {
		if d.matches(name) {
			return true
		}
	}
	return name == "--namespace" || name == "--list-cmds" || name == "--attr-source"
}

var gitGlobalDangers = []danger{
	{[]string{"-c"}, "sets configuration (core.pager, core.sshCommand, alias.x=!cmd ... run programs)"},
	{[]string{"--config-env"}, "sets configuration from the environment"},
	{[]string{"--exec-path"}, "changes where git finds its programs"},
	{[]string{"--git-dir"}, "points git at another repository and its configuration"},
	{[]string{"--work-tree"}, "points git at another work tree"},
	{[]string{"--super-prefix"}, "is internal"},
}

// gitDeniedSubs run other programs or serve repositories; a rule opts in by
// listing the subcommand's name in allow_flags.
var gitDeniedSubs = map[string]string{
	"config": "writes configuration that can run programs (core.*, alias.*, include.*)", "difftool": "runs a diff tool",
	"mergetool": "runs a merge tool", "filter-branch": "runs shell filters", "send-email": "runs a mailer",
	"instaweb": "runs a web server", "hook": "runs hooks", "daemon": "serves repositories",
	"credential": "handles credentials", "credential-store": "handles credentials", "credential-cache": "handles credentials",
	"web--browse": "runs a browser", "upload-pack": "is a server program", "receive-pack": "is a server program",
	"upload-archive": "is a server program", "remote-ext": "runs a program", "remote-fd": "is internal",
	"shell": "is a restricted login shell", "archimport": "imports from another system", "cvsimport": "imports from another system",
	"cvsserver": "is a server program", "cvsexportcommit": "exports to another system", "svn": "talks to another system",
	"p4": "talks to another system", "quiltimport": "imports patches", "imap-send": "sends mail",
	"fsmonitor--daemon": "runs a daemon", "bugreport": "writes a report file", "maintenance": "registers scheduled jobs",
}

var gitSubDangers = []danger{
	{[]string{"--ext-diff"}, "runs an external diff program"},
	{[]string{"--textconv"}, "runs text conversion programs"},
	{[]string{"--output"}, "writes a file"},
	{[]string{"--upload-pack"}, "runs a program as the remote's upload-pack"},
	{[]string{"--receive-pack"}, "runs a program as the remote's receive-pack"},
	{[]string{"--exec"}, "runs a program"},
	{[]string{"--template"}, "installs hooks from a template directory"},
	{[]string{"--open-files-in-pager", "-O"}, "runs a pager program"},
}

// gitSubShortDangers are short options dangerous only for some subcommands.
var gitSubShortDangers = map[string][]danger{
	"fetch":     {{[]string{"-u", "--upload-pack"}, "runs a program as the remote's upload-pack"}},
	"pull":      {{[]string{"-u", "--upload-pack"}, "runs a program as the remote's upload-pack"}},
	"ls-remote": {{[]string{"-u", "--upload-pack"}, "runs a program as the remote's upload-pack"}},
	"clone": {{[]string{"-u", "--upload-pack"}, "runs a program as the remote's upload-pack"},
		{[]string{"-c", "--config"}, "sets configuration in the new repository"}},
	"archive": {{[]string{"--remote"}, "runs a program on a remote"}},
	"grep":    {{[]string{"-O", "--open-files-in-pager"}, "runs a pager program"}},
	"rebase": {{[]string{"-x", "--exec"}, "runs a program for each commit"},
		{[]string{"-i", "--interactive"}, "opens an editor"}, {[]string{"--edit-todo"}, "opens an editor"}},
	"help":   {{[]string{"-w", "--web"}, "runs a browser"}, {[]string{"-i", "--info"}, "runs info"}, {[]string{"-m", "--man"}, "runs man"}},
	"commit": {{[]string{"-e", "--edit"}, "opens an editor"}},
}

var gitNetworkSubs = map[string]bool{"clone": true, "fetch": true, "pull": true, "push": true, "ls-remote": true}

func checkGit(x *argContext) *denial {
	globals, sub, at := gitGlobal(x.argv)
	for _, g := range globals {
		if d := x.checkDangers([]opt{g}, gitGlobalDangers); d != nil {
			return d
		}
		if !gitSafeGlobal[g.name] && !gitKnownGlobal(g.name) {
			return denyf("builtin.flags", "git global option %s is not supported", printable(g.name))
		}
		if g.name == "-C" {
			if d := x.a.checkPath(g.value, false, "git -C"); d != nil {
				return d
			}
		}
	}
	if sub == "" {
		return nil
	}
	if why, ok := gitDeniedSubs[sub]; ok && !contains(x.rule.AllowFlags, sub) {
		return denyf("builtin.flags", "git %s %s; a rule must list %s in allow_flags to allow it", sub, why, sub)
	}
	args := x.argv[at+1:]
	if sub == "config" {
		if len(args) == 0 || !contains([]string{"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list", "--get-urlmatch", "--get-color", "--get-colorbool"}, args[0]) {
			return denyf("builtin.flags", "git config may only read configuration (--get, --list ...)")
		}
	}
	// Options of the subcommand: every letter of a short cluster is examined.
	spec := &optSpec{}
	flags := spelledFlags(args, spec)
	if d := x.checkDangers(flags, gitSubDangers); d != nil {
		return d
	}
	if d := x.checkDangers(flags, gitSubShortDangers[sub]); d != nil {
		return d
	}
	_, operands := parseArgs(args, spec)
	switch sub {
	case "bisect":
		if len(operands) > 0 && operands[0] == "run" && !contains(x.rule.AllowFlags, "bisect run") {
			return denyf("builtin.flags", "git bisect run runs a program; a rule must list \"bisect run\" in allow_flags to allow it")
		}
	case "submodule":
		for _, o := range operands {
			if o == "foreach" && !contains(x.rule.AllowFlags, "submodule foreach") {
				return denyf("builtin.flags", "git submodule foreach runs a shell command; a rule must list \"submodule foreach\" in allow_flags to allow it")
			}
		}
	}
	// Destinations git creates or writes.
	var dests []string
	switch sub {
	case "clone":
		if len(operands) >= 2 {
			dests = append(dests, operands[1])
		} else {
			dests = append(dests, ".") // a new directory in the working directory
		}
	case "init":
		if len(operands) >= 1 {
			dests = append(dests, operands[0])
		} else {
			dests = append(dests, ".")
		}
	case "worktree":
		if len(operands) >= 2 && operands[0] == "add" {
			dests = append(dests, operands[1])
		}
	case "format-patch":
		for i, a := range args {
			if (a == "-o" || a == "--output-directory") && i+1 < len(args) {
				dests = append(dests, args[i+1])
			} else if v, ok := strings.CutPrefix(a, "--output-directory="); ok {
				dests = append(dests, v)
			}
		}
	}
	for _, d := range dests {
		if den := x.a.checkPath(d, true, "git "+sub); den != nil {
			return den
		}
	}
	// Network: repositories given as URLs.
	var repos []string
	switch sub {
	case "clone", "fetch", "pull", "push", "ls-remote":
		if len(operands) > 0 {
			repos = append(repos, operands[0])
		}
	case "remote":
		if len(operands) >= 3 && (operands[0] == "add" || operands[0] == "set-url") {
			repos = append(repos, operands[2:]...)
		}
	case "submodule":
		if len(operands) >= 2 && operands[0] == "add" {
			repos = append(repos, operands[1])
		}
	}
	sawURL := false
	for _, r := range repos {
		isURL, d := x.gitRepo(r)
		if d != nil {
			return d
		}
		sawURL = sawURL || isURL
	}
	if gitNetworkSubs[sub] && !sawURL && sub != "clone" {
		if d := x.networkNone("git " + sub + " (it contacts a remote)"); d != nil {
			return d
		}
	}
	return nil
}

// gitRepo checks a repository argument; it reports whether it is a URL.
func (x *argContext) gitRepo(r string) (bool, *denial) {
	if i := strings.Index(r, "::"); i >= 0 && !strings.Contains(r[:i], "/") {
		return true, denyf("builtin.flags", "git remote helper %q runs programs; only http(s), ssh and git URLs are allowed", printable(r[:i]))
	}
	if strings.Contains(r, "://") {
		scheme := strings.ToLower(r[:strings.Index(r, "://")])
		if scheme == "file" {
			return false, nil
		}
		return true, x.url(r, "https", "https", "http", "ssh", "git", "git+ssh", "ssh+git")
	}
	// scp-like [user@]host:path, with no slash before the colon.
	if i := strings.IndexByte(r, ':'); i > 0 && !strings.Contains(r[:i], "/") {
		h := r[:i]
		if j := strings.LastIndexByte(h, '@'); j >= 0 {
			h = h[j+1:]
		}
		return true, x.host(h)
	}
	return false, nil
}

// --- sed

var sedSpec = &optSpec{shortArg: "efl", shortOptArg: "i", longArg: []string{"--expression", "--file", "--line-length"}}

var sedDangers = []danger{
	{[]string{"-i", "--in-place"}, "edits files in place"},
	{[]string{"-f", "--file"}, "reads a script that cannot be checked"},
}

func checkSed(x *argContext) *denial {
	args := x.argv[1:]
	if d := x.checkDangers(spelledFlags(args, sedSpec), sedDangers); d != nil {
		return d
	}
	opts, operands := parseArgs(args, sedSpec)
	var scripts []string
	fromFile := false
	for _, o := range opts {
		switch o.name {
		case "-e", "--expression":
			scripts = append(scripts, o.value)
		case "-f", "--file":
			fromFile = true
		}
		if strings.HasPrefix(o.name, "--") && !sedKnownLong(o.name) {
			return denyf("builtin.flags", "sed option %s is not supported", printable(o.name))
		}
	}
	if len(scripts) == 0 && !fromFile {
		if len(operands) == 0 {
			return denyf("builtin.flags", "sed needs a script")
		}
		scripts = append(scripts, operands[0])
	}
	if why := checkSedScript(strings.Join(scripts, "\n")); why != "" {
		return denyf("builtin.flags", "sed script: %s", why)
	}
	return nil
}

func sedKnownLong(name string) bool {
	for _, l := range []string{"--expression", "--file", "--line-length", "--in-place", "--quiet", "--silent",
		"--regexp-extended", "--separate", "--unbuffered", "--null-data", "--zero-terminated", "--posix",
		"--debug", "--sandbox", "--follow-symlinks", "--help", "--version", "--binary"} {
		if l == name || len(name) > 2 && strings.HasPrefix(l, name) {
			return true
		}
	}
	return false
}

// --- awk

var awkSpec = &optSpec{shortArg: "fvFeEilW", shortOptArg: "dopDL", longArg: []string{"--file", "--assign", "--field-separator", "--source", "--exec", "--include", "--load"}}

var awkDangers = []danger{
	{[]string{"-f", "--file"}, "reads a program that cannot be checked"},
	{[]string{"-E", "--exec"}, "reads a program that cannot be checked"},
	{[]string{"-i", "--include"}, "loads a library that cannot be checked"},
	{[]string{"-l", "--load"}, "loads a shared library"},
	{[]string{"-W"}, "sets implementation options (mawk -W exec runs a file)"},
	{[]string{"-o", "--pretty-print"}, "writes a file"},
	{[]string{"-p", "--profile"}, "writes a file"},
	{[]string{"-d", "--dump-variables"}, "writes a file"},
	{[]string{"-D", "--debug"}, "starts the debugger"},
}

func checkAwk(x *argContext) *denial {
	args := x.argv[1:]
	if d := x.checkDangers(spelledFlags(args, awkSpec), awkDangers); d != nil {
		return d
	}
	opts, operands := parseArgs(args, awkSpec)
	var progs []string
	fromFile := false
	for _, o := range opts {
		switch o.name {
		case "-e", "--source":
			progs = append(progs, o.value)
		case "-f", "--file", "-E", "--exec":
			fromFile = true
		}
	}
	if len(progs) == 0 && !fromFile {
		if len(operands) == 0 {
			return denyf("builtin.flags", "awk needs a program")
		}
		progs = append(progs, operands[0])
	}
	for _, p := range progs {
		if why := checkAwkProgram(p); why != "" {
			return denyf("builtin.flags", "awk program: %s", why)
		}
	}
	return nil
}

// --- tar

var tarSpec = &optSpec{shortArg: "fCIFTXgKLNbHV", longArg: []string{
	"--file", "--directory", "--use-compress-program", "--info-script", "--new-volume-script", "--files-from",
	"--exclude-from", "--listed-incremental", "--starting-file", "--tape-length", "--newer", "--after-date",
	"--blocking-factor", "--format", "--label", "--to-command", "--checkpoint-action", "--rsh-command",
	"--rmt-command", "--transform", "--xform", "--exclude", "--owner", "--group", "--mode", "--mtime",
	"--index-file", "--volno-file", "--record-size", "--suffix", "--sort", "--warning", "--strip-components"}}

var tarDangers = []danger{
	{[]string{"-I", "--use-compress-program"}, "runs a compression program"},
	{[]string{"--to-command"}, "runs a program for each file"},
	{[]string{"--checkpoint-action"}, "runs actions (exec=...) at checkpoints"},
	{[]string{"-F", "--info-script", "--new-volume-script"}, "runs a script at the end of each volume"},
	{[]string{"--rsh-command"}, "runs a remote shell program"},
	{[]string{"--rmt-command"}, "runs a remote tape program"},
	{[]string{"-P", "--absolute-names"}, "writes outside the target directory"},
	{[]string{"--index-file"}, "writes a file"},
	{[]string{"--volno-file"}, "writes a file"},
}

// tarArgs expands tar's old-style first argument ("xzf a.tgz") into options.
func tarArgs(args []string) []string {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return args
	}
	letters, rest := args[0], args[1:]
	var out []string
	for i := 0; i < len(letters); i++ {
		c := letters[i]
		out = append(out, "-"+string(c))
		if strings.IndexByte(tarSpec.shortArg, c) >= 0 && len(rest) > 0 {
			out = append(out, rest[0])
			rest = rest[1:]
		}
	}
	return append(out, rest...)
}

func checkTar(x *argContext) *denial {
	args := tarArgs(x.argv[1:])
	if d := x.checkDangers(spelledFlags(args, tarSpec), tarDangers); d != nil {
		return d
	}
	opts, _ := parseArgs(args, tarSpec)
	forceLocal, extract := false, false
	for _, o := range opts {
		switch o.name {
		case "--force-local":
			forceLocal = true
		case "-x", "--extract", "--get":
			extract = true
		}
	}
	for _, o := range opts {
		switch o.name {
		case "-f", "--file":
			if strings.Contains(o.value, ":") && !forceLocal {
				return denyf("builtin.flags", "tar archive %q names a remote host (host:file runs rsh); add --force-local for a local file", printable(o.value))
			}
		case "-C", "--directory":
			if d := x.a.checkPath(o.value, extract, "tar -C"); d != nil {
				return d
			}
		}
	}
	if extract {
		dir := "."
		for _, o := range opts {
			if o.name == "-C" || o.name == "--directory" {
				dir = o.value
			}
		}
		if d := x.a.checkPath(dir, true, "tar -x into"); d != nil {
			return d
		}
	}
	return nil
}

// checkUnzip checks where unzip extracts: -d DIR or the working directory.
func checkUnzip(x *argContext) *denial {
	dir := "."
	args := x.argv[1:]
	for i, a := range args {
		switch {
		case a == "-d" && i+1 < len(args):
			dir = args[i+1]
		case strings.HasPrefix(a, "-d") && len(a) > 2:
			dir = a[2:]
		case a == "-l" || a == "-v" || a == "-t" || a == "-Z" || a == "-p" || a == "-c":
			return nil // lists, tests or prints: writes nothing
		}
	}
	return x.a.checkPath(dir, true, "unzip into")
}

// --- rsync

var rsyncSpec = &optSpec{shortArg: "eBfTM", longArg: []string{"--rsh", "--rsync-path", "--remote-option", "--filter",
	"--exclude", "--include", "--temp-dir", "--log-file", "--password-file", "--files-from", "--partial-dir",
	"--compare-dest", "--copy-dest", "--link-dest", "--backup-dir", "--suffix", "--chmod", "--chown", "--usermap",
	"--groupmap", "--out-format", "--log-file-format", "--max-size", "--min-size", "--timeout", "--contimeout",
	"--port", "--sockopts", "--outbuf", "--info", "--debug", "--bwlimit", "--config", "--address", "--protocol",
	"--iconv", "--checksum-choice", "--compress-choice", "--write-batch", "--only-write-batch", "--read-batch",
	"--exclude-from", "--include-from", "--block-size", "--modify-window", "--max-delete"}}

var rsyncDangers = []danger{
	{[]string{"-e", "--rsh"}, "runs a remote shell program"},
	{[]string{"--rsync-path"}, "runs a program on the remote side"},
	{[]string{"-M", "--remote-option"}, "passes options to the remote side"},
	{[]string{"--daemon"}, "starts a server"},
	{[]string{"--config"}, "reads a daemon configuration"},
}

func checkRsync(x *argContext) *denial {
	args := x.argv[1:]
	if d := x.checkDangers(spelledFlags(args, rsyncSpec), rsyncDangers); d != nil {
		return d
	}
	_, operands := parseArgs(args, rsyncSpec)
	for _, o := range operands {
		switch {
		case strings.HasPrefix(o, "rsync://"):
			if d := x.url(o, "rsync", "rsync"); d != nil {
				return d
			}
		case strings.Contains(o, ":"):
			i := strings.IndexByte(o, ':')
			if strings.Contains(o[:i], "/") {
				continue
			}
			h := o[:i]
			if j := strings.LastIndexByte(h, '@'); j >= 0 {
				h = h[j+1:]
			}
			if d := x.host(h); d != nil {
				return d
			}
		}
	}
	return nil
}

// --- rg, fd

var rgSpec = &optSpec{shortArg: "efgtTmABCjMErd", longArg: []string{"--regexp", "--file", "--glob", "--iglob", "--type",
	"--type-not", "--max-count", "--after-context", "--before-context", "--context", "--threads", "--max-columns",
	"--encoding", "--replace", "--max-depth", "--pre", "--pre-glob", "--hostname-bin", "--type-add", "--sort", "--sortr",
	"--colors", "--color", "--path-separator", "--max-filesize", "--ignore-file", "--engine", "--dfa-size-limit",
	"--regex-size-limit", "--context-separator", "--field-match-separator", "--field-context-separator", "--hyperlink-format"}}

var rgDangers = []danger{
	{[]string{"--pre"}, "runs a preprocessor program on every file"},
	{[]string{"--hostname-bin"}, "runs a program"},
	{[]string{"-z", "--search-zip"}, "runs decompression programs"},
}

func checkRg(x *argContext) *denial {
	return x.checkDangers(spelledFlags(x.argv[1:], rgSpec), rgDangers)
}

var fdSpec = &optSpec{shortArg: "edEtjSoc", longArg: []string{"--extension", "--max-depth", "--exclude", "--type",
	"--threads", "--size", "--owner", "--color", "--changed-within", "--changed-before", "--ignore-file",
	"--base-directory", "--path-separator", "--search-path", "--max-results", "--format", "--min-depth", "--exact-depth"}}

var fdDangers = []danger{
	{[]string{"-x", "--exec"}, "runs a program for each result"},
	{[]string{"-X", "--exec-batch"}, "runs a program with the results"},
}

func checkFd(x *argContext) *denial {
	return x.checkDangers(spelledFlags(x.argv[1:], fdSpec), fdDangers)
}

// --- curl, wget

var curlSpec = &optSpec{shortArg: "AbcCdDeEFHKmoPQrTuUwxXyYzt", longArg: []string{"--output", "--config", "--url",
	"--data", "--data-binary", "--data-raw", "--data-urlencode", "--data-ascii", "--header", "--user-agent", "--user",
	"--proxy", "--request", "--cookie", "--cookie-jar", "--dump-header", "--upload-file", "--referer", "--max-time",
	"--connect-timeout", "--output-dir", "--resolve", "--connect-to", "--trace", "--trace-ascii", "--libcurl",
	"--stderr", "--unix-socket", "--abstract-unix-socket", "--interface", "--dns-servers", "--doh-url", "--preproxy",
	"--socks4", "--socks4a", "--socks5", "--socks5-hostname", "--proxy-user", "--form", "--form-string",
	"--write-out", "--range", "--retry", "--retry-delay", "--retry-max-time", "--cert", "--key", "--cacert",
	"--capath", "--etag-save", "--etag-compare", "--hsts", "--alt-svc", "--netrc-file", "--ftp-port", "--quote",
	"--json", "--variable", "--limit-rate", "--max-filesize", "--continue-at", "--time-cond", "--telnet-option",
	"--engine", "--proto", "--proto-redir", "--proxy-header", "--oauth2-bearer", "--aws-sigv4", "--local-port",
	"--max-redirs", "--parallel-max", "--expect100-timeout", "--keepalive-time", "--happy-eyeballs-timeout-ms"}}

var curlDangers = []danger{
	{[]string{"-K", "--config"}, "reads options from a file that cannot be checked"},
	{[]string{"--resolve"}, "maps a host name to another address"},
	{[]string{"--connect-to"}, "connects to another host than the URL names"},
	{[]string{"-x", "--proxy", "--preproxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname"}, "sends traffic through a proxy"},
	{[]string{"--unix-socket", "--abstract-unix-socket"}, "connects to a local socket"},
	{[]string{"--libcurl"}, "writes a program"},
	{[]string{"--doh-url", "--dns-servers"}, "changes name resolution"},
	{[]string{"--engine"}, "loads a crypto engine"},
	{[]string{"--variable", "--expand-url", "--expand-output", "--expand-data"}, "expands variables from the environment or files"},
}

var curlWriteOpts = map[string]bool{"-o": true, "--output": true, "--output-dir": true, "-D": true, "--dump-header": true,
	"-c": true, "--cookie-jar": true, "--trace": true, "--trace-ascii": true, "--stderr": true, "--etag-save": true,
	"--hsts": true, "--alt-svc": true}

func checkCurl(x *argContext) *denial {
	args := x.argv[1:]
	flags := spelledFlags(args, curlSpec)
	for _, f := range flags {
		if strings.HasPrefix(f.name, "--expand-") {
			return denyf("builtin.flags", "curl %s expands variables from the environment or files", f.name)
		}
	}
	if d := x.checkDangers(flags, curlDangers); d != nil {
		return d
	}
	opts, operands := parseArgs(args, curlSpec)
	globoff := false
	for _, o := range opts {
		if o.name == "-g" || o.name == "--globoff" {
			globoff = true
		}
	}
	urls := append([]string{}, operands...)
	for _, o := range opts {
		switch {
		case curlWriteOpts[o.name]:
			if d := x.writePath(o.value, o.name); d != nil {
				return d
			}
		case o.name == "-O" || o.name == "--remote-name" || o.name == "--remote-name-all" || o.name == "-J":
			if d := x.cwdWritable(o.name + " (writes into the working directory)"); d != nil {
				return d
			}
		case o.name == "--url":
			urls = append(urls, o.value)
		}
	}
	for _, u := range urls {
		if strings.ContainsAny(u, "{}") || !globoff && strings.ContainsAny(u, "[]") {
			return denyf("builtin.flags", "curl URL %q uses URL globbing ({} or []), which can reach several hosts; list the URLs (use -g for IPv6 literals)", printable(u))
		}
		if d := x.url(u, "http", "http", "https"); d != nil {
			return d
		}
	}
	return nil
}

var wgetSpec = &optSpec{shortArg: "eoaiBtOTwQPUlARDIXn", longArg: []string{"--execute", "--output-file", "--append-output",
	"--input-file", "--base", "--tries", "--output-document", "--timeout", "--wait", "--quota", "--directory-prefix",
	"--user-agent", "--level", "--accept", "--reject", "--domains", "--include-directories", "--exclude-directories",
	"--config", "--use-askpass", "--header", "--post-data", "--post-file", "--body-data", "--body-file", "--method",
	"--user", "--password", "--referer", "--load-cookies", "--save-cookies", "--ca-certificate", "--certificate",
	"--private-key", "--bind-address", "--dns-servers", "--limit-rate", "--waitretry", "--dns-timeout",
	"--connect-timeout", "--read-timeout", "--restrict-file-names", "--progress", "--http-user", "--http-password",
	"--proxy-user", "--proxy-password", "--secure-protocol", "--ciphers", "--warc-file", "--rejected-log", "--hsts-file"}}

var wgetDangers = []danger{
	{[]string{"-e", "--execute"}, "runs wgetrc commands"},
	{[]string{"--config"}, "reads a configuration file"},
	{[]string{"--use-askpass"}, "runs a program"},
	{[]string{"--bind-address", "--dns-servers"}, "changes how the network is reached"},
}

var wgetWriteOpts = map[string]bool{"-O": true, "--output-document": true, "-o": true, "--output-file": true, "-a": true,
	"--append-output": true, "-P": true, "--directory-prefix": true, "--save-cookies": true, "--warc-file": true,
	"--rejected-log": true, "--hsts-file": true}

func checkWget(x *argContext) *denial {
	args := x.argv[1:]
	if d := x.checkDangers(spelledFlags(args, wgetSpec), wgetDangers); d != nil {
		return d
	}
	opts, operands := parseArgs(args, wgetSpec)
	namedOutput := false
	for _, o := range opts {
		switch {
		case wgetWriteOpts[o.name]:
			if d := x.writePath(o.value, o.name); d != nil {
				return d
			}
			if o.name == "-O" || o.name == "--output-document" || o.name == "-P" || o.name == "--directory-prefix" {
				namedOutput = true
			}
		case o.name == "--spider":
			namedOutput = true
		case o.name == "-i" || o.name == "--input-file":
			if d := x.networkNone("wget -i"); d != nil {
				return d
			}
		}
	}
	if !namedOutput {
		if d := x.cwdWritable("(writes into the working directory)"); d != nil {
			return d
		}
	}
	for _, u := range operands {
		if d := x.url(u, "http", "http", "https"); d != nil {
			return d
		}
	}
	return nil
}

// --- pip, npm

var pipSpec = &optSpec{shortArg: "ifrcetd", longArg: []string{"--index-url", "--extra-index-url", "--trusted-host",
	"--find-links", "--proxy", "--requirement", "--constraint", "--target", "--prefix", "--root", "--src",
	"--cache-dir", "--log", "--config-settings", "--platform", "--python-version", "--implementation", "--abi",
	"--progress-bar", "--retries", "--timeout", "--exists-action", "--cert", "--client-cert", "--report",
	"--upgrade-strategy", "--only-binary", "--no-binary", "--editable", "--dest", "--global-option", "--python", "--keyring-provider"}}

var pipDangers = []danger{
	{[]string{"--proxy"}, "sends traffic through a proxy"},
	{[]string{"--python"}, "runs another interpreter"},
}

var pipNetworkSubs = map[string]bool{"install": true, "download": true, "wheel": true, "index": true, "search": true}

func checkPip(x *argContext) *denial {
	args := x.argv[1:]
	if d := x.checkDangers(spelledFlags(args, pipSpec), pipDangers); d != nil {
		return d
	}
	opts, operands := parseArgs(args, pipSpec)
	if len(operands) == 0 || !pipNetworkSubs[operands[0]] {
		return nil
	}
	sub := operands[0]
	noIndex := false
	indexes := []string{}
	var urls []string
	for _, o := range opts {
		switch o.name {
		case "--no-index":
			noIndex = true
		case "-i", "--index-url":
			indexes = []string{o.value}
		case "--extra-index-url":
			urls = append(urls, o.value)
		case "-f", "--find-links":
			if strings.Contains(o.value, "://") {
				urls = append(urls, o.value)
			}
		case "--trusted-host":
			if d := x.host(o.value); d != nil {
				return d
			}
		case "-e", "--editable":
			if strings.Contains(o.value, "://") {
				urls = append(urls, o.value)
			}
		}
	}
	if !noIndex {
		if len(indexes) == 0 {
			indexes = []string{"https://pypi.org/simple"}
		}
		if d := x.networkNone("pip " + sub + " (it needs the package index; use --no-index with local files)"); d != nil {
			return d
		}
		urls = append(urls, indexes...)
	}
	for _, o := range operands[1:] {
		if i := strings.Index(o, "://"); i >= 0 {
			j := i
			for j > 0 && (isAlnum(o[j-1]) || o[j-1] == '+' || o[j-1] == '-' || o[j-1] == '.') {
				j--
			}
			urls = append(urls, o[j:])
		}
	}
	for _, u := range urls {
		u = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(u, "git+"), "hg+"), "svn+")
		if d := x.url(u, "https", "https", "http", "ssh", "git"); d != nil {
			return d
		}
	}
	return nil
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

var npmSpec = &optSpec{longArg: []string{"--registry", "--userconfig", "--globalconfig", "--script-shell", "--node-options", "--prefix", "--cache", "--call"}}

var npmDangers = []danger{
	{[]string{"--userconfig", "--globalconfig"}, "reads a configuration that can run programs"},
	{[]string{"--script-shell"}, "runs scripts with another shell"},
	{[]string{"--node-options"}, "passes options to node"},
	{[]string{"-c", "--call"}, "runs a shell command"},
}

var npmNetworkSubs = map[string]bool{"install": true, "i": true, "in": true, "ins": true, "inst": true, "insta": true,
	"instal": true, "isnt": true, "isnta": true, "isntal": true, "isntall": true, "add": true, "ci": true,
	"clean-install": true, "install-clean": true, "ic": true, "update": true, "up": true, "upgrade": true, "udpate": true,
	"exec": true, "x": true, "publish": true, "view": true, "v": true, "info": true, "show": true, "search": true,
	"s": true, "se": true, "find": true, "audit": true, "outdated": true, "dist-tag": true, "doctor": true, "ping": true,
	"login": true, "adduser": true, "whoami": true, "unpublish": true, "deprecate": true, "owner": true, "token": true,
	"access": true, "star": true, "stars": true, "install-test": true, "it": true, "install-ci-test": true, "cit": true, "pack": true}

func checkNpm(x *argContext) *denial {
	args := x.argv[1:]
	flags := spelledFlags(args, npmSpec)
	if d := x.checkDangers(flags, npmDangers); d != nil {
		return d
	}
	opts, operands := parseArgs(args, npmSpec)
	registries := []string{}
	for _, o := range opts {
		if o.name == "--registry" || strings.HasSuffix(o.name, ":registry") {
			registries = append(registries, o.value)
		}
	}
	if len(operands) == 0 || !npmNetworkSubs[operands[0]] {
		for _, r := range registries {
			if d := x.url(r, "https", "https", "http"); d != nil {
				return d
			}
		}
		return nil
	}
	if d := x.networkNone("npm " + operands[0]); d != nil {
		return d
	}
	if len(registries) == 0 {
		registries = []string{"https://registry.npmjs.org/"}
	}
	urls := registries
	for _, o := range operands[1:] {
		switch {
		case strings.Contains(o, "://"):
			urls = append(urls, strings.TrimPrefix(o[strings.Index(o, "@")+1:], "git+"))
		case strings.HasPrefix(o, "github:") || strings.HasPrefix(o, "gist:"):
			urls = append(urls, "https://github.com/")
		case strings.HasPrefix(o, "gitlab:"):
			urls = append(urls, "https://gitlab.com/")
		case strings.HasPrefix(o, "bitbucket:"):
			urls = append(urls, "https://bitbucket.org/")
		case !strings.HasPrefix(o, "@") && !strings.HasPrefix(o, ".") && !strings.HasPrefix(o, "/") &&
			!strings.HasPrefix(o, "file:") && strings.Contains(o, "/"):
			urls = append(urls, "https://github.com/") // user/repo shorthand
		}
	}
	for _, u := range urls {
		u = strings.TrimPrefix(u, "git+")
		if !strings.Contains(u, "://") {
			u = "https://" + u
		}
		if d := x.url(u, "https", "https", "http", "ssh", "git"); d != nil {
			return d
		}
	}
	return nil
}

// --- ssh, scp, sftp

// sshSpecs are the options that take an argument, per program: ssh -p
// takes a port where scp -p takes none, and a letter wrongly taken to have
// an argument would hide the rest of its cluster.
var sshSpecs = map[string]*optSpec{
	"ssh":  {shortArg: "BbcDEeFIiJLlmOoPpQRSWw"},
	"scp":  {shortArg: "cDFiJloPSX"},
	"sftp": {shortArg: "BbcDFiJloPRSsX"},
}

var sshDangers = []danger{
	{[]string{"-F"}, "reads a configuration that can run commands"},
	{[]string{"-S"}, "runs another program or uses a control socket"},
	{[]string{"-D"}, "runs another server program (sftp) or opens a proxy (ssh)"},
	{[]string{"-E"}, "writes a log file"},
}

var sftpDangers = []danger{
	{[]string{"-b"}, "reads a batch file whose !commands run local programs"},
	{[]string{"-s"}, "runs another program as the sftp server"},
}

func checkSSH(x *argContext) *denial {
	args := x.argv[1:]
	spec := sshSpecs[x.prog]
	flags := spelledFlags(args, spec)
	if d := x.checkDangers(flags, sshDangers); d != nil {
		return d
	}
	if x.prog == "sftp" {
		if d := x.checkDangers(flags, sftpDangers); d != nil {
			return d
		}
	}
	opts, operands := parseArgs(args, spec)
	for _, o := range opts {
		switch o.name {
		case "-o":
			key := sshOptionKey(o.value)
			switch key {
			case "proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match", "include",
				"proxyusefdpass", "identityagent", "pkcs11provider", "securitykeyprovider", "controlpath", "controlmaster", "sendenv", "setenv", "proxyjump":
				return denyf("builtin.flags", "%s -o %s can run commands, reach other hosts or leak the environment", x.prog, key)
			}
		case "-J":
			for _, j := range strings.Split(o.value, ",") {
				if d := x.host(sshHost(j)); d != nil {
					return d
				}
			}
		}
	}
	var hosts []string
	switch x.prog {
	case "ssh", "sftp":
		if len(operands) > 0 {
			hosts = append(hosts, sshHost(operands[0]))
		}
	case "scp":
		for _, o := range operands {
			if strings.HasPrefix(o, "scp://") {
				hosts = append(hosts, sshHost(o))
			} else if i := strings.IndexByte(o, ':'); i > 0 && !strings.Contains(o[:i], "/") {
				hosts = append(hosts, sshHost(o[:i]))
			}
		}
	}
	if len(hosts) == 0 {
		return x.networkNone(x.prog)
	}
	for _, h := range hosts {
		if d := x.host(h); d != nil {
			return d
		}
	}
	return nil
}

// sshOptionKey returns the lower-case keyword of an ssh -o "Key=value" or
// "Key value" option.
func sshOptionKey(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, "= \t"); i >= 0 {
		v = v[:i]
	}
	return strings.ToLower(v)
}

// sshHost extracts the host from [user@]host[:port] or ssh://user@host:port/.
func sshHost(s string) string {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "ssh://"), "scp://")
	s = strings.TrimPrefix(s, "sftp://")
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	return stripPort(s)
}

// --- sort, tee, dd, zip, base64

var sortSpec = &optSpec{shortArg: "kotST", longArg: []string{"--key", "--output", "--field-separator", "--buffer-size",
	"--temporary-directory", "--compress-program", "--files0-from", "--parallel", "--batch-size", "--random-source", "--sort"}}

var sortDangers = []danger{{[]string{"--compress-program"}, "runs a compression program"}}

func checkSort(x *argContext) *denial {
	args := x.argv[1:]
	if d := x.checkDangers(spelledFlags(args, sortSpec), sortDangers); d != nil {
		return d
	}
	opts, _ := parseArgs(args, sortSpec)
	for _, o := range opts {
		if o.name == "-o" || o.name == "--output" {
			if d := x.writePath(o.value, o.name); d != nil {
				return d
			}
		}
	}
	return nil
}

func checkTee(x *argContext) *denial {
	_, operands := parseArgs(x.argv[1:], &optSpec{}) // --output-error's argument is optional and attached
	for _, o := range operands {
		if d := x.a.checkPath(o, true, "tee"); d != nil {
			return d
		}
	}
	return nil
}

func checkDd(x *argContext) *denial {
	for _, a := range x.argv[1:] {
		if v, ok := strings.CutPrefix(a, "of="); ok {
			if d := x.a.checkPath(v, true, "dd of="); d != nil {
				return d
			}
		}
		if v, ok := strings.CutPrefix(a, "if="); ok {
			if d := x.a.checkPath(v, false, "dd if="); d != nil {
				return d
			}
		}
	}
	return nil
}

func checkZip(x *argContext) *denial {
	if contains(x.rule.AllowFlags, "-TT") || contains(x.rule.AllowFlags, "--unzip-command") {
		return nil
	}
	for _, a := range x.argv[1:] {
		if a == "--" {
			break
		}
		// zip's -TT is a two-letter option, also inside a cluster (-qTT).
		short := strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "TT")
		long := strings.HasPrefix(a, "--unz") || a == "--un"
		if short || long {
			return denyf("builtin.flags", "zip -TT/--unzip-command runs a program; a rule must list -TT in allow_flags to allow it")
		}
	}
	return nil
}

func checkBase64(x *argContext) *denial {
	// Only letters that take an argument in both GNU and BSD base64: a
	// letter wrongly taken to have one would hide the rest of its cluster.
	opts, _ := parseArgs(x.argv[1:], &optSpec{shortArg: "wo", longArg: []string{"--input", "--output", "--wrap", "--break"}})
	for _, o := range opts {
		if o.name == "-o" || o.name == "--output" {
			if d := x.writePath(o.value, o.name); d != nil {
				return d
			}
		}
	}
	return nil
}

// --- pagers, man, editors

func checkPager(x *argContext) *denial {
	for _, a := range x.argv[1:] {
		if strings.HasPrefix(a, "+") {
			return denyf("builtin.flags", "%s %s runs commands at start-up (+!cmd runs a shell)", x.prog, printable(a))
		}
		if a == "-k" || strings.HasPrefix(a, "--lesskey") {
			return denyf("builtin.flags", "%s %s reads a key file that can run commands", x.prog, printable(a))
		}
	}
	return nil
}

var manDangers = []danger{
	{[]string{"-P", "--pager"}, "runs a pager program"},
	{[]string{"-H", "--html"}, "runs a browser"},
	{[]string{"-C", "--config-file"}, "reads a configuration"},
	{[]string{"-p", "--preprocessor"}, "runs preprocessors"},
	{[]string{"-l", "--local-file"}, "formats a file that may run commands"},
}

func checkMan(x *argContext) *denial {
	return x.checkDangers(spelledFlags(x.argv[1:], &optSpec{shortArg: "PHCpMSmeLr"}), manDangers)
}

func checkVim(x *argContext) *denial {
	for _, a := range x.argv[1:] {
		if a == "--" {
			break
		}
		switch {
		case strings.HasPrefix(a, "+"), a == "--cmd", strings.HasPrefix(a, "-c"), strings.HasPrefix(a, "-S"), a == "-s",
			a == "-u", a == "-U", a == "-w", a == "-W", strings.HasPrefix(a, "-e"), strings.HasPrefix(a, "-E"),
			strings.HasPrefix(a, "--remote"), a == "--startuptime", a == "-i":
			return denyf("builtin.flags", "%s %s runs editor commands or scripts", x.prog, printable(a))
		}
	}
	return nil
}

func checkEmacs(x *argContext) *denial {
	for _, a := range x.argv[1:] {
		n, _, _ := strings.Cut(a, "=")
		switch n {
		case "--eval", "-l", "--load", "-f", "--funcall", "--batch", "-batch", "-x", "--script", "-script", "-L", "--directory", "--execute", "-eval", "-load", "-funcall":
			return denyf("builtin.flags", "emacs %s runs Lisp code", printable(n))
		}
	}
	return nil
}

// --- netcat and friends

func checkNetcat(x *argContext) *denial {
	for _, a := range x.argv[1:] {
		l := strings.ToLower(a)
		if x.prog == "socat" && (strings.Contains(l, "exec:") || strings.Contains(l, "system:")) {
			return denyf("builtin.flags", "socat %s runs a program", printable(a))
		}
		if x.prog != "socat" && (a == "-e" || a == "-c" || strings.HasPrefix(a, "--exec") || strings.HasPrefix(a, "--sh-exec") || strings.HasPrefix(a, "--lua-exec")) {
			return denyf("builtin.flags", "%s %s runs a program", x.prog, a)
		}
	}
	return x.networkNone(x.prog)
}

// --- wrappers

// wrapperFunc checks a wrapper's own arguments and the command it runs.
type wrapperFunc func(a *analysis, r contracts.CommandRule, argv []string, depth int) *denial

// wrappers are programs that run another program. A nil entry is a wrapper
// whose wrapped command cannot be extracted reliably: always denied.
var wrappers map[string]wrapperFunc

func init() {
	wrappers = map[string]wrapperFunc{
		"env": wrapEnv, "timeout": wrapTimeout, "nice": wrapNice, "nohup": wrapNohup, "stdbuf": wrapStdbuf,
		"setsid": wrapSetsid, "ionice": wrapIonice, "time": wrapTime, "xargs": wrapXargs,
		"sh": wrapShell, "bash": wrapShell, "dash": wrapShell, "busybox": wrapBusybox,
	}
	for _, n := range []string{"sudo", "doas", "su", "runuser", "pkexec", "flock", "chroot", "unshare", "nsenter",
		"taskset", "watch", "strace", "ltrace", "parallel", "script", "chrt", "prlimit", "setpriv", "firejail", "bwrap",
		"systemd-run", "at", "batch", "fakeroot", "proot", "faketime", "torsocks", "proxychains", "proxychains4",
		"unbuffer", "rlwrap", "eatmydata", "chpst", "setarch", "linux32", "linux64", "xvfb-run", "entr", "tmux",
		"screen", "sem", "catchsegv", "valgrind", "gdb", "numactl", "cpulimit", "expect", "sg", "newgrp", "ssh-agent",
		"dbus-run-session", "dbus-launch", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "pwsh", "yash", "posh",
		"rc", "es", "elvish", "nu", "xonsh", "crontab", "daemonize", "start-stop-daemon", "run-parts", "inotifywait",
		"watchexec", "nodemon", "sshpass", "cgexec", "systemd-nspawn", "capsh", "ld.so", "ld-linux.so.2",
		"ld-linux-x86-64.so.2", "qemu-x86_64", "nix-shell", "direnv", "scl", "sandbox-exec", "caffeinate", "arch"} {
		wrappers[n] = nil
	}
}

func wrapEnv(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	args := argv[1:]
loop:
	for len(args) > 0 {
		s := args[0]
		switch {
		case s == "-i" || s == "--ignore-environment" || s == "-" || s == "-0" || s == "--null" || s == "-v" || s == "--debug":
			args = args[1:]
		case s == "-u" || s == "--unset":
			if len(args) < 2 {
				return denyf("builtin.wrapper", "env %s needs a name", s)
			}
			args = args[2:]
		case strings.HasPrefix(s, "--unset=") || strings.HasPrefix(s, "-u") && !strings.HasPrefix(s, "--"):
			args = args[1:]
		case s == "--":
			args = args[1:]
			break loop
		case strings.HasPrefix(s, "-"):
			return denyf("builtin.wrapper", "env option %s is not supported (-S, -C and others change what runs)", printable(s))
		default:
			break loop
		}
	}
	for len(args) > 0 && strings.Contains(args[0], "=") {
		name, val, _ := strings.Cut(args[0], "=")
		if d := checkEnvVar(a.c, name, val); d != nil {
			return d
		}
		args = args[1:]
	}
	if len(args) == 0 {
		return denyf("builtin.wrapper", "env without a program prints the environment")
	}
	return a.program(args, depth+1, false, false)
}

// wrapperOptions consumes a wrapper's leading options: those in valued take
// the next argument, flag accepts the rest it knows, and "--" ends them.
// Anything else is refused (hint may say why). It returns the arguments
// after the options.
func wrapperOptions(name string, args, valued []string, flag func(string) bool, hint string) ([]string, *denial) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		s := args[0]
		switch {
		case s == "--":
			return args[1:], nil
		case slices.Contains(valued, s):
			if len(args) < 2 {
				return nil, denyf("builtin.wrapper", "%s %s needs a value", name, s)
			}
			args = args[2:]
		case flag(s):
			args = args[1:]
		default:
			return nil, denyf("builtin.wrapper", "%s option %s is not supported%s", name, printable(s), hint)
		}
	}
	return args, nil
}

// wrapped checks the program a wrapper runs.
func (a *analysis) wrapped(name string, args []string, depth int) *denial {
	if len(args) == 0 {
		return denyf("builtin.wrapper", "%s needs a program", name)
	}
	return a.program(args, depth+1, false, false)
}

func wrapTimeout(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	args, d := wrapperOptions("timeout", argv[1:], []string{"-s", "-k", "--signal", "--kill-after"}, func(s string) bool {
		return strings.HasPrefix(s, "--signal=") || strings.HasPrefix(s, "--kill-after=") ||
			(strings.HasPrefix(s, "-s") || strings.HasPrefix(s, "-k")) && !strings.HasPrefix(s, "--") ||
			s == "--preserve-status" || s == "--foreground" || s == "-v" || s == "--verbose"
	}, "")
	if d != nil {
		return d
	}
	if len(args) < 2 || !validDuration(args[0]) {
		return denyf("builtin.wrapper", "timeout needs a duration and a program")
	}
	return a.program(args[1:], depth+1, false, false)
}

func validDuration(s string) bool {
	s = strings.TrimRight(s, "smhd")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return false
		}
	}
	return true
}

func wrapNice(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	args, d := wrapperOptions("nice", argv[1:], []string{"-n", "--adjustment"}, func(s string) bool {
		return strings.HasPrefix(s, "--adjustment=") || strings.HasPrefix(s, "-n") || allDigits(strings.TrimPrefix(s[1:], "-"))
	}, "")
	if d != nil {
		return d
	}
	return a.wrapped("nice", args, depth)
}

func wrapNohup(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	args := argv[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return denyf("builtin.wrapper", "nohup needs a program")
	}
	return a.program(args, depth+1, false, false)
}

func wrapStdbuf(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	args, d := wrapperOptions("stdbuf", argv[1:], []string{"-i", "-o", "-e", "--input", "--output", "--error"}, func(s string) bool {
		return len(s) > 2 && (s[1] == 'i' || s[1] == 'o' || s[1] == 'e') ||
			strings.HasPrefix(s, "--input=") || strings.HasPrefix(s, "--output=") || strings.HasPrefix(s, "--error=")
	}, "")
	if d != nil {
		return d
	}
	return a.wrapped("stdbuf", args, depth)
}

func wrapSetsid(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	args, d := wrapperOptions("setsid", argv[1:], nil, func(s string) bool {
		return s == "--ctty" || s == "--fork" || s == "--wait" ||
			!strings.HasPrefix(s, "--") && strings.Trim(s[1:], "cfw") == ""
	}, "")
	if d != nil {
		return d
	}
	return a.wrapped("setsid", args, depth)
}

func wrapIonice(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	args, d := wrapperOptions("ionice", argv[1:], []string{"-c", "-n", "--class", "--classdata"}, func(s string) bool {
		return s == "-t" || s == "--ignore" || len(s) > 2 && (s[1] == 'c' || s[1] == 'n') && allDigits(s[2:])
	}, " (-p, -P and -u act on other processes)")
	if d != nil {
		return d
	}
	return a.wrapped("ionice", args, depth)
}

func wrapTime(a *analysis, r contracts.CommandRule, argv []string, depth int) *denial {
	args := argv[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		s := args[0]
		switch {
		case s == "--":
			args = args[1:]
		case s == "-f" || s == "--format":
			if len(args) < 2 {
				return denyf("builtin.wrapper", "time %s needs a value", s)
			}
			args = args[2:]
			continue
		case s == "-o" || s == "--output":
			if len(args) < 2 {
				return denyf("builtin.wrapper", "time %s needs a file", s)
			}
			if d := a.checkPath(args[1], true, "time -o"); d != nil {
				return d
			}
			args = args[2:]
			continue
		case strings.HasPrefix(s, "--output="):
			if d := a.checkPath(strings.TrimPrefix(s, "--output="), true, "time --output"); d != nil {
				return d
			}
		case s == "-p" || s == "-v" || s == "-a" || s == "-q" || s == "--portability" || s == "--verbose" ||
			s == "--append" || s == "--quiet" || strings.HasPrefix(s, "--format="):
		default:
			return denyf("builtin.wrapper", "time option %s is not supported", printable(s))
		}
		if s == "--" {
			break
		}
		args = args[1:]
	}
	return a.wrapped("time", args, depth)
}

func wrapXargs(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	args := argv[1:]
	longArg := map[string]bool{"--arg-file": true, "--delimiter": true, "--max-args": true, "--max-procs": true, "--max-chars": true}
	longFlag := map[string]bool{"--null": true, "--no-run-if-empty": true, "--verbose": true, "--interactive": true,
		"--exit": true, "--open-tty": true, "--show-limits": true, "--max-lines": true, "--replace": true, "--eof": true}
loop:
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		s := args[0]
		args = args[1:]
		if s == "--" {
			break
		}
		if strings.HasPrefix(s, "--") {
			name, _, has := strings.Cut(s, "=")
			switch {
			case longArg[name]:
				if !has {
					if len(args) == 0 {
						return denyf("builtin.wrapper", "xargs %s needs a value", name)
					}
					args = args[1:]
				}
			case longFlag[name]:
			default:
				return denyf("builtin.wrapper", "xargs option %s is not supported", printable(name))
			}
			continue
		}
		for j := 1; j < len(s); j++ {
			c := s[j]
			switch {
			case strings.IndexByte("0rtpxo", c) >= 0:
			case strings.IndexByte("adEILnPs", c) >= 0:
				if j+1 == len(s) {
					if len(args) == 0 {
						return denyf("builtin.wrapper", "xargs -%c needs a value", c)
					}
					args = args[1:]
				}
				continue loop
			case strings.IndexByte("eil", c) >= 0:
				continue loop
			default:
				return denyf("builtin.wrapper", "xargs option -%c is not supported", c)
			}
		}
	}
	if len(args) == 0 {
		args = []string{"echo"}
	}
	return a.program(args, depth+1, false, true)
}

func wrapBusybox(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	if len(argv) < 2 || strings.HasPrefix(argv[1], "-") {
		return denyf("builtin.wrapper", "busybox needs an applet name")
	}
	return a.program(argv[1:], depth+1, false, false)
}

// wrapShell checks sh -c 'string' / bash -c 'string' by parsing the string
// as a program of its own. A script file cannot be checked and is denied.
func wrapShell(a *analysis, _ contracts.CommandRule, argv []string, depth int) *denial {
	prog := path.Base(argv[0])
	args := argv[1:]
	hasC := false
	var operands []string
	for i := 0; i < len(args); i++ {
		s := args[i]
		switch {
		case s == "--" || s == "-":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case s == "--norc" || s == "--noprofile":
		case s == "-o" || s == "+o":
			if i+1 >= len(args) || !contains([]string{"errexit", "nounset", "xtrace", "pipefail", "noglob", "noclobber", "verbose", "noexec"}, args[i+1]) {
				return denyf("builtin.wrapper", "%s %s must name errexit, nounset, xtrace, pipefail, noglob, noclobber or verbose", prog, s)
			}
			i++
		case len(s) > 1 && (s[0] == '-' || s[0] == '+') && s[1] != '-':
			for _, c := range s[1:] {
				switch {
				case c == 'c' && s[0] == '-':
					hasC = true
				case strings.ContainsRune("euxvfnCB", c):
				default:
					return denyf("builtin.wrapper", "%s option %c%c is not supported (-l, -i, -s, -O and friends read start-up files or change parsing)", prog, s[0], c)
				}
			}
		case strings.HasPrefix(s, "--"):
			return denyf("builtin.wrapper", "%s option %s is not supported", prog, printable(s))
		default:
			operands = append(operands, args[i:]...)
			i = len(args)
		}
	}
	if !hasC {
		return denyf("builtin.wrapper", "%s without -c runs a script or reads standard input, which cannot be checked; pass the commands with -c", prog)
	}
	if len(operands) == 0 {
		return denyf("builtin.wrapper", "%s -c needs a command string", prog)
	}
	lang := syntax.LangPOSIX
	if prog == "bash" {
		lang = syntax.LangBash
	}
	return a.nested(operands[0], lang, depth+1)
}
