// Package contracts owns the sandbox contract: its JSON Schema (embedded),
// the typed Contract, and the loader that turns a trusted author's YAML or
// JSON file into a validated, defaulted Contract with a stable hash.
//
// The loader reports every problem it finds with the file, line, column and
// field path, and lints a valid contract for choices a policy author should
// make knowingly (interpreters, write-then-execute, open egress ...).
//
// It must never decide a tool call (that is package policy), never read a
// credential's value (it only checks where the server would read it from),
// never touch the network, and never panic or hang on any input.
package contracts
