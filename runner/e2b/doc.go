// Package e2b is sandbox-mcp's client for E2B sandboxes: the control plane
// (create, connect, list, timeout, pause, kill over REST) and envd, the
// daemon inside each sandbox (commands over Connect RPC, files over plain
// HTTP). It speaks to the E2B cloud and, unchanged, to the embedded
// E2B-compatible local sandbox (runner/e2blocal) through Options.SandboxURL.
//
// It owns the wire: headers, timeouts, streaming, retries of idempotent
// control-plane calls, and the mapping of HTTP statuses and Connect codes to
// the typed errors callers branch on (ErrSandboxGone, *RateLimitError, …).
// It must never decide policy (the tools layer checks every call against
// the task's contract first), never buffer a whole file or command output in
// memory, never retry a call that is not idempotent (Create, Run), and never
// put the API key or a sandbox access token in an error or a log line.
//
// The wire types and clients it wraps are generated into api, envdapi and
// envd/… from spec/ (see generate.go).
package e2b
