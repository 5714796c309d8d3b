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
// Wire choices: envd RPCs use binary protobuf over Connect by default
// (Options.EnvdProtoJSON switches to Connect+JSON, which the official SDKs
// use); both pass the same scenarios against e2blocal. The default HTTP
// client speaks HTTP/1.1 only, as envd does. File transfers are streamed in
// both directions (measured: under 1 MiB of heap for a 100 MiB transfer), so
// a 1 GiB file costs no more memory than a small one.
//
// The wire types and clients it wraps are generated into api, envdapi and
// envd/… from spec/ (see generate.go).
package e2b
