package view

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// groupFixture is one tensor of dtype/testdata/ikllama2/seed45r (a
// row-interleaved type, from ik_llama.cpp's own quantizer): its bytes and
// ik_llama.cpp's dequantization of them.
type groupFixture struct {
	name string
	dt   dtype.DType
	rows int64
	cols int64
	raw  []byte
	ref  []byte // float32, row-major
}

// groupFixtures reads the tensors of dtype/testdata/ikllama2/NAME (a
// seed*r fixture) in file order.
func groupFixtures(t *testing.T, name string) (string, []groupFixture) {
	t.Helper()
	base := filepath.Join("..", "dtype", "testdata", "ikllama2", name)
	file, err := os.ReadFile(base + ".gguf")
	if err != nil {
		t.Fatal(err)
	}
	refAll, err := os.ReadFile(base + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(base + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tensors []struct {
			Name, Type string
			Shape      []int64
			FileOffset int64 `json:"file_offset"`
			Bytes      int64
		}
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	var out []groupFixture
	pos := int64(0)
	for _, tn := range doc.Tensors {
		d, ok := dtype.ByName(tn.Type)
		if !ok || d.RowGroup() == 0 || len(tn.Shape) != 2 {
			t.Fatalf("%s: %s is %s, rows per group %d", tn.Name, tn.Type, d, d.RowGroup())
		}
		n := 4 * tn.Shape[0] * tn.Shape[1]
		out = append(out, groupFixture{name: tn.Name, dt: d, rows: tn.Shape[0], cols: tn.Shape[1],
			raw: file[tn.FileOffset : tn.FileOffset+tn.Bytes], ref: refAll[pos : pos+n]})
		pos += n
	}
	if pos != int64(len(refAll)) || len(out) == 0 {
		t.Fatalf("%s.json: %d of %d reference bytes", name, pos, len(refAll))
	}
	return base + ".gguf", out
}

// TestRowGroupViews: ik_llama.cpp's row-interleaved tensors (every
// dtype/testdata/ikllama2/seed*r fixture: seed45r has the first eight
// types) are served in every float view bit for bit as ik_llama.cpp's
// dequantize_row_*_r8/_r4 gives them (F64, F16, BF16 from those float32s)
// at any offset and length, split along either dim, as .npy, natively
// split only in whole groups of rows.
func TestRowGroupViews(t *testing.T) {
	names, err := filepath.Glob(filepath.Join("..", "dtype", "testdata", "ikllama2", "seed*r.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no seed*r fixtures: %v", err)
	}
	for _, js := range names {
		rowGroupViews(t, strings.TrimSuffix(filepath.Base(js), ".json"))
	}
}

func rowGroupViews(t *testing.T, name string) {
	path, fixtures := groupFixtures(t, name)
	idx, srcs, ok := loadSource(t, path)
	if !ok {
		t.Fatalf("%s refused", path)
	}
	if len(idx.Unserved) != 0 || len(idx.Tensors) != len(fixtures) {
		t.Fatalf("%d tensors, unserved %+v", len(idx.Tensors), idx.Unserved)
	}
	r := rand.New(rand.NewPCG(45, 8))
	for _, f := range fixtures {
		var tn *index.Tensor
		for i := range idx.Tensors {
			if idx.Tensors[i].Name == f.name {
				tn = &idx.Tensors[i]
			}
		}
		if tn == nil || tn.DType != f.dt {
			t.Fatalf("%s: %+v", f.name, tn)
		}
		src := srcs[tn.Source]
		for _, to := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
			want := rowMetaConvert(t, f.ref, to)
			rd, err := New(tn, src, to)
			if err != nil {
				t.Fatalf("%s as %s: %v", tn.Name, to, err)
			}
			sweep(t, tn.Name+" as "+to.String(), rd, want, r)
			es := to.ElemSize()
			for _, s := range []Split{{Dim: 0, Parts: 2, Part: 1}, {Dim: 0, Parts: 3, Part: 1}, {Dim: 1, Parts: 3, Part: 2}} {
				rd, err := NewSlice(tn, src, to, s)
				if err != nil {
					t.Fatalf("%s as %s part %v: %v", tn.Name, to, s, err)
				}
				var ws []byte
				if lo, hi := s.Bounds(tn.Shape[s.Dim]); s.Dim == 0 {
					ws = want[lo*f.cols*es : hi*f.cols*es]
				} else {
					ws = rowMetaColumns(want, f.cols, lo, hi, es)
				}
				quickCheck(t, tn.Name+" part", rd, ws, r)
			}
		}
		// Natively, whole groups of rows are their bytes; a part of a
		// group, or of the rows, is refused.
		g := f.dt.RowGroup()
		rd, err := NewSlice(tn, src, dtype.Invalid, Split{Dim: 0, Parts: int(f.rows / g), Part: int(f.rows/g) - 1})
		if err != nil {
			t.Fatalf("%s native last group: %v", tn.Name, err)
		}
		quickCheck(t, tn.Name+" native group", rd, f.raw[len(f.raw)-len(f.raw)/int(f.rows/g):], r)
		for _, s := range []Split{{Dim: 0, Parts: int(f.rows), Part: 1}, {Dim: 1, Parts: 2, Part: 0}} {
			if _, err := NewSlice(tn, src, dtype.Invalid, s); err == nil {
				t.Errorf("%s: native part %v served", tn.Name, s)
			}
		}
		npy, err := NewNPY(tn, src)
		if err != nil {
			t.Fatalf("%s .npy: %v", tn.Name, err)
		}
		b, err := io.ReadAll(io.NewSectionReader(npy, 0, npy.Size()))
		if err != nil || !bytes.HasSuffix(b, f.ref) || !bytes.Contains(b, []byte("'<f4'")) {
			t.Errorf("%s .npy: %d bytes, %v; not its float32s", tn.Name, len(b), err)
		}
		if dt, _, conv, rel := ExportForm(tn, dtype.Invalid); dt != dtype.F32 || conv != dtype.F32 || rel {
			t.Errorf("%s: exported as %s (converted to %s, relabeled %v)", tn.Name, dt, conv, rel)
		}
	}
}

// groupTensor is a tensor of f's type of groups of rows of blocks
// interleaved blocks each, every block a random one of f's (any group,
// any column), and its float32 reference: ik_llama.cpp's values of the
// block moved with it (an interleaved block converts on its own).
func groupTensor(f groupFixture, groups, blocks int64, r *rand.Rand) (raw, ref []byte, cols int64) {
	g, be := f.dt.RowGroup(), f.dt.Info().BlockElems
	ib := g * f.dt.Info().BlockBytes
	fBlocks, fGroups := f.cols/be, f.rows/g
	cols = blocks * be
	ref = make([]byte, 4*groups*g*cols)
	for k := int64(0); k < groups; k++ {
		for b := int64(0); b < blocks; b++ {
			fg, fb := r.Int64N(fGroups), r.Int64N(fBlocks)
			at := (fg*fBlocks + fb) * ib
			raw = append(raw, f.raw[at:at+ib]...)
			for row := int64(0); row < g; row++ {
				from := 4 * ((fg*g+row)*f.cols + fb*be)
				to := 4 * ((k*g+row)*cols + b*be)
				copy(ref[to:to+4*be], f.ref[from:from+4*be])
			}
		}
	}
	return raw, ref, cols
}

// TestRowGroupSteps: row-interleaved tensors of many groups to a source
// step, and of groups larger than a step, read at any offset and length
// (single bytes, cut groups, whole groups, across groups) as their groups
// converted by ik_llama.cpp's values; sizes that are not whole groups of
// rows are refused; reads allocate nothing.
func TestRowGroupSteps(t *testing.T) {
	_, fixtures := groupFixtures(t, "seed45r")
	byType := map[string]groupFixture{}
	for _, f := range fixtures {
		byType[f.dt.String()] = f
	}
	r := rand.New(rand.NewPCG(8, 45))
	for _, c := range []struct {
		typ            string
		groups, blocks int64
	}{
		{"Q4_0_R8", 40, 16},  // 2304-byte groups, 28 to a step
		{"Q8_0_R8", 3, 300},  // groups of 81600 bytes: more than a step
		{"IQ4_XS_R8", 2, 70}, // 76160
		{"Q4_K_R4", 50, 2},   // small R4 groups
		{"Q6_K_R4", 3, 100},  // 84000
		{"IQ3_K_R4", 5, 160}, // 70400
		{"IQ2_K_R4", 7, 3},   // odd counts
		{"IQ4_K_R4", 1, 1},   // one block of one group
	} {
		f, ok := byType[c.typ]
		if !ok {
			t.Fatalf("%s: not in seed45r", c.typ)
		}
		raw, ref, cols := groupTensor(f, c.groups, c.blocks, r)
		g := f.dt.RowGroup()
		tn := &index.Tensor{Name: "w", DType: f.dt, Shape: []int64{c.groups * g, cols}, Size: int64(len(raw))}
		src := &memSource{b: raw, name: "m"}
		for _, to := range []dtype.DType{dtype.F32, dtype.BF16} {
			want := rowMetaConvert(t, ref, to)
			rd, err := New(tn, src, to)
			if err != nil {
				t.Fatalf("%s: %v", c.typ, err)
			}
			what := c.typ + " as " + to.String()
			sweep(t, what, rd, want, r)
			groupOut := int64(len(want)) / c.groups
			rowOut := groupOut / g
			buf := make([]byte, len(want)+8)
			check := func(off, n int64) {
				t.Helper()
				n = min(n, int64(len(want))-off)
				if off < 0 || n <= 0 {
					return
				}
				p := buf[:n]
				if got, err := rd.ReadAt(p, off); int64(got) != n || (err != nil && err != io.EOF) || !bytes.Equal(p, want[off:off+n]) {
					t.Errorf("%s: ReadAt(%d at %d) = %d, %v: differs", what, n, off, got, err)
				}
			}
			for k := int64(0); k <= c.groups; k++ {
				at := k * groupOut
				check(at, groupOut)                    // a whole group
				check(at-3, groupOut+6)                // cut at both ends
				check(at-1, 2)                         // across two groups
				check(at+rowOut-5, 11)                 // across two rows of a group
				check(at+r.Int64N(groupOut), 1)        // one byte
				check(at+rowOut/2, 3*groupOut/2)       // mid-row to mid-row, a group between
				check(at+r.Int64N(rowOut), rowOut*g/2) // half a group, from mid-row
			}
			if !raceEnabled {
				p := make([]byte, 100000)
				if a := testing.AllocsPerRun(20, func() { rd.ReadAt(p, 3) }); a != 0 {
					t.Errorf("%s: %v allocations per read", what, a)
				}
			}
		}
		// rows that are not whole groups, and a size that is not the
		// rows', are refused in one line naming the type
		for _, bad := range []index.Tensor{
			{Name: "w", DType: f.dt, Shape: []int64{c.groups*g - 1, cols}, Size: int64(len(raw)) - int64(len(raw))/(c.groups*g)},
			{Name: "w", DType: f.dt, Shape: []int64{c.groups * g, cols}, Size: int64(len(raw)) - 1},
		} {
			if _, err := New(&bad, src, dtype.F32); err == nil || !strings.Contains(err.Error(), c.typ) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s %v of %d bytes: %v", c.typ, bad.Shape, bad.Size, err)
			}
		}
	}
}

// TestRowGroupMeets: the view's cut-group path converts only the blocks
// whose output meets the read (one block for one byte).
func TestRowGroupMeets(t *testing.T) {
	c := groupConverted{rows: 4, outBlock: 1024, rowBlocks: 8, rowOut: 8192, groupOut: 4 * 8192}
	n := 0
	for b := int64(0); b < c.rowBlocks; b++ {
		if c.meets(c.groupOut, b, c.groupOut+2*8192+3*1024+5, c.groupOut+2*8192+3*1024+6) {
			n++
			if b != 3 {
				t.Errorf("block %d meets a byte of block 3's output", b)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d blocks meet one byte", n)
	}
}

// memRaw is a raw representation over bytes in memory.
type memRaw []byte

func (m memRaw) readRaw(p []byte, off int64) error {
	copy(p, m[off:])
	return nil
}

// TestRowGroupHead: a row-interleaved type whose groups start with a head
// (the rows' scales: dtype.GroupMeta) is read at any offset and length,
// with the group's head handed to the converter beside any run of its
// blocks: groups many to a step, larger than a step, and cut by the
// read. The converter is a stand-in whose output depends on the head's
// byte of the row, the block's bytes for the row and the position.
func TestRowGroupHead(t *testing.T) {
	const rows, meta, bb, be, es = 4, 8, 4 * 10, 8, 4 // a block: 10 bytes a row, 8 elements of 4 bytes
	conv := func(dst []byte, stride int, head, src []byte) {
		if len(head) != meta || len(src)%bb != 0 {
			panic("stand-in converter: bad head or blocks")
		}
		for b := 0; b < len(src)/bb; b++ {
			for r := 0; r < rows; r++ {
				for e := 0; e < be*es; e++ {
					dst[r*stride+b*be*es+e] = head[2*r] ^ src[b*bb+10*r+e%10] ^ byte(e)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(16, 4))
	for _, c := range []struct{ groups, blocks int64 }{{50, 3}, {2, 2000}, {3, 1}} {
		groupBytes := meta + c.blocks*bb
		src := make([]byte, c.groups*groupBytes)
		fill(src, uint64(c.blocks))
		rowOut := c.blocks * be * es
		want := make([]byte, c.groups*rows*rowOut)
		for g := int64(0); g < c.groups; g++ {
			grp := src[g*groupBytes : (g+1)*groupBytes]
			conv(want[g*rows*rowOut:], int(rowOut), grp[:meta], grp[meta:])
		}
		gc := &groupConverted{src: memRaw(src), conv: conv, rows: rows, meta: meta, blockBytes: bb, outBlock: be * es,
			rowBlocks: c.blocks, rowOut: rowOut, groupBytes: groupBytes, groupOut: rows * rowOut, size: int64(len(want))}
		sweep(t, "head", &reader{raw: gc, size: gc.size}, want, r)
	}
}
