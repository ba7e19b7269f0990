package client

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestIKRepacked: through the Go API, opened directly, ik_llama.cpp's
// row-interleaved tensors (a block holds 8 or 4 rows;
// dtype/testdata/ikllama2/seed45r) read as float32 bit for bit as
// ik_llama.cpp's dequantize_row_*_r8/_r4 gives them (the .f32ref), a part
// of their columns in F32 too; as stored, a part of whole groups of rows
// is those groups' bytes, and a part that is not whole groups is refused.
func TestIKRepacked(t *testing.T) {
	fixture := filepath.Join("..", "dtype", "testdata", "ikllama2", "seed45r.gguf")
	ref, err := os.ReadFile(fixture[:len(fixture)-len(".gguf")] + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if us := ck.Unserved(); len(us) != 0 {
		t.Fatalf("unserved: %+v", us)
	}
	ts := ck.Tensors()
	slices.SortFunc(ts, func(a, b TensorInfo) int { return int(a.Offset - b.Offset) })
	pos, checked := int64(0), 0
	for _, ti := range ts {
		n := ti.NumElements()
		want := ref[4*pos : 4*(pos+n)]
		pos += n
		g := ti.DType.RowGroup()
		if g == 0 {
			t.Fatalf("%s: %s is not row-interleaved", ti.Name, ti.DType)
		}
		got, err := ck.ReadFloat32(ti.Name)
		if err != nil || len(got) != int(n) {
			t.Fatalf("%s: %d values, %v", ti.Name, len(got), err)
		}
		for i, v := range got {
			if math.Float32bits(v) != binary.LittleEndian.Uint32(want[4*i:]) {
				t.Fatalf("%s element %d: %v, ik_llama.cpp %v", ti.Name, i, v, math.Float32frombits(binary.LittleEndian.Uint32(want[4*i:])))
			}
		}
		rows, cols := ti.Shape[0], ti.Shape[1]
		r, err := ck.OpenSlice(ti.Name, dtype.F32, Split{Dim: 1, Parts: 3, Part: 1})
		if err != nil {
			t.Fatalf("%s columns: %v", ti.Name, err)
		}
		b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
		r.Close()
		lo, hi := Split{Dim: 1, Parts: 3, Part: 1}.Bounds(cols)
		var wc []byte
		for i := int64(0); i < rows; i++ {
			wc = append(wc, want[4*(i*cols+lo):4*(i*cols+hi)]...)
		}
		if err != nil || !bytes.Equal(b, wc) {
			t.Errorf("%s columns 1/3 in F32: %d bytes, %v; differ", ti.Name, len(b), err)
		}
		groups := int(rows / g)
		r, err = ck.OpenSlice(ti.Name, AsStored, Split{Dim: 0, Parts: groups, Part: groups - 1})
		if err != nil {
			t.Fatalf("%s last group as stored: %v", ti.Name, err)
		}
		b, err = io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
		r.Close()
		group := ti.Size / int64(groups)
		if err != nil || !bytes.Equal(b, file[ti.Offset+ti.Size-group:ti.Offset+ti.Size]) {
			t.Errorf("%s last group as stored: %d bytes, %v; not the file's", ti.Name, len(b), err)
		}
		if r, err := ck.OpenSlice(ti.Name, AsStored, Split{Dim: 0, Parts: int(rows), Part: 1}); err == nil {
			r.Close()
			t.Errorf("%s: row 1 of a group served as stored", ti.Name)
		}
		checked++
	}
	if checked != 8 || 4*pos != int64(len(ref)) {
		t.Fatalf("%d row-interleaved tensors checked, %d of %d reference elements", checked, pos, len(ref)/4)
	}
}
