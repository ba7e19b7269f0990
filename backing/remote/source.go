package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lazyweights/tensorfs/backing"
)

// Source is one object read with ranged GETs: a backing.Source. Every
// GET is pinned to the version validated at Open; once the object is
// seen to have changed, every read fails (never a mix of versions) and
// one line is logged.
type Source struct {
	c      *Client
	id     uint64
	obj    Object
	url    string
	diskID string // "" when the disk cache does not apply

	mu      sync.Mutex
	streams [8]stream // GUARDED_BY(mu): recent sequential readers
	tick    uint64    // GUARDED_BY(mu)

	changed    atomic.Pointer[error] // the error that showed the object changed
	changeOnce sync.Once
	badReply   sync.Once // logs the first reply that did not match its request
	closed     atomic.Bool
	inflight   sync.WaitGroup // prefetches
}

// stream is one sequential reader: where its last read ended and how
// far ahead to fetch.
type stream struct {
	end    int64
	window int64
	used   uint64
	limit  int64 // readahead stops here (the end of a Prefetch range); 0: the object's end
	start  int64 // where a Prefetch range starts
	// direct: a Prefetch range read in reads of a part or more, each
	// fetched straight into the reader's buffer (readDirect) rather
	// than ahead into parts that it would then copy.
	direct bool
	flow   *flow // the GET that the next read of a direct stream continues, or nil
	// plan: the ranges of a PrefetchPlan, each read in reads of chunk
	// bytes (nil for a Prefetch range: [start, limit), chunk 0).
	plan  []backing.Range
	chunk int64
}

// startsRange says whether off is where a range of st's plan starts.
func (st *stream) startsRange(off int64) bool {
	i := sort.Search(len(st.plan), func(i int) bool { return st.plan[i].Off >= off })
	return i < len(st.plan) && st.plan[i].Off == off
}

var (
	_ backing.Source = (*Source)(nil)
	_ backing.Source = (*parseView)(nil)

	sourceIDs atomic.Uint64
)

// Open validates the object at key (one GET of its first part, which is
// kept) and returns it as a Source.
func (c *Client) Open(ctx context.Context, key string) (*Source, error) {
	ctx, unbind := c.bind(ctx)
	defer unbind()
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpenTimeout)
	defer cancel()
	s := &Source{c: c, id: sourceIDs.Add(1), url: c.store.URL(key)}
	p, _ := c.mem.acquire(partKey{s.id, 0}, c.opts.PartSize, false)
	var n int
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		s.obj, n, err = c.store.Open(ctx, key, p.buf)
		return err
	})
	if err == nil {
		if _, ok := s.obj.Identity(); !ok && !c.opts.AllowUnvalidated {
			err = &Error{URL: s.url, Kind: Invalid, Msg: "the server gives no validator (no ETag, no Last-Modified): a file replaced while it is read would be served as a mix of both versions; refused (--allow-unvalidated accepts the risk)"}
		}
	}
	if err != nil {
		if ierr := c.interrupted(s.url); ierr != nil {
			err = ierr
		}
		c.mem.finish(p, err)
		c.mem.release(p)
		return nil, err
	}
	s.obj.Key = key
	// Named as the store names it now that it is open: a store that
	// pins a version at its first request (hf://'s revision, resolved
	// to a commit sha) names the object by it, in Name and in the
	// errors of its reads.
	s.url = c.store.URL(key)
	p.buf = p.buf[:n]
	full := n == int(min(s.obj.Size, c.opts.PartSize))
	if id, ok := s.obj.Identity(); ok && c.disk != nil {
		s.diskID = c.disk.key(c.store.Origin(), id, c.opts.PartSize)
		if full {
			c.disk.put(s.diskID, 0, p.buf)
		}
	}
	c.mem.finish(p, nil)
	c.mem.release(p)
	if !full {
		c.mem.drop(s.id) // a short first read: fetch part 0 again when needed
	}
	return s, nil
}

// Object returns the identity validated at Open.
func (s *Source) Object() Object { return s.obj }

// SHA256 is the hex sha256 of the whole object as its store states it
// (a Digester: an hf:// file in Git LFS), for checking the bytes read;
// ok is false when the store states none.
func (s *Source) SHA256() (hex string, ok bool) {
	if d, isD := s.c.store.(Digester); isD {
		return d.SHA256(s.obj.Key)
	}
	return "", false
}

// Size is the object's size at Open.
func (s *Source) Size() int64 { return s.obj.Size }

// Name is the object's URL.
func (s *Source) Name() string { return s.url }

// Close forgets the source's cached parts; reads after it fail.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	for i := range s.streams {
		if f := s.streams[i].flow; f != nil {
			f.stop()
			s.streams[i].flow = nil
		}
	}
	s.mu.Unlock()
	s.inflight.Wait()
	s.c.mem.drop(s.id)
	return nil
}

// fault is the error of a read that could not be served.
func (s *Source) fault(off, n int64, err error) error {
	return &backing.FaultError{Name: s.url, Off: off, Len: n, Size: s.obj.Size, Now: -1, Err: err}
}

// ReadAt reads len(p) bytes at off (io.ReaderAt semantics over the
// object as opened), fetching the parts it needs in parallel and
// starting readahead for a sequential reader; a read of a part or more
// that no cached part serves is fetched straight into p (direct).
func (s *Source) ReadAt(p []byte, off int64) (int, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("remote: %s: %w", s.url, os.ErrClosed)
	}
	if off < 0 {
		return 0, fmt.Errorf("remote: %s: read at negative offset %d", s.url, off)
	}
	size := s.obj.Size
	if off >= size {
		return 0, io.EOF
	}
	want := int64(len(p))
	eof := false
	if want > size-off {
		want, eof = size-off, true
	}
	if err := s.changedErr(); err != nil {
		return 0, s.fault(off, want, err)
	}
	f := s.readahead(off, want, int64(cap(p)))
	// One deadline for the whole read, whatever splits it into GETs;
	// waiting ends at once when the Client's Context is done.
	deadline := time.Now().Add(s.c.opts.Timeout)
	if f != nil {
		if ok, err := s.readFlow(f, p[:want], off, deadline); ok {
			if err != nil {
				return 0, s.fault(off, want, err)
			}
			if eof {
				return int(want), io.EOF
			}
			return int(want), nil
		}
	}
	// The fetches this read starts end by the deadline; waiting for a
	// part that an earlier fetch holds ends a moment after it.
	ctx, cancel := context.WithDeadline(s.c.opts.Context, deadline.Add(waitSlack))
	defer cancel()
	ps := s.c.opts.PartSize
	if s.direct(off, want) {
		if err := s.readDirect(ctx, p[:want], off, deadline); err != nil {
			if cerr := s.changedErr(); cerr != nil {
				err = cerr
			}
			return 0, s.fault(off, want, err)
		}
		if eof {
			return int(want), io.EOF
		}
		return int(want), nil
	}
	done := int64(0)
	for done < want {
		// Up to Parallel parts at once.
		first := (off + done) / ps
		last := (off + want - 1) / ps
		if last-first >= int64(s.c.opts.Parallel) {
			last = first + int64(s.c.opts.Parallel) - 1
		}
		parts := make([]*part, 0, last-first+1)
		var run []*part // consecutive parts to fetch, one GET
		for i := first; i <= last; i++ {
			pt, fresh := s.c.mem.acquire(partKey{s.id, i}, s.partLen(i), false)
			parts = append(parts, pt)
			if fresh {
				run = append(run, pt)
			} else {
				s.startFetch(run, false, deadline)
				run = nil
			}
		}
		s.startFetch(run, false, deadline)
		n, ferr := s.collect(ctx, parts, p[done:want], off+done)
		done += n
		if ferr != nil {
			if err := s.changedErr(); err != nil {
				ferr = err
			}
			return int(done), s.fault(off, want, ferr)
		}
	}
	if eof {
		return int(want), io.EOF
	}
	return int(want), nil
}

// collect waits for parts (pinned, in order, the first holding byte at
// of the object) and copies their bytes into dst until the first
// error, unpinning each; it returns how many bytes it copied. When ctx
// is done first, a part still being fetched is unpinned once its fetch
// ends.
func (s *Source) collect(ctx context.Context, parts []*part, dst []byte, at int64) (int64, error) {
	ps := s.c.opts.PartSize
	done := int64(0)
	var ferr error
	for _, pt := range parts {
		select {
		case <-pt.done:
		case <-ctx.Done():
			// The fetch ends soon too (its own deadline is no
			// later, and it shares the Context): unpin the part
			// then, never while its buffer is being filled.
			if ferr == nil {
				ferr = s.waitError()
			}
			go func(pt *part) {
				<-pt.done
				s.c.mem.release(pt)
			}(pt)
			continue
		}
		if ferr == nil && pt.err != nil {
			ferr = pt.err
		}
		if ferr == nil {
			start := pt.key.idx * ps
			from := at + done - start
			done += int64(copy(dst[done:], pt.buf[from:]))
		}
		s.c.mem.release(pt)
	}
	return done, ferr
}

// direct says whether the read of [off, off+n) is fetched straight into
// the caller's buffer (readDirect) rather than through parts: when it
// is at least a part long, no part of it is cached or being fetched (so
// the cache holds nothing the read could use, and a reader that does
// not come back to these bytes, as a loader streaming a tensor does
// not, would have them copied twice), and there is no disk cache to
// fill. A small read still fetches its whole part, which the reads
// after it use.
func (s *Source) direct(off, n int64) bool {
	ps := s.c.opts.PartSize
	if n < ps || s.diskID != "" {
		return false
	}
	first, last := off/ps, (off+n-1)/ps
	return s.c.mem.absent(s.id, first, last)
}

// readDirect fills p with the bytes from off on, in GETs of up to maxRun
// bytes in parallel (each pinned, retried and bounded by the AIMD
// limiter as any fetch: Source.get), reading each response body straight
// into p: nothing is cached.
func (s *Source) readDirect(ctx context.Context, p []byte, off int64, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	ps := int(s.c.opts.PartSize)
	var wg sync.WaitGroup
	errs := make([]error, 0, len(p)/maxRun+1)
	var mu sync.Mutex
	for at := 0; at < len(p); at += maxRun {
		run := p[at:min(at+maxRun, len(p))]
		// Buffers of a part each: a retry goes on from the first
		// one not yet filled.
		var bufs [][]byte
		for b := 0; b < len(run); b += ps {
			bufs = append(bufs, run[b:min(b+ps, len(run))])
		}
		wg.Add(1)
		go func(o int64) {
			defer wg.Done()
			if err := s.get(ctx, o, bufs, nil); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(off + int64(at))
	}
	wg.Wait()
	s.c.mem.missed(int64(len(p)+ps-1) / int64(ps))
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// errNoSlot is a try that waited for a slot for GETs in flight until
// its deadline.
var errNoSlot = errors.New("timed out waiting for a connection")

// waitSlack is how long after its deadline a read still waits for a
// part being fetched: the fetches it started end by the deadline with
// their own error, which says more than "no answer".
const waitSlack = time.Second

// partLen is the length of part i.
func (s *Source) partLen(i int64) int64 {
	ps := s.c.opts.PartSize
	return min(ps, s.obj.Size-i*ps)
}

// maxRun bounds the bytes of one GET that fills consecutive parts: long
// enough that a sequential reader costs the store few requests, short
// enough that a reader waits for its first part little longer than for
// one part alone (the parts are published as they arrive).
const maxRun = 32 << 20

// startFetch fetches the fresh consecutive parts pts (pinned, being
// filled) in the background: GETs of up to maxRun bytes, each filling
// several parts. With prefetch, the fetch's pin is released when a part
// is ready.
func (s *Source) startFetch(pts []*part, prefetch bool, deadline time.Time) {
	per := max(1, int(maxRun/s.c.opts.PartSize))
	for len(pts) > 0 {
		n := min(per, len(pts))
		s.inflight.Add(1)
		go s.fetch(pts[:n], prefetch, deadline)
		pts = pts[n:]
	}
}

// fetch fills fresh consecutive parts: from the disk cache those it
// holds, the others with pinned GETs (one per run of consecutive parts,
// retried until the Timeout), publishing each part as it is filled.
func (s *Source) fetch(pts []*part, prefetch bool, deadline time.Time) {
	defer s.inflight.Done()
	ready := func(pt *part, err error) {
		if err == nil && s.diskID != "" {
			s.c.disk.put(s.diskID, pt.key.idx, pt.buf)
		}
		s.c.mem.finish(pt, err)
		if prefetch {
			s.c.mem.release(pt)
		}
	}
	var run []*part
	for i, pt := range pts {
		if s.diskID != "" && s.c.disk.get(s.diskID, pt.key.idx, pt.buf) {
			s.c.mem.finish(pt, nil)
			if prefetch {
				s.c.mem.release(pt)
			}
		} else {
			run = append(run, pt)
			if i < len(pts)-1 {
				continue
			}
		}
		if len(run) > 0 {
			s.fetchRun(run, ready, deadline)
			run = nil
		}
	}
}

// fetchRun fills consecutive parts with one GET (retried from the first
// part not yet filled), calling ready for each part: as it is filled,
// or with the error that stopped the fetch.
func (s *Source) fetchRun(run []*part, ready func(*part, error), deadline time.Time) {
	ctx, cancel := context.WithDeadline(s.c.opts.Context, deadline)
	defer cancel()
	bufs := make([][]byte, len(run))
	for i, pt := range run {
		bufs[i] = pt.buf
	}
	n := 0
	err := s.get(ctx, run[0].key.idx*s.c.opts.PartSize, bufs, func(i int) {
		ready(run[i], nil)
		n = i + 1
	})
	for _, pt := range run[n:] {
		if err == nil { // cannot happen: a GET that returns nil filled every part
			err = errors.New("internal error: a part was not filled")
		}
		ready(pt, err)
	}
}

// get fills bufs with the bytes from off on, retried until ctx's
// deadline, each try from the first buffer not yet filled. Each try holds
// one of the Client's slots for GETs in flight (the AIMD limiter) while
// it runs, not while it backs off: after a throttle halves the bound,
// only that many GETs, retries included, are in flight. filled(i), when
// not nil, is called as bufs[i] is full.
func (s *Source) get(ctx context.Context, off int64, bufs [][]byte, filled func(i int)) error {
	if err := s.changedErr(); err != nil {
		return err
	}
	k := 0 // buffers filled by earlier tries
	try := func(ctx context.Context) error {
		if err := s.c.lim.acquire(ctx); err != nil {
			if err := s.c.interrupted(s.url); err != nil {
				return err
			}
			return &Error{URL: s.url, Kind: Transient, Msg: errNoSlot.Error(), Err: errNoSlot}
		}
		defer s.c.lim.release()
		base := k
		ticket := s.c.lim.ticket()
		err := s.c.store.Get(ctx, s.obj, off+BufsLen(bufs[:base]), bufs[base:], func(i int) {
			k = base + i + 1
			if filled != nil {
				filled(base + i)
			}
		})
		s.c.lim.done(ticket, err)
		return err
	}
	var err error
	probe := false
	if at := s.c.awayAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < s.c.opts.Timeout {
		// The store was away a moment ago: one short try.
		probe = true
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err = try(pctx)
		cancel()
	} else {
		err = retry(ctx, try)
	}
	switch {
	case err == nil:
		s.c.awayAt.Store(0)
		return nil
	case s.c.interrupted(s.url) != nil:
		return s.c.interrupted(s.url)
	case KindOf(err) == Changed:
		s.markChanged(err)
	case KindOf(err) == Transient && errors.Is(err, errNoSlot):
		// Every slot was taken until the deadline: the process is
		// busy, the store not known to be away.
	case KindOf(err) == Transient:
		if !probe {
			s.c.awayAt.Store(time.Now().UnixNano())
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// No answer at all before the deadline (a stalled
			// store): say so, without the context's error, which
			// reads as an interrupt.
			err = &Error{URL: s.url, Kind: Transient, Msg: fmt.Sprintf("no answer from the store within %v", s.c.opts.Timeout)}
		}
	case KindOf(err) == Invalid:
		s.badReply.Do(func() {
			if s.c.opts.ReadErrorsReturned {
				return
			}
			s.c.opts.Logf("tensorfs: %s: %v; the reads that need it fail with EIO", s.url, err)
		})
	}
	return err
}

// waitError is the error of a read that stopped waiting for a part
// being fetched: interrupted, or its deadline passed.
func (s *Source) waitError() error {
	if err := s.c.interrupted(s.url); err != nil {
		return err
	}
	return &Error{URL: s.url, Kind: Transient, Msg: fmt.Sprintf("no answer from the store within %v", s.c.opts.Timeout)}
}

// markChanged records that the object changed, and logs it once.
func (s *Source) markChanged(err error) {
	s.changeOnce.Do(func() {
		s.changed.Store(&err)
		if s.c.opts.ReadErrorsReturned {
			return
		}
		s.c.opts.Logf("tensorfs: %s: the object changed after it was opened (%v); its reads fail with EIO, remount to serve the new version", s.url, err)
	})
}

func (s *Source) changedErr() error {
	if e := s.changed.Load(); e != nil {
		return *e
	}
	return nil
}

// readahead notes a read of [off, off+n) and, when it continues a
// sequential reader, prefetches the window after it, doubling the
// window (from one part up to Readahead) with each sequential read. In
// a Prefetch range, it returns the flow that serves the read, or nil. A
// flow starts even where a part of the read is cached (the part at a
// tensor's edge that the tensor before it left, part 0 kept by Open): a
// part or less fetched twice, against a chain of part-sized reads that
// a reader whose chunks straddle parts would make through the cache.
func (s *Source) readahead(off, n, room int64) *flow {
	ra := s.c.opts.Readahead
	if ra <= 0 {
		return nil
	}
	ps := s.c.opts.PartSize
	s.mu.Lock()
	s.tick++
	var st *stream
	oldest := &s.streams[0]
	for i := range s.streams {
		c := &s.streams[i]
		if c.flow != nil && c.flow.waits(off) {
			// The read a flow waits for (its last may be short).
			st = c
			break
		}
	}
	for i := range s.streams {
		if st != nil {
			break
		}
		if c := &s.streams[i]; c.direct && off >= c.start && off+n <= c.limit {
			st = c // a read inside a Prefetch range, sequential or not
		}
	}
	for i := range s.streams {
		if st != nil {
			break
		}
		c := &s.streams[i]
		if c.used != 0 && off >= c.end-ps && off <= c.end+ps {
			st = c
			break
		}
		if c.used < oldest.used {
			oldest = c
		}
	}
	if st == nil {
		if oldest.flow != nil {
			oldest.flow.stop()
		}
		*oldest = stream{end: off + n, used: s.tick}
		s.mu.Unlock()
		return nil
	}
	inRange := st.direct && off+n <= st.limit
	// A read shorter than a part starts a flow only where the reader
	// streams the range (its start, or right after its last read: check
	// --data hashing a file, 1 MiB at a time); elsewhere it is served
	// through parts, which the reads near it use.
	// A read at the start of a range of a plan whose chunks are not
	// short starts one too (the run's first tensor may be shorter).
	start := inRange && (n >= ps || n >= minFlowRead && off == st.end || st.chunk >= minFlowRead && st.startsRange(off))
	if st.flow != nil || start {
		// Read straight into the reader's buffer, by a flow or
		// its own GETs: nothing ahead.
		var f *flow
		if inRange {
			f = s.takeFlow(st, off, n, room, start)
		} else {
			st.flow.stop()
			st.flow = nil
		}
		if f != nil || inRange && n >= ps {
			st.end = max(st.end, off+n)
			st.used = s.tick
			s.mu.Unlock()
			return f
		}
		// A short read that no flow waits for: as any other.
	}
	// Streams share the memory cache: each gets at most its share of
	// half of it, so that readahead never evicts what a reader is about
	// to use.
	active := int64(0)
	for i := range s.streams {
		if s.streams[i].used != 0 && s.tick-s.streams[i].used < 64 {
			active++
		}
	}
	ra = min(ra, max(ps, s.c.opts.MemCache/2/max(active, 1)))
	st.window = min(max(2*st.window, ps), ra)
	st.end = max(st.end, off+n)
	st.used = s.tick
	from, to := off+n, min(off+n+st.window, s.obj.Size)
	end := s.obj.Size
	if st.limit > 0 {
		to, end = min(to, st.limit), min(end, st.limit)
	}
	window := st.window
	s.mu.Unlock()
	if from >= to {
		return nil
	}
	// A window that slides a part at a time would cost one GET per
	// part: wait until half of it is missing, then fetch that half with
	// one GET, unless the next part is missing (the reader would wait)
	// or the window reaches the end.
	if to < end && window >= 2*ps {
		first, last := from/ps, (to-1)/ps
		missing, next := s.c.mem.missing(s.id, first, last)
		if !next && missing*ps < window/2 {
			return nil
		}
	}
	s.prefetch(from, to)
	return nil
}

// prefetch starts fetching the parts of [from, to) that are not cached,
// as far as the memory budget allows.
func (s *Source) prefetch(from, to int64) {
	if s.closed.Load() || s.changedErr() != nil || from >= to {
		return
	}
	ps := s.c.opts.PartSize
	var run []*part
	for i := from / ps; i*ps < to; i++ {
		pt, fresh := s.c.mem.acquire(partKey{s.id, i}, s.partLen(i), true)
		if pt == nil || !fresh {
			// Cached, being fetched, or no room.
			s.startFetch(run, true, time.Now().Add(s.c.opts.Timeout))
			run = nil
			continue
		}
		run = append(run, pt)
	}
	s.startFetch(run, true, time.Now().Add(s.c.opts.Timeout))
}

// Prefetch says that [off, off+n) is about to be read from start to end
// (a loader streaming one tensor): the first Readahead bytes of it are
// fetched now, and reads that go through it sequentially get the full
// readahead window at once, up to its end. A range of a part or more
// without a disk cache is not fetched ahead: the reads of a part or more
// that go through it are each fetched straight into the reader's buffer
// (by a flow, one GET for the range, or readDirect: one copy of the
// bytes, not two), those shorter (its tail) as any other read.
func (s *Source) Prefetch(off, n int64) {
	if n <= 0 || off < 0 || off >= s.obj.Size {
		return
	}
	s.announce(off, min(off+n, s.obj.Size), nil, 0)
}

// PrefetchPlan says that ranges are about to be read, one after
// another, each from its start in reads of chunk bytes (a loader's
// worker streaming a run of tensors: backing.Planner): as Prefetch of
// the span from the first range's start to the last one's end, whose
// reads go through one flow, one GET for all of the ranges (up to 1
// GiB, the bytes between two ranges skipped when under 64 KiB). A plan
// whose ranges are not in increasing order, overlap or run past the
// object is ignored.
func (s *Source) PrefetchPlan(ranges []backing.Range, chunk int64) {
	var plan []backing.Range
	for _, r := range ranges {
		if r.Len <= 0 {
			continue
		}
		if r.Off < 0 || r.Off >= s.obj.Size || r.Len > s.obj.Size-r.Off || len(plan) > 0 && r.Off < plan[len(plan)-1].Off+plan[len(plan)-1].Len {
			return
		}
		plan = append(plan, r)
	}
	if len(plan) == 0 {
		return
	}
	last := plan[len(plan)-1]
	s.announce(plan[0].Off, last.Off+last.Len, plan, max(chunk, 0))
}

// PlanLimit is how many flows the source's Client keeps open at once
// (backing.Planner): a plan read while they are all taken is read a GET
// per read.
func (s *Source) PlanLimit() int { return int(s.c.flowSlots()) }

// announce starts the stream of a Prefetch range [off, end), or of a
// plan's span.
func (s *Source) announce(off, end int64, plan []backing.Range, chunk int64) {
	ra := s.c.opts.Readahead
	if ra <= 0 {
		return
	}
	s.mu.Lock()
	s.tick++
	for i := range s.streams {
		c := &s.streams[i]
		if c.used != 0 && c.limit == end && c.end == off && plan == nil && c.plan == nil {
			// Said again (the loader says the next tensor ahead,
			// then again as it starts it): the same stream.
			c.used = s.tick
			s.mu.Unlock()
			return
		}
	}
	oldest := &s.streams[0]
	for i := range s.streams {
		c := &s.streams[i]
		if c.used != 0 && c.limit > 0 && c.start < end && off < c.limit {
			// An announced range that this one overlaps: its reader
			// has moved on (check --data's whole file, then a
			// tensor of it).
			if c.flow != nil {
				c.flow.stop()
			}
			*c = stream{}
		}
		if c.used < oldest.used {
			oldest = c
		}
	}
	if oldest.flow != nil {
		oldest.flow.stop()
	}
	direct := end-off >= s.c.opts.PartSize && s.diskID == ""
	*oldest = stream{end: off, window: ra, used: s.tick, limit: end, start: off, direct: direct, plan: plan, chunk: chunk}
	s.mu.Unlock()
	if !direct {
		s.prefetch(off, min(off+ra, end))
	}
}

// CacheStats returns the client's in-memory cache hits and misses (reads
// of parts, not prefetches).
func (c *Client) CacheStats() (hits, misses int64) { return c.mem.stats() }
