package policy

import "strings"

// optSpec describes a program's getopt-style options, enough to find its
// operands and the values of its options.
type optSpec struct {
	shortArg    string   // short options that take a required argument
	shortOptArg string   // short options whose argument, if any, is attached (sed -i.bak)
	longArg     []string // long options (with "--") that take a required argument
	noDashDash  bool     // "--" does not end options
}

// opt is one option occurrence.
type opt struct {
	name     string // "-x" or "--long"
	value    string
	hasValue bool
}

// parseArgs splits args (without argv[0]) into options and operands the
// way getopt_long does with argument permutation. Long options may be
// abbreviated, so a long option that is a prefix of one that takes an
// argument consumes the next argument too.
func parseArgs(args []string, spec *optSpec) (opts []opt, operands []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" && !spec.noDashDash:
			operands = append(operands, args[i+1:]...)
			return opts, operands
		case strings.HasPrefix(a, "--"):
			name, val, has := strings.Cut(a, "=")
			name = canonLong(spec, name)
			o := opt{name: name, value: val, hasValue: has}
			if !has && longTakesArg(spec, name) && i+1 < len(args) {
				i++
				o.value, o.hasValue = args[i], true
			}
			opts = append(opts, o)
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				name := "-" + string(c)
				if strings.IndexByte(spec.shortArg, c) >= 0 {
					o := opt{name: name, hasValue: true}
					if j+1 < len(a) {
						o.value = a[j+1:]
					} else if i+1 < len(args) {
						i++
						o.value = args[i]
					} else {
						o.hasValue = false
					}
					opts = append(opts, o)
					break
				}
				if strings.IndexByte(spec.shortOptArg, c) >= 0 {
					opts = append(opts, opt{name: name, value: a[j+1:], hasValue: j+1 < len(a)})
					break
				}
				opts = append(opts, opt{name: name})
			}
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands
}

// canonLong expands an abbreviated long option to the one option in
// spec.longArg it abbreviates, if exactly one.
func canonLong(spec *optSpec, name string) string {
	if len(name) <= 2 {
		return name
	}
	full, n := name, 0
	for _, l := range spec.longArg {
		if l == name {
			return name
		}
		if strings.HasPrefix(l, name) {
			full, n = l, n+1
		}
	}
	if n == 1 {
		return full
	}
	return name
}

func longTakesArg(spec *optSpec, name string) bool {
	if len(name) <= 2 {
		return false
	}
	for _, l := range spec.longArg {
		if l == name {
			return true
		}
	}
	// An abbreviation consumes an argument only if it is unambiguous.
	n := 0
	for _, l := range spec.longArg {
		if strings.HasPrefix(l, name) {
			n++
		}
	}
	return n == 1
}

// spelledFlags returns every option that any argument spells, including
// arguments parseArgs took as option values, so that a value can never hide
// a flag from the danger checks (at the price of refusing, say, a pattern
// "-z" given to rg -e). Arguments after "--" are operands.
func spelledFlags(args []string, spec *optSpec) []opt {
	var out []opt
	for _, a := range args {
		if a == "--" && !spec.noDashDash {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		o, _ := parseArgs([]string{a}, spec)
		out = append(out, o...)
	}
	return out
}

// danger is an option that runs a program or writes a file, with every
// spelling; a rule opts in by listing any one of them in allow_flags.
type danger struct {
	names []string
	why   string
}

// matches reports whether option name spells d: exactly, or (for long
// options) as an abbreviation getopt_long or git would accept.
func (d danger) matches(name string) bool {
	for _, n := range d.names {
		if n == name {
			return true
		}
		if strings.HasPrefix(n, "--") && strings.HasPrefix(name, "--") && len(name) > 2 && strings.HasPrefix(n, name) {
			return true
		}
	}
	return false
}

func (d danger) allowedBy(allow []string) bool {
	for _, n := range d.names {
		if contains(allow, n) {
			return true
		}
	}
	return false
}
