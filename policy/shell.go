package policy

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// Limits on command analysis. Beyond them a command is denied, never
// partially checked.
const (
	maxCommandBytes   = 64 << 10
	maxDepth          = 64
	maxSimpleCommands = 256
)

// denial is a refusal found while analysing a command.
type denial struct{ rule, reason string }

func denyf(rule, format string, args ...any) *denial {
	return &denial{rule: rule, reason: fmt.Sprintf(format, args...)}
}

// analysis is the state of checking one command line.
type analysis struct {
	c        *contracts.Contract
	cwds     []string // every directory a command may run in (cd adds to it)
	loop     int      // >0 inside a loop body
	count    int      // simple commands seen
	programs []string
	rules    []string
	used     []usedCommand
}

// usedCommand is one simple command the program runs, for credential grants.
type usedCommand struct {
	argv    []string
	neutral bool // cd, true, false, ':': read no environment
}

func (a *analysis) useRule(rule string) {
	if !contains(a.rules, rule) {
		a.rules = append(a.rules, rule)
	}
}

// Parsers are reusable but not concurrent; pools keep one per goroutine.
var bashParsers, posixParsers sync.Pool

// parseShell parses src as a bash (or POSIX sh) program.
func parseShell(src string, lang syntax.LangVariant) (*syntax.File, *denial) {
	pool := &bashParsers
	if lang != syntax.LangBash {
		pool = &posixParsers
	}
	p, _ := pool.Get().(*syntax.Parser)
	if p == nil {
		p = syntax.NewParser(syntax.Variant(lang))
	}
	f, err := p.Parse(strings.NewReader(src), "")
	pool.Put(p)
	if err != nil {
		return nil, denyf("builtin.parse", "cannot parse the command line: %v", err)
	}
	return f, nil
}

// forbiddenNodes refuses every construct that runs code or computes a value
// at run time, wherever it appears (arguments, redirections, here-documents,
// case patterns, assignments).
func forbiddenNodes(f *syntax.File) *denial {
	var d *denial
	set := func(rule, format string, args ...any) bool {
		if d == nil {
			d = denyf(rule, format, args...)
		}
		return false
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if d != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.CmdSubst:
			return set("builtin.substitution", "command substitution $(...) or `...` is not allowed; run the commands separately")
		case *syntax.ProcSubst:
			return set("builtin.substitution", "process substitution <(...) or >(...) is not allowed; use a pipe or a file")
		case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause, *syntax.CStyleLoop:
			return set("builtin.arithmetic", "shell arithmetic is not allowed")
		case *syntax.ParamExp:
			return set("builtin.expansion", "parameter expansion ($NAME) is not allowed; pass values literally or through the env argument")
		case *syntax.ExtGlob, *syntax.BraceExp:
			return set("builtin.expansion", "extended globs and brace expansion are not allowed")
		case *syntax.ArrayExpr:
			return set("builtin.expansion", "arrays are not allowed")
		case *syntax.FuncDecl:
			return set("builtin.function", "defining shell functions is not allowed")
		case *syntax.CoprocClause:
			return set("builtin.background", "coprocesses are not allowed")
		case *syntax.DeclClause:
			return set("builtin.shell-builtin", "%s changes the shell's variables or environment and is not allowed; pass environment through the env argument", n.Variant.Value)
		case *syntax.TestClause, *syntax.TestDecl:
			return set("builtin.shell-builtin", "[[ ... ]] is not supported; use test or [ ... ] if the contract allows it")
		case *syntax.Stmt:
			if n.Background || n.Coprocess || n.Disown {
				return set("builtin.background", "background jobs (&) are not allowed; commands must finish within their timeout")
			}
		case *syntax.SglQuoted:
			if n.Dollar {
				return set("builtin.expansion", "ANSI-C quoting $'...' is not supported; use plain quotes")
			}
		case *syntax.DblQuoted:
			if n.Dollar {
				return set("builtin.expansion", "locale quoting $\"...\" is not supported; use plain quotes")
			}
		}
		return true
	})
	return d
}

func (a *analysis) stmts(list []*syntax.Stmt, depth int) *denial {
	for _, s := range list {
		if d := a.stmt(s, depth); d != nil {
			return d
		}
	}
	return nil
}

func (a *analysis) stmt(s *syntax.Stmt, depth int) *denial {
	if depth > maxDepth {
		return denyf("builtin.limits", "the command line nests deeper than %d levels", maxDepth)
	}
	if s.Background || s.Coprocess || s.Disown {
		return denyf("builtin.background", "background jobs (&) are not allowed; commands must finish within their timeout")
	}
	for _, r := range s.Redirs {
		if d := a.redirect(r); d != nil {
			return d
		}
	}
	switch cmd := s.Cmd.(type) {
	case nil:
		return nil
	case *syntax.CallExpr:
		return a.call(cmd, depth)
	case *syntax.BinaryCmd:
		switch cmd.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe, syntax.PipeAll:
		default:
			return denyf("builtin.parse", "operator %s is not supported", cmd.Op)
		}
		if d := a.stmt(cmd.X, depth); d != nil {
			return d
		}
		return a.stmt(cmd.Y, depth)
	case *syntax.Subshell:
		return a.stmts(cmd.Stmts, depth+1)
	case *syntax.Block:
		return a.stmts(cmd.Stmts, depth+1)
	case *syntax.IfClause:
		for ic := cmd; ic != nil; ic = ic.Else {
			if d := a.stmts(ic.Cond, depth+1); d != nil {
				return d
			}
			if d := a.stmts(ic.Then, depth+1); d != nil {
				return d
			}
		}
		return nil
	case *syntax.WhileClause:
		a.loop++
		defer func() { a.loop-- }()
		if d := a.stmts(cmd.Cond, depth+1); d != nil {
			return d
		}
		return a.stmts(cmd.Do, depth+1)
	case *syntax.ForClause:
		wi, ok := cmd.Loop.(*syntax.WordIter)
		if !ok || cmd.Select {
			return denyf("builtin.parse", "only for NAME in WORDS loops are supported")
		}
		for _, w := range wi.Items {
			if _, why := literalWord(w); why != "" {
				return denyf("builtin.expansion", "%s", why)
			}
		}
		if d := checkShellVar(a.c, wi.Name.Value); d != nil {
			return d
		}
		a.loop++
		defer func() { a.loop-- }()
		return a.stmts(cmd.Do, depth+1)
	case *syntax.CaseClause:
		if _, why := literalWord(cmd.Word); why != "" {
			return denyf("builtin.expansion", "%s", why)
		}
		for _, item := range cmd.Items {
			if d := a.stmts(item.Stmts, depth+1); d != nil {
				return d
			}
		}
		return nil
	case *syntax.TimeClause:
		if cmd.Stmt == nil {
			return nil
		}
		if d := a.needWrapperRule("time"); d != nil {
			return d
		}
		return a.stmt(cmd.Stmt, depth+1)
	}
	return denyf("builtin.parse", "%s is not supported", nodeName(s.Cmd))
}

func nodeName(n syntax.Node) string {
	switch n.(type) {
	case *syntax.FuncDecl:
		return "a function definition"
	case *syntax.ArithmCmd:
		return "arithmetic"
	case *syntax.TestClause:
		return "[[ ... ]]"
	case *syntax.DeclClause:
		return "declare/export/local"
	case *syntax.LetClause:
		return "let"
	case *syntax.CoprocClause:
		return "coproc"
	}
	return fmt.Sprintf("%T", n)
}

// redirect checks one redirection: file targets are paths under paths.write
// (output) or paths.read (input); descriptor duplications are fine.
func (a *analysis) redirect(r *syntax.Redirect) *denial {
	if r.N != nil && !allDigits(r.N.Value) {
		return denyf("builtin.redirect", "redirection to a named descriptor {%s} is not allowed", r.N.Value)
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		return nil // the body's expansions were refused by forbiddenNodes
	case syntax.WordHdoc:
		if _, why := literalWord(r.Word); why != "" {
			return denyf("builtin.expansion", "%s", why)
		}
		return nil
	}
	w, why := literalWord(r.Word)
	if why != "" {
		return denyf("builtin.expansion", "redirection target: %s", why)
	}
	switch r.Op {
	case syntax.DplIn, syntax.DplOut:
		v := strings.TrimSuffix(w.value, "-")
		if allDigits(v) || w.value == "-" {
			return nil
		}
		if r.Op == syntax.DplIn {
			return denyf("builtin.redirect", "<&%s is not a file descriptor", printable(w.value))
		}
		return a.redirectTarget(w, true)
	case syntax.RdrIn:
		return a.redirectTarget(w, false)
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut:
		return a.redirectTarget(w, true)
	}
	return denyf("builtin.redirect", "redirection %s is not supported", r.Op)
}

func (a *analysis) redirectTarget(w word, write bool) *denial {
	rule, roots, verb := "paths.read", a.c.Paths.Read, "readable"
	if write {
		rule, roots, verb = "paths.write", a.c.Paths.Write, "writable"
	}
	if w.glob || w.tilde {
		return denyf(rule, "redirection target %q uses a glob or ~; write the path out; %s: %s", printable(w.value), verb, listRoots(roots))
	}
	for _, cwd := range a.cwds {
		p, why := cleanPath(w.value, cwd)
		if why != "" {
			return denyf(rule, "redirection target: %s; %s: %s", why, verb, listRoots(roots))
		}
		if write && writableDevices[p] || !write && readableDevices[p] {
			continue
		}
		if !withinAny(p, roots) {
			return denyf(rule, "redirection to %s is outside the %s paths; %s: %s", p, verb, verb, listRoots(roots))
		}
		if why := execTarget(a.c, p); write && why != "" {
			return denyf("builtin.exec-target", "%s", why)
		}
	}
	return nil
}

// checkShellVar refuses a for-loop variable that would change how programs
// are found or run (for PATH in /work/bin; do ls; done), or a credential.
func checkShellVar(c *contracts.Contract, name string) *denial {
	if contracts.ReservedEnvName(name) {
		return denyf("builtin.reserved-env", "the loop variable %s changes how programs are found or run", name)
	}
	for _, cr := range c.Credentials {
		if cr.Name == name {
			return denyf("credentials", "the loop variable %s is a credential", name)
		}
	}
	return nil
}

// deniedBuiltins change the shell itself (its variables, options, traps,
// functions, lookups) or run code the engine cannot see. They are refused
// whatever the contract says.
var deniedBuiltins = map[string]bool{
	"eval": true, "source": true, ".": true, "exec": true, "builtin": true, "command": true,
	"export": true, "declare": true, "typeset": true, "local": true, "readonly": true,
	"set": true, "alias": true, "unalias": true, "trap": true, "enable": true, "hash": true,
	"ulimit": true, "unset": true, "shopt": true, "coproc": true, "fc": true, "bind": true,
	"complete": true, "compgen": true, "compopt": true, "pushd": true, "popd": true, "dirs": true,
	"let": true, "mapfile": true, "readarray": true, "read": true, "getopts": true,
	"history": true, "caller": true, "jobs": true, "fg": true, "bg": true, "disown": true,
	"wait": true, "suspend": true, "logout": true, "umask": true, "function": true,
	"select": true, "times": true, "type": true,
}

// call checks one simple command.
func (a *analysis) call(ce *syntax.CallExpr, depth int) *denial {
	if len(ce.Args) == 0 {
		if len(ce.Assigns) > 0 {
			return denyf("builtin.assignment", "setting shell variables (NAME=value) is not allowed; pass environment through the env argument")
		}
		return nil
	}
	for _, as := range ce.Assigns {
		if as.Append || as.Naked || as.Index != nil || as.Array != nil || as.Name == nil {
			return denyf("builtin.assignment", "only NAME=value prefixes are supported")
		}
		val := ""
		if as.Value != nil {
			w, why := literalWord(as.Value)
			if why != "" {
				return denyf("builtin.expansion", "%s", why)
			}
			val = w.value
		}
		if d := checkEnvVar(a.c, as.Name.Value, val); d != nil {
			return d
		}
	}
	argv := make([]string, 0, len(ce.Args))
	for i, w := range ce.Args {
		lw, why := literalWord(w)
		if why != "" {
			return denyf("builtin.expansion", "%s", why)
		}
		if i == 0 {
			if lw.glob || lw.tilde {
				return denyf("builtin.glob", "the program name %q uses a glob or ~; name the program literally", printable(lw.value))
			}
		} else if lw.glob && lw.leadingMeta {
			return denyf("builtin.glob", "the glob %q could expand to a file name starting with '-' and be read as a flag; write it as ./%s", printable(lw.value), printable(lw.value))
		}
		argv = append(argv, lw.value)
	}
	return a.program(argv, depth, true, false)
}

// program checks argv (one simple command, or the command a wrapper runs).
// direct is true when the shell runs it (so shell builtins apply); xargs is
// true when xargs appends arguments the engine cannot see.
func (a *analysis) program(argv []string, depth int, direct, xargs bool) *denial {
	if depth > maxDepth {
		return denyf("builtin.limits", "the command line nests deeper than %d levels", maxDepth)
	}
	a.count++
	if a.count > maxSimpleCommands {
		return denyf("builtin.limits", "the command line has more than %d simple commands", maxSimpleCommands)
	}
	name := argv[0]
	if name == "" {
		return denyf("commands.allow", "the program name is empty")
	}
	if direct {
		if deniedBuiltins[name] {
			return denyf("builtin.shell-builtin", "the shell builtin %q is not allowed: it changes the shell or runs code that cannot be checked", name)
		}
		if name == "printf" && len(argv) > 1 && strings.HasPrefix(argv[1], "-v") {
			return denyf("builtin.shell-builtin", "printf -v sets a shell variable and is not allowed")
		}
		switch name {
		case "cd":
			return a.cd(argv)
		case "true", "false", ":":
			a.used = append(a.used, usedCommand{argv: argv, neutral: true})
			a.programs = append(a.programs, name)
			a.useRule("builtin." + map[string]string{"true": "true", "false": "false", ":": "colon"}[name])
			return nil
		}
	}
	idx := a.matchRules(name)
	if len(idx) == 0 {
		if strings.Contains(name, "/") {
			return denyf("commands.allow", "the path-qualified program %q is not allowed: a rule must name this exact path; allowed: %s", printable(name), a.allowedList())
		}
		return denyf("commands.allow", "%q is not an allowed program; allowed: %s", printable(name), a.allowedList())
	}
	base := path.Base(name)
	if w, ok := wrappers[base]; ok {
		var rule = -1
		for _, i := range idx {
			if a.c.Commands.Allow[i].Wrapper {
				rule = i
				break
			}
		}
		if rule < 0 {
			return denyf("builtin.wrapper", "%s runs another program; it is allowed only by a rule with wrapper: true, and then the program it runs is checked too", base)
		}
		if xargs {
			return denyf("builtin.wrapper", "%s behind xargs would receive arguments that cannot be checked", base)
		}
		if w == nil {
			return denyf("builtin.wrapper", "%s runs another program in a way that cannot be checked reliably; run the program directly", base)
		}
		a.useRule(ruleName(rule))
		a.programs = append(a.programs, name)
		a.used = append(a.used, usedCommand{argv: argv})
		return w(a, a.c.Commands.Allow[rule], argv, depth)
	}
	var first *denial
	for _, i := range idx {
		d := a.checkRule(i, base, argv, xargs)
		if d == nil {
			a.useRule(ruleName(i))
			a.programs = append(a.programs, name)
			a.used = append(a.used, usedCommand{argv: argv})
			return nil
		}
		if first == nil {
			first = d
		}
	}
	return first
}

// needWrapperRule is for the time keyword: allowed like the time program.
func (a *analysis) needWrapperRule(name string) *denial {
	for _, i := range a.matchRules(name) {
		if a.c.Commands.Allow[i].Wrapper {
			a.useRule(ruleName(i))
			return nil
		}
	}
	return denyf("builtin.wrapper", "%s runs another program; it is allowed only by a rule with wrapper: true", name)
}

// matchRules returns the indexes of the rules whose run names this program:
// a bare name matches the same bare name; a path matches the same path after
// cleaning (relative paths resolve against the workdir for rules and against
// every possible working directory for the command). A bare rule never
// matches a path, whatever its base name.
func (a *analysis) matchRules(name string) []int {
	var out []int
	for i, r := range a.c.Commands.Allow {
		if runMatches(a.c, r.Run, name, a.cwds) {
			out = append(out, i)
		}
	}
	return out
}

func runMatches(c *contracts.Contract, run, name string, cwds []string) bool {
	if run == "" {
		return false
	}
	if !strings.Contains(run, "/") || !strings.Contains(name, "/") {
		return run == name
	}
	want := run
	if !strings.HasPrefix(want, "/") {
		want = workdir(c) + "/" + want
	}
	want = path.Clean(want)
	for _, cwd := range cwds {
		got := name
		if !strings.HasPrefix(got, "/") {
			got = cwd + "/" + got
		}
		if path.Clean(got) != want {
			return false
		}
	}
	return true
}

// allowedList describes the allow rules for a reason.
func (a *analysis) allowedList() string { return AllowedPrograms(a.c) }

// AllowedPrograms lists the contract's allowed programs with their
// subcommands, as reasons and tool descriptions show them: "pytest, git
// (status, diff)", or "none".
func AllowedPrograms(c *contracts.Contract) string {
	if len(c.Commands.Allow) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(c.Commands.Allow))
	for _, r := range c.Commands.Allow {
		s := r.Run
		if len(r.Subcommands) > 0 {
			s += " (" + strings.Join(r.Subcommands, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// cd changes the working directory: only to a literal directory inside
// paths.read, and not inside a loop (where the directory could drift).
func (a *analysis) cd(argv []string) *denial {
	args := argv[1:]
	for len(args) > 0 && (args[0] == "-P" || args[0] == "-L" || args[0] == "-e" || args[0] == "-@") {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) != 1 || args[0] == "-" || strings.HasPrefix(args[0], "-") {
		return denyf("builtin.cd", "cd needs exactly one directory; readable: %s", listRoots(a.c.Paths.Read))
	}
	if a.loop > 0 {
		return denyf("builtin.cd", "cd inside a loop is not supported")
	}
	if strings.HasPrefix(args[0], "~") || strings.ContainsAny(args[0], "*?[") {
		return denyf("builtin.cd", "cd to %q: ~ and pattern characters are not supported; write the directory out", printable(args[0]))
	}
	var next []string
	for _, cwd := range a.cwds {
		p, why := cleanPath(args[0], cwd)
		if why != "" {
			return denyf("builtin.cd", "%s", why)
		}
		if !withinAny(p, a.c.Paths.Read) {
			return denyf("paths.read", "cd %s leaves the readable paths; readable: %s", p, listRoots(a.c.Paths.Read))
		}
		next = append(next, p)
	}
	for _, p := range next {
		if !contains(a.cwds, p) {
			a.cwds = append(a.cwds, p)
		}
	}
	if len(a.cwds) > 16 {
		return denyf("builtin.cd", "too many cd commands to follow")
	}
	a.programs = append(a.programs, "cd")
	a.used = append(a.used, usedCommand{argv: argv, neutral: true})
	a.useRule("builtin.cd")
	return nil
}

// ruleName is the contract path of allow rule i.
func ruleName(i int) string {
	if i >= 0 && i < len(ruleNames) {
		return ruleNames[i]
	}
	return "commands.allow[" + strconv.Itoa(i) + "]"
}

// ruleNames caches the names of the first rules, which every decision uses.
var ruleNames = func() (names [64]string) {
	for i := range names {
		names[i] = "commands.allow[" + strconv.Itoa(i) + "]"
	}
	return names
}()
