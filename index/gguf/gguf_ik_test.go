package gguf

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestIKLlamaTypes: ik_llama.cpp's block-local types (codes 137–141) are
// served as dtype's IQ2_K..IQ6_K; a tensor of one cut by the end of the
// file, or declared larger than the room before the next tensor, is
// refused in one line naming its type; its row-scaled types (IQ4_KS,
// IQ2_KS, IQ4_KSS, IQ5_KS, IQ3_KS, IQ2_KL) and _KT trellis types are
// served too, each row its scale (RowMeta) and its blocks, and the size
// checked as such; so are its BitNet types IQ1_BN and IQ2_BN (blocks of
// 64 after an fp16 or float32 row scale).
func TestIKLlamaTypes(t *testing.T) {
	f32 := ggufTI{name: "a", dims: []uint64{8}, typ: 0, offset: 0}
	for _, c := range []struct {
		code  uint32
		name  string
		bytes int // per 256 elements
	}{{137, "IQ2_K", 76}, {138, "IQ3_K", 110}, {139, "IQ4_K", 144}, {140, "IQ5_K", 176}, {141, "IQ6_K", 212}} {
		q := ggufTI{name: "q", dims: []uint64{512, 2}, typ: c.code, offset: 32}
		size := 4 * c.bytes
		pad := (size + 31) &^ 31
		idx, err := Parse(ggufFile("ik.gguf", (&ggufBuild{tensors: []ggufTI{f32, q}, data: make([]byte, 32+size)}).bytes()))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(idx.Tensors) != 2 || idx.Tensors[1].DType.String() != c.name || idx.Tensors[1].Size != int64(size) {
			t.Fatalf("%s: tensors %+v", c.name, idx.Tensors)
		}
		d, _ := dtype.ByGGML(c.code)
		if d.String() != c.name || d.Info().BlockBytes != int64(c.bytes) {
			t.Fatalf("code %d: %v %+v", c.code, d, d.Info())
		}
		for _, bad := range []struct {
			what string
			b    *ggufBuild
		}{
			{"truncated", &ggufBuild{tensors: []ggufTI{f32, q}, data: make([]byte, 32+size-1)}},
			{"larger than its room", &ggufBuild{tensors: []ggufTI{f32, q, {name: "z", dims: []uint64{8}, typ: 0, offset: uint64(32 + pad - 32)}}, data: make([]byte, 32+pad+32)}},
		} {
			_, err := Parse(ggufFile("ik.gguf", bad.b.bytes()))
			want := fmt.Sprintf("%s [2 512]", c.name)
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s %s: error %v, want one line naming %q", c.name, bad.what, err, want)
			}
		}
	}

	// The row-scaled types: rows of the row's scale (meta) and its blocks
	// (block: the bytes of 256 elements).
	for _, c := range []struct {
		code        uint32
		name        string
		meta, block int
	}{{134, "IQ1_BN", 2, 4 * 13}, {135, "IQ2_BN", 4, 4 * 16}, {144, "IQ4_KS", 4, 136}, {145, "IQ2_KS", 2, 70}, {146, "IQ4_KSS", 4, 128}, {152, "IQ5_KS", 4, 168}, {156, "IQ3_KS", 2, 102}, {157, "IQ2_KL", 2, 86},
		{158, "IQ1_KT", 4, 56}, {153, "IQ2_KT", 4, 68}, {154, "IQ3_KT", 4, 100}, {155, "IQ4_KT", 4, 128}} {
		size := 3 * (c.meta + 2*c.block) // 3 rows of 512
		r := ggufTI{name: "r", dims: []uint64{512, 3}, typ: c.code, offset: 32}
		idx, err := Parse(ggufFile("ik.gguf", (&ggufBuild{tensors: []ggufTI{f32, r}, data: make([]byte, 32+size)}).bytes()))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(idx.Tensors) != 2 || len(idx.Unserved) != 0 {
			t.Fatalf("%s: served %+v, unserved %+v", c.name, idx.Tensors, idx.Unserved)
		}
		if g := idx.Tensors[1]; g.DType.String() != c.name || g.Size != int64(size) || !slices.Equal(g.Shape, []int64{3, 512}) || g.DType.RowMeta() != int64(c.meta) {
			t.Fatalf("%s: tensor %+v", c.name, g)
		}
		// Blocks without the rows' scales are short by 3*meta bytes.
		_, err = Parse(ggufFile("ik.gguf", (&ggufBuild{tensors: []ggufTI{f32, r}, data: make([]byte, 32+size-1)}).bytes()))
		if want := fmt.Sprintf("%s [3 512]", c.name); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s truncated: error %v, want one line naming %q", c.name, err, want)
		}
		r.dims = []uint64{200, 3} // not whole blocks
		_, err = Parse(ggufFile("ik.gguf", (&ggufBuild{tensors: []ggufTI{f32, r}, data: make([]byte, 32+size)}).bytes()))
		d, _ := dtype.ByGGML(c.code)
		if want := fmt.Sprintf("block size %d", d.Info().BlockElems); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s rows of 200: error %v", c.name, err)
		}
	}
}
