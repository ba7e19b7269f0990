package client

import (
	"context"
	"sync"
	"sync/atomic"
)

// forEach calls do(ctx, i) for every i in [0, n), in order of i, from
// workers goroutines at once, with a context that is cancelled (with
// that error as its cause) as soon as one call fails. It returns when
// every call started has returned: nil, or the first error (the cause of
// ctx, when ctx ended first). A call is not started once ctx has ended.
func forEach(ctx context.Context, n, workers int, do func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancel(err)
	}
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := context.Cause(ctx); err != nil {
					fail(err)
					return
				}
				if err := do(ctx, int(i)); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
