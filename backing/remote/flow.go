package remote

import (
	"context"
	"errors"
	"time"
)

// A flow is one GET of a Prefetch range (a loader streaming one tensor)
// whose body is read straight into the reader's successive buffers: the
// reads of a tensor of N chunks cost the store one request, not N, and
// no memory beyond the reader's own buffers (the GET reads a buffer only
// while its ReadAt waits for it; between reads the body waits in the
// connection). It rests on Store.Get's promise to take bufs[i] from the
// slice only after filled(i-1) has returned: the flow puts each reader
// buffer there as its ReadAt comes. A read that does not continue the
// flow (another offset or length) ends it and is served as any other
// read; so is a read whose flow failed (the object changed and an
// interrupt aside): a flow only ever saves GETs.
type flow struct {
	start, end int64 // the GET's range
	chunk      int64 // each buffer's length; the last one's is what is left
	at         int64 // GUARDED_BY(Source.mu): where the next read must start to continue it

	give chan flowReq // a reader's buffer
	ctx  context.Context
	stop context.CancelFunc
	over chan struct{} // closed when the flow's goroutine has ended
}

// flowReq is one ReadAt's buffer for the flow, and where its outcome goes.
type flowReq struct {
	p    []byte
	off  int64
	done chan error // nil: p holds its bytes
}

// maxFlow bounds the bytes of one flow's GET (a longer range is read
// with several, one after another).
const maxFlow = 1 << 30

// minFlowRead is the shortest read that starts a flow: a flow's GET
// holds a slice entry per buffer (maxFlow/minFlowRead at most), and a
// reader of shorter reads is served as well through parts.
const minFlowRead = 64 << 10

var (
	errFlowMismatch = errors.New("not the read the flow waits for")
	errFlowEnded    = errors.New("the flow ended")
)

// bufLen is the length of the flow's buffer at off.
func (f *flow) bufLen(off int64) int64 { return min(f.chunk, f.end-off) }

// flowSlots is how many flows a Client has open at once: each holds one
// of its Parallel slots for GETs in flight while its reader is between
// reads, so at most half of them.
func (c *Client) flowSlots() int32 { return int32(max(1, c.opts.Parallel/2)) }

// takeFlow returns the flow that the read of [off, off+n) of stream st
// continues, or starts one for it and the reads after it up to the
// stream's limit, or returns nil (the read is served as any other).
// LOCKS_REQUIRED(s.mu).
func (s *Source) takeFlow(st *stream, off, n int64, start bool) *flow {
	if f := st.flow; f != nil {
		if f.at == off && f.at < f.end && f.bufLen(off) == n {
			f.at += n
			return f
		}
		f.stop()
		st.flow = nil
	}
	if !start || st.limit-off <= n || s.c.awayAt.Load() != 0 || s.closed.Load() {
		return nil // one GET anyway, or the store was away a moment ago
	}
	if s.c.flows.Add(1) > s.c.flowSlots() {
		s.c.flows.Add(-1)
		return nil
	}
	end := st.limit
	if end-off > maxFlow {
		end = off + max(1, maxFlow/n)*n // whole buffers, so the next read starts the next flow
	}
	ctx, stop := context.WithCancel(s.c.opts.Context)
	f := &flow{start: off, end: end, chunk: n, at: off + n, give: make(chan flowReq), ctx: ctx, stop: stop, over: make(chan struct{})}
	st.flow = f
	s.inflight.Add(1)
	go s.runFlow(f)
	return f
}

// runFlow is a flow's goroutine: one GET (Source.get: pinned, retried
// from the first buffer not filled, in a slot of the limiter) of the
// flow's range, each buffer a reader's, taken as its ReadAt comes. It
// ends when the range is read, or when no read continues it within the
// Timeout, or when it is stopped (another read of the stream, Close, an
// interrupt), reading no more of the body.
func (s *Source) runFlow(f *flow) {
	defer s.inflight.Done()
	defer s.c.flows.Add(-1)
	defer close(f.over)
	defer f.stop()
	nb := int((f.end - f.start + f.chunk - 1) / f.chunk)
	bufs := make([][]byte, nb)
	var pending *flowReq
	idle := time.NewTimer(s.c.opts.Timeout)
	defer idle.Stop()
	// wait puts the buffer of the read that continues the flow at
	// bufs[i]; false when none comes.
	wait := func(i int) bool {
		at := f.start + int64(i)*f.chunk
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(s.c.opts.Timeout)
		for {
			select {
			case r := <-f.give:
				if r.off != at || int64(len(r.p)) != f.bufLen(at) {
					r.done <- errFlowMismatch
					continue
				}
				bufs[i], pending = r.p, &r
				return true
			case <-f.ctx.Done():
				return false
			case <-idle.C:
				return false
			}
		}
	}
	if !wait(0) {
		return
	}
	// Until its read comes, each buffer is a slice of the first one of
	// its length: Store.Get needs the lengths now, and never reads into
	// bufs[i] before filled(i-1) has returned (by when it is the
	// reader's, or empty).
	for i := 1; i < nb; i++ {
		bufs[i] = bufs[0][:f.bufLen(f.start+int64(i)*f.chunk)]
	}
	err := s.get(f.ctx, f.start, bufs, func(i int) {
		if pending == nil {
			return // emptied: the flow was let go
		}
		pending.done <- nil
		pending = nil
		if i+1 < nb && !wait(i+1) {
			for j := i + 1; j < nb; j++ {
				bufs[j] = bufs[j][:0] // read no more of the body
			}
		}
	})
	if pending != nil {
		if err == nil {
			err = errFlowEnded
		}
		pending.done <- err
	}
}

// readFlow reads p at off through flow f. ok is false when the flow did
// not serve it (it had ended, or failed otherwise than by the object's
// change or an interrupt): the caller reads p as any other read. It
// returns only once the flow no longer touches p.
func (s *Source) readFlow(f *flow, p []byte, off int64, deadline time.Time) (ok bool, err error) {
	req := flowReq{p: p, off: off, done: make(chan error, 1)}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	done := s.c.opts.Context.Done()
	select {
	case f.give <- req:
	case <-f.over:
		return false, nil
	case <-done:
		return true, s.waitError()
	case <-t.C:
		return true, s.waitError()
	}
	select {
	case err = <-req.done:
	case <-done:
		f.stop()
		<-req.done
		return true, s.waitError()
	case <-t.C:
		f.stop()
		<-req.done
		return true, s.waitError()
	}
	switch {
	case err == nil:
		s.c.mem.missed((int64(len(p)) + s.c.opts.PartSize - 1) / s.c.opts.PartSize)
		return true, nil
	case s.changedErr() != nil:
		return true, s.changedErr()
	case s.c.interrupted(s.url) != nil:
		return true, s.c.interrupted(s.url)
	}
	return false, nil
}
