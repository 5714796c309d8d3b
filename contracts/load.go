package contracts

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// Load reads, validates and defaults the contract file at path. See Parse.
func Load(path string) (*Contract, []Warning, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("contracts: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("contracts: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("contracts: %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("contracts: read %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse validates a contract document (YAML, or JSON when name ends in
// .json or the content is a JSON object), applies the defaults, and lints it.
// name is used in error messages and to tell JSON from YAML.
//
// When the contract is invalid, the error is an Errors listing every problem
// found, each with its line, column and field path. Warnings are returned
// only for a valid contract.
func Parse(name string, data []byte) (*Contract, []Warning, error) {
	d := &doc{file: name}
	d.decode(data)
	if len(d.errs) == 0 {
		d.validate()
	}
	if len(d.errs) > 0 {
		return nil, nil, d.sortedErrs()
	}
	c, err := d.typed()
	if err != nil {
		return nil, nil, err
	}
	d.applyDefaults(c)
	d.check(c)
	if len(d.errs) > 0 {
		return nil, nil, d.sortedErrs()
	}
	return c, lint(c), nil
}

// sortedErrs returns the errors in file order without repeats. Errors at
// one position are ordered by path and message, so that the output never
// depends on the order in which the validator visited them.
func (d *doc) sortedErrs() Errors {
	sort.SliceStable(d.errs, func(i, j int) bool {
		a, b := d.errs[i], d.errs[j]
		switch {
		case a.Line != b.Line:
			return a.Line < b.Line
		case a.Col != b.Col:
			return a.Col < b.Col
		case a.Path != b.Path:
			return a.Path < b.Path
		}
		return a.Msg < b.Msg
	})
	out := d.errs[:0]
	seen := map[FieldError]bool{}
	for _, e := range d.errs {
		if !seen[*e] {
			seen[*e] = true
			out = append(out, e)
		}
	}
	if len(out) > maxErrors {
		more := len(out) - maxErrors
		out = append(out[:maxErrors:maxErrors], &FieldError{File: d.file, Msg: fmt.Sprintf("... and %d more problems", more)})
	}
	return out
}

// typed decodes the schema-valid document into a Contract.
func (d *doc) typed() (*Contract, error) {
	b, err := json.Marshal(d.root)
	if err != nil {
		return nil, Errors{{File: d.file, Msg: fmt.Sprintf("cannot encode contract: %v", err)}}
	}
	var c Contract
	if err := json.Unmarshal(b, &c); err != nil {
		// The schema admits only what the types hold; reaching here is a bug
		// in schema.json, reported rather than hidden.
		return nil, Errors{{File: d.file, Msg: fmt.Sprintf("contract passed the schema but does not decode (please report): %v", err)}}
	}
	return &c, nil
}

// The defaults of a contract's optional fields.
const (
	DefaultBackend        = BackendLocal
	DefaultTemplate       = "base"
	DefaultLifetime       = Duration(30 * time.Minute)
	DefaultOnExpiry       = ExpiryKill
	DefaultWorkdir        = "/home/user/work"
	DefaultTimeout        = Duration(60 * time.Second)
	DefaultMaxTimeout     = Duration(10 * time.Minute)
	DefaultEgress         = EgressNone
	DefaultOutputBytes    = ByteSize(1 << 20)
	DefaultFileBytes      = ByteSize(10 << 20)
	DefaultArtifactBytes  = ByteSize(200 << 20)
	DefaultProcesses      = 256
	DefaultMemoryBytes    = ByteSize(1 << 30)
	DefaultApproval       = "required"
	DefaultApprovalTTL    = Duration(time.Hour)
	DefaultMacStepTimeout = Duration(30 * time.Minute)
)

// applyDefaults fills every field the file left out. A list written as []
// stays empty: "read: []" means nothing is readable.
func (d *doc) applyDefaults(c *Contract) {
	s := &c.Sandbox
	s.Backend = orDefault(s.Backend, DefaultBackend)
	s.Template = orDefault(s.Template, DefaultTemplate)
	s.Lifetime = orDefault(s.Lifetime, DefaultLifetime)
	s.OnExpiry = orDefault(s.OnExpiry, DefaultOnExpiry)
	s.Workdir = orDefault(s.Workdir, DefaultWorkdir)
	if src := c.Task.Source; src != nil && src.Repo == "" && src.Revision == "" {
		c.Task.Source = nil
	}

	cm := &c.Commands
	switch {
	case cm.DefaultTimeout == 0 && cm.MaxTimeout == 0:
		cm.DefaultTimeout, cm.MaxTimeout = DefaultTimeout, DefaultMaxTimeout
	case cm.DefaultTimeout == 0:
		cm.DefaultTimeout = min(DefaultTimeout, cm.MaxTimeout)
	case cm.MaxTimeout == 0:
		cm.MaxTimeout = max(DefaultMaxTimeout, cm.DefaultTimeout)
	}
	cm.Allow = orEmpty(cm.Allow)
	cm.Env.Pass = orEmpty(cm.Env.Pass)

	if c.Paths.Read == nil {
		c.Paths.Read = []string{s.Workdir}
	}
	c.Paths.Write = orEmpty(c.Paths.Write)
	c.Paths.Export = orEmpty(c.Paths.Export)

	c.Network.Egress = orDefault(c.Network.Egress, DefaultEgress)
	c.Credentials = orEmpty(c.Credentials)

	l := &c.Limits
	l.OutputBytes = orDefault(l.OutputBytes, DefaultOutputBytes)
	l.FileBytes = orDefault(l.FileBytes, DefaultFileBytes)
	l.ArtifactBytes = orDefault(l.ArtifactBytes, DefaultArtifactBytes)
	l.Processes = orDefault(l.Processes, DefaultProcesses)
	l.MemoryBytes = orDefault(l.MemoryBytes, DefaultMemoryBytes)

	if m := c.Mac; m != nil {
		m.Approval = orDefault(m.Approval, DefaultApproval)
		m.ApprovalTTL = orDefault(m.ApprovalTTL, DefaultApprovalTTL)
		for name, st := range m.Steps {
			st.Timeout = orDefault(st.Timeout, DefaultMacStepTimeout)
			m.Steps[name] = st
		}
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
