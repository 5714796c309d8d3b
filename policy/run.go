package policy

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// Defaults used when a contract was built without them.
const (
	defaultTimeout    = 60 * time.Second
	defaultMaxTimeout = 10 * time.Minute
)

// Limits on the agent's environment.
const (
	maxEnvVars       = 64
	maxEnvValueBytes = 32 << 10
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkEnvVar checks one variable the agent wants to set: a valid name,
// never a reserved one or a credential, listed in commands.env.pass, with a
// bounded UTF-8 value.
func checkEnvVar(c *contracts.Contract, name, value string) *denial {
	if !envNameRE.MatchString(name) {
		return denyf("commands.env.pass", "%q is not a valid variable name", printable(name))
	}
	if contracts.ReservedEnvName(name) {
		return denyf("builtin.reserved-env", "%s changes how programs are found or run and can never be set by the agent", name)
	}
	for _, cr := range c.Credentials {
		if cr.Name == name {
			return denyf("credentials", "%s is a credential; the server injects it into the commands its grant allows", name)
		}
	}
	if !contains(c.Commands.Env.Pass, name) {
		pass := "none"
		if len(c.Commands.Env.Pass) > 0 {
			pass = strings.Join(c.Commands.Env.Pass, ", ")
		}
		return denyf("commands.env.pass", "%s is not in commands.env.pass; the agent may set: %s", name, pass)
	}
	if len(value) > maxEnvValueBytes || strings.IndexByte(value, 0) >= 0 || !utf8.ValidString(value) {
		return denyf("commands.env.pass", "the value of %s must be valid UTF-8 without NUL bytes, at most %d bytes", name, maxEnvValueBytes)
	}
	return nil
}

// DecideRun decides a run_command call. The command line is parsed as a
// bash program; every simple command in it must match a commands.allow
// rule, after the built-in checks on substitutions, expansions, builtins,
// wrappers, exec-capable flags, redirections, paths and network use.
//
// Credentials: a credential is injected only if every simple command of the
// program (wrappers included; cd, true, false and ':' excepted) matches one
// of its grants, so that `git fetch; cat .git/config` or
// `git fetch && printenv` never receives it.
func DecideRun(c *contracts.Contract, call RunCall) Decision {
	if c == nil {
		return deny(RuleDefaultDeny, "no contract is loaded for this task")
	}
	cmd := call.Command
	switch {
	case strings.TrimSpace(cmd) == "":
		return deny("builtin.input", "the command is empty")
	case len(cmd) > maxCommandBytes:
		return deny("builtin.limits", "command too long: %d bytes, at most %d", len(cmd), maxCommandBytes)
	case !utf8.ValidString(cmd):
		return deny("builtin.input", "the command is not valid UTF-8")
	}
	for _, r := range cmd {
		if r == 0 {
			return deny("builtin.input", "the command contains a NUL byte")
		}
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return deny("builtin.input", "the command contains the control character %U; shells and checkers can disagree on it", r)
		}
	}

	wd := workdir(c)
	cwd := wd
	if call.Cwd != "" {
		p, why := cleanPath(call.Cwd, wd)
		if why != "" {
			return deny("paths.read", "cwd: %s", why)
		}
		cwd = p
	}
	if !withinAny(cwd, c.Paths.Read) {
		return deny("paths.read", "cwd %s is outside the readable paths; readable: %s", cwd, listRoots(c.Paths.Read))
	}

	if len(call.Env) > maxEnvVars {
		return deny("commands.env.pass", "%d environment variables; at most %d", len(call.Env), maxEnvVars)
	}
	var env map[string]string
	for _, name := range sortedKeys(call.Env) {
		if d := checkEnvVar(c, name, call.Env[name]); d != nil {
			return deny(d.rule, "env: %s", d.reason)
		}
		if env == nil {
			env = map[string]string{}
		}
		env[name] = call.Env[name]
	}

	timeout, clamped, d := effectiveTimeout(c, call.TimeoutSeconds)
	if d != nil {
		return deny(d.rule, "%s", d.reason)
	}

	a := &analysis{c: c, cwds: []string{cwd}}
	if d := a.nested(cmd, syntax.LangBash, 0); d != nil {
		return deny(d.rule, "%s", d.reason)
	}
	if len(a.programs) == 0 {
		return deny("builtin.input", "the command runs no program")
	}

	eff := &RunEffective{
		Command: cmd, Cwd: cwd, Env: env, Timeout: timeout, TimeoutClamped: clamped,
		Network: NetworkPlanFor(c), Programs: a.programs, Credentials: a.credentials(),
	}
	reason := fmt.Sprintf("allowed by %s: %s", strings.Join(a.rules, ", "), strings.Join(a.programs, ", "))
	if clamped {
		reason += fmt.Sprintf("; timeout clamped to %s (commands.max_timeout)", timeout)
	}
	return Decision{Allow: true, Rule: strings.Join(a.rules, ","), Reason: reason, Effective: eff}
}

// nested parses src and checks every statement in it.
func (a *analysis) nested(src string, lang syntax.LangVariant, depth int) *denial {
	if depth > maxDepth {
		return denyf("builtin.limits", "the command line nests deeper than %d levels", maxDepth)
	}
	if len(src) > maxCommandBytes {
		return denyf("builtin.limits", "command too long")
	}
	f, d := parseShell(src, lang)
	if d != nil {
		return d
	}
	if d := forbiddenNodes(f); d != nil {
		return d
	}
	return a.stmts(f.Stmts, depth)
}

// effectiveTimeout clamps the requested timeout to commands.max_timeout.
func effectiveTimeout(c *contracts.Contract, seconds float64) (time.Duration, bool, *denial) {
	def, max := time.Duration(c.Commands.DefaultTimeout), time.Duration(c.Commands.MaxTimeout)
	if def <= 0 {
		def = defaultTimeout
	}
	if max <= 0 {
		max = defaultMaxTimeout
	}
	if def > max {
		def = max
	}
	switch {
	case math.IsNaN(seconds) || seconds < 0:
		return 0, false, denyf("builtin.timeout", "timeout_seconds must be a positive number of seconds, at most %s", max)
	case seconds == 0:
		return def, false, nil
	case seconds >= max.Seconds():
		return max, seconds > max.Seconds(), nil
	}
	t := time.Duration(seconds * float64(time.Second))
	if t < time.Millisecond {
		t = time.Millisecond
	}
	return t, false, nil
}

// credentials returns the credentials every simple command's grant covers.
func (a *analysis) credentials() []string {
	var out []string
	for _, cr := range a.c.Credentials {
		ok := len(a.used) > 0
		for _, u := range a.used {
			if !u.neutral && !a.granted(cr, u.argv) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, cr.Name)
		}
	}
	return out
}

func (a *analysis) granted(cr contracts.Credential, argv []string) bool {
	for _, g := range cr.Grant {
		if !runMatches(a.c, g.Run, argv[0], a.cwds) {
			continue
		}
		if len(g.Subcommands) == 0 || contains(g.Subcommands, subcommandOf(path.Base(argv[0]), argv)) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
