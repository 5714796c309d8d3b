package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// HandoffState is where a handoff is in its life:
// requested → pending_approval → approved → staging → running → cleaning →
// done | failed | denied | expired.
type HandoffState string

// Handoff states.
const (
	HandoffRequested HandoffState = "requested"
	HandoffPending   HandoffState = "pending_approval"
	HandoffApproved  HandoffState = "approved"
	HandoffStaging   HandoffState = "staging"
	HandoffRunning   HandoffState = "running"
	HandoffCleaning  HandoffState = "cleaning"
	HandoffDone      HandoffState = "done"
	HandoffFailed    HandoffState = "failed"
	HandoffDenied    HandoffState = "denied"
	HandoffExpired   HandoffState = "expired"
)

func (st HandoffState) valid() bool {
	switch st {
	case HandoffRequested, HandoffPending, HandoffApproved, HandoffStaging, HandoffRunning,
		HandoffCleaning, HandoffDone, HandoffFailed, HandoffDenied, HandoffExpired:
		return true
	}
	return false
}

// Terminal reports whether nothing more happens to a handoff in state st.
func (st HandoffState) Terminal() bool {
	return st == HandoffDone || st == HandoffFailed || st == HandoffDenied || st == HandoffExpired
}

// Handoff is the record of one handoff_to_mac request: what was asked, who
// approved which digest, where and how it ran, and what came back.
type Handoff struct {
	ID          string       `json:"handoff_id"`
	TaskID      string       `json:"task_id"`
	State       HandoffState `json:"state"`
	Owner       string       `json:"owner,omitempty"`        // the contract's task.owner
	RequestedBy string       `json:"requested_by,omitempty"` // the agent's MCP session
	Note        string       `json:"note,omitempty"`         // the agent's note, as given

	ContractHash   string             `json:"contract_hash"`
	SourceRevision string             `json:"source_revision,omitempty"`
	Step           HandoffStepDef     `json:"step"`
	Inputs         []HandoffInput     `json:"inputs"`
	Runner         HandoffRunner      `json:"runner"`
	Credentials    HandoffCredentials `json:"credential_scope"`
	NetworkPolicy  string             `json:"network_policy"`

	ApprovalRequired bool      `json:"approval_required"`
	ApprovalDigest   string    `json:"approval_digest"`
	Approval         *Approval `json:"approval,omitempty"`

	Steps   []HandoffStepRun `json:"steps,omitempty"`
	Checks  []HandoffCheck   `json:"checks,omitempty"`
	Outputs []HandoffOutput  `json:"outputs,omitempty"`
	Cleanup *HandoffCleanup  `json:"cleanup,omitempty"`

	Error     string `json:"error,omitempty"`
	NextOwner string `json:"next_owner,omitempty"` // who acts next when it failed: "agent" or the owner

	History   []HandoffTransition `json:"history"`
	CreatedAt time.Time           `json:"created_at"`
	UpdatedAt time.Time           `json:"updated_at"`
}

// HandoffStepDef is the contract's definition of the step, as approved.
type HandoffStepDef struct {
	Name    string   `json:"name"`
	Argv    []string `json:"argv"`
	Env     []string `json:"env,omitempty"` // variable names; values are in the contract
	Timeout string   `json:"timeout"`
	Outputs []string `json:"outputs,omitempty"`
	SHA256  string   `json:"sha256"` // of the canonical definition, values included
}

// HandoffInput is one frozen input.
type HandoffInput struct {
	Name       string `json:"name"`
	Version    int64  `json:"version"`
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
	SourcePath string `json:"source_path,omitempty"` // in the sandbox
	StagedPath string `json:"staged_path,omitempty"` // on the Mac
}

// HandoffRunner is where the handoff runs.
type HandoffRunner struct {
	Kind      string `json:"kind"` // "ssh"
	SSH       string `json:"ssh"`  // user@host:port
	HostKey   string `json:"host_key_fingerprint"`
	Workspace string `json:"workspace,omitempty"`
	System    string `json:"system,omitempty"` // uname -srm on the Mac
	HashTool  string `json:"hash_tool,omitempty"`
}

// HandoffCredentials is what the handoff may use on the Mac.
type HandoffCredentials struct {
	SSHKey  string   `json:"ssh_key_fingerprint"` // the server's client key
	Secrets []string `json:"secrets"`             // secret names sent to the Mac (none today)
	Signing string   `json:"signing"`             // signing identity, or "none"
}

// Approval is who approved which digest, when, until when.
type Approval struct {
	By        string    `json:"by"`
	Via       string    `json:"via"` // elicitation | cli | contract
	Digest    string    `json:"digest"`
	At        time.Time `json:"at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// HandoffStepRun is one step as it ran.
type HandoffStepRun struct {
	Name        string    `json:"name"`
	ExitCode    int       `json:"exit_code"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at"`
	DurationMS  int64     `json:"duration_ms"`
	TimedOut    bool      `json:"timed_out"`
	Killed      string    `json:"killed,omitempty"`
	LogSHA256   string    `json:"log_sha256"`
	LogBytes    int64     `json:"log_bytes"`
	LogArtifact string    `json:"log_artifact,omitempty"`
	Reconnects  int       `json:"reconnects"`
}

// HandoffCheck is one check and whether it passed.
type HandoffCheck struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// HandoffOutput is one declared output brought back.
type HandoffOutput struct {
	Path         string `json:"path"`
	Artifact     string `json:"artifact,omitempty"`
	URI          string `json:"uri,omitempty"`
	SHA256       string `json:"sha256,omitempty"`        // hashed by the server on arrival
	RemoteSHA256 string `json:"remote_sha256,omitempty"` // hashed on the Mac
	Size         int64  `json:"size"`
	Archive      bool   `json:"archive,omitempty"` // a directory, as a tar archive
	Missing      bool   `json:"missing,omitempty"`
}

// HandoffCleanup is what cleanup confirmed.
type HandoffCleanup struct {
	WorkspaceRemoved bool      `json:"workspace_removed"`
	ProcessesGone    bool      `json:"processes_gone"`
	Error            string    `json:"error,omitempty"`
	At               time.Time `json:"at"`
}

// HandoffTransition is one state change.
type HandoffTransition struct {
	State  HandoffState `json:"state"`
	At     time.Time    `json:"at"`
	Detail string       `json:"detail,omitempty"`
}

// HandoffURIScheme is the scheme of handoff record resource URIs.
const HandoffURIScheme = "handoff://"

// HandoffURI returns the MCP resource URI of a handoff record.
func HandoffURI(taskID, id string) string { return HandoffURIScheme + taskID + "/" + id }

// maxHandoffRecord bounds one record (and one decision file) on disk.
const maxHandoffRecord = 4 << 20

// PutHandoff creates or replaces the handoff record h.ID of task h.TaskID,
// keeping CreatedAt from an existing record and setting UpdatedAt to now.
// It also writes the record to handoffs/<task-id>/<id>.json in the store
// directory (0600), where `sandbox-mcp handoff` reads it while a server
// holds the database. It returns the record as stored.
func (s *Store) PutHandoff(ctx context.Context, h Handoff) (Handoff, error) {
	if err := ctx.Err(); err != nil {
		return Handoff{}, err
	}
	if err := checkName("task id", h.TaskID); err != nil {
		return Handoff{}, err
	}
	if err := checkName("handoff id", h.ID); err != nil {
		return Handoff{}, err
	}
	if !h.State.valid() {
		return Handoff{}, fmt.Errorf("store: handoff %s: unknown state %q", h.ID, h.State)
	}
	now := s.now().UTC()
	var raw []byte
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(bucketHandoffs).CreateBucketIfNotExists([]byte(h.TaskID))
		if err != nil {
			return err
		}
		if old := b.Get([]byte(h.ID)); old != nil {
			var prev Handoff
			if err := json.Unmarshal(old, &prev); err != nil {
				return fmt.Errorf("decode handoff: %w", err)
			}
			h.CreatedAt = prev.CreatedAt
		} else if h.CreatedAt.IsZero() {
			h.CreatedAt = now
		}
		h.UpdatedAt = now
		if raw, err = json.Marshal(h); err != nil {
			return err
		}
		if len(raw) > maxHandoffRecord {
			return fmt.Errorf("record is %d bytes; at most %d", len(raw), maxHandoffRecord)
		}
		return b.Put([]byte(h.ID), raw)
	})
	if err != nil {
		return Handoff{}, fmt.Errorf("store: put handoff %s/%s: %w", h.TaskID, h.ID, err)
	}
	dir := filepath.Join(s.dir, "handoffs", h.TaskID)
	if err := writeFileAtomic(dir, h.ID+".json", raw); err != nil {
		return h, fmt.Errorf("store: put handoff %s/%s: mirror: %w", h.TaskID, h.ID, err)
	}
	return h, nil
}

// GetHandoff returns handoff id of task taskID, or an error wrapping
// ErrNotFound.
func (s *Store) GetHandoff(ctx context.Context, taskID, id string) (Handoff, error) {
	if err := ctx.Err(); err != nil {
		return Handoff{}, err
	}
	if err := checkName("task id", taskID); err != nil {
		return Handoff{}, err
	}
	if err := checkName("handoff id", id); err != nil {
		return Handoff{}, err
	}
	var h Handoff
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHandoffs).Bucket([]byte(taskID))
		if b == nil {
			return ErrNotFound
		}
		v := b.Get([]byte(id))
		if v == nil {
			return ErrNotFound
		}
		return json.Unmarshal(v, &h)
	})
	if err != nil {
		return Handoff{}, fmt.Errorf("store: handoff %s/%s: %w", taskID, id, err)
	}
	return h, nil
}

// ListHandoffs returns every handoff of task taskID, oldest first.
func (s *Store) ListHandoffs(ctx context.Context, taskID string) ([]Handoff, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkName("task id", taskID); err != nil {
		return nil, err
	}
	var hs []Handoff
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHandoffs).Bucket([]byte(taskID))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var h Handoff
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("decode handoff %s: %w", k, err)
			}
			hs = append(hs, h)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: list handoffs of %s: %w", taskID, err)
	}
	sortHandoffs(hs)
	return hs, nil
}

func sortHandoffs(hs []Handoff) {
	slices.SortStableFunc(hs, func(a, b Handoff) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// ReadHandoffRecords reads the handoff records a server mirrored into the
// store directory dir, for every task, oldest first. It does not open the
// database, so it works while a server holds it.
func ReadHandoffRecords(dir string) ([]Handoff, error) {
	root := filepath.Join(dir, "handoffs")
	tasks, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read handoffs: %w", err)
	}
	var hs []Handoff
	for _, t := range tasks {
		if !t.IsDir() || !ValidName.MatchString(t.Name()) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(root, t.Name()))
		if err != nil {
			return nil, fmt.Errorf("store: read handoffs: %w", err)
		}
		for _, f := range files {
			id, ok := strings.CutSuffix(f.Name(), ".json")
			if !ok || !f.Type().IsRegular() || !ValidName.MatchString(id) {
				continue
			}
			raw, err := readLimited(filepath.Join(root, t.Name(), f.Name()))
			if err != nil {
				return nil, fmt.Errorf("store: read handoff %s/%s: %w", t.Name(), id, err)
			}
			var h Handoff
			if err := json.Unmarshal(raw, &h); err != nil {
				return nil, fmt.Errorf("store: read handoff %s/%s: %w", t.Name(), id, err)
			}
			hs = append(hs, h)
		}
	}
	sortHandoffs(hs)
	return hs, nil
}

// Decision is an owner's out-of-band answer to a pending handoff, written
// by `sandbox-mcp handoff approve|deny` into approvals/<handoff-id>.json of
// the store directory and taken by the server on its next look.
type Decision struct {
	HandoffID string    `json:"handoff_id"`
	TaskID    string    `json:"task_id"`
	Digest    string    `json:"digest"` // the approval digest decided on
	Approve   bool      `json:"approve"`
	By        string    `json:"by"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`
}

// WriteDecision drops d for a running (or the next) server on store
// directory dir. It does not open the database. A decision already waiting
// for the same handoff is an error.
func WriteDecision(dir string, d Decision) error {
	if err := checkName("task id", d.TaskID); err != nil {
		return err
	}
	if err := checkName("handoff id", d.HandoffID); err != nil {
		return err
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	adir := filepath.Join(dir, "approvals")
	if _, err := os.Lstat(filepath.Join(adir, d.HandoffID+".json")); err == nil {
		return fmt.Errorf("store: a decision on handoff %s is already waiting for the server", d.HandoffID)
	}
	if err := writeFileAtomic(adir, d.HandoffID+".json", raw); err != nil {
		return fmt.Errorf("store: write decision on %s: %w", d.HandoffID, err)
	}
	return nil
}

// TakeDecision returns and removes the decision waiting for handoff id, or
// nil when there is none.
func (s *Store) TakeDecision(id string) (*Decision, error) {
	if err := checkName("handoff id", id); err != nil {
		return nil, err
	}
	p := filepath.Join(s.dir, "approvals", id+".json")
	// Claim the file by renaming it first, so a decision written meanwhile
	// is neither lost nor taken twice.
	claimed := filepath.Join(s.dir, "approvals", ".taken-"+id)
	if err := os.Rename(p, claimed); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("store: take decision on %s: %w", id, err)
	}
	defer os.Remove(claimed)
	raw, err := readLimited(claimed)
	if err != nil {
		return nil, fmt.Errorf("store: read decision on %s: %w", id, err)
	}
	var d Decision
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("store: decision on %s: %w", id, err)
	}
	if d.HandoffID != id {
		return nil, fmt.Errorf("store: decision file for %s names handoff %q", id, d.HandoffID)
	}
	return &d, nil
}

// readLimited reads a regular file of at most maxHandoffRecord bytes,
// without following a symlink.
func readLimited(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxHandoffRecord+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxHandoffRecord {
		return nil, fmt.Errorf("%s is over %d bytes", p, maxHandoffRecord)
	}
	return raw, nil
}

// writeFileAtomic writes name in dir (made 0700) through a temporary file
// and a rename, mode 0600.
func writeFileAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}
