package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/lazyweights/tensorfs/backing"
)

// memStore is an object in memory, for testing the cache and retry
// logic without a server (backing/s3's tests run against a real one).
type memStore struct {
	data   []byte
	etag   string
	origin string // Origin, after "mem:"
	gets   atomic.Int64
	fail   func(off int64) error // error of a Get at off, or nil
	// cut, when set, is how many buffers a Get at off fills before its
	// connection is reset (a transient error), or -1 for all of them.
	cut func(off int64) int
	// into, when set, is told the first buffer of each Get.
	into func(buf []byte)

	mu    sync.Mutex
	tried map[int64]bool // offsets asked for once
}

func (m *memStore) URL(key string) string { return "mem://" + key }

func (m *memStore) Origin() string { return "mem:" + m.origin }

func (m *memStore) Open(ctx context.Context, key string, head []byte) (Object, int, error) {
	if key != "obj" {
		return Object{}, 0, &Error{URL: m.URL(key), Kind: NotFound, Status: 404}
	}
	return Object{Key: key, Size: int64(len(m.data)), ETag: m.etag}, copy(head, m.data), nil
}

func (m *memStore) Get(ctx context.Context, obj Object, off int64, bufs [][]byte, filled func(int)) error {
	m.gets.Add(1)
	if m.into != nil {
		m.into(bufs[0])
	}
	if m.fail != nil {
		if err := m.fail(off); err != nil {
			return err
		}
	}
	if obj.ETag != m.etag {
		return &Error{URL: m.URL(obj.Key), Kind: Changed, Status: 412}
	}
	if m.cut != nil {
		if k := m.cut(off); k >= 0 && k < len(bufs) {
			if err := ReadBufs(bytes.NewReader(m.data[off:]), bufs[:k], filled); err != nil {
				return err
			}
			return &Error{URL: m.URL(obj.Key), Kind: Transient, Msg: "connection reset"}
		}
	}
	return ReadBufs(bytes.NewReader(m.data[off:off+BufsLen(bufs)]), bufs, filled)
}

func (m *memStore) List(ctx context.Context, prefix string) ([]Entry, bool, error) {
	return []Entry{{Name: "obj", Size: int64(len(m.data))}}, true, nil
}

func newTest(t *testing.T, size int, opts Options) (*memStore, *Source) {
	t.Helper()
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	st := &memStore{data: data, etag: `"v1"`}
	c, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return st, s
}

func TestConcurrentReadsTinyCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"readahead", Options{PartSize: 4096, MemCache: 8192, Parallel: 3, Readahead: 16384}},
		{"no readahead", Options{PartSize: 4096, MemCache: 8192, Parallel: 2, Readahead: -1}},
		{"large cache", Options{PartSize: 4096, MemCache: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, s := newTest(t, 100000, tc.opts)
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 9))
					for i := 0; i < 100; i++ {
						off, n := r.Int64N(100010), r.IntN(20000)
						if g < 2 { // sequential readers
							off, n = int64(i*1000), 1000
						}
						buf := make([]byte, n)
						got, err := s.ReadAt(buf, off)
						lo := min(off, 100000)
						want := min(int64(n), 100000-lo)
						if int64(got) != want || !bytes.Equal(buf[:got], st.data[lo:lo+want]) || (int64(n) > want) != (err == io.EOF) {
							t.Errorf("ReadAt(%d, %d) = %d, %v; want %d", n, off, got, err, want)
							return
						}
					}
				}(g)
			}
			wg.Wait()
		})
	}
}

func TestChangedIsSticky(t *testing.T) {
	var logged atomic.Int32
	st, s := newTest(t, 50000, Options{PartSize: 4096, Readahead: -1, Logf: func(string, ...any) { logged.Add(1) }})
	st.etag = `"v2"`
	for _, off := range []int64{20000, 30000, 0} {
		_, err := s.ReadAt(make([]byte, 10), off)
		if !errors.Is(err, backing.ErrFault) || KindOf(err) != Changed {
			t.Fatalf("read at %d after a change: %v", off, err)
		}
	}
	if logged.Load() != 1 {
		t.Fatalf("%d log lines, want 1", logged.Load())
	}
}

func TestRetriesThenDeadline(t *testing.T) {
	transient := &Error{URL: "mem://obj", Kind: Transient, Status: 503, Code: "SlowDown"}
	st, s := newTest(t, 50000, Options{PartSize: 4096, Readahead: -1, Timeout: 300 * time.Millisecond})
	st.fail = func(off int64) error { // the first try at each offset
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.tried == nil {
			st.tried = map[int64]bool{}
		}
		if !st.tried[off] {
			st.tried[off] = true
			return transient
		}
		return nil
	}
	buf := make([]byte, 30000)
	if _, err := s.ReadAt(buf, 10000); err != nil || !bytes.Equal(buf, st.data[10000:40000]) {
		t.Fatalf("read through first tries failing: %v", err)
	}
	st.fail = func(int64) error { return transient }
	_, err := s.ReadAt(buf[:10], 45000)
	if !errors.Is(err, backing.ErrFault) || KindOf(err) != Transient {
		t.Fatalf("read with the store gone: %v", err)
	}
	st.fail = nil
	if _, err := s.ReadAt(buf[:10], 45000); err != nil {
		t.Fatalf("read with the store back: %v", err)
	}
	for _, tc := range []struct {
		err  error
		kind Kind
	}{
		{io.ErrUnexpectedEOF, Transient},
		{context.DeadlineExceeded, Transient},
		{errors.New("x"), Invalid},
		{&Error{Kind: Denied}, Denied},
	} {
		if k := KindOf(tc.err); k != tc.kind {
			t.Errorf("KindOf(%v) = %v, want %v", tc.err, k, tc.kind)
		}
	}
}

func TestClosedAndBounds(t *testing.T) {
	_, s := newTest(t, 1000, Options{PartSize: 4096})
	if _, err := s.ReadAt(make([]byte, 1), -1); err == nil {
		t.Fatal("negative offset read")
	}
	if n, err := s.ReadAt(make([]byte, 1), 1000); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v", n, err)
	}
	s.Close()
	if _, err := s.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}

func TestDiskCache(t *testing.T) {
	dir := t.TempDir()
	opts := Options{PartSize: 4096, Readahead: -1, CacheDir: dir, CacheSize: 40000}
	st, s := newTest(t, 30000, opts)
	buf := make([]byte, 30000)
	s.ReadAt(buf, 0)
	cold := st.gets.Load()
	c2, _ := New(st, opts)
	s2, err := c2.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, st.data) {
		t.Fatalf("warm read: %v", err)
	}
	if st.gets.Load() != cold {
		t.Fatalf("warm read sent %d GETs", st.gets.Load()-cold)
	}
	// The budget holds: 40000 bytes of 4096-byte parts.
	c3, _ := New(st, Options{PartSize: 4096, CacheDir: dir, CacheSize: 10000})
	if c3.disk.used > 10000 {
		t.Fatalf("disk cache holds %d bytes over its budget", c3.disk.used)
	}
}

// TestRunGets checks the GETs that fill several parts: a sequential
// reader costs about one GET per half readahead window, not one per
// part, and a GET cut off midway is resumed from its first part not yet
// filled (the parts it did fill are served, never fetched twice).
func TestRunGets(t *testing.T) {
	const part = 4 << 10
	opts := Options{PartSize: part, Readahead: 8 * part, MemCache: 32 * part, Parallel: 4}
	for _, tc := range []struct {
		name    string
		cut     bool
		maxGets int64
	}{
		{"sequential", false, 64 / 2},
		{"cut midway", true, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, s := newTest(t, 64*part, opts)
			var cuts atomic.Int64
			resumed := map[int64]bool{}
			var mu sync.Mutex
			if tc.cut {
				st.cut = func(off int64) int {
					mu.Lock()
					defer mu.Unlock()
					if resumed[off] {
						return -1
					}
					resumed[off+part] = true // the retry goes through
					cuts.Add(1)
					return 1 // one part, then a reset
				}
			}
			got := make([]byte, 64*part)
			for off := 0; off < len(got); off += part {
				if n, err := s.ReadAt(got[off:off+part], int64(off)); n != part || err != nil {
					t.Fatalf("ReadAt(%d, %d) = %d, %v", part, off, n, err)
				}
			}
			if !bytes.Equal(got, st.data) {
				t.Fatal("bytes differ")
			}
			t.Logf("%d GETs, %d cut", st.gets.Load(), cuts.Load())
			if g := st.gets.Load(); g > tc.maxGets {
				t.Errorf("%d GETs for 64 parts read in order, want at most %d", g, tc.maxGets)
			}
			if tc.cut && cuts.Load() == 0 {
				t.Error("no GET was cut")
			}
			if _, miss := s.c.CacheStats(); tc.cut && miss > 8 {
				t.Errorf("%d reads missed the cache", miss)
			}
		})
	}
}

// within says whether b lies inside p.
func within(b, p []byte) bool {
	if len(b) == 0 || len(p) == 0 {
		return false
	}
	b0, p0 := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&p[0]))
	return b0 >= p0 && b0+uintptr(len(b)) <= p0+uintptr(len(p))
}

// TestDirectReads: a read of a part or more that finds none of its parts
// cached is fetched straight into the caller's buffer (no part buffer,
// no second copy), as are the reads through a Prefetch range (a loader
// streaming a tensor: nothing fetched ahead; one GET, a flow, read into
// the reader's successive buffers); a transient error mid-body goes on
// from the first buffer not filled; a changed object fails it, sticky;
// a read shorter than a part still goes through the cache.
func TestDirectReads(t *testing.T) {
	const ps = 4096
	st, s := newTest(t, 40*ps+123, Options{PartSize: ps, Logf: func(string, ...any) {}})
	var mu sync.Mutex
	var dst [][]byte
	st.into = func(b []byte) { mu.Lock(); dst = append(dst, b); mu.Unlock() }
	gets := func() (bs [][]byte) { mu.Lock(); bs, dst = dst, nil; mu.Unlock(); return bs }
	// A tensor at an unaligned offset, streamed in reads of a part.
	off, n := int64(2*ps+100), int64(6*ps+7) // past part 0, which Open keeps
	s.Prefetch(off, n)
	var first []byte
	var all [][]byte
	for at := off; at < off+n; at += ps {
		p := make([]byte, min(ps, off+n-at))
		if k, err := s.ReadAt(p, at); err != nil || k != len(p) {
			t.Fatalf("read at %d: %d, %v", at, k, err)
		}
		if first == nil {
			first = p
		}
		all = append(all, p)
	}
	if !bytes.Equal(bytes.Join(all, nil), st.data[off:off+n]) {
		t.Fatal("the streamed reads' bytes differ")
	}
	if bs := gets(); len(bs) != 1 || !within(bs[0], first) {
		t.Fatalf("a streamed tensor of 7 reads: %d GETs, the first into the reader's buffer: %v; want 1", len(bs), len(bs) == 1 && within(bs[0], first))
	}
	// A long read, nothing cached: GETs of up to maxRun bytes straight
	// into it; the first one reset after two buffers goes on from the
	// third.
	st.cut = func(o int64) int {
		if o == 10*ps && !st.tried[o] {
			st.mu.Lock()
			st.tried[o] = true
			st.mu.Unlock()
			return 2
		}
		return -1
	}
	st.tried = map[int64]bool{}
	p := make([]byte, 20*ps)
	if k, err := s.ReadAt(p, 10*ps); err != nil || k != len(p) || !bytes.Equal(p, st.data[10*ps:30*ps]) {
		t.Fatalf("a long read: %d, %v", k, err)
	}
	for _, b := range gets() {
		if !within(b, p) {
			t.Fatal("a GET of the long read did not read into its buffer")
		}
	}
	st.cut = nil
	// Shorter than a part: a part buffer, kept for the next read.
	q := make([]byte, 100)
	if _, err := s.ReadAt(q, 35*ps); err != nil {
		t.Fatal(err)
	}
	if bs := gets(); len(bs) != 1 || within(bs[0], q) {
		t.Fatal("a short read did not go through a part")
	}
	hits, _ := s.c.CacheStats()
	if _, err := s.ReadAt(q, 35*ps+200); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.c.CacheStats(); h != hits+1 {
		t.Fatalf("the next short read: %d cache hits, want 1", h-hits)
	}
	// The object changes: a direct read fails, and every read after it.
	s.inflight.Wait() // the readahead of the short reads
	st.etag = `"v2"`
	if _, err := s.ReadAt(make([]byte, 2*ps), 0); KindOf(err) != Changed || !errors.Is(err, backing.ErrFault) {
		t.Fatalf("a direct read of a changed object: %v", err)
	}
	if _, err := s.ReadAt(q, 35*ps); KindOf(err) != Changed {
		t.Fatalf("a cached read after the change: %v", err)
	}
}
