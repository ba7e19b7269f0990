package dtype_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
)

// TestQuantIKTrellisFile parses testdata/ikllama2/seed44.gguf as tensorfs
// serves it: Q6_0 converts to every view dtype bit-exact to ik_llama.cpp's
// dequantize_row_q6_0 (whole and in ranges cut mid-block), and each _KT
// tensor is listed unserved, named, never served as its codes.
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
	if len(idx.Tensors) != 1 || idx.Tensors[0].DType != dtype.Q6_0 {
		t.Fatalf("tensors %+v, want the Q6_0 one only", idx.Tensors)
	}
	tn := idx.Tensors[0]
	n := int(tn.NumElements())
	ref := make([]float32, n) // Q6_0 is the file's first tensor
	for i := range ref {
		ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(refBytes[4*i:]))
	}
	ggmlRefTensor(t, tn.Name, tn.DType, b[tn.Offset:tn.Offset+tn.Size], ref, rand.New(rand.NewSource(133)))
	named := map[string]bool{}
	for _, u := range idx.Unserved {
		for _, typ := range []string{"IQ1_KT", "IQ2_KT", "IQ3_KT", "IQ4_KT"} {
			if u.Type == typ && strings.HasPrefix(u.Why, "ik_llama.cpp's "+typ+" (ggml type ") && strings.Contains(u.Name, strings.ToLower(typ)) {
				named[typ] = true
			}
		}
	}
	if len(named) != 4 || len(idx.Unserved) != 4 {
		t.Errorf("unserved %+v: want the four _KT tensors, named", idx.Unserved)
	}
}
