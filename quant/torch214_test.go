package quant_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/source"
)

// xLogical is one tensor of a converted view in a generator's
// EXPECTED.json: its parts and the sha256 of its values.
type xLogical struct {
	Name  string   `json:"name"`
	Shape []int64  `json:"shape"`
	Parts []string `json:"parts"`
	F32   string   `json:"sha256_f32"`
	BF16  string   `json:"sha256_bf16"`
	F16   string   `json:"sha256_f16"`      // when the generator wrote it
	F32N  string   `json:"sha256_f32_nan"`  // every NaN 0x7FC00000
	BF16N string   `json:"sha256_bf16_nan"` // every NaN 0x7FC0
	NaN   int      `json:"nan"`
}

// torch214Expected is testdata/torch214/EXPECTED.json, written by gen.py
// there with torch 2.14's own dtypes, quantizers and dequantizers.
type torch214Expected struct {
	Torch string `json:"torch"`
	Cases map[string]struct {
		Logical []xLogical `json:"logical"`
	} `json:"cases"`
}

// TestTorch214: each checkpoint of testdata/torch214 (block FP8, DeepSeek
// ue8m0, MXFP8, gpt-oss MXFP4, ModelOpt and compressed-tensors NVFP4, torchao Float8Tensor,
// MXTensor and NVFP4Tensor, written by torch 2.14 and safetensors' torch
// writer), opened as any SOURCE is (source.Load), serves every weight as
// the float32 values torch computes from the same bytes, bit for bit (NaNs
// as NaNs: torch's own payloads depend on its code path), and its .bf16
// view as torch's bfloat16 result; the parts are in no converted view and
// every plain tensor is as stored.
func TestTorch214(t *testing.T) {
	dir := filepath.Join("testdata", "torch214")
	raw, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp torch214Expected
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Cases) != 9 || exp.Torch == "" {
		t.Fatalf("EXPECTED.json: %d cases, torch %q", len(exp.Cases), exp.Torch)
	}
	for name, cs := range exp.Cases {
		t.Run(name, func(t *testing.T) {
			checkLogical(t, filepath.Join(dir, name), "", cs.Logical, "torch "+exp.Torch)
		})
	}
}

// checkLogical opens dir as any SOURCE is and checks that its converted
// views hold exactly the tensors of want (scheme: the plan's, when not
// empty), each with want's digests, and no part of a quantized one.
func checkLogical(t *testing.T, dir, scheme string, want []xLogical, ref string) {
	t.Helper()
	toBF16, _ := dtype.ConverterFor(dtype.F32, dtype.BF16)
	toF16, _ := dtype.ConverterFor(dtype.F32, dtype.F16)
	digest := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	ck, err := source.Load(context.Background(), dir, source.Options{Backing: backing.Options{Mode: backing.Pread}})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	q := ck.Index.Quantization
	if q == nil || len(q.Problems) != 0 || scheme != "" && q.Scheme != scheme {
		t.Fatalf("quantization %+v, want scheme %q and no problems", q, scheme)
	}
	byName := map[string]*index.Tensor{}
	for i := range ck.Index.Tensors {
		tn := &ck.Index.Tensors[i]
		if tn.Listed(true) {
			if byName[tn.Name] != nil {
				t.Errorf("%s listed twice in the converted views", tn.Name)
			}
			byName[tn.Name] = tn
		}
	}
	if len(byName) != len(want) {
		t.Errorf("%d tensors in the converted views, want %d", len(byName), len(want))
	}
	for _, l := range want {
		tn := byName[l.Name]
		if tn == nil {
			t.Errorf("%s is not in the converted views", l.Name)
			continue
		}
		quantized := len(l.Parts) > 1 || l.Parts[0] != l.Name
		if quantized != (tn.Role == index.RoleLogical) || !slices.Equal(tn.Shape, l.Shape) {
			t.Errorf("%s: role %v shape %v, want quantized %v shape %v", l.Name, tn.Role, tn.Shape, quantized, l.Shape)
			continue
		}
		stored := make([]byte, tn.Size)
		if n, err := ck.Sources[tn.Source].ReadAt(stored, tn.Offset); n != len(stored) {
			t.Fatalf("%s: %d of %d bytes, %v", l.Name, n, len(stored), err)
		}
		if quantized { // reads at any offset are the whole's bytes
			rnd := rand.New(rand.NewPCG(uint64(len(stored)), 44))
			for k := 0; k < 20; k++ {
				off := rnd.Int64N(int64(len(stored)))
				n := 1 + rnd.Int64N(min(int64(len(stored))-off, 5000))
				buf := make([]byte, n)
				if got, err := ck.Sources[tn.Source].ReadAt(buf, tn.Offset+off); got != int(n) || !bytes.Equal(buf, stored[off:off+n]) {
					t.Fatalf("%s: [%d, +%d): %d, %v, or bytes differ from the whole's", l.Name, off, n, got, err)
				}
			}
		}
		conv, ok := dtype.ConverterFor(tn.DType, dtype.F32)
		if !ok {
			t.Fatalf("%s: %s", l.Name, tn.DType)
		}
		f32 := make([]byte, 4*tn.NumElements())
		conv(f32, stored)
		bf := make([]byte, 2*tn.NumElements())
		toBF16(bf, f32)
		if l.F16 != "" {
			hf := make([]byte, 2*tn.NumElements())
			toF16(hf, f32)
			if got := digest(hf); got != l.F16 {
				t.Errorf("%s: float16 sha256 %s, %s has %s", l.Name, got, ref, l.F16)
			}
		}
		// NaN payloads are compared only as NaNs (sha256_*_nan)
		nan := 0
		for i := 0; i < len(f32); i += 4 {
			if v := binary.LittleEndian.Uint32(f32[i:]); v&0x7fffffff > 0x7f800000 {
				nan++
				binary.LittleEndian.PutUint32(f32[i:], 0x7fc00000)
				binary.LittleEndian.PutUint16(bf[i/2:], 0x7fc0)
			}
		}
		if nan != l.NaN {
			t.Errorf("%s: %d NaNs, %s has %d", l.Name, nan, ref, l.NaN)
		}
		want32, want16 := l.F32N, l.BF16N
		if want32 == "" { // a generator that writes no NaN
			want32, want16 = l.F32, l.BF16
		} else if nan == 0 && (l.F32 != want32 || l.BF16 != want16) {
			t.Errorf("%s: EXPECTED.json's digests with and without NaNs differ", l.Name)
		}
		if got := digest(f32); got != want32 {
			t.Errorf("%s: float32 sha256 %s, %s has %s", l.Name, got, ref, want32)
		}
		if got := digest(bf); got != want16 {
			t.Errorf("%s: bfloat16 sha256 %s, %s has %s", l.Name, got, ref, want16)
		}
	}
	for _, l := range want {
		for _, p := range l.Parts {
			if p != l.Name && byName[p] != nil {
				t.Errorf("part %s of %s is in the converted views", p, l.Name)
			}
		}
	}
}
