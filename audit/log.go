package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/redact"
)

// Fixed keys for audit attributes. Use these, not ad-hoc spellings, so that
// lines from every tool can be searched the same way.
const (
	KeyTaskID     = "task_id"
	KeySessionID  = "session_id"
	KeyTool       = "tool"
	KeyDecision   = "decision"
	KeyRule       = "rule"
	KeyDurationMS = "duration_ms"
	KeyExitCode   = "exit_code"
	KeySandboxID  = "sandbox_id"
	KeyHandoffID  = "handoff_id"
	KeyError      = "error"
)

// MaxLineBytes is the longest line the log writes or Verify accepts. A
// record that would be longer is replaced by a line saying so.
const MaxLineBytes = 1 << 20

// zeroHash is line 1's prev.
const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// ErrClosed is returned for records logged after Close.
var ErrClosed = errors.New("audit: log is closed")

// Options configures a Log. The zero value is ready to use.
type Options struct {
	// Redactor, if not nil, is applied to every encoded line before it is
	// hashed and written. [Log.SetRedactor] replaces it later.
	Redactor *redact.Redactor
	// Level is the minimum level written. If nil, slog.LevelInfo.
	Level slog.Leveler
	// NoSync skips the fsync after each line. Only for tests and benchmarks:
	// without it a crash can lose lines the caller believed were logged.
	NoSync bool
	// Now is the clock for lines Open writes itself. If nil, time.Now.
	Now func() time.Time
}

// Log is an open audit log. It is safe for concurrent use.
type Log struct {
	opts    Options
	path    string
	aside   string
	handler slog.Handler
	redact  atomic.Pointer[redact.Redactor]

	mu     sync.Mutex
	f      *os.File
	seq    int64
	prev   string // hex sha256 of the last line written
	err    error  // sticky: first write failure, or ErrClosed
	closed bool
}

// Open opens the audit log at path for appending, creating it with mode
// 0600 if needed, and takes an exclusive lock on it so that two servers
// cannot interleave chains. An existing file is verified first; if its chain
// is broken it is set aside (see the package documentation and
// [Log.SetAside]) and a new log is started.
func Open(path string, opts Options) (*Log, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	l := &Log{opts: opts, path: path}
	l.redact.Store(opts.Redactor)
	f, rep, verr, err := openVerified(path)
	if err != nil {
		return nil, err
	}
	var brokenErr error
	if verr != nil {
		// Never touch a broken log: move it aside and start afresh.
		aside := path + ".broken-" + opts.Now().UTC().Format("20060102T150405.000000000Z")
		if err := os.Rename(path, aside); err != nil {
			f.Close()
			return nil, fmt.Errorf("audit: set aside broken log %s: %w", path, err)
		}
		f.Close()
		l.aside, brokenErr = aside, verr
		f, rep, verr, err = openVerified(path)
		if err != nil {
			return nil, err
		}
		if verr != nil { // someone raced us and wrote a bad file at path
			f.Close()
			return nil, fmt.Errorf("audit: %s: new log does not verify: %w", path, verr)
		}
	}
	l.f, l.seq, l.prev = f, rep.Lines, rep.Head
	l.handler = slog.NewJSONHandler(lineWriter{l}, &slog.HandlerOptions{
		Level:       opts.Level,
		ReplaceAttr: protectKeys,
	})
	if brokenErr != nil {
		l.Logger().LogAttrs(context.Background(), slog.LevelWarn,
			"audit: previous log failed verification and was set aside; starting a new chain",
			slog.String("previous_file", l.aside), slog.String(KeyError, brokenErr.Error()))
		if l.err != nil {
			f.Close()
			return nil, l.err
		}
	}
	return l, nil
}

// openVerified opens and locks path and verifies its contents. verr is the
// verification failure, if any; err is an I/O or locking failure.
func openVerified(path string) (f *os.File, rep Report, verr, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, rep, nil, fmt.Errorf("audit: open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, rep, nil, fmt.Errorf("audit: %s is in use by another process (it holds the lock); give each server its own audit log", path)
		}
		return nil, rep, nil, fmt.Errorf("audit: lock %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, rep, nil, fmt.Errorf("audit: chmod %s: %w", path, err)
	}
	rep, verr = Verify(io.NewSectionReader(f, 0, 1<<62))
	var ve *VerifyError
	if verr != nil && !errors.As(verr, &ve) {
		f.Close()
		return nil, rep, nil, fmt.Errorf("audit: read %s: %w", path, verr)
	}
	return f, rep, verr, nil
}

// protectKeys renames caller attributes that would shadow the chain fields.
func protectKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && (a.Key == "seq" || a.Key == "prev") {
		a.Key = "attr_" + a.Key
	}
	return a
}

// SetRedactor replaces the redactor applied to later lines, for example
// with one built from the secrets of every task the server has loaded. It
// is safe to call while other goroutines log. nil turns redaction off.
func (l *Log) SetRedactor(r *redact.Redactor) { l.redact.Store(r) }

// Logger returns a logger that writes to the audit log.
func (l *Log) Logger() *slog.Logger { return slog.New(l.handler) }

// Handler returns the slog handler that writes to the audit log.
func (l *Log) Handler() slog.Handler { return l.handler }

// Path returns the log's file name.
func (l *Log) Path() string { return l.path }

// SetAside returns the name the previous, broken log was renamed to by Open,
// or "" if the existing log verified (or there was none).
func (l *Log) SetAside() string { return l.aside }

// Head returns the number of lines in the log and the sha256 (hex) of the
// last one: an anchor for [VerifyAnchor].
func (l *Log) Head() (lines int64, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq, l.prev
}

// Err returns the first error that stopped the log from writing a line, or
// nil. Callers that must not act unaudited check it after logging.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.err
}

// Close flushes and closes the file. Later records fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	syncErr := l.f.Sync()
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("audit: close %s: %w", l.path, err)
	}
	if syncErr != nil {
		return fmt.Errorf("audit: sync %s: %w", l.path, syncErr)
	}
	return nil
}

// lineWriter receives each encoded record from the slog JSON handler, which
// writes one complete line per Write call.
type lineWriter struct{ l *Log }

func (w lineWriter) Write(p []byte) (int, error) {
	rest := p
	for len(rest) > 0 {
		rec := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			rec, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(bytes.TrimSpace(rec)) == 0 {
			continue
		}
		if err := w.l.append(rec); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// append redacts rec (one JSON object), chains it and writes it as one line.
func (l *Log) append(rec []byte) error {
	if r := l.redact.Load(); r != nil {
		rec = r.Bytes(rec)
	}
	if !json.Valid(rec) || rec[0] != '{' {
		rec = substitute(l.opts.Now(), "audit: record dropped: not a JSON object after redaction", len(rec))
	} else if len(rec) > MaxLineBytes-200 {
		rec = substitute(l.opts.Now(), "audit: record dropped: longer than the line limit", len(rec))
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.err != nil {
		return l.err
	}
	line := make([]byte, 0, len(rec)+100)
	line = append(line, `{"seq":`...)
	line = strconv.AppendInt(line, l.seq+1, 10)
	line = append(line, `,"prev":"`...)
	line = append(line, l.prev...)
	line = append(line, '"')
	if body := bytes.TrimSpace(rec[1:]); !bytes.Equal(body, []byte("}")) {
		line = append(line, ',')
	}
	line = append(line, rec[1:]...)
	sum := sha256.Sum256(line)
	line = append(line, '\n')
	if _, err := l.f.Write(line); err != nil {
		l.err = fmt.Errorf("audit: write %s: %w", l.path, err)
		return l.err
	}
	if !l.opts.NoSync {
		if err := l.f.Sync(); err != nil {
			l.err = fmt.Errorf("audit: sync %s: %w", l.path, err)
			return l.err
		}
	}
	l.seq++
	l.prev = hex.EncodeToString(sum[:])
	return nil
}

// substitute is the record written in place of one that cannot be written.
func substitute(now time.Time, msg string, size int) []byte {
	b, _ := json.Marshal(struct {
		Time  time.Time `json:"time"`
		Level string    `json:"level"`
		Msg   string    `json:"msg"`
		Size  int       `json:"size"`
	}{now, "ERROR", msg, size})
	return b
}
