package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// name checks that a Source opened by the store's first request is
// named as the store names the object once open (a store that resolves
// a revision at its first request names the object by what it pinned),
// so that its read errors name it once.
func (s *suite) name(t *testing.T) {
	src := s.open(t, s.client(t, context.Background()), keyRanges)
	if src.Name() != s.f.Store.URL(keyRanges) {
		t.Errorf("Source.Name() = %s, the store names it %s", src.Name(), s.f.Store.URL(keyRanges))
	}
}

// ranges checks reads of byte ranges, at the store and through a
// Client.
func (s *suite) ranges(t *testing.T) {
	t.Run("store", s.storeRanges)
	t.Run("source", s.sourceRanges)
	t.Run("concurrent", s.concurrentReads)
	t.Run("empty object", s.emptyObject)
}

// storeRanges checks Store.Open's head and Store.Get's ranged reads.
func (s *suite) storeRanges(t *testing.T) {
	want := s.objects[keyRanges]
	size := int64(len(want))
	ctx := context.Background()
	s.storeOpen(t, keyRanges, 100)
	s.storeOpen(t, keyRanges, len(want)+1000) // a head longer than the object
	obj := s.storeOpen(t, keyRanges, 16)
	for _, r := range []struct {
		name string
		off  int64
		lens []int
	}{
		{"start", 0, []int{1000}},
		{"middle", 70_001, []int{12_345}},
		{"last byte", size - 1, []int{1}},
		{"to the end", size - 5000, []int{5000}},
		{"the whole object", 0, []int{int(size)}},
		{"several buffers", 333, []int{1, 4096, 100, 50_000}},
	} {
		bufs := make([][]byte, len(r.lens))
		for i, n := range r.lens {
			bufs[i] = make([]byte, n)
		}
		var order []int
		err := s.f.Store.Get(ctx, obj, r.off, bufs, func(i int) { order = append(order, i) })
		if err != nil {
			t.Fatalf("%s: Get at %d of %v bytes: %v", r.name, r.off, r.lens, err)
		}
		at := r.off
		for i, b := range bufs {
			if !bytes.Equal(b, want[at:at+int64(len(b))]) {
				t.Fatalf("%s: Get at %d: buffer %d differs from the object's bytes %d-%d", r.name, r.off, i, at, at+int64(len(b))-1)
			}
			at += int64(len(b))
		}
		if len(order) != len(bufs) {
			t.Fatalf("%s: filled called for %v, want each of %d buffers once in order", r.name, order, len(bufs))
		}
		for i, k := range order {
			if k != i {
				t.Fatalf("%s: filled called for %v, want each of %d buffers once in order", r.name, order, len(bufs))
			}
		}
	}
}

// sourceRanges checks a Client's ReadAt at the start, middle and end,
// across the end, past it and of no bytes.
func (s *suite) sourceRanges(t *testing.T) {
	want := s.objects[keyRanges]
	size := int64(len(want))
	src := s.open(t, s.client(t, context.Background()), keyRanges)
	for _, r := range []struct {
		name    string
		off     int64
		n       int
		wantN   int
		wantEOF bool
	}{
		{"start", 0, 100, 100, false},
		{"middle, across parts", 3*partSize - 10, 2*partSize + 20, 2*partSize + 20, false},
		{"end", size - 100, 100, 100, false},
		{"across the end", size - 100, 300, 100, true},
		{"past the end", size + 10, 100, 0, true},
		{"at the end", size, 1, 0, true},
		{"zero bytes", 500, 0, 0, false},
		{"the whole object", 0, int(size), int(size), false},
	} {
		buf := make([]byte, r.n)
		n, err := src.ReadAt(buf, r.off)
		if n != r.wantN || (r.wantEOF && err != io.EOF) || (!r.wantEOF && err != nil && !(err == io.EOF && r.off+int64(n) == size)) {
			t.Fatalf("%s: ReadAt(%d bytes at %d) = %d, %v; want %d bytes (EOF %v)", r.name, r.n, r.off, n, err, r.wantN, r.wantEOF)
		}
		if n > 0 && !bytes.Equal(buf[:n], want[r.off:r.off+int64(n)]) {
			t.Fatalf("%s: ReadAt(%d bytes at %d): the bytes differ from the object's", r.name, r.n, r.off)
		}
	}
}

// concurrentReads checks a Client's ReadAt from goroutines at once.
func (s *suite) concurrentReads(t *testing.T) {
	want := s.objects[keyRanges]
	size := int64(len(want))
	src := s.open(t, s.client(t, context.Background()), keyRanges)
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for range 20 {
				off, n := r.Int64N(size), r.IntN(3*partSize)
				buf := make([]byte, n)
				got, err := src.ReadAt(buf, off)
				end := min(off+int64(n), size)
				if int64(got) != end-off || (err != nil && err != io.EOF) || !bytes.Equal(buf[:got], want[off:end]) {
					errs <- fmt.Errorf("ReadAt(%d bytes at %d) = %d, %v; want %d bytes, the object's", n, off, got, err, end-off)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// emptyObject checks the size and reads of an empty object.
func (s *suite) emptyObject(t *testing.T) {
	obj := s.storeOpen(t, keyEmpty, 16)
	if obj.Size != 0 {
		t.Fatalf("size %d", obj.Size)
	}
	src := s.open(t, s.client(t, context.Background()), keyEmpty)
	if n, err := src.ReadAt(make([]byte, 10), 0); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt of an empty object: %d, %v; want 0, EOF", n, err)
	}
}

func (s *suite) size(t *testing.T) {
	c := s.client(t, context.Background())
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if src := s.open(t, c, k); src.Size() != int64(len(s.objects[k])) {
			t.Errorf("%s: Size() = %d, want %d", k, src.Size(), len(s.objects[k]))
		}
		if obj := s.storeOpen(t, k, 0); obj.Size != int64(len(s.objects[k])) {
			t.Errorf("%s: Store.Open with an empty head: size %d, want %d", k, obj.Size, len(s.objects[k]))
		}
	}
	t.Run("list", func(t *testing.T) {
		ents, any, err := s.f.Store.List(context.Background(), listPrefix)
		if remote.KindOf(err) == remote.Invalid && s.f.Lacks["List"] != "" {
			t.Skipf("the store cannot list: %s (%v)", s.f.Lacks["List"], err)
		}
		if err != nil || !any {
			t.Fatalf("List(%s): %v, %v", listPrefix, any, err)
		}
		got := map[string]int64{}
		for _, e := range ents {
			got[e.Name] = e.Size
		}
		want := map[string]int64{"a.bin": 1234, "b.bin": 4321} // not sub/c.bin: a level deeper
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("List(%s) = %v, want %v", listPrefix, got, want)
		}
		ents, any, err = s.f.Store.List(context.Background(), listPrefix+"sub/")
		if err != nil || !any || len(ents) != 1 || ents[0] != (remote.Entry{Name: "c.bin", Size: 99}) {
			t.Fatalf("List(%ssub/) = %v, %v, %v; want c.bin of 99 bytes", listPrefix, ents, any, err)
		}
		ents, any, err = s.f.Store.List(context.Background(), "conformance/nothing/")
		if err != nil || any || len(ents) != 0 {
			t.Fatalf("List of a prefix with nothing under it = %v, %v, %v; want nothing, no error", ents, any, err)
		}
	})
}
