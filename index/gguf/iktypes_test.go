package gguf

import (
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestGGUFIKTypes: ik_llama.cpp's Q6_0 is served; its row-interleaved
// (_R4, _R8) types are listed, each named with why in one line, and the
// file's other tensors are served. (Its row-scaled, _KT and _BN types are
// served: TestIKLlamaTypes.)
func TestGGUFIKTypes(t *testing.T) {
	ik := map[uint32]string{
		202: "Q4_0_R8", 208: "Q8_0_R8", 212: "Q4_K_R4", 214: "Q6_K_R4", 223: "IQ4_XS_R8", 339: "IQ4_K_R4"}
	g := &ggufBuild{
		tensors: []ggufTI{
			{"a.weight", []uint64{4}, 0, 0},        // F32
			{"q.weight", []uint64{64, 2}, 133, 32}, // Q6_0: 2 rows of 2 blocks of 26 bytes
		},
		data: make([]byte, 32+104),
	}
	for code, name := range ik {
		g.tensors = append(g.tensors, ggufTI{"ik." + name, []uint64{256, 2}, code, 160})
	}
	idx, err := Parse(ggufFile("ik.gguf", g.bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tn := range idx.Tensors {
		got = append(got, tn.Name+" "+tn.DType.String())
		if tn.Name == "q.weight" && (tn.Size != 104 || !slices.Equal(tn.Shape, []int64{2, 64})) {
			t.Errorf("Q6_0 tensor: size %d shape %v, want 104 [2 64]", tn.Size, tn.Shape)
		}
	}
	if want := []string{"a.weight F32", "q.weight Q6_0"}; !slices.Equal(got, want) {
		t.Fatalf("tensors %v, want %v", got, want)
	}
	if len(idx.Unserved) != len(ik) {
		t.Fatalf("%d unserved, want %d: %+v", len(idx.Unserved), len(ik), idx.Unserved)
	}
	for _, u := range idx.Unserved {
		name := strings.TrimPrefix(u.Name, "ik.")
		if u.Type != name || !strings.HasPrefix(u.Why, "ik_llama.cpp's "+name+" (ggml type ") ||
			strings.ContainsAny(u.Why, "\r\n") || !slices.Equal(u.Shape, []int64{2, 256}) {
			t.Errorf("unserved %+v", u)
		}
	}
}

// TestGGUFIKTypesRefused: a file of only an ik_llama.cpp type tensorfs does
// not serve, and Q6_0 tensors whose data does not fit their shape, are
// refused in one line naming the type.
func TestGGUFIKTypesRefused(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want []string
	}{
		{"IQ1_BN one byte short", ggufOneTensor("t", []uint64{256, 2}, 134, 0, 2*(2+4*13)-1), []string{"IQ1_BN [2 256]", "past the end"}},
		{"only Q4_0_R8", ggufOneTensor("t", []uint64{256, 8}, 202, 0, 1152), []string{"ik_llama.cpp's Q4_0_R8 (ggml type 202) interleaves its rows", "no other tensor to serve"}},
		{"Q6_0 row not whole blocks", ggufOneTensor("t", []uint64{48, 2}, 133, 0, 128), []string{"innermost dimension 48 is not a multiple of the Q6_0 block size 32"}},
		{"Q6_0 past end", ggufOneTensor("t", []uint64{64}, 133, 0, 40), []string{"52 data bytes (Q6_0 [64])", "past the end"}},
		{"Q6_0 overlaps", (&ggufBuild{tensors: []ggufTI{{"a", []uint64{64}, 133, 0}, {"b", []uint64{4}, 0, 32}}, data: make([]byte, 64)}).bytes(), []string{"overlaps tensor \"a\"", "(Q6_0 [64]: 52 bytes)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(ggufFile("bad.gguf", tc.b))
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\r\n") || !strings.HasPrefix(msg, "bad.gguf: gguf: ") {
				t.Fatalf("not one line naming the file: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
		})
	}
	if _, ok := dtype.ByGGML(133); !ok {
		t.Fatal("Q6_0 not in the dtype table")
	}
}
