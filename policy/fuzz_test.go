package policy

import (
	"net/netip"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// FuzzDecide checks command decisions against a fixed contract. It must
// never panic, every decision must be well formed, and an allowed command
// must also pass a second, simpler reading of the same program written
// independently of the engine: every command anywhere in the syntax tree
// names an allowed program, nothing is substituted or expanded at run time,
// nothing runs in the background, and every output redirection stays in
// paths.write. raw goes through Decide's strict JSON decoder as run_command
// arguments.
func FuzzDecide(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, []byte(`{"command":`+jsonString(s)+`}`))
	}
	c := devContract()
	f.Fuzz(func(t *testing.T, cmd string, raw []byte) {
		d := DecideRun(c, RunCall{Command: cmd})
		checkWellFormed(t, d)
		if d.Allow {
			simpleReading(t, c.Commands.Allow, cmd, d)
		}
		if d2, err := Decide(c, ToolRunCommand, raw); err == nil {
			checkWellFormed(t, d2)
		}
	})
}

func checkWellFormed(t *testing.T, d Decision) {
	t.Helper()
	if d.Rule == "" || d.Reason == "" {
		t.Fatalf("decision without rule or reason: %+v", d)
	}
	if !utf8.ValidString(d.Reason) {
		t.Fatalf("reason is not UTF-8: %q", d.Reason)
	}
	if d.Allow {
		if _, ok := d.Effective.(*RunEffective); !ok {
			t.Fatalf("allowed without RunEffective: %+v", d)
		}
		if !strings.HasPrefix(d.Reason, "allowed by ") {
			t.Fatalf("allowed reason %q", d.Reason)
		}
		return
	}
	if d.Effective != nil || !strings.HasPrefix(d.Reason, "denied by "+d.Rule+": ") {
		t.Fatalf("malformed denial: %+v", d)
	}
}

// simpleReading re-parses an allowed command and fails the fuzz run if a
// plain reading of the tree would refuse it.
func simpleReading(t *testing.T, rules []contracts.CommandRule, cmd string, d Decision) {
	t.Helper()
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		t.Fatalf("allowed a command that does not parse: %q: %v", cmd, err)
	}
	// Read the program as the printer writes it back, parsed again, so the
	// check does not share the engine's view of the original text.
	var printed strings.Builder
	if err := syntax.NewPrinter().Print(&printed, f); err != nil {
		t.Fatalf("cannot print %q: %v", cmd, err)
	}
	if f, err = syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(printed.String()), ""); err != nil {
		t.Fatalf("printed form of allowed %q does not parse: %q: %v", cmd, printed.String(), err)
	}
	cwd := d.Effective.(*RunEffective).Cwd
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ParamExp, *syntax.ArithmExp, *syntax.ArithmCmd,
			*syntax.FuncDecl, *syntax.CoprocClause, *syntax.DeclClause, *syntax.LetClause, *syntax.ExtGlob:
			t.Fatalf("allowed %q with a %T", cmd, n)
		case *syntax.Stmt:
			if n.Background || n.Coprocess {
				t.Fatalf("allowed %q with a background statement", cmd)
			}
		case *syntax.CallExpr:
			if len(n.Args) == 0 {
				if len(n.Assigns) > 0 {
					t.Fatalf("allowed %q with a shell assignment", cmd)
				}
				return true
			}
			name, ok := plainWord(n.Args[0])
			if !ok {
				t.Fatalf("allowed %q whose program name is not a plain word", cmd)
			}
			if !plainAllowed(rules, name) {
				t.Fatalf("allowed %q running %q, which no rule names", cmd, name)
			}
		case *syntax.Redirect:
			switch n.Op {
			case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut:
				target, ok := plainWord(n.Word)
				if !ok {
					t.Fatalf("allowed %q redirecting to a non-plain word", cmd)
				}
				p := target
				if !strings.HasPrefix(p, "/") {
					p = cwd + "/" + p // with cd, the engine checks every directory; the first is one of them
				}
				p = path.Clean(p)
				if p != "/dev/null" && p != "/dev/stdout" && p != "/dev/stderr" && p != "/work" && !strings.HasPrefix(p, "/work/") {
					t.Fatalf("allowed %q writing %s", cmd, p)
				}
			}
		}
		return true
	})
}

// plainWord reads a word made only of literal text and plain quotes,
// written separately from the engine's literalWord.
func plainWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := strings.ReplaceAll(p.Value, "\\\n", "")
			escaped := false
			for _, r := range v {
				if r == '\\' && !escaped {
					escaped = true
					continue
				}
				escaped = false
				b.WriteRune(r)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				v := l.Value
				for _, pair := range [][2]string{{"\\\n", ""}, {`\\`, "\x00"}, {`\"`, `"`}, {`\$`, `$`}, {"\\`", "`"}, {"\x00", `\`}} {
					v = strings.ReplaceAll(v, pair[0], pair[1])
				}
				b.WriteString(v)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// plainAllowed: the program is a rule's run exactly, or a builtin the
// engine always allows, or a program under a wrapper rule's argument list
// (not visible here), or a path rule (compared cleaned).
func plainAllowed(rules []contracts.CommandRule, name string) bool {
	switch name {
	case "cd", "true", "false", ":":
		return true
	}
	for _, r := range rules {
		if r.Run == name {
			return true
		}
		if strings.Contains(r.Run, "/") && strings.Contains(name, "/") && path.Base(path.Clean(r.Run)) == path.Base(path.Clean(name)) {
			return true // the engine compares full paths; the simple reading only needs the same file name
		}
	}
	return false
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// fuzzSeeds mixes allowed commands and known attacks.
var fuzzSeeds = []string{
	"ls -la | grep foo", "pytest -q && git status", "find . -name '*.py'", "find . -exec sh {} +",
	"git diff HEAD~1", "git -c core.pager=sh diff", "ls; rm -rf /", "echo hi > out.txt", "echo x > ~/.bashrc",
	"echo $(id)", "cat <(id)", `"rm" -rf /`, "/usr/bin/su*o id", "./sed -n p", "env CI=1 pytest", "ls | xargs wc -l",
	"bash -c 'pytest && ls'", "sed -n '1,5p' f", "sed 's/a/b/e' f", `awk '{print $1}' f`, `awk '{print | "sh"}'`,
	"tar xzf a.tgz", "tar -I sh -xf a", "curl https://pypi.org/", "curl http://2130706433/", "cd /work/src && pytest",
	"if true; then echo yes; fi", "for f in a b; do echo hi; done", "cat <<'EOF'\nx\nEOF", "CI=1 pytest 2>&1 | head",
	"timeout 30 pytest", "git clone https://github.com/a/b", "pip install requests", "rg -n TODO src | sort | head -20",
	"(ls; pytest)", "{ ls; }", "case x in x) ls;; esac", "echo {a,b}", "ls ./*", "echo x >&/etc/x", "sh -c \"sh -c 'ls'\"",
}

// FuzzHostAllowed checks host canonicalisation: never panic, and an allowed
// host must be one a plain reading of the allowlist names: an exact entry, a
// subdomain of a *.domain entry, or an address inside a CIDR entry.
func FuzzHostAllowed(f *testing.F) {
	for _, h := range []string{"pypi.org", "PyPI.org.", "api.github.com", "10.1.2.3", "2130706433", "0x7f.1",
		"[::ffff:10.1.0.1]", "[64:ff9b::a9fe:a9fe]", "pypi\u3002org", "xn--pypi-7ve.org", "pypi.org:443", "[2001:db8::1]:8443"} {
		f.Add(h)
	}
	c := devContract()
	f.Fuzz(func(t *testing.T, raw string) {
		ok, why := HostAllowed(c, raw)
		if !ok {
			if why == "" {
				t.Fatalf("denied %q without a reason", raw)
			}
			return
		}
		h, bad := canonicalName(stripPort(raw))
		if bad != "" {
			t.Fatalf("allowed %q that does not canonicalise: %s", raw, bad)
		}
		if h.isIP {
			for _, e := range c.Network.Allow {
				if p, err := netip.ParsePrefix(e); err == nil && p.Contains(h.ip.Unmap()) {
					return
				}
			}
			t.Fatalf("allowed %q (%s) outside every CIDR", raw, h.ip)
		}
		for _, e := range c.Network.Allow {
			if h.name == e || strings.HasPrefix(e, "*.") && strings.HasSuffix(h.name, e[1:]) {
				return
			}
		}
		t.Fatalf("allowed %q (%s), which no entry names", raw, h.name)
	})
}
