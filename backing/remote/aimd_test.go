package remote

import (
	"context"
	"testing"
)

// TestLimiterAIMD drives the limiter with outcomes and checks its limit:
// halved on a throttle (once per lowering: GETs sent before it do not
// halve it again), floor 1, +1 per window of limit successes, ceiling
// Parallel.
func TestLimiterAIMD(t *testing.T) {
	throttle := &Error{Status: 503, Code: "SlowDown", Kind: Transient}
	tooMany := &Error{Status: 429, Kind: Transient}
	other := &Error{Status: 500, Kind: Transient}
	type step struct {
		stale bool  // the GET was sent before the last lowering
		err   error // its outcome
		n     int   // repeated n times (default 1)
		limit int   // the limit after
	}
	tests := []struct {
		name    string
		ceiling int
		steps   []step
	}{
		{"halve on 503", 16, []step{{err: throttle, limit: 8}, {err: throttle, limit: 4}, {err: tooMany, limit: 2}, {err: throttle, limit: 1}, {err: throttle, limit: 1}}},
		{"one halving per lowering", 16, []step{{err: throttle, limit: 8}, {stale: true, err: throttle, n: 10, limit: 8}, {err: throttle, limit: 4}}},
		{"other errors do not count", 16, []step{{err: other, n: 20, limit: 16}, {err: throttle, limit: 8}, {err: other, n: 20, limit: 8}}},
		{"additive increase", 16, []step{{err: throttle, limit: 8}, {n: 7, limit: 8}, {limit: 9}, {n: 8, limit: 9}, {limit: 10}}},
		{"recover to ceiling, not above", 4, []step{{err: throttle, limit: 2}, {err: throttle, limit: 1}, {limit: 2}, {n: 2, limit: 3}, {n: 3, limit: 4}, {n: 100, limit: 4}}},
		{"floor 1", 1, []step{{err: throttle, limit: 1}, {n: 5, limit: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(tt.ceiling)
			before := l.ticket() // a GET sent before the last done
			for i, s := range tt.steps {
				for range max(s.n, 1) {
					tk := l.ticket()
					if s.stale {
						tk = before
					} else {
						before = tk
					}
					l.done(tk, s.err)
				}
				if got, _, _ := l.stats(); got != s.limit {
					t.Fatalf("step %d: limit %d, want %d", i, got, s.limit)
				}
			}
		})
	}
}

// TestLimiterBlocks: acquire waits while limit GETs are in flight and
// goes on when one is released or the limit is raised.
func TestLimiterBlocks(t *testing.T) {
	l := newLimiter(2)
	ctx := context.Background()
	l.done(l.ticket(), &Error{Status: 503}) // limit 1
	if err := l.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.acquire(cctx); err == nil {
		t.Fatal("a second acquire at limit 1 did not wait")
	}
	got := make(chan error)
	go func() { got <- l.acquire(ctx) }()
	l.done(l.ticket(), nil) // one success: limit 2, a slot frees
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	l.release()
	l.release()
	if _, _, n := l.stats(); n != 1 {
		t.Fatalf("%d throttles counted, want 1", n)
	}
}
