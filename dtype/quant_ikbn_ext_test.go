package dtype_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
)

// TestQuantIKBNFile parses testdata/ikllama2/seed47bn.gguf as tensorfs
// serves it: its IQ1_BN and IQ2_BN tensors are served with their rows'
// scales (RowMeta 2 and 4), bit-exact to ik_llama.cpp's t times the row's
// scale, row by row and by runs of a row's blocks.
func TestQuantIKBNFile(t *testing.T) {
	path := filepath.Join("testdata", "ikllama2", "seed47bn.gguf")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refBytes, err := os.ReadFile(filepath.Join("testdata", "ikllama2", "seed47bn.f32ref"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := formats.ParseFile(ggmlRefFile{bytes.NewReader(b), path})
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Tensors) != 2 || len(idx.Unserved) != 0 {
		t.Fatalf("tensors %+v, unserved %+v: want both served", idx.Tensors, idx.Unserved)
	}
	ts := slices.Clone(idx.Tensors)
	slices.SortFunc(ts, func(a, b index.Tensor) int { return int(a.Offset - b.Offset) })
	rng := rand.New(rand.NewSource(134))
	pos := 0
	for i, want := range []dtype.DType{dtype.IQ1_BN, dtype.IQ2_BN} { // file order, as the .f32ref
		tn := ts[i]
		if tn.DType != want || tn.DType.RowMeta() != map[dtype.DType]int64{dtype.IQ1_BN: 2, dtype.IQ2_BN: 4}[want] {
			t.Fatalf("%s: %s (row meta %d), want %s", tn.Name, tn.DType, tn.DType.RowMeta(), want)
		}
		n := int(tn.NumElements())
		ref := make([]float32, n)
		for i := range ref {
			ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(refBytes[4*(pos+i):]))
		}
		pos += n
		ikRowRefTensor(t, tn.Name, tn.DType, b[tn.Offset:tn.Offset+tn.Size], ref, int(tn.Shape[len(tn.Shape)-1]), rng)
	}
	if 4*pos != len(refBytes) {
		t.Errorf("%d of %d reference elements", pos, len(refBytes)/4)
	}
}
