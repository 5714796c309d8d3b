package redact

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
)

// Secret is a named credential value. Its methods never reveal Value: it
// prints, logs and marshals as "REDACTED". Read s.Value directly only where
// the value is injected into a command's environment.
//
// fmt cannot call methods on unexported struct fields, so a Secret held in an
// unexported field of a struct that is printed with %v is printed raw; keep
// Secrets in exported fields or pass them to loggers directly.
type Secret struct {
	Name  string
	Value string
}

const hidden = "REDACTED"

// LogValue implements slog.LogValuer: a Secret logs as "REDACTED".
func (s Secret) LogValue() slog.Value { return slog.StringValue(hidden) }

// String returns "REDACTED".
func (s Secret) String() string { return hidden }

// GoString returns a Go-syntax form with the value hidden, for %#v.
func (s Secret) GoString() string {
	return "redact.Secret{Name:" + strconv.Quote(s.Name) + ", Value:REDACTED}"
}

// Format implements fmt.Formatter so that no verb (%x, %q, %+v, ...) reaches
// the value.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		io.WriteString(f, s.GoString())
		return
	}
	io.WriteString(f, hidden)
}

// MarshalJSON returns the JSON string "REDACTED".
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + hidden + `"`), nil }

// MarshalText returns "REDACTED" (used by YAML and other text encoders).
func (s Secret) MarshalText() ([]byte, error) { return []byte(hidden), nil }
