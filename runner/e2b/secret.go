package e2b

import (
	"fmt"
	"log/slog"
)

// Secret holds a credential (the E2B API key, a sandbox access token). It
// prints, formats, logs and marshals as REDACTED; convert it with string()
// only where the value goes on the wire.
type Secret string

const redacted = "REDACTED"

// String returns REDACTED.
func (Secret) String() string { return redacted }

// GoString returns REDACTED, so %#v does not print the value either.
func (Secret) GoString() string { return redacted }

// Format prints REDACTED for every verb.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue makes slog print REDACTED.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText makes encoding/json and friends write REDACTED.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
