package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: no such task or artifact.
	ErrNotFound = errors.New("not found")
	// ErrInvalidName: a task id or artifact name does not match [ValidName].
	ErrInvalidName = errors.New("invalid name")
	// ErrTooLarge: an export exceeded its byte limit.
	ErrTooLarge = errors.New("artifact exceeds the size limit")
	// ErrCorrupt: a blob on disk no longer matches its recorded size or digest.
	ErrCorrupt = errors.New("artifact blob is corrupt")
)

// ValidName is the pattern task ids and artifact names must match: it keeps
// them usable as path elements, keys and URI segments.
var ValidName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkName(kind, name string) error {
	if !ValidName.MatchString(name) {
		return fmt.Errorf("store: %s %q: %w: use 1-128 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit", kind, name, ErrInvalidName)
	}
	return nil
}

const schemaVersion = "1"

var (
	bucketTasks     = []byte("tasks")
	bucketArtifacts = []byte("artifacts")
	bucketVersions  = []byte("artifact_versions")
	bucketHandoffs  = []byte("handoffs")
	bucketMeta      = []byte("meta")
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// LockTimeout is how long Open waits for another process to release the
	// directory. If zero, 1s.
	LockTimeout time.Duration
	// Now is the clock for record timestamps. If nil, time.Now.
	Now func() time.Time
}

// Store is an open state directory. It is safe for concurrent use.
type Store struct {
	dir string
	db  *bolt.DB
	now func() time.Time
}

// Open opens (creating if needed) the state directory dir and locks it, so
// that a second server on the same directory fails with a clear error
// instead of corrupting it.
func Open(dir string, opts Options) (*Store, error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create state directory: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("store: state directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("store: state directory %s is not a directory", dir)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("store: state directory %s belongs to uid %d, not to this process (uid %d); use a directory of your own", dir, st.Uid, os.Geteuid())
	}
	if info.Mode().Perm() != 0o700 {
		// It holds task records and artifacts: only its owner may use it.
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: restrict state directory %s to its owner: %w", dir, err)
		}
	}
	dbPath := filepath.Join(dir, "state.db")
	db, err := bolt.Open(dbPath, 0o600, &bolt.Options{Timeout: opts.LockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("store: state directory %s is in use by another process (could not lock %s within %v); give each server its own --state directory or stop the other one", dir, dbPath, opts.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dbPath, err)
	}
	s := &Store{dir: dir, db: db, now: opts.Now}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) init() error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketTasks, bucketArtifacts, bucketVersions, bucketHandoffs, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get([]byte("schema")); {
		case v == nil:
			return meta.Put([]byte("schema"), []byte(schemaVersion))
		case string(v) != schemaVersion:
			return fmt.Errorf("state schema version %q, this binary understands %q", v, schemaVersion)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: initialise %s: %w", s.dir, err)
	}
	// Leftovers of exports interrupted by a crash: we hold the lock, so no
	// export is in progress.
	tmp := s.tmpDir()
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("store: clear %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("store: create %s: %w", tmp, err)
	}
	return nil
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the directory.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Status is a task's sandbox state.
type Status string

// Task statuses.
const (
	StatusCreating Status = "creating"
	StatusRunning  Status = "running"
	StatusPaused   Status = "paused"
	StatusKilled   Status = "killed"
	StatusGone     Status = "gone"
)

func (st Status) valid() bool {
	switch st {
	case StatusCreating, StatusRunning, StatusPaused, StatusKilled, StatusGone:
		return true
	}
	return false
}

// Task is what the server remembers about a task across restarts.
type Task struct {
	ID           string    `json:"id"`
	ContractHash string    `json:"contract_hash"`
	SandboxID    string    `json:"sandbox_id,omitempty"`
	Backend      string    `json:"backend"`
	Status       Status    `json:"status"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// PutTask creates or replaces the task record t.ID. CreatedAt is kept from
// an existing record (or set to now for a new one, if zero); UpdatedAt is
// set to now. It returns the record as stored.
func (s *Store) PutTask(ctx context.Context, t Task) (Task, error) {
	if err := ctx.Err(); err != nil {
		return Task{}, err
	}
	if err := checkName("task id", t.ID); err != nil {
		return Task{}, err
	}
	if !t.Status.valid() {
		return Task{}, fmt.Errorf("store: task %s: unknown status %q (want creating, running, paused, killed or gone)", t.ID, t.Status)
	}
	now := s.now().UTC()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTasks)
		if old := b.Get([]byte(t.ID)); old != nil {
			var prev Task
			if err := json.Unmarshal(old, &prev); err != nil {
				return fmt.Errorf("decode task %s: %w", t.ID, err)
			}
			t.CreatedAt = prev.CreatedAt
		} else if t.CreatedAt.IsZero() {
			t.CreatedAt = now
		}
		t.UpdatedAt = now
		v, err := json.Marshal(t)
		if err != nil {
			return err
		}
		return b.Put([]byte(t.ID), v)
	})
	if err != nil {
		return Task{}, fmt.Errorf("store: put task %s: %w", t.ID, err)
	}
	return t, nil
}

// GetTask returns the task record id, or an error wrapping ErrNotFound.
func (s *Store) GetTask(ctx context.Context, id string) (Task, error) {
	if err := ctx.Err(); err != nil {
		return Task{}, err
	}
	if err := checkName("task id", id); err != nil {
		return Task{}, err
	}
	var t Task
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTasks).Get([]byte(id))
		if v == nil {
			return ErrNotFound
		}
		return json.Unmarshal(v, &t)
	})
	if err != nil {
		return Task{}, fmt.Errorf("store: get task %s: %w", id, err)
	}
	return t, nil
}

// ListTasks returns every task record, ordered by id.
func (s *Store) ListTasks(ctx context.Context) ([]Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ts []Task
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTasks).ForEach(func(k, v []byte) error {
			var t Task
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decode task %s: %w", k, err)
			}
			ts = append(ts, t)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: list tasks: %w", err)
	}
	return ts, nil
}
