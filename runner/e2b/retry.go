package e2b

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

const (
	// retryBase is the first backoff; each retry doubles it.
	retryBase = 250 * time.Millisecond
	// retryMaxDelay caps one backoff.
	retryMaxDelay = 8 * time.Second
	// retryBudget bounds the total time spent waiting between attempts of
	// one call; a Retry-After beyond what is left ends the retries.
	retryBudget = 30 * time.Second
)

// retryable reports whether a failed attempt of an idempotent call may be
// tried again: transport failures, 429 and the 5xx statuses that mean "try
// later".
func retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Status {
	case 0:
		return e.Err != nil // transport failure
	case 429, 500, 502, 503, 504:
		return true
	}
	return false
}

// backoff returns the wait before retry number n (0-based): the server's
// Retry-After when it gave one, otherwise exponential with full jitter.
func backoff(n int, err error) time.Duration {
	var rl *RateLimitError
	if errors.As(err, &rl) && rl.RetryAfter > 0 {
		return rl.RetryAfter
	}
	d := retryBase << min(n, 10)
	if d > retryMaxDelay {
		d = retryMaxDelay
	}
	return d/2 + rand.N(d/2+1)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// withRetry runs attempt until it succeeds, fails in a way that is not
// retryable, the retries or the wait budget run out, or ctx ends. attempt
// receives the attempt number (0 first) so it can treat a 404 after a lost
// response as success.
func (c *Client) withRetry(ctx context.Context, attempt func(n int) error) error {
	var waited time.Duration
	for n := 0; ; n++ {
		err := attempt(n)
		if err == nil || n >= c.retries || !retryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := backoff(n, err)
		if waited+d > retryBudget {
			return err
		}
		waited += d
		c.logger.DebugContext(ctx, "e2b: retrying", "attempt", n+1, "wait_ms", d.Milliseconds(), "error", err.Error())
		if serr := c.sleep(ctx, d); serr != nil {
			return serr
		}
	}
}
