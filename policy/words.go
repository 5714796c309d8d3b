package policy

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// word is a shell word whose value is known statically.
type word struct {
	value string
	glob  bool // has an unquoted *, ? or [...]: bash expands it to file names
	tilde bool // starts with an unquoted ~: bash expands it to a home directory
	// leadingMeta is true when the glob could expand to a name starting with
	// '-' (the pattern does not start with a literal character other than '-').
	leadingMeta bool
}

// literalWord evaluates w the way bash would without running anything. It
// refuses every part whose value is only known at run time (parameters,
// substitutions, arithmetic), ANSI-C and locale quoting, extended globs and
// brace expansion, and returns a reason.
func literalWord(w *syntax.Word) (word, string) {
	if len(w.Parts) == 1 {
		if l, ok := w.Parts[0].(*syntax.Lit); ok && !strings.ContainsAny(l.Value, "\\*?[~{") {
			return word{value: l.Value}, ""
		}
	}
	var out word
	var b strings.Builder
	// unq collects the unquoted characters with quoted ones replaced by a
	// harmless placeholder, to spot brace expansion.
	var unq strings.Builder
	first := true
	bracket, bracketLeading := -1, false
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				ch := v[i]
				if ch == '\\' {
					if i+1 < len(v) {
						i++
						if v[i] == '\n' {
							continue
						}
						if first {
							first = false
						}
						b.WriteByte(v[i])
						unq.WriteByte('_')
						continue
					}
					b.WriteByte('\\')
					unq.WriteByte('_')
					first = false
					continue
				}
				switch ch {
				case '*', '?':
					out.glob = true
					if b.Len() == 0 {
						out.leadingMeta = true
					}
				case '[':
					if bracket < 0 {
						bracket, bracketLeading = unq.Len(), b.Len() == 0
					}
				case '~':
					if b.Len() == 0 && first {
						out.tilde = true
					}
				}
				first = false
				b.WriteByte(ch)
				unq.WriteByte(ch)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return word{}, "ANSI-C quoting $'...' is not supported; use plain quotes"
			}
			b.WriteString(p.Value)
			unq.WriteString(strings.Repeat("_", len(p.Value)))
			first = false
		case *syntax.DblQuoted:
			if p.Dollar {
				return word{}, "locale quoting $\"...\" is not supported; use plain quotes"
			}
			for _, dp := range p.Parts {
				lit, ok := dp.(*syntax.Lit)
				if !ok {
					return word{}, expansionReason(dp)
				}
				v := lit.Value
				for i := 0; i < len(v); i++ {
					if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("$`\"\\\n", v[i+1]) >= 0 {
						i++
						if v[i] == '\n' {
							continue
						}
					}
					b.WriteByte(v[i])
					unq.WriteByte('_')
				}
			}
			first = false
		default:
			return word{}, expansionReason(part)
		}
	}
	out.value = b.String()
	if bracket >= 0 && strings.IndexByte(unq.String()[bracket+1:], ']') >= 0 {
		out.glob = true
		out.leadingMeta = out.leadingMeta || bracketLeading
	}
	if braceExpansion(unq.String()) {
		return word{}, fmt.Sprintf("brace expansion in %q is not supported; write the words out", printable(out.value))
	}
	if out.glob && !out.leadingMeta && strings.HasPrefix(out.value, "-") {
		out.leadingMeta = true
	}
	return out, ""
}

// braceExpansion reports whether unquoted text has a {..,..} or {a..b}
// group bash would expand.
func braceExpansion(s string) bool {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return false
	}
	rest := s[open+1:]
	close := strings.LastIndexByte(rest, '}')
	if close < 0 {
		return false
	}
	inner := rest[:close]
	return strings.Contains(inner, ",") || strings.Contains(inner, "..")
}

// expansionReason names the run-time expansion a word part performs.
func expansionReason(p syntax.WordPart) string {
	switch p.(type) {
	case *syntax.ParamExp:
		return "parameter expansion ($NAME) is not allowed; pass values literally or through the env argument"
	case *syntax.CmdSubst:
		return "command substitution is not allowed; run the commands separately"
	case *syntax.ArithmExp:
		return "arithmetic expansion is not allowed"
	case *syntax.ProcSubst:
		return "process substitution is not allowed; use a pipe or a file"
	case *syntax.ExtGlob:
		return "extended globs are not allowed"
	case *syntax.BraceExp:
		return "brace expansion is not allowed"
	}
	return fmt.Sprintf("%T in a word is not supported", p)
}
