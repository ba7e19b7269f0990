package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/lazyweights/tensorfs/dtype"
)

// recSink records everything a Stream does and checks the chunk contract
// as it goes: consecutive offsets from 0, full buffers but the last, no
// concurrent calls on one tensor, End exactly once.
type recSink struct {
	t     testing.TB
	chunk int // expected buffer size; 0 to skip the full-buffer check

	mu          sync.Mutex
	tensors     map[string]*recTensor
	begun       []string
	bufs        map[*byte]bool
	inFlight    int
	maxInFlight int
	writes      int

	// Fault injection.
	beginErr map[string]error
	writeErr map[string]error
	endErr   map[string]error
	skip     map[string]bool
	onWrite  func(n int) // called with the running write count, under mu
}

type recTensor struct {
	s      *recSink
	info   TensorInfo
	dt     dtype.DType
	size   int64
	data   bytes.Buffer
	busy   bool
	ends   int
	endErr error
}

func newRecSink(t testing.TB, chunk int) *recSink {
	return &recSink{t: t, chunk: chunk, tensors: map[string]*recTensor{}, bufs: map[*byte]bool{}}
}

func (s *recSink) Begin(t TensorInfo, dt dtype.DType, size int64) (TensorSink, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.tensors[t.Name]; dup {
		s.t.Errorf("Begin(%q) twice", t.Name)
	}
	s.begun = append(s.begun, t.Name)
	if err := s.beginErr[t.Name]; err != nil {
		return nil, err
	}
	if s.skip[t.Name] {
		return nil, nil
	}
	rt := &recTensor{s: s, info: t, dt: dt, size: size}
	s.tensors[t.Name] = rt
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	return rt, nil
}

func (r *recTensor) Write(chunk []byte, off int64) error {
	s := r.s
	s.mu.Lock()
	if r.busy {
		s.t.Errorf("%s: concurrent Write", r.info.Name)
	}
	r.busy = true
	if off != int64(r.data.Len()) {
		s.t.Errorf("%s: chunk at %d, want %d", r.info.Name, off, r.data.Len())
	}
	if len(chunk) == 0 {
		s.t.Errorf("%s: empty chunk at %d", r.info.Name, off)
	} else {
		s.bufs[unsafe.SliceData(chunk)] = true
	}
	last := off+int64(len(chunk)) == r.size
	if s.chunk > 0 && !last && len(chunk) != s.chunk {
		s.t.Errorf("%s: chunk of %d bytes at %d is not the last and not a full %d", r.info.Name, len(chunk), off, s.chunk)
	}
	if off+int64(len(chunk)) > r.size {
		s.t.Errorf("%s: chunk [%d,%d) past size %d", r.info.Name, off, off+int64(len(chunk)), r.size)
	}
	s.writes++
	n := s.writes
	err := s.writeErr[r.info.Name]
	if s.onWrite != nil {
		// Under the lock: no other Write is counted between this one and
		// what the hook does (TestStreamCancel's bound relies on it).
		s.onWrite(n)
	}
	s.mu.Unlock()

	if err == nil {
		r.data.Write(chunk)
	}
	s.mu.Lock()
	r.busy = false
	s.mu.Unlock()
	return err
}

func (r *recTensor) End(err error) error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	r.ends++
	r.endErr = err
	s.inFlight--
	return s.endErr[r.info.Name]
}

// checkEnded verifies every begun tensor ended exactly once.
func (s *recSink) checkEnded() {
	s.t.Helper()
	for name, r := range s.tensors {
		if r.ends != 1 {
			s.t.Errorf("%s: End called %d times", name, r.ends)
		}
	}
}

func standardSpecs(chunk int64) []spec {
	return []spec{
		{"z.last", 3*chunk + 5},
		{"a.empty", 0},
		{"b.one", 1},
		{"c.below", chunk - 1},
		{"d.exact", chunk},
		{"e.above", chunk + 1},
		{"f.many", 7*chunk + chunk/2},
		{"g/nested/name", 2 * chunk},
	}
}

func TestStreamDeliversExactBytes(t *testing.T) {
	for _, tc := range []struct{ parallel, chunk int }{
		{1, 1}, {1, 7}, {2, 7}, {3, 4096}, {8, 4096}, {16, 1000}, {4, 1 << 20},
	} {
		t.Run(fmt.Sprintf("p%d_c%d", tc.parallel, tc.chunk), func(t *testing.T) {
			c, _ := patternCheckpoint(t, standardSpecs(int64(max(tc.chunk, 16))))
			sink := newRecSink(t, tc.chunk)
			err := c.Stream(context.Background(), sink, StreamOptions{Parallel: tc.parallel, ChunkSize: tc.chunk})
			if err != nil {
				t.Fatal(err)
			}
			sink.checkEnded()
			if len(sink.tensors) != len(c.Tensors()) {
				t.Fatalf("%d tensors delivered, want %d", len(sink.tensors), len(c.Tensors()))
			}
			for _, ti := range c.Tensors() {
				r := sink.tensors[ti.Name]
				if r.endErr != nil {
					t.Errorf("%s: End(%v)", ti.Name, r.endErr)
				}
				if r.dt != ti.DType || r.size != ti.Size {
					t.Errorf("%s: Begin(%v, %d), want (%v, %d)", ti.Name, r.dt, r.size, ti.DType, ti.Size)
				}
				if !bytes.Equal(r.data.Bytes(), expected(ti)) {
					t.Errorf("%s: delivered bytes differ", ti.Name)
				}
			}
			if sink.maxInFlight > tc.parallel {
				t.Errorf("%d tensors in flight, Parallel %d", sink.maxInFlight, tc.parallel)
			}
			if len(sink.bufs) > tc.parallel {
				t.Errorf("chunks came from %d distinct buffers, want <= Parallel %d", len(sink.bufs), tc.parallel)
			}
			if tc.parallel == 1 {
				// One tensor at a time: Begin order is index order.
				var want []string
				for _, ti := range c.Tensors() {
					want = append(want, ti.Name)
				}
				if strings.Join(sink.begun, ",") != strings.Join(want, ",") {
					t.Errorf("begin order %v, want %v", sink.begun, want)
				}
			}
		})
	}
}

// discardSink counts bytes and keeps nothing.
type discardSink struct {
	mu    sync.Mutex
	bytes int64
	bufs  map[*byte]bool
}

func (d *discardSink) Begin(TensorInfo, dtype.DType, int64) (TensorSink, error) { return d, nil }
func (d *discardSink) End(error) error                                          { return nil }
func (d *discardSink) Write(chunk []byte, off int64) error {
	d.mu.Lock()
	d.bytes += int64(len(chunk))
	if d.bufs != nil {
		d.bufs[unsafe.SliceData(chunk)] = true
	}
	d.mu.Unlock()
	return nil
}

// TestStreamMemoryIsBounded streams checkpoints of very different sizes
// (generated on the fly, so they occupy no memory themselves), as stored
// and converted F16 -> F32, and checks that what Stream allocates is the
// buffer pool plus a small constant, the same for both sizes.
func TestStreamMemoryIsBounded(t *testing.T) {
	const chunk = 1 << 20
	sizes := []int64{16 << 20, 512 << 20}
	if raceEnabled || testing.Short() {
		sizes = []int64{8 << 20, 64 << 20}
	}
	for _, to := range []dtype.DType{dtype.Invalid, dtype.F32} {
		name := "native"
		if to != dtype.Invalid {
			name = to.String()
		}
		t.Run(name, func(t *testing.T) {
			if raceEnabled && to != dtype.Invalid {
				// The view's scratch is a sync.Pool, which the race
				// detector empties at random on purpose.
				t.Skip("allocation counts of conversions are meaningless under -race")
			}
			opts := StreamOptions{Parallel: 4, ChunkSize: chunk, DType: to}
			var allocs []uint64
			for _, total := range sizes {
				var specs []spec
				for i := int64(0); i < total/(4<<20); i++ {
					specs = append(specs, spec{fmt.Sprintf("t%05d", i), 4<<20 - 2*(i%3)})
				}
				c, _ := patternCheckpoint(t, specs)
				for i := range c.idx.Tensors {
					// The same bytes, as F16 (NaNs and all): convertible.
					tt := &c.idx.Tensors[i]
					tt.DType, tt.Shape = dtype.F16, []int64{tt.Size / 2}
				}
				want := c.TotalSize()
				if to == dtype.F32 {
					want *= 2
				}
				sink := &discardSink{bufs: map[*byte]bool{}}
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if err := c.Stream(context.Background(), sink, opts); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&after)
				if sink.bytes != want {
					t.Fatalf("streamed %d bytes, want %d", sink.bytes, want)
				}
				if len(sink.bufs) > opts.Parallel {
					t.Errorf("%d distinct buffers, want <= %d", len(sink.bufs), opts.Parallel)
				}
				got := after.TotalAlloc - before.TotalAlloc
				limit := uint64(opts.BufferBytes()) + 1<<20
				t.Logf("checkpoint %d MiB: Stream allocated %d KiB (pool %d KiB)", total>>20, got>>10, opts.BufferBytes()>>10)
				if got > limit {
					t.Errorf("checkpoint of %d bytes: Stream allocated %d bytes, want <= %d (pool + 1 MiB)", total, got, limit)
				}
				allocs = append(allocs, got)
			}
			// Growing the checkpoint 8x must not grow what Stream
			// allocates beyond per-tensor bookkeeping (a reader, a view;
			// a GC may also empty the view's scratch pool once), nothing
			// near a chunk.
			perTensor := (allocs[1] - min(allocs[1], allocs[0])) / uint64(sizes[1]/(4<<20))
			if perTensor > 8<<10 {
				t.Errorf("allocation grows by %d bytes per tensor", perTensor)
			}
		})
	}
}

// provSink supplies its own buffers and behaves like an asynchronous GPU
// sink: Write only queues the copy, which happens at Reclaim (or End).
// If Stream refilled a buffer before reclaiming it, the queued copy would
// see the new bytes and the result would differ.
type provSink struct {
	t    testing.TB
	bufs [][]byte

	mu       sync.Mutex
	owned    []bool            // buffer i holds a queued copy
	queued   []pendingCopy     // per buffer
	data     map[string][]byte // the "device" memory
	reclaims int
	writes   int
	ends     map[string]int
}

type pendingCopy struct {
	name string
	off  int64
	n    int
}

func newProvSink(t testing.TB, n, size int) *provSink {
	s := &provSink{t: t, owned: make([]bool, n), queued: make([]pendingCopy, n), data: map[string][]byte{}, ends: map[string]int{}}
	for i := 0; i < n; i++ {
		s.bufs = append(s.bufs, make([]byte, size))
	}
	return s
}

func (s *provSink) Buffers() [][]byte { return s.bufs }

func (s *provSink) Reclaim(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reclaims++
	s.flush(i)
	return nil
}

// flush performs buffer i's queued copy. LOCKS_REQUIRED(s.mu)
func (s *provSink) flush(i int) {
	if !s.owned[i] {
		return
	}
	q := s.queued[i]
	copy(s.data[q.name][q.off:], s.bufs[i][:q.n])
	s.owned[i] = false
}

func (s *provSink) Begin(t TensorInfo, dt dtype.DType, size int64) (TensorSink, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[t.Name] = make([]byte, size)
	return &provTensor{s, t.Name}, nil
}

type provTensor struct {
	s    *provSink
	name string
}

func (p *provTensor) Write(chunk []byte, off int64) error {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	for i, b := range s.bufs {
		if unsafe.SliceData(b) == unsafe.SliceData(chunk) {
			if s.owned[i] {
				s.t.Errorf("buffer %d written again before Reclaim", i)
			}
			s.owned[i] = true
			s.queued[i] = pendingCopy{p.name, off, len(chunk)}
			return nil
		}
	}
	s.t.Errorf("chunk is not one of the sink's buffers")
	return nil
}

func (p *provTensor) End(err error) error {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ends[p.name]++
	for i := range s.bufs {
		if s.owned[i] && s.queued[i].name == p.name {
			s.flush(i)
		}
	}
	return nil
}

func TestStreamUsesSinkBuffers(t *testing.T) {
	for _, tc := range []struct{ bufs, size, parallel int }{
		{1, 64, 1}, {2, 64, 1}, {3, 100, 2}, {2, 4096, 4}, {8, 333, 3},
	} {
		t.Run(fmt.Sprintf("b%d_s%d_p%d", tc.bufs, tc.size, tc.parallel), func(t *testing.T) {
			c, _ := patternCheckpoint(t, standardSpecs(int64(tc.size)))
			sink := newProvSink(t, tc.bufs, tc.size)
			// ChunkSize is ignored: the sink's buffers decide.
			if err := c.Stream(context.Background(), sink, StreamOptions{Parallel: tc.parallel, ChunkSize: 12345}); err != nil {
				t.Fatal(err)
			}
			for _, ti := range c.Tensors() {
				if !bytes.Equal(sink.data[ti.Name], expected(ti)) {
					t.Errorf("%s: bytes differ", ti.Name)
				}
				if sink.ends[ti.Name] != 1 {
					t.Errorf("%s: %d Ends", ti.Name, sink.ends[ti.Name])
				}
			}
			if sink.reclaims < sink.writes {
				t.Errorf("%d reclaims for %d writes", sink.reclaims, sink.writes)
			}
		})
	}
}

func TestStreamRejectsEmptySinkBuffers(t *testing.T) {
	c, _ := patternCheckpoint(t, standardSpecs(64))
	for _, bufs := range [][][]byte{nil, {make([]byte, 8), {}}} {
		s := newProvSink(t, 0, 0)
		s.bufs = bufs
		if err := c.Stream(context.Background(), s, StreamOptions{}); err == nil {
			t.Errorf("buffers %v: no error", bufs)
		}
	}
}

// TestStreamRefusesBadArguments: a nil sink and a dtype that is not a
// conversion target are errors before anything is read, not a panic in a
// worker or a silent delivery as stored.
func TestStreamRefusesBadArguments(t *testing.T) {
	c, _ := patternCheckpoint(t, standardSpecs(64))
	if err := c.Stream(context.Background(), nil, StreamOptions{}); err == nil || !strings.Contains(err.Error(), "nil sink") {
		t.Errorf("nil sink: %v", err)
	}
	for _, dt := range []dtype.DType{dtype.I32, dtype.U8, dtype.Q4_0, dtype.DType(250)} {
		s := newRecSink(t, 64)
		err := c.Stream(context.Background(), s, StreamOptions{DType: dt})
		if !errors.Is(err, ErrNotConvertible) || !strings.Contains(err.Error(), "pattern.bin") || len(s.begun) != 0 {
			t.Errorf("DType %v: error %v, %d tensors begun", dt, err, len(s.begun))
		}
	}
}

func TestStreamErrorsNameTheTensor(t *testing.T) {
	const chunk = 64
	boom := errors.New("sink exploded")
	type setup func(c *Checkpoint, src *patternSource, s *recSink)
	offsetOf := func(c *Checkpoint, name string) int64 {
		ti, _ := c.Tensor(name)
		return ti.Offset
	}
	for _, tc := range []struct {
		name   string
		setup  setup
		tensor string
		op     string
		is     error
		off    int64
	}{
		{"read error", func(c *Checkpoint, src *patternSource, s *recSink) {
			src.failAt = offsetOf(c, "f.many") + 3*chunk + 1
		}, "f.many", "read", errInjected, 3 * chunk},
		{"truncated source", func(c *Checkpoint, src *patternSource, s *recSink) {
			// The last tensor in the file: as if the file were cut short.
			src.shortAt = offsetOf(c, "g/nested/name") + chunk + 7
		}, "g/nested/name", "read", io.ErrUnexpectedEOF, chunk + 7},
		{"begin error", func(c *Checkpoint, src *patternSource, s *recSink) {
			s.beginErr = map[string]error{"d.exact": boom}
		}, "d.exact", "sink begin", boom, -1},
		{"write error", func(c *Checkpoint, src *patternSource, s *recSink) {
			s.writeErr = map[string]error{"e.above": boom}
		}, "e.above", "sink write", boom, 0},
		{"end error", func(c *Checkpoint, src *patternSource, s *recSink) {
			s.endErr = map[string]error{"b.one": boom}
		}, "b.one", "sink end", boom, -1},
	} {
		for _, parallel := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/p%d", tc.name, parallel), func(t *testing.T) {
				c, src := patternCheckpoint(t, standardSpecs(chunk))
				sink := newRecSink(t, chunk)
				tc.setup(c, src, sink)
				err := c.Stream(context.Background(), sink, StreamOptions{Parallel: parallel, ChunkSize: chunk})
				var te *TensorError
				if !errors.As(err, &te) {
					t.Fatalf("error %v (%T), want *TensorError", err, err)
				}
				if te.Name != tc.tensor || te.Op != tc.op || te.Off != tc.off {
					t.Errorf("error names (%q, %q, %d), want (%q, %q, %d)", te.Name, te.Op, te.Off, tc.tensor, tc.op, tc.off)
				}
				if !errors.Is(err, tc.is) {
					t.Errorf("error %v does not wrap %v", err, tc.is)
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") || !strings.Contains(msg, fmt.Sprintf("tensor %q", tc.tensor)) || !strings.HasPrefix(msg, "pattern.bin: ") {
					t.Errorf("message %q: want one line naming the source and the tensor", msg)
				}
				sink.checkEnded()
				if r := sink.tensors[tc.tensor]; r != nil && tc.op != "sink end" && r.endErr == nil {
					t.Errorf("%s ended with nil error", tc.tensor)
				}
			})
		}
	}
}

func TestStreamCancel(t *testing.T) {
	const chunk = 32
	c, _ := patternCheckpoint(t, standardSpecs(chunk))
	for _, parallel := range []int{1, 4} {
		ctx, cancel := context.WithCancel(context.Background())
		sink := newRecSink(t, chunk)
		sink.onWrite = func(n int) {
			if n == 5 {
				cancel()
			}
		}
		err := c.Stream(ctx, sink, StreamOptions{Parallel: parallel, ChunkSize: chunk})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("p%d: error %v, want context.Canceled", parallel, err)
		}
		sink.checkEnded()
		if sink.writes > 5+parallel {
			t.Errorf("p%d: %d writes after cancelling at the 5th", parallel, sink.writes)
		}
		cancel()
	}
	// A context cancelled before the call begins nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sink := newRecSink(t, chunk)
	if err := c.Stream(ctx, sink, StreamOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("pre-cancelled: %v", err)
	}
	if len(sink.begun) != 0 {
		t.Errorf("pre-cancelled: %d tensors begun", len(sink.begun))
	}
}

func TestStreamFilterAndSkip(t *testing.T) {
	c, _ := patternCheckpoint(t, standardSpecs(16))
	sink := newRecSink(t, 16)
	sink.skip = map[string]bool{"c.below": true}
	err := c.Stream(context.Background(), sink, StreamOptions{ChunkSize: 16, Filter: func(ti TensorInfo) bool {
		return ti.Name < "f"
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for name := range sink.tensors {
		got = append(got, name)
	}
	want := map[string]bool{"a.empty": true, "b.one": true, "d.exact": true, "e.above": true}
	if len(got) != len(want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	for _, n := range got {
		if !want[n] {
			t.Errorf("delivered %s", n)
		}
	}
	if len(sink.begun) != 5 {
		t.Errorf("begun %v, want 5 (c.below skipped by the sink)", sink.begun)
	}
}
