package hdf5

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

type memFile struct {
	*bytes.Reader
	name string
}

func (m memFile) Name() string { return m.name }

func mem(b []byte) memFile { return memFile{bytes.NewReader(b), "w.h5"} }

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testenv.Path(t, filepath.Join("formats2", name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nodes returns the offsets of the v1 B-tree nodes of type typ.
func nodes(b []byte, typ byte) []int {
	var out []int
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte("TREE"))
		if j < 0 {
			return out
		}
		if i+j+4 < len(b) && b[i+j+4] == typ {
			out = append(out, i+j)
		}
		i += j + 4
	}
}

// oneLine fails unless err is one line naming the file and saying want.
func oneLine(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "w.h5: HDF5: ") || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want one line with %q", what, err, want)
	}
}

// TestLoopingBTree: a group B-tree node, and a chunk B-tree node, that
// point back at themselves are one line each ("reached twice"), as is
// a group linked from inside itself; a node whose level does not
// descend too.
func TestLoopingBTree(t *testing.T) {
	for _, c := range []struct {
		file string
		typ  byte
	}{{"keras_mlp.weights.h5", 0}, {"keras_gzip.weights.h5", 1}} {
		b := fixture(t, c.file)
		ns := nodes(b, c.typ)
		if len(ns) == 0 {
			t.Fatalf("%s: no B-tree node of type %d", c.file, c.typ)
		}
		// Level 1, first child: the node itself.
		keySize := 8
		if c.typ == 1 {
			keySize = 8 + 8*3 // size, mask, and at least rank+1 offsets: found below
		}
		loop := bytes.Clone(b)
		n := ns[0]
		loop[n+5] = 1
		if c.typ == 0 {
			binary.LittleEndian.PutUint64(loop[n+24+keySize:], uint64(n))
		} else {
			// The first child follows the first key: find the chunk's
			// address as the first 8-byte value after the key that
			// points inside the file past the node.
			for p := n + 24 + 8; p+8 <= n+24+8+8*index.MaxDims; p += 8 {
				if v := binary.LittleEndian.Uint64(b[p:]); v > uint64(n) && v < uint64(len(b)) {
					binary.LittleEndian.PutUint64(loop[p:], uint64(n))
					break
				}
			}
		}
		_, err := Parse(mem(loop))
		oneLine(t, c.file+" loop", err, "reached twice (a loop)")
		// The same node one level up without pointing to itself: its
		// children are not at the level it says.
		deeper := bytes.Clone(b)
		deeper[n+5] = 2
		_, err = Parse(mem(deeper))
		if err == nil || !strings.HasPrefix(err.Error(), "w.h5: HDF5: ") {
			t.Errorf("%s: level 2: %v", c.file, err)
		}
	}
	// A group that links to the root: a cycle.
	b := fixture(t, "keras_mlp.weights.h5")
	r := &reader{f: mem(b), name: "w.h5", size: int64(len(b))}
	root, err := r.superblock(0)
	if err != nil {
		t.Fatal(err)
	}
	snod := bytes.LastIndex(b, []byte("SNOD"))
	cyc := bytes.Clone(b)
	binary.LittleEndian.PutUint64(cyc[snod+8+8:], root)
	_, err = Parse(mem(cyc))
	oneLine(t, "cycle", err, "reached twice (a cycle of groups?)")
}

// TestChunkBomb: a chunk whose gzip stream inflates far past the chunk
// is refused at its first byte over, in one line, without inflating the
// rest; a stored chunk far larger than its data is refused at load.
func TestChunkBomb(t *testing.T) {
	b := fixture(t, "keras_gzip.weights.h5")
	f := mem(b)
	idx, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var m *index.Member
	for i := range idx.Members {
		if idx.Members[i].Name == "layers/dense/vars/0" {
			m = &idx.Members[i]
		}
	}
	if m == nil {
		t.Fatal("no chunked layers/dense/vars/0")
	}
	var zb bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&zb, zlib.BestCompression)
	zw.Write(make([]byte, 16<<20)) // 16 MiB of zeros: 16 KB of gzip, for a chunk of 2948 bytes
	zw.Close()
	// Point the first chunk of layers/dense/vars/0 at the bomb,
	// appended to the file: its B-tree key holds the stored size, its
	// child the address.
	var p *plan
	for _, pl := range planOf(t, b) {
		if pl.shape[0] == 200 && pl.shape[1] == 33 && len(pl.filters) == 2 && p == nil {
			p = pl
		}
	}
	if p == nil {
		t.Fatal("no plan for a [200, 33] shuffled dataset")
	}
	ch := p.chunks[0]
	addr := binary.LittleEndian.AppendUint64(nil, uint64(ch.off))
	at := bytes.Index(b, addr)
	for at >= 0 && binary.LittleEndian.Uint32(b[at-8-8*3:]) != uint32(ch.size) {
		next := bytes.Index(b[at+1:], addr)
		if next < 0 {
			at = -1
			break
		}
		at += 1 + next
	}
	if at < 0 {
		t.Fatal("cannot find the chunk's B-tree entry")
	}
	key := at - 8 - 8*3 // size, mask, three offsets (rank 2 + the element dimension)
	bomb := append(bytes.Clone(b), zb.Bytes()...)
	binary.LittleEndian.PutUint32(bomb[key:], uint32(zb.Len()))
	binary.LittleEndian.PutUint64(bomb[at:], uint64(len(b)))
	_, err = Parse(mem(bomb))
	oneLine(t, "stored chunk larger than its data", err, "a stored chunk of")

	// A bomb that fits the stored-size check: 4 MiB of zeros in 4 KB.
	zb.Reset()
	zw, _ = zlib.NewWriterLevel(&zb, zlib.BestCompression)
	zw.Write(make([]byte, 4<<20))
	zw.Close()
	if zb.Len() > int(2*p.elem*p.chunk[0]*p.chunk[1]+4096) {
		t.Fatalf("the small bomb is %d bytes", zb.Len())
	}
	bomb = append(bytes.Clone(b), zb.Bytes()...)
	binary.LittleEndian.PutUint32(bomb[key:], uint32(zb.Len()))
	binary.LittleEndian.PutUint64(bomb[at:], uint64(len(b)))
	bf := mem(bomb)
	idx, err = Parse(bf)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range idx.Members {
		if m.Name != "layers/dense/vars/0" {
			continue
		}
		var out bytes.Buffer
		err := m.Kind.(*index.Decoded).Decode(&out, bf)
		if err == nil || !strings.Contains(err.Error(), "inflates to more than its") || strings.Contains(err.Error(), "\n") {
			t.Errorf("bomb: %v", err)
		}
		if out.Len() > 0 {
			t.Errorf("bomb: %d bytes written before the bad chunk was found", out.Len())
		}
	}
}

// planOf parses b and returns its chunked datasets' plans.
func planOf(t *testing.T, b []byte) []*plan {
	t.Helper()
	r := &reader{f: mem(b), name: "w.h5", size: int64(len(b))}
	root, err := r.superblock(0)
	if err != nil {
		t.Fatal(err)
	}
	w := &walker{r: r, idx: &index.Index{}, groups: map[int64]bool{}}
	if err := w.group(root, "", 0); err != nil {
		t.Fatal(err)
	}
	return w.plans
}

// TestUnshuffle: HDF5's shuffle undone, a tail of part of an element
// kept.
func TestUnshuffle(t *testing.T) {
	src := []byte{1, 4, 7, 2, 5, 8, 3, 6, 9, 0xaa}
	dst := make([]byte, len(src))
	unshuffle(dst, src, 3)
	if want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 0xaa}; !bytes.Equal(dst, want) {
		t.Errorf("% x, want % x", dst, want)
	}
}

// FuzzHDF5: any bytes parse or fail with one line, within the caps
// (dense groups' heaps and B-trees, chunk indexes); a parsed file's
// contiguous tensors lie inside it and its chunked ones decode to their
// size or fail with one line.
func FuzzHDF5(f *testing.F) {
	f.Add([]byte(Magic + "\x00\x00\x00\x00\x00\x08\x08\x00"))
	if b, err := os.ReadFile("../../formats/testdata/others/bank_churn/model.weights.h5"); err == nil {
		f.Add(b) // a Keras 3 file from a public repository (formats/testdata/others/MANIFEST)
	} else {
		f.Fatal(err)
	}
	for _, c := range []string{"dense.h5", "chunks.h5", "chunks114.h5", "eapaged.h5"} {
		f.Add(gunzipFixture(f, c)) // libver='latest': dense groups, layout-4 and -5 chunk indexes (testdata/gen.py)
	}
	if d := os.Getenv("TENSORFS_TESTDATA"); d != "" {
		for _, c := range []string{"keras_mlp.weights.h5", "keras_gzip.weights.h5"} {
			if b, err := os.ReadFile(filepath.Join(d, "formats2", c)); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file := memFile{bytes.NewReader(b), "w.h5"}
		idx, err := Parse(file)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("two lines: %v", err)
			}
			return
		}
		for _, tn := range idx.Tensors {
			if m := idx.Member(tn.Source); m != nil {
				var out bytes.Buffer
				if err := m.Kind.(*index.Decoded).Decode(&out, file); err == nil && int64(out.Len()) != m.Size {
					t.Fatalf("%s: decoded %d of %d", tn.Name, out.Len(), m.Size)
				} else if err != nil && strings.Contains(err.Error(), "\n") {
					t.Fatalf("two lines: %v", err)
				}
				continue
			}
			if err := index.CheckTensor(&tn, "w.h5", int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// budgetTarget is an index.DecodeTarget over a buffer of the member's
// size, with a budget of working memory; it records what it was asked.
type budgetTarget struct {
	b       []byte
	budget  int64
	scratch int64
	writes  int // Write calls (a decoder given a target uses WriteAt)
	at      int64
}

func (w *budgetTarget) Write(p []byte) (int, error) { w.writes++; return len(p), nil }

func (w *budgetTarget) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(w.b)) {
		return 0, fmt.Errorf("WriteAt(%d bytes at %d) past %d", len(p), off, len(w.b))
	}
	w.at += int64(len(p))
	return copy(w.b[off:], p), nil
}

func (w *budgetTarget) Scratch(n int64) ([]byte, error) {
	if w.scratch+n > w.budget {
		return nil, fmt.Errorf("%d bytes of scratch, over the budget of %d", w.scratch+n, w.budget)
	}
	w.scratch += n
	return make([]byte, n), nil
}

// TestDecodeWithinBudget: a chunked dataset decoded for the cache of
// decoded members (an index.DecodeTarget) puts its chunks in place with
// WriteAt, from two chunk buffers taken from the budget, and holds no
// row of chunks of its own (issue 41: a 261 KB file of four 64 MiB gzip
// chunks peaked at 355 MiB with --inflate-mem 16MiB); its bytes are
// those of the plain decoding; a budget short of the two buffers is an
// error before anything is written.
func TestDecodeWithinBudget(t *testing.T) {
	for _, name := range []string{"chunks.h5", "chunks114.h5"} {
		b := gunzipFixture(t, name)
		file := mem(b)
		idx, err := Parse(file)
		if err != nil {
			t.Fatal(err)
		}
		decoded := 0
		for _, m := range idx.Members {
			k, ok := m.Kind.(*index.Decoded)
			if !ok {
				continue
			}
			decoded++
			var plain bytes.Buffer
			if err := k.Decode(&plain, file); err != nil {
				t.Fatalf("%s %s: %v", name, m.Name, err)
			}
			tg := &budgetTarget{b: make([]byte, m.Size), budget: 1 << 40}
			if err := k.Decode(tg, file); err != nil {
				t.Fatalf("%s %s: %v", name, m.Name, err)
			}
			if !bytes.Equal(tg.b, plain.Bytes()) || tg.at != m.Size || tg.writes != 0 || tg.scratch == 0 || tg.scratch > 2*MaxChunkBytes {
				t.Fatalf("%s %s: equal %v, %d of %d bytes written at their offsets, %d Write calls, %d bytes of scratch", name, m.Name, bytes.Equal(tg.b, plain.Bytes()), tg.at, m.Size, tg.writes, tg.scratch)
			}
			short := &budgetTarget{b: make([]byte, m.Size), budget: tg.scratch - 1}
			err := k.Decode(short, file)
			if err == nil || !strings.Contains(err.Error(), "over the budget") || short.at != 0 || short.writes != 0 {
				t.Fatalf("%s %s: with a budget of %d: %v, %d bytes written", name, m.Name, short.budget, err, short.at)
			}
		}
		if decoded == 0 {
			t.Fatalf("%s: no decoded dataset", name)
		}
	}
}

// countTarget is an index.DecodeTarget that keeps nothing: it counts
// the bytes written at their offsets and the working memory taken.
type countTarget struct {
	size, budget, scratch, at int64
	writes                    int
}

func (w *countTarget) Write(p []byte) (int, error) { w.writes++; return len(p), nil }

func (w *countTarget) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > w.size {
		return 0, fmt.Errorf("WriteAt(%d bytes at %d) past %d", len(p), off, w.size)
	}
	w.at += int64(len(p))
	return len(p), nil
}

func (w *countTarget) Scratch(n int64) ([]byte, error) {
	if w.scratch+n > w.budget {
		return nil, fmt.Errorf("%d bytes of scratch, over the budget of %d", w.scratch+n, w.budget)
	}
	w.scratch += n
	return make([]byte, n), nil
}

// TestChunkBombBudget: issue 41's file, a [4096, 16384] F32 dataset in
// four [4096, 4096] gzip chunks of zeros (64 MiB each, 261 KB stored),
// decoded for the cache: within a budget of 16 MiB it is refused before
// any chunk is inflated (on 8665b93 it held a 256 MiB row of chunks and
// two 64 MiB chunk buffers outside any budget: 335 MiB peak); within 256
// MiB its one chunk buffer (no shuffling) is the budget's and the 256
// MiB are written in place.
func TestChunkBombBudget(t *testing.T) {
	var zb bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&zb, zlib.BestCompression)
	zw.Write(make([]byte, 64<<20))
	zw.Close()
	var file []byte
	p := &plan{shape: []int64{4096, 16384}, chunk: []int64{4096, 4096}, elem: 4, filters: []filter{{id: filterDeflate}}}
	for i := int64(0); i < 4; i++ {
		p.chunks = append(p.chunks, chunk{start: []int64{0, i * 4096}, off: int64(len(file)), size: int64(zb.Len())})
		file = append(file, zb.Bytes()...)
	}
	small := &countTarget{size: 256 << 20, budget: 16 << 20}
	err := p.decode(small, bytes.NewReader(file))
	if err == nil || !strings.Contains(err.Error(), "over the budget") || small.at != 0 || small.writes != 0 {
		t.Fatalf("budget 16 MiB: %v; %d bytes written, %d Write calls", err, small.at, small.writes)
	}
	big := &countTarget{size: 256 << 20, budget: 256 << 20}
	if err := p.decode(big, bytes.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	if big.at != 256<<20 || big.writes != 0 || big.scratch != 64<<20 {
		t.Fatalf("budget 256 MiB: %d bytes written at their offsets, %d Write calls, %d bytes of scratch", big.at, big.writes, big.scratch)
	}
}
