package contracts

import (
	"fmt"
	"net"
	"net/netip"
	"path"
	"strconv"
	"strings"
)

// errAtPtr reports a problem with the value at a JSON pointer (or, for a
// defaulted value, its nearest ancestor in the file).
func (d *doc) errAtPtr(ptr, format string, args ...any) {
	l := d.at(ptr)
	p := l.path
	if _, ok := d.locs[ptr]; !ok {
		p = ptrPath(ptr)
	}
	d.errAt(l.pos, p, format, args...)
}

// ptrPath converts a pointer into a field path without the document's help;
// used only for values the file left out.
func ptrPath(ptr string) string {
	p := ""
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if i, err := strconv.Atoi(seg); err == nil {
			p = childPath(p, "", i)
		} else {
			p = childPath(p, unescapePtr(seg), -1)
		}
	}
	return p
}

func idx(base string, i int) string { return base + "/" + strconv.Itoa(i) }

// check enforces the rules the schema cannot express. It runs on the typed,
// defaulted contract.
func (d *doc) check(c *Contract) {
	// Timeouts.
	cm := c.Commands
	if cm.DefaultTimeout > cm.MaxTimeout {
		d.errAtPtr("/commands/default_timeout", "%s is longer than commands.max_timeout (%s); a command may never ask for more than the maximum", cm.DefaultTimeout, cm.MaxTimeout)
	}

	// Paths.
	d.checkAbsPath("/sandbox/workdir", c.Sandbox.Workdir)
	for _, list := range []struct {
		key   string
		paths []string
	}{{"read", c.Paths.Read}, {"write", c.Paths.Write}, {"export", c.Paths.Export}} {
		for i, p := range list.paths {
			d.checkAbsPath(idx("/paths/"+list.key, i), p)
		}
	}
	for i, p := range c.Paths.Export {
		if coveredBy(p, c.Paths.Read) < 0 {
			d.errAtPtr(idx("/paths/export", i), "%s is not inside any paths.read entry; exporting a file reads it out of the sandbox, so it must be readable", p)
		}
	}

	// Commands.
	for i, r := range cm.Allow {
		d.checkProgram(idx("/commands/allow", i)+"/run", r.Run)
	}
	for i, name := range cm.Env.Pass {
		if ReservedEnvName(name) {
			d.errAtPtr(idx("/commands/env/pass", i), "%s may never be set by the agent: %s", name, reservedWhy)
		}
	}

	// Network.
	n := c.Network
	switch {
	case n.Egress == EgressAllowlist && len(n.Allow) == 0:
		d.errAtPtr("/network/egress", "allowlist needs at least one host in network.allow (or use egress: none)")
	case n.Egress != EgressAllowlist && len(n.Allow) > 0:
		d.errAtPtr("/network/allow", "is used only with egress: allowlist (egress is %s)", n.Egress)
	}
	for i, h := range n.Allow {
		d.checkHost(idx("/network/allow", i), h)
	}

	// Credentials.
	names := map[string]int{}
	passed := map[string]bool{}
	for _, p := range cm.Env.Pass {
		passed[p] = true
	}
	for i, cr := range c.Credentials {
		base := idx("/credentials", i)
		if ReservedEnvName(cr.Name) {
			d.errAtPtr(base+"/name", "%s cannot be a credential name: %s", cr.Name, reservedWhy)
		}
		if j, dup := names[cr.Name]; dup {
			d.errAtPtr(base+"/name", "duplicate credential name %s (also credentials[%d])", cr.Name, j)
		} else {
			names[cr.Name] = i
		}
		if passed[cr.Name] {
			d.errAtPtr(base+"/name", "%s is also in commands.env.pass; the agent could replace the credential with its own value", cr.Name)
		}
		if file, ok := strings.CutPrefix(cr.From, "file:"); ok && path.Clean(file) != file {
			d.errAtPtr(base+"/from", "must be a clean absolute path; did you mean \"file:%s\"?", path.Clean(file))
		}
		for j, g := range cr.Grant {
			d.checkGrant(fmt.Sprintf("%s/grant/%d", base, j), cr.Name, g, cm.Allow)
		}
	}

	// Mac.
	if m := c.Mac; m != nil {
		ssh := m.Runner.SSH
		if port, err := strconv.Atoi(ssh[strings.LastIndexByte(ssh, ':')+1:]); err != nil || port < 1 || port > 65535 {
			d.errAtPtr("/mac/runner/ssh", "port must be between 1 and 65535, got %q", ssh)
		}
		for _, name := range sortedKeys(m.Steps) {
			for i, o := range m.Steps[name].Outputs {
				if clean := path.Clean(o); clean != o || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
					d.errAtPtr(idx(childPtr("/mac/steps", name, -1)+"/outputs", i),
						"must be a clean relative path inside the step's workspace, without '..', got %q", o)
				}
			}
		}
	}
}

func (d *doc) checkAbsPath(ptr, p string) {
	if clean := path.Clean(p); clean != p {
		d.errAtPtr(ptr, "must be a clean absolute path; did you mean %q?", clean)
	}
}

// checkProgram refuses program paths that do not match only themselves:
// ".", "..", "a//b", "bin/", "../x", "./a/../b".
func (d *doc) checkProgram(ptr, run string) {
	if run == "." || run == ".." {
		d.errAtPtr(ptr, "must be a program name, got %q", run)
		return
	}
	if !strings.Contains(run, "/") {
		return
	}
	rel := strings.TrimPrefix(run, "./")
	clean := path.Clean(rel)
	if clean != rel || clean == ".." || clean == "/" || strings.HasPrefix(clean, "../") || strings.HasPrefix(rel, "./") {
		d.errAtPtr(ptr, "must be a clean path to a program (no '..', '//' or trailing '/'), got %q", run)
	}
}

// checkHost refuses allowlist entries the sandbox could not enforce as meant.
func (d *doc) checkHost(ptr, h string) {
	if strings.Contains(h, "/") {
		p, err := netip.ParsePrefix(h)
		switch {
		case err != nil:
			d.errAtPtr(ptr, "must be a CIDR such as 10.0.0.0/8, got %q", h)
		case p.Masked() != p:
			d.errAtPtr(ptr, "CIDR has host bits set; did you mean %q?", p.Masked().String())
		}
		return
	}
	if net.ParseIP(strings.TrimSuffix(h, ".")) != nil || isAllDigitsAndDots(h) {
		d.errAtPtr(ptr, "an IP address must be written as a CIDR, such as %s/32", strings.TrimSuffix(h, "."))
		return
	}
	if rest, ok := strings.CutPrefix(h, "*."); ok && !strings.Contains(strings.TrimSuffix(rest, "."), ".") {
		d.errAtPtr(ptr, "a wildcard must name a domain, such as *.example.com, got %q", h)
	}
}

func isAllDigitsAndDots(s string) bool {
	return strings.Trim(s, "0123456789.") == ""
}

// checkGrant requires a credential's grant to name a program (and
// subcommands) that commands.allow permits.
func (d *doc) checkGrant(ptr, cred string, g Grant, allow []CommandRule) {
	var rules []CommandRule
	for _, r := range allow {
		if r.Run == g.Run {
			rules = append(rules, r)
		}
	}
	if len(rules) == 0 {
		d.errAtPtr(ptr+"/run", "%s is not in commands.allow; %s can be granted only to an allowed program", g.Run, cred)
		return
	}
	for i, sub := range g.Subcommands {
		ok := false
		for _, r := range rules {
			if len(r.Subcommands) == 0 || contains(r.Subcommands, sub) {
				ok = true
			}
		}
		if !ok {
			d.errAtPtr(idx(ptr+"/subcommands", i), "%s %s is not allowed by commands.allow (allowed: %s)", g.Run, sub, strings.Join(rules[0].Subcommands, ", "))
		}
	}
}

// coveredBy returns the index of the first entry of dirs that is p or an
// ancestor of p, or -1. Containment is separator-aware: /work does not
// cover /work2.
func coveredBy(p string, dirs []string) int {
	for i, dir := range dirs {
		if within(p, dir) {
			return i
		}
	}
	return -1
}

// within says whether p is dir or below it.
func within(p, dir string) bool {
	if dir == "/" || p == dir {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// reservedWhy explains a name ReservedEnvName refuses.
const reservedWhy = "it is reserved because it changes which program runs, what code it loads or where it connects (see ReservedEnvName)"
