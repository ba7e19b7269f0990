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

// TestIKRowScaled: through the Go API, opened directly, ik_llama.cpp's
// row-scaled tensors (a scale before each row's blocks;
// dtype/testdata/ikllama) read as float32 bit for bit as ik_llama.cpp
// dequantizes them (the .f32ref), a part of their columns in F32 too, and
// a part of their rows as stored is those rows' bytes, scales included.
func TestIKRowScaled(t *testing.T) {
	fixture := filepath.Join("..", "dtype", "testdata", "ikllama", "seed7.gguf")
	ref, err := os.ReadFile(fixture + ".f32ref")
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
		if ti.DType.RowMeta() == 0 {
			continue
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
		r, err := ck.OpenSlice(ti.Name, dtype.F32, Split{Dim: 1, Parts: 2, Part: 1})
		if err != nil {
			t.Fatalf("%s columns: %v", ti.Name, err)
		}
		b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
		r.Close()
		var wc []byte
		for i := int64(0); i < rows; i++ {
			wc = append(wc, want[4*(i*cols+cols/2):4*(i+1)*cols]...)
		}
		if err != nil || !bytes.Equal(b, wc) {
			t.Errorf("%s columns 1/2 in F32: %d bytes, %v; differ", ti.Name, len(b), err)
		}
		r, err = ck.OpenSlice(ti.Name, AsStored, Split{Dim: 0, Parts: int(rows), Part: 1})
		if err != nil {
			t.Fatalf("%s row 1 as stored: %v", ti.Name, err)
		}
		b, err = io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
		r.Close()
		row := ti.Size / rows
		if err != nil || !bytes.Equal(b, file[ti.Offset+row:ti.Offset+2*row]) {
			t.Errorf("%s row 1 as stored: %d bytes, %v; not the file's", ti.Name, len(b), err)
		}
		checked++
	}
	if checked != 12 || 4*pos != int64(len(ref)) {
		t.Fatalf("%d row-scaled tensors checked, %d of %d reference elements", checked, pos, len(ref)/4)
	}
}
