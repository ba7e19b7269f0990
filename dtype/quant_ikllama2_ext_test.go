package dtype_test

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestQuantIKTrellisFile parses testdata/ikllama2/seed44.gguf as tensorfs
// serves it: Q6_0 converts to every view dtype bit-exact to ik_llama.cpp's
// dequantize_row_q6_0 (whole and in ranges cut mid-block), and each _KT
// tensor is served with its rows' scales, bit-exact to ik_llama.cpp's
// dequantize_row_iqN_kt row by row and by runs of a row's blocks.
func TestQuantIKTrellisFile(t *testing.T) {
	b, ts, refs, unserved := ikFile(t, "seed44")
	if len(ts) != 5 || unserved != 0 {
		t.Fatalf("tensors %+v, %d unserved: want the Q6_0 one and the four _KT ones served", ts, unserved)
	}
	rng := rand.New(rand.NewSource(133))
	kt := map[string]bool{}
	for i, tn := range ts { // in file order, as the .f32ref
		ref := refs[i]
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
	if len(kt) != 4 {
		t.Errorf("_KT types checked %v", kt)
	}
}
