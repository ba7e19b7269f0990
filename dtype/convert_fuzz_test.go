package dtype

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// FuzzConvert: for any source bytes and any convertible pair, converting
// a run of whole blocks equals the same run of the whole conversion, the
// assembly and Go paths agree, and float sources match the reference.
func FuzzConvert(f *testing.F) {
	all := All()
	for i, d := range all {
		for t := range targets {
			if !CanConvert(d, targets[t]) {
				continue
			}
			seed := make([]byte, 3*int(d.Info().BlockBytes)+64)
			for j := range seed {
				seed[j] = byte(j*37 + i*11 + t)
			}
			f.Add(seed, uint8(i), uint8(t), uint16(1), uint16(2))
		}
	}
	// Real tensor bytes as seeds, when the shared test data is there.
	dir, _ := testenv.Optional()
	for _, name := range []string{
		"gguf/quantized/ollama-ggml-f16.gguf", "gguf/quantized/ollama-ggml-bf16.gguf",
		"gguf/quantized/ollama-ggml-q4_k.gguf.f32ref", "gguf/quantized/ollama-ggml-q4_0.gguf",
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		b = b[len(b)/2:]
		b = b[:min(len(b), 4096)]
		for i := range all {
			f.Add(b, uint8(i), uint8(i), uint16(3), uint16(100))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, fromIdx, toIdx uint8, a, b uint16) {
		from, to := all[int(fromIdx)%len(all)], targets[int(toIdx)%len(targets)]
		if !CanConvert(from, to) {
			return
		}
		bb := int(from.Info().BlockBytes)
		nblocks := len(data) / bb
		src := data[:nblocks*bb]
		whole := mustConvert(t, from, to, src)
		if hasAccel {
			old := useAccel
			useAccel = !old
			other := mustConvert(t, from, to, src)
			useAccel = old
			if !bytes.Equal(whole, other) {
				t.Fatalf("%s -> %s: assembly and Go paths differ", from, to)
			}
		}
		lo, hi := int(a)%(nblocks+1), int(b)%(nblocks+1)
		if lo > hi {
			lo, hi = hi, lo
		}
		per := int(from.Info().BlockElems) * int(to.ElemSize())
		if got := mustConvert(t, from, to, src[lo*bb:hi*bb]); !bytes.Equal(got, whole[lo*per:hi*per]) {
			t.Fatalf("%s -> %s: blocks [%d,%d) differ from the whole conversion", from, to, lo, hi)
		}
		if from.Kind() == KindFloat {
			for i := range elemCount(from, len(src)) {
				v := elemBits(from, src, i)
				if g, w := elemBits(to, whole, i), refConvert(from, to, v, false); g != w {
					t.Fatalf("%s %#x -> %s: got %#x, want %#x", from, v, to, g, w)
				}
			}
		}
	})
}

// TestNumPyTorch cross-checks F64 -> F16 and F32 -> F16 against NumPy's
// astype(float16) (which rounds float64 directly) and F32 -> BF16 against
// torch's .to(torch.bfloat16), on values aimed at the rounding ties.
// NaNs are compared as NaN only: the libraries' payload rules differ.
func TestNumPyTorch(t *testing.T) {
	py := testenv.Python(t, "numpy", "torch")
	rng := newRand(19, 20)
	const n = 100000
	f64 := make([]byte, 8*n)
	f32 := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint64(f64[8*i:], randF64Bits(rng, formats[F16]))
		to := formats[F16]
		if i%2 == 1 {
			to = formats[BF16]
		}
		binary.LittleEndian.PutUint32(f32[4*i:], randF32Bits(rng, to))
	}
	dir := t.TempDir()
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("f64", f64)
	write("f32", f32)
	script := `
import sys, numpy as np, torch
d = sys.argv[1]
a = np.fromfile(d + "/f64", dtype="<f8")
a.astype("<f2").tofile(d + "/f64_f16")
b = np.fromfile(d + "/f32", dtype="<f4")
b.astype("<f2").tofile(d + "/f32_f16")
torch.from_numpy(b.copy()).to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tofile(d + "/f32_bf16")
`
	if out, err := execPython(py, script, dir); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	check := func(from, to DType, src []byte, file string) {
		want, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		got := mustConvert(t, from, to, src)
		if len(got) != len(want) {
			t.Fatalf("%s: %d bytes, want %d", file, len(got), len(want))
		}
		for i := range len(got) / 2 {
			g, w := binary.LittleEndian.Uint16(got[2*i:]), binary.LittleEndian.Uint16(want[2*i:])
			gNaN, wNaN := isNaN16(to, g), isNaN16(to, w)
			if gNaN != wNaN || !gNaN && g != w {
				t.Fatalf("%s -> %s of %#x: got %#04x, library %#04x", from, to, elemBits(from, src, i), g, w)
			}
		}
	}
	check(F64, F16, f64, "f64_f16")
	check(F32, F16, f32, "f32_f16")
	check(F32, BF16, f32, "f32_bf16")
}

func isNaN16(d DType, v uint16) bool {
	if d == BF16 {
		return v&0x7fff > 0x7f80
	}
	return v&0x7fff > 0x7c00
}

func newRand(a, b uint64) *rand.Rand { return rand.New(rand.NewPCG(a, b)) }

func execPython(py, script, dir string) ([]byte, error) {
	return exec.Command(py, "-c", script, dir).CombinedOutput()
}
