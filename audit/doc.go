// Package audit writes and verifies the server's audit log: an append-only
// file of JSON lines, one per policy decision and per side effect, in which
// every line records the sha256 of the line before it.
//
// Callers log through an ordinary *slog.Logger from [Log.Logger], with the
// fixed keys below (KeyTaskID, KeyDecision, ...). Each line is the slog JSON
// record with two fields put first:
//
//	{"seq":7,"prev":"<sha256 hex of line 6's bytes, without its newline>","time":...,"level":"INFO","msg":...}
//
// Line 1's prev is 64 zeros. [Verify] (and `sandbox-mcp audit verify FILE`)
// recomputes the chain and names the first bad line: an edited, removed,
// inserted, reordered or truncated line breaks either the seq run or the
// hash link. A chain alone cannot show that lines were cut from the end, or
// that an attacker with write access rewrote every line after some point;
// for that, keep [Log.Head] somewhere else (the handoff record, the
// operator's log) and check it later with [VerifyAnchor].
//
// Durability: by default every line is written with a single write(2) and
// then fsync'd before the logging call returns, so a line that was logged
// before a side effect is on disk before the side effect happens. Lines are
// serialised by a mutex, so concurrent loggers never interleave.
//
// Secrets: with [Options.Redactor] set, every line is redacted after it is
// encoded and before it is hashed and written, so no configured secret value
// (or its encodings) reaches the file.
//
// Reopening: [Open] verifies an existing file before appending to it. A file
// whose chain does not verify is never appended to or changed: it is renamed
// to "<path>.broken-<UTC time>" and a new log is started at path, whose first
// line names the set-aside file and the verification error.
//
// Package audit must never drop a line silently: a record it cannot write
// makes [Log.Err] non-nil, and every later line fails too.
package audit
