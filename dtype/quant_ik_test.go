package dtype_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
)

// ikServed and ikRowScaled are the types of testdata/ikllama/seedN.gguf
// (ik_llama.cpp's quantizers, see the README there) by the name ikgen
// gives their tensors: the block-local ones with their dtype, the
// row-scaled ones with their dtype's name.
var (
	ikServed = map[string]dtype.DType{
		"iq2_k": dtype.IQ2_K, "iq3_k": dtype.IQ3_K, "iq4_k": dtype.IQ4_K, "iq5_k": dtype.IQ5_K, "iq6_k": dtype.IQ6_K,
	}
	ikRowScaled = map[string]string{
		"iq4_ks": "IQ4_KS", "iq2_ks": "IQ2_KS", "iq4_kss": "IQ4_KSS", "iq5_ks": "IQ5_KS", "iq3_ks": "IQ3_KS", "iq2_kl": "IQ2_KL",
	}
)

// TestQuantIKLlama checks IQ2_K..IQ6_K against ik_llama.cpp's own
// dequantize_row_*, bit for bit, as TestQuantGGMLRefExtra does for ggml's
// (F32, F64, F16, BF16; whole tensors and ranges cut mid-block), and the
// row-scaled types (served with a scale per row, dtype.RowMeta) row by
// row and by runs of blocks inside a row with that row's scale.
func TestQuantIKLlama(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "ikllama", "*.gguf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/ikllama/*.gguf (%v)", err)
	}
	covered := map[string]int{}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			refBytes, err := os.ReadFile(path + ".f32ref")
			if err != nil {
				t.Fatal(err)
			}
			ref := make([]float32, len(refBytes)/4)
			for i := range ref {
				ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(refBytes[4*i:]))
			}
			idx, err := formats.ParseFile(ggmlRefFile{bytes.NewReader(b), path})
			if err != nil {
				t.Fatal(err)
			}
			// Every tensor, served or not, in file order, as the .f32ref.
			type part struct {
				name  string
				off   int64
				n     int64
				dt    dtype.DType
				raw   []byte
				listA string // the unserved Type, "" for a served tensor
				why   string
			}
			var parts []part
			for _, tn := range idx.Tensors {
				parts = append(parts, part{tn.Name, tn.Offset, tn.NumElements(), tn.DType, b[tn.Offset : tn.Offset+tn.Size], "", ""})
			}
			for _, u := range idx.Unserved {
				n := int64(1)
				for _, d := range u.Shape {
					n *= d
				}
				parts = append(parts, part{u.Name, u.Offset, n, dtype.Invalid, nil, u.Type, u.Why})
			}
			sort.Slice(parts, func(i, j int) bool { return parts[i].off < parts[j].off })
			if len(parts) != 2*(len(ikServed)+len(ikRowScaled)) {
				t.Fatalf("%d tensors, want %d", len(parts), 2*(len(ikServed)+len(ikRowScaled)))
			}
			rng := rand.New(rand.NewSource(1))
			pos := 0
			for _, p := range parts {
				typ, _, _ := strings.Cut(p.name, ".")
				n := int(p.n)
				if pos+n > len(ref) {
					t.Fatalf("%s: .f32ref too short", p.name)
				}
				tref := ref[pos : pos+n]
				pos += n
				if want, ok := ikServed[typ]; ok {
					if p.dt != want {
						t.Fatalf("%s: dtype %v, want %v", p.name, p.dt, want)
					}
					ggmlRefTensor(t, p.name, p.dt, p.raw, tref, rng)
					covered[typ]++
					continue
				}
				if want, ok := ikRowScaled[typ]; !ok || p.dt.String() != want || p.dt.RowMeta() == 0 {
					t.Fatalf("%s: served as %v or listed as %q (%s), want %q served with its rows' scales", p.name, p.dt, p.listA, p.why, want)
				}
				cols := map[bool]int{true: 512, false: 2304}[strings.HasSuffix(p.name, ".a")]
				ikRowRefTensor(t, p.name, p.dt, p.raw, tref, cols, rng)
				covered[typ]++
			}
			if pos != len(ref) {
				t.Fatalf("tensors hold %d elements, .f32ref %d", pos, len(ref))
			}
		})
	}
	for typ := range ikServed {
		if covered[typ] == 0 {
			t.Errorf("%s: not checked against ik_llama.cpp", typ)
		}
	}
	for typ := range ikRowScaled {
		if covered[typ] == 0 {
			t.Errorf("%s: not in the fixtures", typ)
		}
	}
}

// ikRowRefTensor checks a tensor of a type with row meta, rows of cols
// elements, against ref (ik_llama.cpp's float32s) through its F32
// RowConverter: each whole row, and a random run of each row's blocks
// converted with the row's meta alone.
func ikRowRefTensor(t *testing.T, name string, dt dtype.DType, raw []byte, ref []float32, cols int, rng *rand.Rand) {
	t.Helper()
	conv, ok := dtype.RowConverterFor(dt, dtype.F32)
	if !ok {
		t.Fatalf("%s: no %s row converter", name, dt)
	}
	rowBytes, ok := dt.RowSize(int64(cols))
	if !ok || int64(len(raw)) != int64(len(ref)/cols)*rowBytes {
		t.Fatalf("%s: %d bytes for %d rows of %d", name, len(raw), len(ref)/cols, rowBytes)
	}
	meta, bb, be := int(dt.RowMeta()), int(dt.Info().BlockBytes), int(dt.Info().BlockElems)
	got := make([]byte, 4*cols)
	for r := 0; r < len(ref)/cols; r++ {
		row := raw[r*int(rowBytes) : (r+1)*int(rowBytes)]
		want := ref[r*cols : (r+1)*cols]
		conv(got, row[:meta], row[meta:])
		blocks := cols / be
		i := rng.Intn(blocks)
		j := i + 1 + rng.Intn(blocks-i)
		part := make([]byte, 4*be*(j-i))
		conv(part, row[:meta], row[meta+i*bb:meta+j*bb])
		for k := 0; k < cols; k++ {
			if g := binary.LittleEndian.Uint32(got[4*k:]); g != math.Float32bits(want[k]) {
				t.Fatalf("%s row %d element %d: %#08x, ik_llama.cpp %#08x", name, r, k, g, math.Float32bits(want[k]))
			}
		}
		if !bytes.Equal(part, got[4*be*i:4*be*j]) {
			t.Fatalf("%s row %d: blocks %d..%d alone differ from the whole row's", name, r, i, j)
		}
	}
}
