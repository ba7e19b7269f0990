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

// ikFile parses testdata/ikllama2/NAME.gguf as tensorfs serves it and
// returns its bytes, its served tensors in file order with each one's
// reference from NAME.f32ref (in the same order), and how many tensors
// it lists as unserved.
func ikFile(t *testing.T, name string) ([]byte, []index.Tensor, [][]float32, int) {
	t.Helper()
	path := filepath.Join("testdata", "ikllama2", name+".gguf")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refBytes, err := os.ReadFile(filepath.Join("testdata", "ikllama2", name+".f32ref"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := formats.ParseFile(ggmlRefFile{bytes.NewReader(b), path})
	if err != nil {
		t.Fatal(err)
	}
	ts := slices.Clone(idx.Tensors)
	slices.SortFunc(ts, func(a, b index.Tensor) int { return int(a.Offset - b.Offset) })
	var refs [][]float32
	pos := 0
	for _, tn := range ts {
		n := int(tn.NumElements())
		if 4*(pos+n) > len(refBytes) {
			t.Fatalf("%s: %s.f32ref ends at element %d", tn.Name, name, len(refBytes)/4)
		}
		ref := make([]float32, n)
		for i := range ref {
			ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(refBytes[4*(pos+i):]))
		}
		refs = append(refs, ref)
		pos += n
	}
	if 4*pos != len(refBytes) {
		t.Fatalf("%s: tensors hold %d of %d reference elements", name, pos, len(refBytes)/4)
	}
	return b, ts, refs, len(idx.Unserved)
}

// TestQuantIKBNFile parses testdata/ikllama2/seed47bn.gguf as tensorfs
// serves it: its IQ1_BN and IQ2_BN tensors are served with their rows'
// scales (RowMeta 2 and 4), bit-exact to ik_llama.cpp's t times the row's
// scale, row by row and by runs of a row's blocks.
func TestQuantIKBNFile(t *testing.T) {
	b, ts, refs, unserved := ikFile(t, "seed47bn")
	if len(ts) != 2 || unserved != 0 {
		t.Fatalf("tensors %+v, %d unserved: want both served", ts, unserved)
	}
	rng := rand.New(rand.NewSource(134))
	for i, want := range []dtype.DType{dtype.IQ1_BN, dtype.IQ2_BN} { // file order
		tn := ts[i]
		if tn.DType != want || tn.DType.RowMeta() != map[dtype.DType]int64{dtype.IQ1_BN: 2, dtype.IQ2_BN: 4}[want] {
			t.Fatalf("%s: %s (row meta %d), want %s", tn.Name, tn.DType, tn.DType.RowMeta(), want)
		}
		ikRowRefTensor(t, tn.Name, tn.DType, b[tn.Offset:tn.Offset+tn.Size], refs[i], int(tn.Shape[len(tn.Shape)-1]), rng)
	}
}
