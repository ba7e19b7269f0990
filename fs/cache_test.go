package fs

import (
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// dropSource is a memSource that records DropCache calls.
type dropSource struct {
	*memSource
	mu    sync.Mutex
	drops [][2]int64
}

func (d *dropSource) DropCache(off, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drops = append(d.drops, [2]int64{off, n})
	return nil
}

func TestMergeRanges(t *testing.T) {
	got := mergeRanges([][2]int64{{10, 20}, {0, 5}, {15, 30}, {30, 31}, {40, 50}, {42, 45}})
	want := [][2]int64{{0, 5}, {10, 31}, {40, 50}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mergeRanges = %v, want %v", got, want)
	}
}

// TestCacheDrop serves the bytes of tensors that straddle 2 MiB chunks
// behind a header, in pieces and out of order, and checks that a chunk
// is dropped exactly when every tensor byte in it has been served (the
// header and the gap are never served), once per full serving, and that
// KeepBackingCache and sources without a cache drop nothing.
func TestCacheDrop(t *testing.T) {
	const mib = 1 << 20
	size := int64(5*mib + 100)
	src := &dropSource{memSource: &memSource{name: "ck", data: make([]byte, size)}}
	// Header [0, 4096); tensor a [4096, 3 MiB); a gap; b [3 MiB + 8, end);
	// c aliases part of a (counted once).
	idx := &index.Index{Sources: []string{"ck"}, Tensors: []index.Tensor{
		{Name: "a", DType: dtype.U8, Shape: []int64{3*mib - 4096}, Offset: 4096, Size: 3*mib - 4096},
		{Name: "b", DType: dtype.U8, Shape: []int64{size - 3*mib - 8}, Offset: 3*mib + 8, Size: size - 3*mib - 8},
		{Name: "c", DType: dtype.U8, Shape: []int64{mib}, Offset: mib, Size: mib},
	}}
	c := newCacheDrop(idx, []backing.Source{src}, false)
	if c == nil {
		t.Fatal("newCacheDrop: nil for a source that can drop")
	}
	for i, want := range []int64{2*mib - 4096, 2*mib - 8, mib + 100} {
		if got := c.srcs[0].covered(i); got != want {
			t.Fatalf("covered(%d) = %d, want %d", i, got, want)
		}
	}
	steps := []struct {
		off, n int64
		drops  [][2]int64 // after this step, all drops so far
	}{
		{4096, mib, nil},
		{2*mib + 8, 4096, nil}, // the gap is not a tensor's, but counts if served
		{mib + 4096, mib - 4096, [][2]int64{{0, 2 * mib}}},
		{2 * mib, 8, [][2]int64{{0, 2 * mib}}},
		{3*mib + 8, size - 3*mib - 8, [][2]int64{{0, 2 * mib}, {4 * mib, 2 * mib}}},
		{2*mib + 4096, mib - 4096, [][2]int64{{0, 2 * mib}, {4 * mib, 2 * mib}, {2 * mib, 2 * mib}}},
	}
	for i, s := range steps {
		c.served(0, s.off, s.n)
		if !reflect.DeepEqual(src.drops, s.drops) {
			t.Fatalf("step %d (%d bytes at %d): drops %v, want %v", i, s.n, s.off, src.drops, s.drops)
		}
	}
	// A second full serving of chunk 0 drops it again.
	c.served(0, 4096, 2*mib-4096)
	if n := len(src.drops); n != 4 || src.drops[3] != [2]int64{0, 2 * mib} {
		t.Errorf("after serving chunk 0 again: drops %v", src.drops)
	}
	if got, want := c.droppedBytes(), uint64(2*(2*mib-4096)+2*mib-8+mib+100); got != want {
		t.Errorf("droppedBytes = %d, want %d", got, want)
	}

	if newCacheDrop(idx, []backing.Source{src}, true) != nil {
		t.Errorf("KeepBackingCache: counters made")
	}
	if newCacheDrop(idx, []backing.Source{src.memSource}, false) != nil {
		t.Errorf("a source without DropCache: counters made")
	}
	var nilDrop *cacheDrop
	nilDrop.served(0, 0, 10) // nothing to do, no panic
}

// TestReadsCountServed reads every tensor file of a tree through
// Root.read (ReadAt and view readers: a memory source has no descriptor
// to splice) and checks that the reads count: the fixture fits one
// chunk, which is dropped once every tensor byte of it has been read.
func TestReadsCountServed(t *testing.T) {
	for _, only := range []string{"", "/.f32", "/.npy"} {
		idx, mem := fixture(t, basicSpecs)
		src := &dropSource{memSource: mem}
		r := newRoot(t, idx, src, Options{})
		files := map[string]*entry{}
		tensorFiles(r.top, "", files)
		buf := make([]byte, 7) // small reads, at every offset
		for p, e := range files {
			if only != "" && !strings.HasPrefix(p, only) || only == "" && strings.HasPrefix(p, "/.") {
				continue
			}
			for off := int64(0); off < e.file.size; off += int64(len(buf)) {
				if _, errno := r.read(e, buf, off); errno != 0 {
					t.Fatalf("%s at %d: %v", p, off, errno)
				}
			}
		}
		if only == "/.f32" {
			// Not every tensor has an .f32 view (integers): no full chunk.
			continue
		}
		if len(src.drops) != 1 || src.drops[0] != [2]int64{0, cacheChunk} {
			t.Errorf("reading every file under %q: drops %v, want the one chunk once", only, src.drops)
		}
	}
}
