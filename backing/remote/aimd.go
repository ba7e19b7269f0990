package remote

import (
	"context"
	"errors"
	"sync"
)

// limiter bounds the GETs in flight, all sources of a Client together,
// and adapts the bound to the store (AIMD, as TCP's congestion window
// does): a throttled GET (503 SlowDown, 429) halves it, down to 1; each
// window of limit successful GETs raises it by one, up to ceiling
// (Options.Parallel). One throttle halves the limit once: GETs that were
// started before it was last lowered (under the higher limit) and are
// throttled too do not halve it again. No clock is involved.
type limiter struct {
	ceiling int

	mu       sync.Mutex
	limit    int           // GUARDED_BY(mu): GETs allowed in flight now
	inflight int           // GUARDED_BY(mu)
	epoch    uint64        // GUARDED_BY(mu): bumped each time limit is lowered
	ok       int           // GUARDED_BY(mu): successes since limit last changed
	wake     chan struct{} // GUARDED_BY(mu): closed (and replaced) when a slot frees
	// Counts, for tests and benchmarks.
	throttles, lowest int // GUARDED_BY(mu)
}

func newLimiter(ceiling int) *limiter {
	return &limiter{ceiling: ceiling, limit: ceiling, lowest: ceiling, wake: make(chan struct{})}
}

// acquire waits for a slot.
func (l *limiter) acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		if l.inflight < l.limit {
			l.inflight++
			l.mu.Unlock()
			return nil
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ticket is taken as a GET is sent, and given to done with its outcome.
func (l *limiter) ticket() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// release frees a slot.
func (l *limiter) release() {
	l.mu.Lock()
	l.inflight--
	l.signal()
	l.mu.Unlock()
}

// signal wakes the waiters. LOCKS_REQUIRED(mu)
func (l *limiter) signal() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// done records the outcome of one GET made under ticket: a success
// counts toward raising the limit, a throttle lowers it.
func (l *limiter) done(ticket uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.ok++
		if l.ok >= l.limit && l.limit < l.ceiling {
			l.limit++
			l.ok = 0
			l.signal()
		}
	case Throttled(err):
		l.throttles++
		if ticket != l.epoch {
			return // started under a limit already lowered since
		}
		l.limit = max(1, l.limit/2)
		l.lowest = min(l.lowest, l.limit)
		l.epoch++
		l.ok = 0
	}
}

// stats returns the limit now, the lowest it went and the throttled
// GETs seen.
func (l *limiter) stats() (limit, lowest, throttles int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit, l.lowest, l.throttles
}

// Throttled reports whether err is a store asking for fewer requests:
// HTTP 429, or 503 (S3's SlowDown).
func Throttled(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Status == 429 || e.Status == 503 || e.Code == "SlowDown"
}

// Limit returns the Client's bound on GETs in flight now (at most
// Options.Parallel, lowered while the store throttles), the lowest it
// has been and the throttled GETs seen.
func (c *Client) Limit() (limit, lowest, throttles int) { return c.lim.stats() }
