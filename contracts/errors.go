package contracts

import (
	"strconv"
	"strings"
)

// FieldError is one problem in a contract file. Line and Col are 1-based and
// zero when the problem has no position (an empty file); Path is the field
// path such as "commands.allow[2].run", empty for the whole document.
type FieldError struct {
	File string
	Line int
	Col  int
	Path string
	Msg  string
}

// Error formats e as "FILE:LINE:COL: path: message".
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(":")
		if e.Col > 0 {
			b.WriteString(strconv.Itoa(e.Col))
			b.WriteString(":")
		}
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a contract file, in file order. Parse and
// Load return it as their error when the contract is invalid.
type Errors []*FieldError

// Error formats one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, so that errors.As finds a *FieldError.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Warning is a lint finding in a valid contract: something it allows that a
// policy author should choose knowingly. Path is the field path it concerns.
type Warning struct {
	Path string
	Msg  string
}

// String formats w as "path: message".
func (w Warning) String() string {
	if w.Path == "" {
		return w.Msg
	}
	return w.Path + ": " + w.Msg
}
