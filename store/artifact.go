package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// copyBufferSize is the only buffer an export uses, whatever its size.
const copyBufferSize = 32 << 10

// ArtifactMeta is what the caller knows about where an artifact came from.
type ArtifactMeta struct {
	// SourcePath is the path inside the sandbox it was copied from.
	SourcePath string
	// Command is the last command that ran in the task before the export.
	Command string
	// ExitCode is that command's exit code.
	ExitCode int
	// ContractHash identifies the contract the task ran under.
	ContractHash string
}

// Artifact is one manifest entry: a named, hashed file exported by a task.
type Artifact struct {
	TaskID       string    `json:"task_id"`
	Name         string    `json:"name"`
	Version      int64     `json:"version"`
	SHA256       string    `json:"sha256"`
	Size         int64     `json:"size"`
	URI          string    `json:"uri"`
	SourcePath   string    `json:"source_path"`
	Command      string    `json:"command"`
	ExitCode     int       `json:"exit_code"`
	ContractHash string    `json:"contract_hash"`
	CreatedAt    time.Time `json:"created_at"`
}

// URIScheme is the scheme of artifact resource URIs.
const URIScheme = "artifact://"

// URI returns the MCP resource URI of artifact name in task taskID.
func URI(taskID, name string) string { return URIScheme + taskID + "/" + name }

// ParseURI splits an artifact URI ("artifact://<task-id>/<name>") and
// validates both parts.
func ParseURI(uri string) (taskID, name string, err error) {
	rest, ok := strings.CutPrefix(uri, URIScheme)
	if !ok {
		return "", "", fmt.Errorf("store: %q is not an artifact URI (want %s<task-id>/<name>)", uri, URIScheme)
	}
	taskID, name, ok = strings.Cut(rest, "/")
	if !ok {
		return "", "", fmt.Errorf("store: %q is not an artifact URI (want %s<task-id>/<name>)", uri, URIScheme)
	}
	if err := checkName("task id", taskID); err != nil {
		return "", "", err
	}
	if err := checkName("artifact name", name); err != nil {
		return "", "", err
	}
	return taskID, name, nil
}

func (s *Store) tmpDir() string { return filepath.Join(s.dir, "blobs", "tmp") }

// blobPath is only ever called with a digest the store computed or checked.
func (s *Store) blobPath(sum string) string {
	return filepath.Join(s.dir, "blobs", "sha256", sum[:2], sum[2:])
}

// PutArtifact streams r into the blob store and records it as artifact name
// of task taskID (which must exist), replacing any current artifact of that
// name with a new version. maxBytes (> 0) is the most it will read: if r has
// more, or fails, or ctx ends, nothing is recorded and no file is left
// behind, and the error wraps ErrTooLarge for the limit. Memory use does not
// depend on the artifact's size.
func (s *Store) PutArtifact(ctx context.Context, taskID, name string, r io.Reader, maxBytes int64, meta ArtifactMeta) (Artifact, error) {
	if err := checkName("task id", taskID); err != nil {
		return Artifact{}, err
	}
	if err := checkName("artifact name", name); err != nil {
		return Artifact{}, err
	}
	if maxBytes <= 0 {
		return Artifact{}, fmt.Errorf("store: export %s/%s: maxBytes must be positive, got %d", taskID, name, maxBytes)
	}
	if _, err := s.GetTask(ctx, taskID); err != nil {
		return Artifact{}, fmt.Errorf("store: export %s/%s: %w", taskID, name, err)
	}
	sum, size, err := s.writeBlob(ctx, r, maxBytes)
	if err != nil {
		return Artifact{}, fmt.Errorf("store: export %s/%s: %w", taskID, name, err)
	}
	a := Artifact{
		TaskID: taskID, Name: name, SHA256: sum, Size: size, URI: URI(taskID, name),
		SourcePath: meta.SourcePath, Command: meta.Command, ExitCode: meta.ExitCode,
		ContractHash: meta.ContractHash, CreatedAt: s.now().UTC(),
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		cur, err := tx.Bucket(bucketArtifacts).CreateBucketIfNotExists([]byte(taskID))
		if err != nil {
			return err
		}
		vers, err := tx.Bucket(bucketVersions).CreateBucketIfNotExists([]byte(taskID))
		if err != nil {
			return err
		}
		if old := cur.Get([]byte(name)); old != nil {
			var prev Artifact
			if err := json.Unmarshal(old, &prev); err != nil {
				return fmt.Errorf("decode artifact: %w", err)
			}
			a.Version = prev.Version
		}
		a.Version++
		v, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if err := cur.Put([]byte(name), v); err != nil {
			return err
		}
		return vers.Put(versionKey(name, a.Version), v)
	})
	if err != nil {
		// The blob stays: it is content-addressed and harmless, and may be
		// shared with another artifact.
		return Artifact{}, fmt.Errorf("store: export %s/%s: record manifest: %w", taskID, name, err)
	}
	return a, nil
}

func versionKey(name string, version int64) []byte {
	k := make([]byte, 0, len(name)+9)
	k = append(k, name...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, uint64(version))
}

// writeBlob copies r into a temporary file while hashing it, then moves the
// file to its content address. It returns the digest and size.
func (s *Store) writeBlob(ctx context.Context, r io.Reader, maxBytes int64) (sum string, size int64, err error) {
	tmp, err := os.CreateTemp(s.tmpDir(), "export-*")
	if err != nil {
		return "", 0, fmt.Errorf("create temporary file: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	buf := make([]byte, copyBufferSize)
	// Neither side implements WriterTo/ReaderFrom, so CopyBuffer uses buf.
	size, err = io.CopyBuffer(io.MultiWriter(tmp, h), &ctxReader{ctx: ctx, r: io.LimitReader(r, maxBytes+1)}, buf)
	if err != nil {
		return "", 0, fmt.Errorf("copy: %w", err)
	}
	if size > maxBytes {
		return "", 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	if err := tmp.Sync(); err != nil {
		return "", 0, fmt.Errorf("sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", 0, fmt.Errorf("close: %w", err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	dst := s.blobPath(sum)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", 0, fmt.Errorf("create blob directory: %w", err)
	}
	// Same content may already be stored: replacing it with an atomic rename
	// keeps one file per digest, repairs a damaged copy, and cannot race
	// with a concurrent export of the same bytes. Open readers keep the
	// old inode.
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", 0, fmt.Errorf("move blob into place: %w", err)
	}
	done = true
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return "", 0, err
	}
	return sum, size, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// GetArtifact returns the current manifest entry of artifact name in task
// taskID, or an error wrapping ErrNotFound.
func (s *Store) GetArtifact(ctx context.Context, taskID, name string) (Artifact, error) {
	if err := ctx.Err(); err != nil {
		return Artifact{}, err
	}
	if err := checkName("task id", taskID); err != nil {
		return Artifact{}, err
	}
	if err := checkName("artifact name", name); err != nil {
		return Artifact{}, err
	}
	var a Artifact
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArtifacts).Bucket([]byte(taskID))
		if b == nil {
			return ErrNotFound
		}
		v := b.Get([]byte(name))
		if v == nil {
			return ErrNotFound
		}
		return json.Unmarshal(v, &a)
	})
	if err != nil {
		return Artifact{}, fmt.Errorf("store: artifact %s/%s: %w", taskID, name, err)
	}
	return a, nil
}

// OpenArtifact opens the current version of artifact name in task taskID
// for reading. The blob's size is checked on open; its sha256 is checked as
// it is read, and a mismatch turns the final io.EOF into an error wrapping
// ErrCorrupt, so a reader that reaches EOF without error got exactly the
// recorded bytes.
func (s *Store) OpenArtifact(ctx context.Context, taskID, name string) (io.ReadCloser, Artifact, error) {
	a, err := s.GetArtifact(ctx, taskID, name)
	if err != nil {
		return nil, Artifact{}, err
	}
	rc, err := s.openVerified(a.SHA256, a.Size)
	if err != nil {
		return nil, Artifact{}, fmt.Errorf("store: artifact %s/%s: %w", taskID, name, err)
	}
	return rc, a, nil
}

// OpenBlob opens a blob by its sha256 (64 lower-case hex digits), for
// example an input a handoff froze, verified as in OpenArtifact. It returns
// the blob's size.
func (s *Store) OpenBlob(ctx context.Context, sum string) (io.ReadCloser, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if !isDigest(sum) {
		return nil, 0, fmt.Errorf("store: blob %q: %w: want 64 lower-case hex digits", sum, ErrInvalidName)
	}
	fi, err := os.Lstat(s.blobPath(sum))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("store: blob %s: %w", sum, ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: blob %s: %w", sum, err)
	}
	rc, err := s.openVerified(sum, fi.Size())
	if err != nil {
		return nil, 0, fmt.Errorf("store: blob %s: %w", sum, err)
	}
	return rc, fi.Size(), nil
}

func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (s *Store) openVerified(sum string, size int64) (io.ReadCloser, error) {
	f, err := os.Open(s.blobPath(sum))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: blob %s is missing", ErrCorrupt, sum)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != size {
		f.Close()
		return nil, fmt.Errorf("%w: blob %s has %d bytes, recorded %d", ErrCorrupt, sum, fi.Size(), size)
	}
	return &verifyingReader{f: f, h: sha256.New(), want: sum}, nil
}

// verifyingReader hashes what is read and reports a digest mismatch at EOF.
type verifyingReader struct {
	f    *os.File
	h    hash.Hash
	want string
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("%w: blob %s now hashes to %s", ErrCorrupt, v.want, got)
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.f.Close() }

// ListArtifacts returns the current version of every artifact of task
// taskID, ordered by name. A task with no artifacts gives an empty list.
func (s *Store) ListArtifacts(ctx context.Context, taskID string) ([]Artifact, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkName("task id", taskID); err != nil {
		return nil, err
	}
	var as []Artifact
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArtifacts).Bucket([]byte(taskID))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var a Artifact
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decode artifact %s: %w", k, err)
			}
			as = append(as, a)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: list artifacts of %s: %w", taskID, err)
	}
	return as, nil
}

// ArtifactHistory returns every version recorded under artifact name of
// task taskID, oldest first, or an error wrapping ErrNotFound.
func (s *Store) ArtifactHistory(ctx context.Context, taskID, name string) ([]Artifact, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkName("task id", taskID); err != nil {
		return nil, err
	}
	if err := checkName("artifact name", name); err != nil {
		return nil, err
	}
	var as []Artifact
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVersions).Bucket([]byte(taskID))
		if b == nil {
			return nil
		}
		prefix := append([]byte(name), 0)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var a Artifact
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decode artifact %s: %w", k, err)
			}
			as = append(as, a)
		}
		return nil
	})
	if err == nil && len(as) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: history of %s/%s: %w", taskID, name, err)
	}
	return as, nil
}
