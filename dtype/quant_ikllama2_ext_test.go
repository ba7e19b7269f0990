package dtype_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
)

// TestQuantIKTrellisFile parses testdata/ikllama2/seed44.gguf as tensorfs
// serves it: Q6_0 converts to every view dtype bit-exact to ik_llama.cpp's
// dequantize_row_q6_0 (whole and in ranges cut mid-block), and each _KT
// tensor is served with its rows' scales, bit-exact to ik_llama.cpp's
// dequantize_row_iqN_kt row by row and by runs of a row's blocks.
func TestQuantIKTrellisFile(t *testing.T) {
	path := filepath.Join("testdata", "ikllama2", "seed44.gguf")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refBytes, err := os.ReadFile(strings.TrimSuffix(path, ".gguf") + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := formats.ParseFile(ggmlRefFile{bytes.NewReader(b), path})
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Tensors) != 5 || len(idx.Unserved) != 0 {
		t.Fatalf("tensors %+v, unserved %+v: want the Q6_0 one and the four _KT ones served", idx.Tensors, idx.Unserved)
	}
	ts := slices.Clone(idx.Tensors)
	slices.SortFunc(ts, func(a, b index.Tensor) int { return int(a.Offset - b.Offset) })
	rng := rand.New(rand.NewSource(133))
	pos, kt := 0, map[string]bool{}
	for _, tn := range ts { // in file order, as the .f32ref
		n := int(tn.NumElements())
		ref := make([]float32, n)
		for i := range ref {
			ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(refBytes[4*(pos+i):]))
		}
		pos += n
		raw := b[tn.Offset : tn.Offset+tn.Size]
		if tn.DType == dtype.Q6_0 {
			ggmlRefTensor(t, tn.Name, tn.DType, raw, ref, rng)
			continue
		}
		if tn.DType.RowMeta() != 4 || !strings.Contains(tn.Name, strings.ToLower(tn.DType.String())) {
			t.Fatalf("%s: %s, row meta %d", tn.Name, tn.DType, tn.DType.RowMeta())
		}
		ikRowRefTensor(t, tn.Name, tn.DType, raw, ref, int(tn.Shape[len(tn.Shape)-1]), rng)
		kt[tn.DType.String()] = true
	}
	if len(kt) != 4 || 4*pos != len(refBytes) {
		t.Errorf("_KT types checked %v; %d of %d reference elements", kt, pos, len(refBytes)/4)
	}
}
