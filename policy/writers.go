package policy

import (
	"path"
	"regexp"
	"strings"
)

// Programs that create, change or remove the files they name. Their
// destinations are checked against paths.write (and the write-then-execute
// targets) so that a shell command cannot do what write_file would refuse.
// The sandbox confines writes too; on E2B it is the only other guard.

// writerSpecs are the options that take an argument, per program.
var writerSpecs = map[string]*optSpec{
	"cp":       {shortArg: "tS", longArg: []string{"--target-directory", "--suffix", "--sparse"}},
	"mv":       {shortArg: "tS", longArg: []string{"--target-directory", "--suffix"}},
	"install":  {shortArg: "tSmogC", longArg: []string{"--target-directory", "--suffix", "--mode", "--owner", "--group", "--strip-program"}},
	"ln":       {shortArg: "tS", longArg: []string{"--target-directory", "--suffix"}},
	"rm":       {},
	"rmdir":    {},
	"unlink":   {},
	"touch":    {shortArg: "rdt", longArg: []string{"--reference", "--date"}},
	"mkdir":    {shortArg: "m", longArg: []string{"--mode", "--context"}},
	"truncate": {shortArg: "sr", longArg: []string{"--size", "--reference"}},
	"shred":    {shortArg: "ns", longArg: []string{"--iterations", "--size", "--random-source", "--remove"}},
	"chmod":    {longArg: []string{"--reference"}},
	"chown":    {longArg: []string{"--reference", "--from"}},
	"chgrp":    {longArg: []string{"--reference"}},
}

var chmodMode = regexp.MustCompile(`^([0-7]{1,4}|[ugoa]*([-+=][rwxXstugo]*)+(,[ugoa]*([-+=][rwxXstugo]*)+)*)$`)

var installDangers = []danger{{[]string{"--strip-program"}, "runs a program"}, {[]string{"-s", "--strip"}, "runs strip"}}

func checkWriter(x *argContext) *denial {
	spec := writerSpecs[x.prog]
	args := x.argv[1:]
	if x.prog == "install" {
		if d := x.checkDangers(spelledFlags(args, spec), installDangers); d != nil {
			return d
		}
	}
	opts, operands := parseArgs(args, spec)
	var targets []string
	hasTarget, reference := false, false
	for _, o := range opts {
		switch o.name {
		case "-t", "--target-directory":
			targets = append(targets, o.value)
			hasTarget = true
		case "--reference":
			reference = true
		}
	}
	switch x.prog {
	case "cp", "install", "ln":
		switch {
		case hasTarget:
		case len(operands) >= 2:
			targets = append(targets, operands[len(operands)-1])
		case x.prog == "ln" && len(operands) == 1:
			targets = append(targets, ".") // a link named like its target, in the working directory
		case x.prog == "install" && len(operands) == 1:
			targets = append(targets, operands[0]) // install -d DIR
		}
	case "mv":
		targets = append(targets, operands...) // the sources disappear too
	case "chmod":
		for i, o := range operands {
			if i == 0 && !reference && chmodMode.MatchString(o) {
				continue
			}
			targets = append(targets, o)
		}
	case "chown", "chgrp":
		if len(operands) > 0 && !reference {
			operands = operands[1:]
		}
		targets = append(targets, operands...)
	default:
		targets = append(targets, operands...)
	}
	for _, t := range targets {
		if d := x.a.checkWritePattern(t, x.prog); d != nil {
			return d
		}
	}
	return nil
}

// checkWritePattern checks a destination that may be a glob (rm build/*.o).
// A pattern component that could match ".." (one starting with '.') is
// refused; otherwise each pattern component is replaced by a plain name and
// the result checked, so /work/*/../../etc is seen as /etc.
func (a *analysis) checkWritePattern(p, what string) *denial {
	if !strings.ContainsAny(p, "*?[") {
		return a.checkPath(p, true, what)
	}
	parts := strings.Split(p, "/")
	for i, c := range parts {
		if !strings.ContainsAny(c, "*?[") {
			continue
		}
		if strings.HasPrefix(c, ".") {
			return denyf("paths.write", "%s %q: a pattern starting with '.' can match the parent directory; write the names out", what, printable(p))
		}
		parts[i] = "glob"
	}
	literal := strings.Join(parts, "/")
	if strings.HasPrefix(p, "/") && !strings.HasPrefix(literal, "/") {
		literal = "/" + literal
	}
	return a.checkPath(path.Clean(literal), true, what)
}
