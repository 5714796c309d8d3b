// Package redact scrubs named secret values, and the encodings an agent would
// use to smuggle them out, from text before it leaves the server.
//
// It owns the [Secret] type (which never prints its value: fmt, slog,
// encoding/json and encoding.TextMarshaler all see "REDACTED") and the
// [Redactor], a multi-pattern matcher built once per task from that task's
// secrets. A Redactor replaces every occurrence of a secret's value, of its
// standard and URL base64 forms (padded, unpadded, and the stable inner part
// of the value inside a longer base64 stream at each of the three byte
// alignments), its lower- and upper-case hex, its URL percent-encodings, its
// JSON and Go string escapes, and its reversal, with "[REDACTED:NAME]".
// Every byte that any of these patterns covers is removed; overlapping
// matches merge into one replacement, so a crafted prefix cannot shift the
// scan past the start of a secret.
// A value with leading or trailing white space (a token read from a file
// with its newline) is also matched without it.
// [Redactor.Writer] does the same for a stream, across chunk boundaries.
//
// Values shorter than [MinStrongLen] bytes cannot be redacted reliably: their
// encodings are so short that they would match ordinary text, and a few bytes
// are easy to leak one at a time. For such values only the literal value (and
// its JSON/Go escapes) is replaced, and [Redactor.Weak] names them so that
// contract checks can warn. Empty values are ignored.
//
// What redaction cannot catch, and which the sandbox must therefore not rely
// on it for: any transformation not listed above (compression, encryption,
// mixed-case hex, base64 with line breaks, one character per line, ...). It
// is a last line of defence against accidental and naive leaks, not a
// confinement boundary. Package redact must never log, store or return a
// secret value, and performs no I/O of its own beyond the writer it is given.
package redact
