package redact

import (
	"errors"
	"io"
)

// Writer returns a writer that redacts everything written to it and passes
// the result on to w. A secret split across two or more Write calls is still
// replaced: the writer holds back the last few bytes of each write (fewer
// than the longest pattern, a few hundred bytes for typical secrets) until
// more data or Close shows they are not the start of a secret. Close flushes
// them; it does not close w. The returned writer is not safe for concurrent
// use. Its output is exactly r.Bytes of everything written.
func (r *Redactor) Writer(w io.Writer) io.WriteCloser {
	if r == nil {
		r = New(nil)
	}
	return &writer{r: r, w: w}
}

// ErrClosed is returned by a redacting writer's Write after Close.
var ErrClosed = errors.New("redact: write after close")

type writer struct {
	r       *Redactor
	w       io.Writer
	pending []byte // held-back tail, shorter than r.maxLen
	covered int    // leading bytes of pending already replaced
	out     []byte // reused output buffer
	err     error
	closed  bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, ErrClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	src := p
	if len(w.pending) > 0 {
		w.pending = append(w.pending, p...)
		src = w.pending
	}
	var n int
	w.out, n, w.covered = w.r.redact(w.out[:0], src, false, w.covered)
	if err := w.emit(); err != nil {
		return 0, err
	}
	// Keep the unconsumed tail; copy so that p is not retained.
	w.pending = append(w.pending[:0], src[n:]...)
	return len(p), nil
}

func (w *writer) emit() error {
	if len(w.out) == 0 {
		return nil
	}
	if _, err := w.w.Write(w.out); err != nil {
		w.err = err
		return err
	}
	return nil
}

// Close writes the held-back bytes, redacted. It is safe to call twice.
func (w *writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	w.out, _, _ = w.r.redact(w.out[:0], w.pending, true, w.covered)
	w.pending = w.pending[:0]
	return w.emit()
}
