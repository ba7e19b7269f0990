package remote

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/lazyweights/tensorfs/backing"
)

// A flow is one GET of a Prefetch range (a loader streaming one tensor),
// or of several ranges of a PrefetchPlan (a loader's worker streaming a
// run of tensors), whose body is read straight into the reader's
// successive buffers: the reads of N chunks cost the store one request,
// not N, and no memory beyond the reader's own buffers (the GET reads a
// buffer only while its ReadAt waits for it; between reads the body
// waits in the connection). The bytes between two ranges of a plan (a
// GGUF's alignment padding) are read into a buffer of the flow's own, of
// at most maxGap bytes; ranges further apart end the flow there (the
// next range's first read starts another). It rests on Store.Get's
// promise to take bufs[i] from the slice only after filled(i-1) has
// returned: the flow puts each reader buffer there as its ReadAt comes.
// A read that does not continue the flow (another offset or length)
// ends it and is served as any other read; so is a read whose flow
// failed (the object changed and an interrupt aside): a flow only ever
// saves GETs.
type flow struct {
	start int64     // the GET's first byte
	segs  []flowSeg // the GET's buffers in order: the reader's, and gaps
	next  int       // GUARDED_BY(Source.mu): the segment of the read that continues it; len(segs): none
	gap   []byte    // where gaps are read, as long as the longest (nil: none)

	give chan flowReq // a reader's buffer
	ctx  context.Context
	stop context.CancelFunc
	over chan struct{} // closed when the flow's goroutine has ended
}

// flowSeg is one buffer of a flow's GET: n bytes at off, a reader's or
// (gap) bytes between two ranges of a plan, read and dropped.
type flowSeg struct {
	off, n int64
	gap    bool
}

// waits says whether the read at off is the one the flow waits for.
// LOCKS_REQUIRED(Source.mu).
func (f *flow) waits(off int64) bool { return f.next < len(f.segs) && f.segs[f.next].off == off }

// advance moves past the segment of the read that has continued the
// flow, and the gap after it. LOCKS_REQUIRED(Source.mu).
func (f *flow) advance() {
	f.next++
	for f.next < len(f.segs) && f.segs[f.next].gap {
		f.next++
	}
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

// maxGap bounds the bytes between two ranges of a plan that one flow
// reads and drops (a GGUF's alignment padding: 32 bytes by default);
// ranges further apart are read by flows of their own.
const maxGap = 64 << 10

// maxFlowSegs bounds the buffers of one flow's GET (a plan of many
// small tensors is read by several).
const maxFlowSegs = 1 << 15

var (
	errFlowMismatch = errors.New("not the read the flow waits for")
	errFlowEnded    = errors.New("the flow ended")
)

// flowSlots is how many flows a Client has open at once: each holds one
// of its Parallel slots for GETs in flight while its reader is between
// reads, so at most half of them.
func (c *Client) flowSlots() int32 { return int32(max(1, c.opts.Parallel/2)) }

// takeFlow returns the flow that the read of [off, off+n) of stream st
// continues, or starts one for it and the reads after it up to the
// stream's limit (those of its plan), or returns nil (the read is
// served as any other). room is the capacity of the reader's buffer
// (see runFlow). LOCKS_REQUIRED(s.mu).
func (s *Source) takeFlow(st *stream, off, n, room int64, start bool) *flow {
	if f := st.flow; f != nil {
		if f.waits(off) && f.segs[f.next].n == n {
			f.advance()
			return f
		}
		f.stop()
		st.flow = nil
	}
	if !start || s.c.awayAt.Load() != 0 || s.closed.Load() {
		return nil // the store was away a moment ago
	}
	segs, gap := st.flowSegs(off, n, room)
	if len(segs) < 2 {
		return nil // one GET anyway
	}
	if s.c.flows.Add(1) > s.c.flowSlots() {
		s.c.flows.Add(-1)
		return nil
	}
	ctx, stop := context.WithCancel(s.c.opts.Context)
	f := &flow{start: off, segs: segs, give: make(chan flowReq), ctx: ctx, stop: stop, over: make(chan struct{})}
	if gap > 0 {
		f.gap = make([]byte, gap)
	}
	f.advance()
	st.flow = f
	s.inflight.Add(1)
	go s.runFlow(f)
	return f
}

// flowSegs returns the buffers of a flow that starts with the read of
// [off, off+n) of stream st: the rest of the range of its plan that
// holds off in reads of n bytes (of the plan's chunk, where the read is
// the range's first, shorter than a chunk), then the ranges after it,
// each in reads of a chunk, the bytes between them a gap; the longest
// gap's length too. It stops at a gap over maxGap, a read longer than
// room, maxFlow bytes or maxFlowSegs buffers; nil when the read is not
// one of the plan's. LOCKS_REQUIRED(s.mu).
func (st *stream) flowSegs(off, n, room int64) (segs []flowSeg, gap int64) {
	plan := st.plan
	if plan == nil {
		plan = []backing.Range{{Off: st.start, Len: st.limit - st.start}}
	}
	i := sort.Search(len(plan), func(i int) bool { return plan[i].Off+plan[i].Len > off })
	if i == len(plan) || off < plan[i].Off {
		return nil, 0
	}
	chunk := n
	if end := plan[i].Off + plan[i].Len; st.chunk > 0 && n == min(st.chunk, end-off) {
		chunk = st.chunk
	}
	total := int64(0)
	at := off
	for ; i < len(plan); i++ {
		r := plan[i]
		if at < r.Off {
			g := r.Off - at
			if g > maxGap || len(segs) >= maxFlowSegs {
				break
			}
			segs = append(segs, flowSeg{off: at, n: g, gap: true})
			total += g
			gap = max(gap, g)
		}
		end := r.Off + r.Len
		if at < r.Off {
			at = r.Off
		}
		for at < end {
			k := min(chunk, end-at)
			if k > room || total+k > maxFlow || len(segs) >= maxFlowSegs {
				break
			}
			segs = append(segs, flowSeg{off: at, n: k})
			total += k
			at += k
		}
		if at < end {
			break
		}
	}
	for len(segs) > 0 && segs[len(segs)-1].gap {
		segs = segs[:len(segs)-1]
	}
	if len(segs) == 0 || segs[0].n != n {
		return nil, 0 // a read that is not the plan's
	}
	return segs, gap
}

// runFlow is a flow's goroutine: one GET (Source.get: pinned, retried
// from the first buffer not filled, in a slot of the limiter) of the
// flow's bytes, each buffer a reader's, taken as its ReadAt comes, or
// the flow's own for a gap. It ends when the bytes are read, or when no
// read continues it within the Timeout, or when it is stopped (another
// read of the stream, Close, an interrupt), reading no more of the body.
func (s *Source) runFlow(f *flow) {
	defer s.inflight.Done()
	defer s.c.flows.Add(-1)
	defer close(f.over)
	defer f.stop()
	nb := len(f.segs)
	bufs := make([][]byte, nb)
	var pending *flowReq
	idle := time.NewTimer(s.c.opts.Timeout)
	defer idle.Stop()
	// wait puts the buffer of the read that continues the flow at
	// bufs[i]; false when none comes.
	wait := func(i int) bool {
		sg := f.segs[i]
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
				if r.off != sg.off || int64(len(r.p)) != sg.n {
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
	// Until its read comes, each reader's buffer is a slice of the
	// first reader's, up to its capacity (flowSegs keeps every buffer
	// within it): Store.Get needs the lengths now, and never reads into
	// bufs[i] before filled(i-1) has returned (by when it is the
	// reader's, or empty), so those bytes are never written.
	first := bufs[0][:cap(bufs[0])]
	for i := 1; i < nb; i++ {
		if f.segs[i].gap {
			bufs[i] = f.gap[:f.segs[i].n]
		} else {
			bufs[i] = first[:f.segs[i].n]
		}
	}
	letGo := false
	err := s.get(f.ctx, f.start, bufs, func(i int) {
		if letGo {
			return // emptied: the flow was let go
		}
		if !f.segs[i].gap {
			pending.done <- nil
			pending = nil
		}
		if j := i + 1; j < nb && !f.segs[j].gap && !wait(j) {
			letGo = true
			for ; j < nb; j++ {
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
