package dtype

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// ggmlTypesDoc is the NAME.json that gen_ggml_types.py writes beside
// NAME.gguf and NAME.f32ref (../shared/tools/gen_ggml_types.py).
type ggmlTypesDoc struct {
	Writer struct {
		Seed int `json:"seed"`
	} `json:"writer"`
	Tensors []struct {
		Name         string  `json:"name"`
		Type         string  `json:"type"`
		Code         uint32  `json:"code"`
		Shape        []int64 `json:"shape"`
		Bytes        int64   `json:"bytes"`
		SHA256Blocks string  `json:"sha256_blocks"`
		SHA256F32    string  `json:"sha256_f32"`
	} `json:"tensors"`
}

// ggmlToFloatTypes are the quantized types ggml's type traits give a
// to_float for: all of them must be in every gen_ggml_types.py file and
// match it bit for bit. (Q8_1 has none in ggml; Q8_K keeps its own.)
var ggmlToFloatTypes = []DType{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
	IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0}

// ggmlTypesFiles lists the gen_ggml_types.py outputs to check: the shared
// file (seed 4099, 3 rows) and the small ones kept in testdata/ggmltypes
// (other seeds and row counts, made the same way in a Debian sid chroot).
func ggmlTypesFiles(t *testing.T) []string {
	t.Helper()
	local, err := filepath.Glob(filepath.Join("testdata", "ggmltypes", "*.gguf"))
	if err != nil || len(local) == 0 {
		t.Fatalf("no testdata/ggmltypes/*.gguf (%v)", err)
	}
	shared := filepath.Join(testenv.Path(t, "gguf/types"), "types.gguf")
	if _, err := os.Stat(shared); err != nil {
		testenv.SkipOrFail(t, "no "+shared)
		return local
	}
	return append([]string{shared}, local...)
}

// TestQuantGGMLTypes checks every ggml type against ggml's own to_float
// (libggml0), bit for bit, on files of one tensor per type made by ggml's
// own quantizer: the blocks are the ones the .json names (sha256), and the
// dequantized float32s equal the .f32ref, whose sha256 the .json also gives.
func TestQuantGGMLTypes(t *testing.T) {
	for _, path := range ggmlTypesFiles(t) {
		base := path[:len(path)-len(".gguf")]
		t.Run(filepath.Base(base), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := os.ReadFile(base + ".f32ref")
			if err != nil {
				t.Fatal(err)
			}
			js, err := os.ReadFile(base + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var doc ggmlTypesDoc
			if err := json.Unmarshal(js, &doc); err != nil {
				t.Fatal(err)
			}
			ts := quantWalkGGUF(t, b)
			if len(ts) != len(doc.Tensors) {
				t.Fatalf("%d tensors in the file, %d in the .json", len(ts), len(doc.Tensors))
			}
			covered := map[DType]bool{}
			pos := 0 // in ref, bytes
			for i, rt := range ts {
				want := doc.Tensors[i]
				d := quantFromGGML(t, rt.ggml)
				if rt.name != want.Name || rt.ggml != want.Code || d.String() != want.Type {
					t.Fatalf("tensor %d: %s (%s, code %d), .json says %s (%s, code %d)", i, rt.name, d, rt.ggml, want.Name, want.Type, want.Code)
				}
				size, ok := d.ByteSize(rt.elems)
				if !ok || size != want.Bytes {
					t.Fatalf("%s: %d elements of %s are %d bytes (ok %v), .json says %d", rt.name, rt.elems, d, size, ok, want.Bytes)
				}
				raw := b[rt.offset : rt.offset+size]
				if h := sha256.Sum256(raw); hex.EncodeToString(h[:]) != want.SHA256Blocks {
					t.Fatalf("%s: blocks differ from the .json's sha256", rt.name)
				}
				n := int(rt.elems)
				wantF := ref[pos : pos+4*n]
				pos += 4 * n
				if h := sha256.Sum256(wantF); hex.EncodeToString(h[:]) != want.SHA256F32 {
					t.Fatalf("%s: .f32ref part differs from the .json's sha256", rt.name)
				}
				deq, ok := quantDequantizer(d)
				if !ok {
					t.Errorf("%s: no dequantizer for %s", rt.name, d)
					continue
				}
				for _, accel := range []bool{false, true} { // the plain loops, then the vector path where there is one
					setAccel(t, accel)
					f := make([]float32, n)
					deq(f, raw)
					bad := 0
					for j, v := range f {
						g, w := math.Float32bits(v), binary.LittleEndian.Uint32(wantF[4*j:])
						if g != w {
							if bad < 4 {
								t.Errorf("%s (accel %v): element %d: got %#08x (%g), ggml %#08x (%g)", d, accel, j, g, v, w, math.Float32frombits(w))
							}
							bad++
						}
					}
					if bad > 0 {
						t.Errorf("%s (accel %v): %d of %d elements differ", d, accel, bad, n)
					}
				}
				covered[d] = true
			}
			if pos != len(ref) {
				t.Fatalf(".f32ref has %d bytes, the tensors %d", len(ref), pos)
			}
			for _, d := range ggmlToFloatTypes {
				if !covered[d] {
					t.Errorf("%s: not in the file", d)
				}
			}
		})
	}
}

// TestQuantAccelSame: the vector path gives the plain loops' bits on every
// type, on random blocks whose scales are anything (NaN, Inf, subnormal
// included), whole and over tails of fewer blocks than one batch.
func TestQuantAccelSame(t *testing.T) {
	if !hasAccel {
		t.Skip("no assembly kernels on this build or CPU")
	}
	rng := rand.New(rand.NewSource(29))
	for _, d := range quantTypes {
		deq, _ := quantDequantizer(d)
		bs, be := int(d.Info().BlockBytes), int(d.Info().BlockElems)
		for _, nb := range []int{1, 3, 7, 9, 64} {
			src := make([]byte, nb*bs)
			rng.Read(src)
			if nb == 64 {
				src = quantRandomBlocks(rng, d, nb)
			}
			want := make([]float32, nb*be+1)
			got := make([]float32, nb*be+1)
			want[nb*be], got[nb*be] = -7, -7
			setAccel(t, false)
			deq(want, src)
			setAccel(t, true)
			deq(got, src)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%s, %d blocks: element %d: vector %#08x, plain %#08x", d, nb, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}
