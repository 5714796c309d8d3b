package egress

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// splice copies bytes both ways between a and b until both directions have
// ended, passing a half-close on (EOF one way closes the write side of the
// other), and closes both. With idle > 0 it closes both once no byte has
// moved either way for that long.
func splice(a, b net.Conn, idle time.Duration) {
	var w *idleWatch
	if idle > 0 {
		w = newIdleWatch(idle, func() { a.Close(); b.Close() })
		defer w.stop()
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pump(b, a, w) }()
	go func() { defer wg.Done(); pump(a, b, w) }()
	wg.Wait()
	a.Close()
	b.Close()
}

// pump copies src to dst. At src's EOF it closes dst's write side; on an
// error either way it closes both, which ends the other direction too.
func pump(dst, src net.Conn, w *idleWatch) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			w.touch()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				dst.Close()
				return
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) && closeWrite(dst) {
				return
			}
			src.Close()
			dst.Close()
			return
		}
	}
}

// closeWrite half-closes c if it can, and reports whether it did.
func closeWrite(c net.Conn) bool {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite() == nil
	}
	return false
}

// idleWatch calls onIdle once no activity was recorded for d.
type idleWatch struct {
	d      time.Duration
	start  time.Time
	last   atomic.Int64 // since start, ns
	mu     sync.Mutex
	t      *time.Timer
	done   bool
	onIdle func()
}

func newIdleWatch(d time.Duration, onIdle func()) *idleWatch {
	w := &idleWatch{d: d, start: time.Now(), onIdle: onIdle}
	w.mu.Lock()
	w.t = time.AfterFunc(d, w.check)
	w.mu.Unlock()
	return w
}

func (w *idleWatch) touch() {
	if w != nil {
		w.last.Store(int64(time.Since(w.start)))
	}
}

func (w *idleWatch) check() {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	quiet := time.Since(w.start) - time.Duration(w.last.Load())
	if quiet < w.d {
		w.t.Reset(w.d - quiet)
		w.mu.Unlock()
		return
	}
	w.done = true
	w.mu.Unlock()
	w.onIdle()
}

func (w *idleWatch) stop() {
	w.mu.Lock()
	w.done = true
	w.t.Stop()
	w.mu.Unlock()
}

// activeConn records reads and writes on an idleWatch.
type activeConn struct {
	net.Conn
	w *idleWatch
}

func (c *activeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.w.touch()
	}
	return n, err
}

func (c *activeConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.w.touch()
	}
	return n, err
}
