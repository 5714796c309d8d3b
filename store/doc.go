// Package store owns the server's state directory: task records, the
// artifact manifest and the content-addressed artifact blobs, all of which
// survive a restart.
//
// Layout of the directory (made mode 0700 on Open; refused if another user
// owns it):
//
//	state.db                   bbolt database, locked by one process at a time
//	blobs/sha256/ab/cdef...    artifact contents, named by their sha256 (0600)
//	blobs/tmp/                 exports in progress; emptied on Open
//	handoffs/<task>/<id>.json  a copy of each handoff record, readable while
//	                           the server holds the lock (handoff list/show)
//	approvals/<id>.json        an operator's approve/deny decision, dropped by
//	                           `sandbox-mcp handoff approve|deny` and taken once
//	                           by the server ([Store.TakeDecision])
//
// Buckets in state.db: "tasks" (task id → Task JSON), "artifacts" (task id →
// name → current Artifact JSON), "artifact_versions" (task id → name\x00version
// → every Artifact ever recorded under that name), "handoffs" (task id →
// handoff id → Handoff JSON, see handoff.go), "meta" (schema
// version).
//
// Exports are streamed: [Store.PutArtifact] copies through a fixed 32 KiB
// buffer into a temporary file while hashing, fsyncs it and renames it into
// place (identical content shares one blob), so memory use does not depend
// on the artifact's size. A failed or over-limit export leaves nothing
// behind. Re-exporting a name records a new version that replaces the
// current one; earlier versions stay listed by [Store.ArtifactHistory] and
// their blobs stay readable by digest ([Store.OpenBlob]) because a handoff
// may have frozen them. Blobs are never deleted by this package (no garbage
// collection yet).
//
// Bbolt rather than SQLite: the records are small key → JSON values with no
// queries beyond prefix scans, bbolt is pure Go with no cgo and compiles in
// seconds, where modernc.org/sqlite adds minutes of build time on a small
// machine.
//
// Package store must never follow a name supplied by an agent outside the
// directory: task ids and artifact names are checked against [ValidName]
// before they reach a path or a key, and blob paths are built only from
// hex digests the store computed itself.
package store
