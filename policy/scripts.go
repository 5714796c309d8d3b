package policy

import (
	"fmt"
	"strings"
)

// checkSedScript parses a GNU sed script far enough to find the commands
// that run programs or write files (e, w, W, and the s flags e and w). It
// splits at ';' even where GNU sed would read text to the end of the line
// (a, i, c, r, labels), so it may refuse a harmless script but never misses
// a command GNU sed would run. Anything it cannot parse is refused.
func checkSedScript(s string) string {
	p := &sedParser{s: s}
	depth := 0
	for {
		p.skip(" \t\n;")
		if p.eof() {
			break
		}
		if p.peek() == '#' {
			p.toEOL()
			continue
		}
		if why := p.addresses(); why != "" {
			return why
		}
		p.skip(" \t")
		for !p.eof() && p.peek() == '!' {
			p.i++
			p.skip(" \t")
		}
		if p.eof() {
			return "address without a command"
		}
		c := p.next()
		switch c {
		case '{':
			depth++
			continue
		case '}':
			depth--
			if depth < 0 {
				return "unexpected }"
			}
		case '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'l', 'q', 'Q', 'L':
			p.skip(" \t")
			for !p.eof() && p.peek() >= '0' && p.peek() <= '9' {
				p.i++
			}
		case 'a', 'i', 'c', ':', 'b', 't', 'T', 'r', 'R', 'v':
			p.toSep()
			continue
		case 'e':
			return "the e command runs a shell command"
		case 'w', 'W':
			return fmt.Sprintf("the %c command writes a file", c)
		case 's':
			if why := p.substitute(); why != "" {
				return why
			}
		case 'y':
			delim, why := p.delim()
			if why != "" {
				return why
			}
			for k := 0; k < 2; k++ {
				if why := p.until(delim); why != "" {
					return why
				}
			}
		default:
			return fmt.Sprintf("unknown sed command %q", c)
		}
		p.skip(" \t")
		if !p.eof() && !strings.ContainsRune(";\n}#", rune(p.peek())) {
			return fmt.Sprintf("unexpected %q after a command", p.peek())
		}
	}
	if depth != 0 {
		return "unmatched {"
	}
	return ""
}

type sedParser struct {
	s string
	i int
}

func (p *sedParser) eof() bool  { return p.i >= len(p.s) }
func (p *sedParser) peek() byte { return p.s[p.i] }
func (p *sedParser) next() byte { c := p.s[p.i]; p.i++; return c }

func (p *sedParser) skip(set string) {
	for !p.eof() && strings.IndexByte(set, p.peek()) >= 0 {
		p.i++
	}
}

func (p *sedParser) toEOL() {
	for !p.eof() && p.peek() != '\n' {
		p.i++
	}
}

// toSep skips text up to the next ';', '}' or newline.
func (p *sedParser) toSep() {
	for !p.eof() && p.peek() != '\n' && p.peek() != ';' && p.peek() != '}' {
		p.i++
	}
}

// addresses parses [addr1[,addr2]].
func (p *sedParser) addresses() string {
	ok, why := p.address(false)
	if why != "" || !ok {
		return why
	}
	p.skip(" \t")
	if !p.eof() && p.peek() == ',' {
		p.i++
		p.skip(" \t")
		ok, why := p.address(true)
		if why != "" {
			return why
		}
		if !ok {
			return "missing second address"
		}
	}
	return ""
}

func (p *sedParser) address(second bool) (bool, string) {
	if p.eof() {
		return false, ""
	}
	c := p.peek()
	switch {
	case c >= '0' && c <= '9' || second && (c == '+' || c == '~'):
		p.i++
		p.digits()
		if !second && !p.eof() && p.peek() == '~' {
			p.i++
			p.digits()
		}
		return true, ""
	case c == '$':
		p.i++
		return true, ""
	case c == '/' || c == '\\':
		p.i++
		delim := byte('/')
		if c == '\\' {
			if p.eof() || p.peek() == '\n' || p.peek() == '\\' {
				return false, "bad regex delimiter"
			}
			delim = p.next()
		}
		if why := p.until(delim); why != "" {
			return false, why
		}
		for !p.eof() && (p.peek() == 'I' || p.peek() == 'M') {
			p.i++
		}
		return true, ""
	}
	return false, ""
}

func (p *sedParser) digits() {
	for !p.eof() && p.peek() >= '0' && p.peek() <= '9' {
		p.i++
	}
}

func (p *sedParser) delim() (byte, string) {
	if p.eof() {
		return 0, "missing delimiter"
	}
	d := p.next()
	if d == '\n' || d == '\\' {
		return 0, "bad delimiter"
	}
	return d, ""
}

// until consumes text up to an unescaped delim, which it consumes too.
func (p *sedParser) until(delim byte) string {
	for !p.eof() {
		c := p.next()
		switch c {
		case '\\':
			if p.eof() {
				return "unterminated expression"
			}
			p.i++
		case '\n':
			return "unterminated expression"
		case delim:
			return ""
		}
	}
	return "unterminated expression"
}

func (p *sedParser) substitute() string {
	d, why := p.delim()
	if why != "" {
		return why
	}
	if why := p.until(d); why != "" {
		return why
	}
	if why := p.until(d); why != "" {
		return why
	}
	for !p.eof() {
		c := p.peek()
		switch {
		case c == 'g' || c == 'p' || c == 'i' || c == 'I' || c == 'm' || c == 'M' || c >= '0' && c <= '9':
			p.i++
		case c == 'e':
			return "the s///e flag runs the result as a shell command"
		case c == 'w':
			return "the s///w flag writes a file"
		case strings.IndexByte(" \t;\n}#", c) >= 0:
			return ""
		default:
			return fmt.Sprintf("unknown s flag %q", c)
		}
	}
	return ""
}

// checkAwkProgram refuses awk programs that can run commands or write
// files: system(), pipes (print | "cmd", "cmd" | getline, |&), output
// redirection in print/printf, gawk's @load/@include and indirect calls, and
// /inet network files. It reads strings and regex literals as data; where it
// is unsure, it reads text as code, which can only refuse more.
func checkAwkProgram(src string) string {
	if strings.Contains(src, "system") {
		return "system() runs a shell command"
	}
	if strings.Contains(src, "/inet") {
		return "/inet special files open network connections"
	}
	if strings.Contains(src, "@") {
		return "@load, @include and indirect calls are not allowed"
	}
	inPrint := false
	var last byte // last significant character outside strings and regexes
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '"':
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' {
					j++
				}
				if j < len(src) && src[j] == '\n' {
					return "unterminated string"
				}
			}
			if j >= len(src) {
				return "unterminated string"
			}
			i, last = j, '"'
			continue
		case c == '/' && (last == 0 || strings.IndexByte("(,{};!~&|=?:\n", last) >= 0):
			j := i + 1
			for ; j < len(src) && src[j] != '/'; j++ {
				if src[j] == '\\' {
					j++
				}
				if j < len(src) && src[j] == '\n' {
					return "unterminated regular expression"
				}
			}
			if j >= len(src) {
				return "unterminated regular expression"
			}
			i, last = j, '/'
			continue
		case c == '|':
			if i+1 < len(src) && src[i+1] == '|' {
				i++
				last = '|'
				continue
			}
			return "pipes (print | \"cmd\", \"cmd\" | getline) run shell commands"
		case c == '>' && inPrint:
			return "output redirection in print or printf writes a file"
		case c == ';' || c == '\n' || c == '{' || c == '}':
			inPrint = false
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || isAlnum(src[j])) {
				j++
			}
			if w := src[i:j]; w == "print" || w == "printf" {
				inPrint = true
			}
			i, last = j-1, 'a'
			continue
		}
		if c != ' ' && c != '\t' {
			last = c
		}
	}
	return ""
}
