package gguf

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestGGUFIKTypes: ik_llama.cpp's Q6_0 is served; so are its
// row-interleaved (_R4, _R8) types that have a group dequantizer, each
// with its name, shape and the size of its whole groups of rows, and a
// tensor of one whose rows are not whole groups is listed with why; its
// _BN types and the other row-interleaved ones are listed, each named with
// why in one line, and the file's other tensors are served. (Its
// row-scaled and _KT types are served: TestIKLlamaTypes.)
func TestGGUFIKTypes(t *testing.T) {
	ik := map[uint32]string{134: "IQ1_BN", 135: "IQ2_BN", 206: "Q5_0_R4", 230: "BF16_R16", 397: "Q8_K_R16"}
	g := &ggufBuild{
		tensors: []ggufTI{
			{"a.weight", []uint64{4}, 0, 0},        // F32
			{"q.weight", []uint64{64, 2}, 133, 32}, // Q6_0: 2 rows of 2 blocks of 26 bytes
		},
		data: make([]byte, 32+104),
	}
	at := uint64(160)
	for code, name := range ik {
		if _, served := dtype.ByGGML(code); served {
			delete(ik, code)
			continue
		}
		g.tensors = append(g.tensors, ggufTI{"ik." + name, []uint64{256, 2}, code, at})
		at += 160
	}
	want := []string{"a.weight F32", "q.weight Q6_0"}
	sizes := map[string]int64{}
	groups := 0
	for _, d := range dtype.All() {
		rows := d.RowGroup()
		if rows == 0 {
			continue
		}
		groups++
		size, ok := d.GroupSize(256)
		if !ok {
			t.Fatalf("%s: no size for rows of 256", d)
		}
		code := uint64(d.Info().GGML)
		g.tensors = append(g.tensors, ggufTI{"r." + d.String(), []uint64{256, uint64(rows)}, uint32(code), at})
		want, sizes["r."+d.String()] = append(want, "r."+d.String()+" "+d.String()), size
		at += (uint64(size) + 31) &^ 31
		// rows that are not whole groups: listed, not served
		g.tensors = append(g.tensors, ggufTI{"odd." + d.String(), []uint64{256, uint64(rows + 1)}, uint32(code), at})
		ik[uint32(code)] = d.String()
		at += (uint64(size)*2 + 31) &^ 31
	}
	if groups < 8 {
		t.Fatalf("%d row-interleaved types served, want at least 8", groups)
	}
	g.data = make([]byte, at)
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
		if size, ok := sizes[tn.Name]; ok && (tn.Size != size || !slices.Equal(tn.Shape, []int64{tn.DType.RowGroup(), 256})) {
			t.Errorf("%s: size %d shape %v, want %d [%d 256]", tn.Name, tn.Size, tn.Shape, size, tn.DType.RowGroup())
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("tensors %v, want %v", got, want)
	}
	if len(idx.Unserved) != len(ik) {
		t.Fatalf("%d unserved, want %d: %+v", len(idx.Unserved), len(ik), idx.Unserved)
	}
	for _, u := range idx.Unserved {
		name := u.Name[strings.Index(u.Name, ".")+1:]
		if u.Type != name || !strings.HasPrefix(u.Why, "ik_llama.cpp's "+name+" (ggml type ") || strings.ContainsAny(u.Why, "\r\n") {
			t.Errorf("unserved %+v", u)
		}
		if d, ok := dtype.ByName(name); ok && d.RowGroup() != 0 {
			rows := d.RowGroup() + 1
			if !strings.Contains(u.Why, fmt.Sprintf("groups of %d; the tensor's %d rows are not whole groups", rows-1, rows)) || !slices.Equal(u.Shape, []int64{rows, 256}) {
				t.Errorf("unserved %+v: want its %d rows named as not whole groups", u, rows)
			}
		} else if !slices.Equal(u.Shape, []int64{2, 256}) {
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
		{"only Q8_K_R16", ggufOneTensor("t", []uint64{256, 16}, 397, 0, 8192), []string{"ik_llama.cpp's Q8_K_R16 (ggml type 397) interleaves its rows", "no other tensor to serve"}},
		{"only Q4_0_R8 of 6 rows", ggufOneTensor("t", []uint64{256, 6}, 202, 0, 864), []string{"tensor \"t\"", "ik_llama.cpp's Q4_0_R8 (ggml type 202) interleaves its rows in groups of 8; the tensor's 6 rows are not whole groups", "no other tensor to serve"}},
		{"Q4_0_R8 past end", ggufOneTensor("t", []uint64{256, 8}, 202, 0, 1151), []string{"1152 data bytes (Q4_0_R8 [8 256])", "past the end"}},
		{"IQ3_K_R4 overlaps", (&ggufBuild{tensors: []ggufTI{{"a", []uint64{256, 4}, 338, 0}, {"b", []uint64{4}, 0, 416}}, data: make([]byte, 448)}).bytes(), []string{"overlaps tensor \"a\"", "(IQ3_K_R4 [4 256]: 440 bytes)"}},
		{"IQ1_BN one byte short", ggufOneTensor("t", []uint64{256, 2}, 134, 0, 2*(2+4*13)-1), []string{"IQ1_BN [2 256]", "past the end"}},
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
