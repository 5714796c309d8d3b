package tools

import (
	"sync"
	"time"
)

// capture keeps the first max bytes written to it and counts the rest, so
// a command's output is bounded no matter how much it prints.
type capture struct {
	max   int
	buf   []byte
	total int64
}

func (c *capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - len(c.buf); room > 0 {
		if len(p) > room {
			p = p[:room]
		}
		c.buf = append(c.buf, p...)
	}
	return len(p), nil
}

// truncated reports whether bytes were dropped.
func (c *capture) truncated() bool { return c.total > int64(len(c.buf)) }

// progress turns a command's output into throttled progress messages: at
// most one per interval, each with the newest output (up to maxMsg bytes).
// Hosts with a 60-second tool timeout also take progress as a sign of life.
type progress struct {
	mu       sync.Mutex
	send     func(n int, msg string)
	interval time.Duration
	now      func() time.Time
	last     time.Time
	pending  []byte
	count    int
}

const progressMaxMsg = 2048

func newProgress(send func(int, string), interval time.Duration, now func() time.Time) *progress {
	return &progress{send: send, interval: interval, now: now}
}

// add records chunk and sends a progress message if the interval passed.
func (p *progress) add(chunk []byte) {
	if p == nil || p.send == nil {
		return
	}
	p.mu.Lock()
	p.pending = append(p.pending, chunk...)
	if len(p.pending) > progressMaxMsg {
		p.pending = append(p.pending[:0], p.pending[len(p.pending)-progressMaxMsg:]...)
	}
	if p.now().Sub(p.last) < p.interval {
		p.mu.Unlock()
		return
	}
	p.flushLocked()
	p.mu.Unlock()
}

// tick sends a heartbeat when nothing was sent for an interval, so a long
// silent command still shows life.
func (p *progress) tick() {
	if p == nil || p.send == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.now().Sub(p.last) >= p.interval {
		p.flushLocked()
	}
}

func (p *progress) flushLocked() {
	p.count++
	p.last = p.now()
	msg := string(p.pending)
	p.pending = p.pending[:0]
	p.send(p.count, msg)
}
