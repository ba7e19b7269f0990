package remote

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
)

// getOffsets records the offset of each of st's GETs.
func getOffsets(st *memStore) func() []int64 {
	var mu sync.Mutex
	var offs []int64
	st.fail = func(off int64) error {
		mu.Lock()
		offs = append(offs, off)
		mu.Unlock()
		return nil
	}
	return func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		o := offs
		offs = nil
		return o
	}
}

// streamRange reads [off, off+n) in reads of chunk bytes, each into a
// buffer of its own, and checks the bytes once every read is done (a
// flow that wrote into a buffer after its read returned shows there).
func streamRange(t *testing.T, st *memStore, s *Source, off, n, chunk int64) {
	t.Helper()
	var bufs [][]byte
	for at := off; at < off+n; at += chunk {
		p := make([]byte, min(chunk, off+n-at))
		if k, err := s.ReadAt(p, at); k != len(p) || err != nil {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", len(p), at, k, err)
		}
		bufs = append(bufs, p)
	}
	if !bytes.Equal(bytes.Join(bufs, nil), st.data[off:off+n]) {
		t.Fatal("the bytes read differ from the object's")
	}
}

// runFlows counts the goroutines running a flow, once they have had a
// minute to return: a flow's goroutine calls inflight.Done as its last
// deferred call, so Close or inflight.Wait can return while it is still
// on its way out (the race detector's scheduling shows it).
func runFlows() int {
	buf := make([]byte, 1<<20)
	n := 0
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		n = strings.Count(string(buf[:runtime.Stack(buf, true)]), "remote.(*Source).runFlow")
		if n == 0 || time.Now().After(deadline) {
			return n
		}
	}
}

// TestFlowOneGet: a tensor streamed through a Prefetch range, in reads
// of a chunk each (the loader's), costs the store one GET, whatever
// the number of chunks, read straight into the reader's buffers (a
// cached part in it too); the flow ends with the range. Reads with no Prefetch range (a mount's
// reader) still get a GET each; a read that skips ahead in a Prefetch
// range ends the flow and is served right.
func TestFlowOneGet(t *testing.T) {
	const ps = 4096
	st, s := newTest(t, 100*ps, Options{PartSize: ps})
	offs := getOffsets(st)
	off, n := int64(3*ps+17), int64(9*2*ps+5) // 10 chunks, the last 5 bytes
	s.Prefetch(off, n)
	s.Prefetch(off, n) // said twice, as the loader does
	streamRange(t, st, s, off, n, 2*ps)
	if o := offs(); len(o) != 1 || o[0] != off {
		t.Fatalf("a tensor of 10 chunks: GETs at %v; want one, at %d", o, off)
	}
	s.inflight.Wait()
	if f := s.c.flows.Load(); f != 0 || runFlows() != 0 {
		t.Fatalf("%d flows open (%d goroutines) after the range was read", f, runFlows())
	}

	// A range whose first part is cached (part 0, kept by Open; the
	// part a tensor before it left): one GET all the same, not a
	// chain of reads through the cache.
	s.Prefetch(17, 8*ps)
	streamRange(t, st, s, 17, 8*ps, ps)
	if o := offs(); len(o) != 1 || o[0] != 17 {
		t.Fatalf("a range from cached part 0 read in 8 chunks: GETs at %v; want one, at 17", o)
	}

	// No Prefetch range: a read each (random reads, a mount's reader).
	for _, at := range []int64{60 * ps, 40 * ps, 70 * ps} {
		p := make([]byte, 2*ps)
		if k, err := s.ReadAt(p, at); k != len(p) || err != nil || !bytes.Equal(p, st.data[at:at+2*ps]) {
			t.Fatalf("ReadAt at %d: %d, %v", at, k, err)
		}
	}
	if o := offs(); len(o) != 3 {
		t.Fatalf("3 reads out of order without a Prefetch range: GETs at %v; want 3", o)
	}

	// A Prefetch range read with a jump: the flow ends, the reads after
	// the jump start another one.
	off = 80 * ps
	s.Prefetch(off, 12*ps)
	p := make([]byte, 2*ps)
	for _, at := range []int64{off, off + 2*ps, off + 6*ps, off + 8*ps, off + 10*ps} {
		if k, err := s.ReadAt(p, at); k != len(p) || err != nil || !bytes.Equal(p, st.data[at:at+2*ps]) {
			t.Fatalf("ReadAt at %d: %d, %v", at, k, err)
		}
	}
	if o := offs(); len(o) != 2 || o[0] != off || o[1] != off+6*ps {
		t.Fatalf("a Prefetch range read with a jump: GETs at %v; want %d and %d", o, off, off+6*ps)
	}
}

// TestFlowCut: a flow's reply cut off mid-body goes on with one ranged
// GET from the first buffer not filled, to the range's end; the bytes
// are the object's.
func TestFlowCut(t *testing.T) {
	const ps = 4096
	st, s := newTest(t, 100*ps, Options{PartSize: ps})
	offs := getOffsets(st)
	off, n, chunk := int64(5*ps+3), int64(20*ps), int64(2*ps)
	var once sync.Once
	st.cut = func(o int64) int {
		k := -1
		once.Do(func() { k = 3 }) // the first GET: 3 buffers, then a reset
		return k
	}
	s.Prefetch(off, n)
	streamRange(t, st, s, off, n, chunk)
	if o := offs(); len(o) != 2 || o[0] != off || o[1] != off+3*chunk {
		t.Fatalf("a flow cut after 3 buffers: GETs at %v; want %d, then %d", o, off, off+3*chunk)
	}
}

// holdStore is a memStore whose GETs of more than two 4 KiB parts, once
// hold is set, fill their first buffer and then wait for their
// context, as a reply held mid-body.
type holdStore struct {
	*memStore
	hold    bool
	waiting chan struct{}
}

func (h *holdStore) Get(ctx context.Context, obj Object, off int64, bufs [][]byte, filled func(int)) error {
	if !h.hold || BufsLen(bufs) <= 2*4096 {
		return h.memStore.Get(ctx, obj, off, bufs, filled)
	}
	h.gets.Add(1)
	if err := ReadBufs(bytes.NewReader(h.data[off:]), bufs[:1], filled); err != nil {
		return err
	}
	close(h.waiting)
	<-ctx.Done()
	return &Error{URL: h.URL(obj.Key), Kind: Transient, Msg: "read: " + ctx.Err().Error(), Err: ctx.Err()}
}

// TestFlowEnds: a flow whose reader stops ends when the source is
// closed, and when no read comes for a Timeout, reading nothing more
// into the buffers it was given; a read waiting on a held flow ends at
// the Client's interrupt with an error that says so. No goroutine is
// left.
func TestFlowEnds(t *testing.T) {
	const ps = 4096
	t.Run("close", func(t *testing.T) {
		st, s := newTest(t, 100*ps, Options{PartSize: ps})
		s.Prefetch(ps, 50*ps)
		first := make([]byte, 2*ps)
		if _, err := s.ReadAt(first, ps); err != nil {
			t.Fatal(err)
		}
		if s.c.flows.Load() != 1 {
			t.Fatal("no flow after the first read of a Prefetch range")
		}
		kept := bytes.Clone(first)
		clear(first) // the reader reuses its buffer
		s.Close()
		if f := s.c.flows.Load(); f != 0 || runFlows() != 0 {
			t.Fatalf("%d flows open (%d goroutines) after Close", f, runFlows())
		}
		if !bytes.Equal(first, make([]byte, 2*ps)) || !bytes.Equal(kept, st.data[ps:3*ps]) {
			t.Fatal("the flow wrote into the reader's buffer after its read returned")
		}
	})
	t.Run("idle", func(t *testing.T) {
		_, s := newTest(t, 100*ps, Options{PartSize: ps, Timeout: 2 * time.Second})
		s.Prefetch(ps, 50*ps)
		if _, err := s.ReadAt(make([]byte, 2*ps), ps); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { s.inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute): // generous: it ends 2 s after the read
			t.Fatal("a flow with no reader is still open a minute after its last read")
		}
		if f := s.c.flows.Load(); f != 0 {
			t.Fatalf("%d flows open", f)
		}
	})
	t.Run("interrupt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, base := newTest(t, 100*ps, Options{})
		st := &holdStore{memStore: base.c.store.(*memStore), waiting: make(chan struct{})}
		c, err := New(st, Options{PartSize: ps, Timeout: 10 * time.Minute, Context: ctx})
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Open(context.Background(), "obj")
		if err != nil {
			t.Fatal(err)
		}
		st.hold = true
		s.Prefetch(ps, 50*ps)
		if _, err := s.ReadAt(make([]byte, 2*ps), ps); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := s.ReadAt(make([]byte, 2*ps), 3*ps)
			done <- err
		}()
		select {
		case <-st.waiting:
		case err := <-done:
			t.Fatalf("the second read ended (%v) without waiting on a flow", err)
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) || !errors.Is(err, backing.ErrFault) {
				t.Fatalf("a read of a held flow, interrupted: %v", err)
			}
		case <-time.After(time.Minute): // generous: it ends at once
			t.Fatal("the read still waits on the held flow a minute after the interrupt")
		}
		s.Close()
		if f := c.flows.Load(); f != 0 || runFlows() != 0 {
			t.Fatalf("%d flows open (%d goroutines) after Close", f, runFlows())
		}
	})
}

// TestFlowShortReads: a Prefetch range read whole in reads shorter than
// a part (check --data hashing a file 64 KiB.. 1 MiB at a time) is one
// flow too: one GET for a range of 10 parts read in 40 reads, not a GET
// per part or readahead window; a reply cut mid-body goes on from the
// first buffer not filled, and the bytes are the object's. Short reads
// that do not stream the range (a jump) are served through parts.
func TestFlowShortReads(t *testing.T) {
	const ps = 4 * minFlowRead
	st, s := newTest(t, 30*ps, Options{PartSize: ps})
	offs := getOffsets(st)
	off, n := int64(ps+17), int64(10*ps)
	s.Prefetch(off, n)
	streamRange(t, st, s, off, n, minFlowRead)
	if o := offs(); len(o) != 1 || o[0] != off {
		t.Fatalf("a range of 10 parts read in 40 short reads: GETs at %v; want one, at %d", o, off)
	}
	s.inflight.Wait()
	if f := s.c.flows.Load(); f != 0 || runFlows() != 0 {
		t.Fatalf("%d flows open (%d goroutines) after the range was read", f, runFlows())
	}

	// Cut after 5 buffers: one more GET, from the 6th.
	var once sync.Once
	st.cut = func(o int64) int {
		k := -1
		once.Do(func() { k = 5 })
		return k
	}
	off = 12 * ps
	s.Prefetch(off, n)
	streamRange(t, st, s, off, n, minFlowRead)
	if o := offs(); len(o) != 2 || o[0] != off || o[1] != off+5*minFlowRead {
		t.Fatalf("a flow of short reads cut after 5 buffers: GETs at %v; want %d, then %d", o, off, off+5*minFlowRead)
	}
	st.cut = nil
	s.inflight.Wait() // the cut flow's goroutine, on its way out after its last buffer

	// Reads shorter than minFlowRead, and a short read past a jump,
	// start no flow.
	off = 23 * ps
	s.Prefetch(off, 4*ps)
	p := make([]byte, minFlowRead/2)
	for _, at := range []int64{off, off + 2*ps} {
		if k, err := s.ReadAt(p, at); k != len(p) || err != nil || !bytes.Equal(p, st.data[at:at+int64(len(p))]) {
			t.Fatalf("ReadAt at %d: %d, %v", at, k, err)
		}
	}
	if f := s.c.flows.Load(); f != 0 {
		t.Fatalf("%d flows open after reads under minFlowRead", f)
	}
}

// streamPlan reads the ranges of plan one after another, each in reads
// of chunk bytes (the last one shorter), each into a buffer of chunk
// bytes' capacity (a loader's pool buffer), and checks the bytes once
// every read is done.
func streamPlan(t *testing.T, st *memStore, s *Source, plan []backing.Range, chunk int64) {
	t.Helper()
	var got, want [][]byte
	for _, r := range plan {
		for at := r.Off; at < r.Off+r.Len; at += chunk {
			p := make([]byte, chunk)[:min(chunk, r.Off+r.Len-at)]
			if k, err := s.ReadAt(p, at); k != len(p) || err != nil {
				t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", len(p), at, k, err)
			}
			got = append(got, p)
		}
		want = append(want, st.data[r.Off:r.Off+r.Len])
	}
	if !bytes.Equal(bytes.Join(got, nil), bytes.Join(want, nil)) {
		t.Fatal("the bytes read differ from the object's")
	}
}

// TestFlowPlan: the ranges of a PrefetchPlan (a loader's worker
// streaming a run of tensors, the first one shorter than a chunk, some
// with padding between them) read in chunks cost the store one GET,
// the padding read and dropped; a gap over maxGap starts a second GET
// at the range after it; a reply cut mid-body goes on with one ranged
// GET from the first buffer not filled; a read that jumps ends the flow
// and is served right. No flow is left.
func TestFlowPlan(t *testing.T) {
	const ps = 4096
	const chunk = minFlowRead
	r0 := backing.Range{Off: 3*ps + 17, Len: ps / 2}                // shorter than a chunk
	r1 := backing.Range{Off: r0.Off + r0.Len, Len: 2*chunk + ps}    // right after it
	r2 := backing.Range{Off: r1.Off + r1.Len + 100, Len: chunk + 5} // after padding
	r3 := backing.Range{Off: r2.Off + r2.Len + 32, Len: 3 * chunk}
	plan := []backing.Range{r0, r1, r2, r3}
	size := int(r3.Off+r3.Len) + 2*maxGap + chunk
	t.Run("one GET", func(t *testing.T) {
		st, s := newTest(t, size, Options{PartSize: ps})
		offs := getOffsets(st)
		s.PrefetchPlan(plan, chunk)
		streamPlan(t, st, s, plan, chunk)
		if o := offs(); len(o) != 1 || o[0] != r0.Off {
			t.Fatalf("a plan of 4 ranges with gaps: GETs at %v; want one, at %d", o, r0.Off)
		}
		far := []backing.Range{r0, r1, {Off: r1.Off + r1.Len + maxGap + 1, Len: chunk}, {Off: r1.Off + r1.Len + maxGap + 1 + chunk, Len: chunk}}
		s.PrefetchPlan(far, chunk)
		streamPlan(t, st, s, far, chunk)
		if o := offs(); len(o) != 2 || o[0] != far[0].Off || o[1] != far[2].Off {
			t.Fatalf("a plan with a gap over %d bytes: GETs at %v; want %d and %d", maxGap, o, far[0].Off, far[2].Off)
		}
		s.inflight.Wait()
		if f := s.c.flows.Load(); f != 0 || runFlows() != 0 {
			t.Fatalf("%d flows open (%d goroutines) after the plan was read", f, runFlows())
		}
	})
	t.Run("cut", func(t *testing.T) {
		st, s := newTest(t, size, Options{PartSize: ps})
		offs := getOffsets(st)
		var once sync.Once
		st.cut = func(o int64) int {
			k := -1
			once.Do(func() { k = 5 }) // the first range, the second's 3 buffers, the padding
			return k
		}
		s.PrefetchPlan(plan, chunk)
		streamPlan(t, st, s, plan, chunk)
		if o := offs(); len(o) != 2 || o[0] != r0.Off || o[1] != r2.Off {
			t.Fatalf("a plan's flow cut after 5 buffers: GETs at %v; want %d, then %d", o, r0.Off, r2.Off)
		}
	})
	t.Run("jump", func(t *testing.T) {
		st, s := newTest(t, size, Options{PartSize: ps})
		offs := getOffsets(st)
		s.PrefetchPlan(plan, chunk)
		// The first two ranges as planned, then the fourth one's (the
		// third skipped): the flow ends, the reads after the jump
		// start another one.
		streamPlan(t, st, s, plan[:2], chunk)
		streamPlan(t, st, s, plan[3:], chunk)
		if o := offs(); len(o) != 2 || o[0] != r0.Off || o[1] != r3.Off {
			t.Fatalf("a plan read with a jump: GETs at %v; want %d and %d", o, r0.Off, r3.Off)
		}
		s.inflight.Wait()
		if f := s.c.flows.Load(); f != 0 || runFlows() != 0 {
			t.Fatalf("%d flows open (%d goroutines) after the plan was read", f, runFlows())
		}
	})
}
