package fs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
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
		files := map[string]*node{}
		tensorFiles(r.lookupPath(""), "", files)
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

// readCounted reads a whole file of the tree through Root.read in pieces
// of step bytes and ends each reply (Done), as go-fuse does once it has
// written it, so that spliced reads count too. It reports a failed read
// with t.Errorf (it runs in goroutines too) and returns nil.
func readCounted(t *testing.T, r *Root, e *node, step int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, step)
	for off := int64(0); off < e.file.size; {
		res, errno := r.read(e, buf, off)
		if errno != 0 {
			t.Errorf("%s: read at %d: %v", e.name, off, errno)
			return nil
		}
		b, st := res.Bytes(make([]byte, step))
		if !st.Ok() || len(b) == 0 {
			t.Errorf("%s: read at %d of %d: %d bytes, %v", e.name, off, e.file.size, len(b), st)
			return nil
		}
		out = append(out, b...)
		off += int64(len(b))
		res.Done()
	}
	return out
}

// TestExportReadsCountServed reads the safetensors exports of a tree over
// a real file (spliced segments, copied segments, conversions) and checks
// that their bytes are the export's and that they count as served like
// the tensor files' reads: reading the stored export, or a view's, counts
// every tensor byte once; reading the tensor files and then the export
// counts them twice (each drop is a hint: the bytes stay exact); nothing
// counts with KeepBackingCache.
func TestExportReadsCountServed(t *testing.T) {
	idx, mem := fixture(t, []spec{{"w", dtype.F32, []int64{3000}}, {"h", dtype.BF16, []int64{5000}}, {"b", dtype.U8, []int64{13}}})
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, mem.data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx.Sources = []string{path}
	var tensorBytes uint64
	for _, tt := range idx.Tensors {
		tensorBytes += uint64(tt.Size)
	}
	for _, mode := range []backing.Mode{backing.Mmap, backing.Pread} {
		for _, noSplice := range []bool{false, true} {
			for _, dir := range []string{".safetensors", ".f16/.safetensors", ".f32/.safetensors"} {
				for _, order := range []string{"export only", "tensors, then export", "both at once"} {
					what := fmt.Sprintf("%v/nosplice=%v/%s/%s", mode, noSplice, dir, order)
					src, err := backing.Open(path, backing.Options{Mode: mode})
					if err != nil {
						t.Fatal(err)
					}
					if _, ok := src.(backing.CacheDropper); !ok {
						t.Fatalf("%s: a %v source cannot drop its cache", what, mode)
					}
					r := newRoot(t, idx, src, Options{NoSplice: noSplice})
					x, err := view.NewExport(idx, []backing.Source{mem}, exportDType(dir))
					if err != nil {
						t.Fatal(err)
					}
					wantBytes := make([]byte, x.Size())
					x.ReadAt(wantBytes, 0)
					// The tensor files, read before or while the export
					// is: their drops must not change a byte of it.
					want := tensorBytes
					var wg sync.WaitGroup
					if order != "export only" {
						want *= 2
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := range idx.Tensors {
								tt := &idx.Tensors[i]
								if got := readCounted(t, r, r.lookupPath(tt.Path), 1000); !bytes.Equal(got, mem.data[tt.Offset:tt.Offset+tt.Size]) {
									t.Errorf("%s: %s differs from the file", what, tt.Name)
								}
							}
						}()
						if order != "both at once" {
							wg.Wait()
						}
					}
					if got := readCounted(t, r, r.lookupPath(dir+"/model.safetensors"), 1000); !bytes.Equal(got, wantBytes) {
						t.Errorf("%s: the export's bytes differ from view.Export's", what)
					}
					wg.Wait()
					if got := r.cache.srcs[0].served[0].Load(); got != want {
						t.Errorf("%s: %d bytes counted as served, want %d", what, got, want)
					}
					if got, cov := r.cache.droppedBytes(), want; got != cov {
						t.Errorf("%s: %d bytes dropped, want %d (the chunk once per full read)", what, got, cov)
					}
					src.Close()
				}
			}
		}
	}
	src, err := backing.Open(path, backing.Options{Mode: backing.Pread})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r := newRoot(t, idx, src, Options{KeepBackingCache: true})
	readCounted(t, r, r.lookupPath(".safetensors/model.safetensors"), 1000)
	if r.cache != nil {
		t.Errorf("KeepBackingCache: counters made")
	}
}

// exportDType is the dtype of the export in directory dir of a tree
// in the stored dtypes.
func exportDType(dir string) dtype.DType {
	switch dir {
	case ".f16/.safetensors":
		return dtype.F16
	case ".f32/.safetensors":
		return dtype.F32
	}
	return dtype.Invalid
}

// TestExportReadNoAlloc checks that reads of the export, spliced and
// copied, with served bytes counted, allocate nothing but the reply.
func TestExportReadNoAlloc(t *testing.T) {
	idx, mem := fixture(t, []spec{{"w", dtype.BF16, []int64{1 << 16}}})
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, mem.data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx.Sources = []string{path}
	src, err := backing.Open(path, backing.Options{Mode: backing.Pread})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r := newRoot(t, idx, src, Options{})
	dest := make([]byte, 32<<10)
	for _, p := range []string{".safetensors/model.safetensors", ".f32/.safetensors/model.safetensors"} {
		e := r.lookupPath(p)
		off := e.file.size - int64(len(dest)) // inside the tensor: spliced, or converted
		if res, errno := r.read(e, dest, off); errno != 0 {
			t.Fatalf("%s: %v", p, errno)
		} else {
			res.Done() // builds the export
		}
		allocs := testing.AllocsPerRun(100, func() {
			res, _ := r.read(e, dest, off)
			res.Done()
		})
		// The race detector's sync.Pool drops a share of what is put
		// back, so a spliced reply is sometimes allocated anew.
		if allocs > 1 && !raceEnabled {
			t.Errorf("%s: %v allocations per read", p, allocs)
		}
	}
}

// TestTiledReadsCountServed: the reads of a tensor tiled from chunks of
// two files (a distributed checkpoint's) count as served on those files,
// so each file's chunk is dropped once the tensor has been read, as a
// stored tensor's would be; the bytes are the tensor's.
func TestTiledReadsCountServed(t *testing.T) {
	const half = cacheChunk // each file holds one 2 MiB chunk of the tensor
	var files []*dropSource
	var tiles []backing.Tile
	want := make([]byte, 0, 2*half)
	for i := range 2 {
		data := make([]byte, half)
		for j := range data {
			data[j] = byte(j*7 + i)
		}
		want = append(want, data...)
		f := &dropSource{memSource: &memSource{name: fmt.Sprint("f", i), data: data}}
		files = append(files, f)
		tiles = append(tiles, backing.Tile{Src: f, Start: []int64{int64(2 * i), 0}, Shape: []int64{2, half / 2}})
	}
	shape := []int64{4, half / 2}
	tl, err := backing.NewTiled("x:w", shape, 1, tiles)
	if err != nil {
		t.Fatal(err)
	}
	chunks := []index.Chunk{{Source: 0, Start: []int64{0, 0}, Shape: []int64{2, half / 2}}, {Source: 1, Start: []int64{2, 0}, Shape: []int64{2, half / 2}}}
	idx := &index.Index{Sources: []string{"f0", "f1", "x:w"},
		Members: []index.Member{{Source: 2, File: 0, Name: "w", Size: 2 * half, Kind: &index.Tiles{Shape: shape, ElemSize: 1, Chunks: chunks}}},
		Tensors: []index.Tensor{{Name: "w", Path: "w", DType: dtype.U8, Shape: shape, Size: 2 * half, Source: 2}}}
	r, err := NewRoot(idx, []backing.Source{files[0], files[1], tl}, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*node{}
	tensorFiles(r.lookupPath(""), "", nodes)
	e := nodes["/w"]
	if e == nil {
		t.Fatalf("no /w in %v", nodes)
	}
	if got := readCounted(t, r, e, 96<<10); !bytes.Equal(got, want) {
		t.Fatal("the tensor's bytes differ")
	}
	for i, f := range files {
		if len(f.drops) != 1 || f.drops[0] != [2]int64{0, cacheChunk} {
			t.Errorf("file %d: drops %v, want its chunk once", i, f.drops)
		}
	}
}
