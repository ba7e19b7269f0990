package dtype_test

// An external test package, so that it can parse the files with package
// index (which imports dtype) without an import cycle.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/x448/float16"
)

// ggmlRefFile is an in-memory index.File.
type ggmlRefFile struct {
	*bytes.Reader
	name string
}

func (f ggmlRefFile) Name() string { return f.name }

// ggmlRefTypes are the types of testdata/ggmlref: blocks from ggml's own
// quantizer, .f32ref from ggml's own dequantize_row_* (see the README
// there). They complement TestQuantRefFiles, whose shared files lack them.
var ggmlRefTypes = map[string]dtype.DType{
	"ollama-ggml-iq4_nl.gguf": dtype.IQ4_NL,
	"ollama-ggml-mxfp4.gguf":  dtype.MXFP4,
	"ollama-ggml-q8_k.gguf":   dtype.Q8_K,
}

// ggmlRefShapes are the tensors quantgen writes for these types.
var ggmlRefShapes = map[string][]int64{
	"blk.0.ffn_up.weight": {3, 256},
	"blk.1.ffn_up.weight": {2, 768},
	"blk.2.ffn_up.weight": {2, 2, 512}, // blocks scaled to zero, tiny, huge
	"blk.3.ffn_up.weight": {3, 1536},   // more than one 4096-element chunk
	"output_norm.weight":  {256},       // F32
}

// ggmlRefBF16 rounds a float32 (not NaN) to bfloat16, nearest even.
func ggmlRefBF16(v float32) uint16 {
	b := math.Float32bits(v)
	return uint16((b + 0x7fff + (b >> 16 & 1)) >> 16)
}

// ggmlRefWant gives the expected bytes of elements [a, b) of ref (float32
// values) in view dtype to: F32 the value itself, F64 exact, F16 and BF16
// the value rounded once (F16 by x448/float16, independent of dtype).
func ggmlRefWant(ref []float32, a, b int, to dtype.DType) []byte {
	var out []byte
	for _, v := range ref[a:b] {
		switch to {
		case dtype.F32:
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		case dtype.F64:
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(float64(v)))
		case dtype.F16:
			out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(v).Bits())
		case dtype.BF16:
			out = binary.LittleEndian.AppendUint16(out, ggmlRefBF16(v))
		}
	}
	return out
}

// ggmlRefCompare reports the first few differing elements of got and want
// (elements of es bytes, numbered from first).
func ggmlRefCompare(t *testing.T, what string, got, want []byte, es, first int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := 0; i < len(want); i += es {
		if !bytes.Equal(got[i:i+es], want[i:i+es]) {
			if bad < 5 {
				t.Errorf("%s: element %d: got % x, want % x", what, first+i/es, got[i:i+es], want[i:i+es])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(want)/es)
	}
}

// TestQuantGGMLRefExtra checks IQ4_NL, MXFP4 and Q8_K against ggml's own
// dequantization, bit for bit: each testdata/ggmlref file is parsed by
// package index, and every tensor converted to F32 (and F64, F16, BF16: the
// reference rounded once) equals its part of the .f32ref, whole and in
// element ranges that start and end mid-block, converted from only the
// blocks that cover them.
func TestQuantGGMLRefExtra(t *testing.T) {
	dir := filepath.Join("testdata", "ggmlref")
	covered := map[dtype.DType]bool{}
	for file, want := range ggmlRefTypes {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join(dir, file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			refBytes, err := os.ReadFile(path + ".f32ref")
			if err != nil {
				t.Fatal(err)
			}
			if len(refBytes)%4 != 0 {
				t.Fatalf(".f32ref of %d bytes", len(refBytes))
			}
			ref := make([]float32, len(refBytes)/4)
			for i := range ref {
				ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(refBytes[4*i:]))
			}
			idx, err := formats.ParseFile(ggmlRefFile{bytes.NewReader(b), path})
			if err != nil {
				t.Fatal(err)
			}
			ts := append([]index.Tensor(nil), idx.Tensors...)
			sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
			if len(ts) != len(ggmlRefShapes) {
				t.Fatalf("%d tensors, want %d", len(ts), len(ggmlRefShapes))
			}
			rng := rand.New(rand.NewSource(int64(want)))
			pos := 0 // in ref, elements
			for _, tn := range ts {
				n := int(tn.NumElements())
				if shape, ok := ggmlRefShapes[tn.Name]; !ok || !reflect.DeepEqual(tn.Shape, shape) {
					t.Fatalf("%s: shape %v, want %v", tn.Name, tn.Shape, shape)
				}
				if wantDT := map[bool]dtype.DType{true: dtype.F32, false: want}[tn.Name == "output_norm.weight"]; tn.DType != wantDT {
					t.Fatalf("%s: dtype %v, want %v", tn.Name, tn.DType, wantDT)
				}
				if pos+n > len(ref) {
					t.Fatalf("%s: .f32ref too short", tn.Name)
				}
				tref := ref[pos : pos+n]
				pos += n
				raw := b[tn.Offset : tn.Offset+tn.Size]
				ggmlRefTensor(t, tn.Name, tn.DType, raw, tref, rng)
				if tn.DType == want {
					covered[want] = true
				}
			}
			if pos != len(ref) {
				t.Fatalf("tensors hold %d elements, .f32ref %d", pos, len(ref))
			}
		})
	}
	for _, d := range ggmlRefTypes {
		if !covered[d] {
			t.Errorf("%s: not checked against a ggml reference", d)
		}
	}
}

// ggmlRefTensor checks one tensor's conversions against its reference.
func ggmlRefTensor(t *testing.T, name string, d dtype.DType, raw []byte, ref []float32, rng *rand.Rand) {
	t.Helper()
	info := d.Info()
	bb, be := int(info.BlockBytes), int(info.BlockElems)
	n := len(ref)
	if size, ok := d.ByteSize(int64(n)); !ok || int(size) != len(raw) {
		t.Fatalf("%s: %d bytes for %d elements of %s", name, len(raw), n, d)
	}
	for _, to := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
		conv, ok := dtype.ConverterFor(d, to)
		if !ok {
			t.Fatalf("%s: no %s→%s converter", name, d, to)
		}
		es := int(to.ElemSize())

		// The whole tensor.
		out := make([]byte, n*es)
		conv(out, raw)
		ggmlRefCompare(t, fmt.Sprintf("%s %s→%s", name, d, to), out, ggmlRefWant(ref, 0, n, to), es, 0)
		if t.Failed() {
			return // the ranges would only repeat the differences
		}

		// Element ranges [a, b), most starting and ending mid-block, as a
		// view serves them: convert only the covering blocks, from a copy
		// of just their bytes, and cut the range out.
		ranges := [][2]int{{0, 1}, {1, 2}, {be - 1, be + 1}, {be / 2, n - be/2}, {n - 1, n}, {3, n}, {0, n - 5}}
		if n > 4096+be {
			ranges = append(ranges, [2]int{4096 - 7, 4096 + 9}, [2]int{be + 5, 4096 + be + 3})
		}
		for i := 0; i < 40; i++ {
			a := rng.Intn(n)
			ranges = append(ranges, [2]int{a, a + 1 + rng.Intn(n-a)})
		}
		for _, r := range ranges {
			a, b := r[0], r[1]
			b0, b1 := a/be, (b+be-1)/be
			src := append([]byte(nil), raw[b0*bb:b1*bb]...)
			part := make([]byte, (b1-b0)*be*es+es)
			for i := range part {
				part[i] = 0xA5 // sentinel
			}
			conv(part, src)
			if !bytes.Equal(part[len(part)-es:], bytes.Repeat([]byte{0xA5}, es)) {
				t.Fatalf("%s %s→%s [%d,%d): wrote past the blocks' elements", name, d, to, a, b)
			}
			got := part[(a-b0*be)*es : (b-b0*be)*es]
			ggmlRefCompare(t, fmt.Sprintf("%s %s→%s [%d,%d)", name, d, to, a, b), got, ggmlRefWant(ref, a, b, to), es, a)
			if t.Failed() {
				return
			}
		}
	}
}
