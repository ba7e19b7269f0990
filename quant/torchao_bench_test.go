package quant

import (
	"math/rand/v2"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// benchAO builds one torchao weight of 2048×4096 elements per case, with
// random codes and valid scales, as torchao lays it out (no expected
// values: the speed does not depend on them).
func benchAO(b *testing.B, sc string) (*ckpt, *Weight) {
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int64, mask byte) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(r.Uint32()) & mask
		}
		return p
	}
	const O, I = 2048, 4096
	c := newAOCase()
	W := "model.layers.0.mlp.down_proj.weight"
	pre, _ := aoPrefix(W)
	bf16 := func(n int64) []byte { v, _ := half(dtype.BF16, scales(r, int(n), -10, -4)); return v }
	switch sc {
	case "float8-rowwise", "float8-block128":
		c.b.put(pre+"qdata", "F8_E4M3", []int64{O, I}, rnd(O*I, 0x77))
		ss := []int64{O, 1}
		if sc == "float8-block128" {
			ss = []int64{O / 128, I / 128}
		}
		c.b.put(pre+"scale", "F32", ss, f32s(scales(r, int(ss[0]*ss[1]), -10, -4)))
		c.entry(W, "Float8Tensor", map[string]any{"block_size": []int64{O / ss[0], I / ss[1]}, "dtype": aoDT("bfloat16")}, "qdata", "scale")
	case "int4-g128":
		c.b.put(pre+"qdata", "I8", []int64{O, I / 2}, rnd(O*I/2, 0xff))
		c.b.put(pre+"scale", "BF16", []int64{I / 128, O}, bf16(I/128*O))
		c.b.put(pre+"zero_point", "BF16", []int64{I / 128, O}, bf16(I/128*O))
		c.entry(W, "Int4Tensor", map[string]any{"block_size": []int64{1, 128}, "shape": []int64{O, I}}, "qdata", "scale", "zero_point")
	case "intx-int4-g32-bf16", "int8-asym-g32-bf16":
		cls := "IntxUnpackedToInt8Tensor"
		if sc == "int8-asym-g32-bf16" {
			cls = "Int8Tensor"
		}
		q := rnd(O*I, 0xff)
		if cls == "IntxUnpackedToInt8Tensor" { // int4 codes, in [-8, 7]
			for i := range q {
				q[i] = q[i]&15 - 8
			}
		}
		c.b.put(pre+"qdata", "I8", []int64{O, I}, q)
		c.b.put(pre+"scale", "BF16", []int64{O, I / 32}, bf16(O*I/32))
		c.b.put(pre+"zero_point", "I8", []int64{O, I / 32}, rnd(O*I/32, 7))
		c.entry(W, cls, map[string]any{"block_size": []int64{1, 32}, "dtype": aoDT("bfloat16"), "target_dtype": aoDT("int4")}, "qdata", "scale", "zero_point")
	case "int8-rowwise":
		c.b.put(pre+"qdata", "I8", []int64{O, I}, rnd(O*I, 0xff))
		c.b.put(pre+"scale", "F32", []int64{O, 1}, f32s(scales(r, O, -10, -4)))
		c.entry(W, "Int8Tensor", map[string]any{"block_size": []int64{1, I}, "dtype": aoDT("bfloat16")}, "qdata", "scale")
	case "nvfp4-swizzled":
		c.b.put(pre+"qdata", "U8", []int64{O, I / 2}, rnd(O*I/2, 0xff))
		c.b.put(pre+"scale", "F8_E4M3", []int64{O / 128 * 32, I / 64 * 16}, rnd(O*I/16, 0x77))
		c.b.put(pre+"per_tensor_scale", "F32", []int64{}, f32s([]float32{0.001}))
		c.entry(W, "NVFP4Tensor", map[string]any{"block_size": 16, "is_swizzled_scales": true, "orig_dtype": aoDT("bfloat16")}, "qdata", "scale", "per_tensor_scale")
	case "mx-fp8-bf16", "mx-fp4-bf16", "mx-fp6-e2m3-bf16", "mx-fp6-e3m2-bf16":
		var elem any = aoDT("float8_e4m3fn")
		q := rnd(O*I, 0x77)
		qs := []int64{O, I}
		qdt := "F8_E4M3"
		switch sc {
		case "mx-fp4-bf16":
			elem, q, qs, qdt = aoDT("float4_e2m1fn_x2"), rnd(O*I/2, 0xff), []int64{O, I / 2}, "U8"
		case "mx-fp6-e2m3-bf16", "mx-fp6-e3m2-bf16":
			// one code a byte, as torchao writes them (low 6 bits)
			elem, q, qdt = "fp6_"+sc[7:11], rnd(O*I, 63), "U8"
		}
		c.b.put(pre+"qdata", qdt, qs, q)
		s := rnd(O*I/32, 15)
		for i := range s {
			s[i] += 120
		}
		c.b.put(pre+"scale", "F8_E8M0", []int64{O, I / 32}, s)
		c.entry(W, "MXTensor", map[string]any{"elem_dtype": elem, "block_size": 32, "orig_dtype": aoDT("bfloat16")}, "qdata", "scale")
	}
	ck, res := c.plan(b)
	if len(res.Weights) != 1 || len(res.Problems) != 0 {
		b.Fatalf("%s: %+v", sc, res.Problems)
	}
	return ck, &res.Weights[0]
}

var benchAOCases = []string{"float8-rowwise", "float8-block128", "int4-g128", "intx-int4-g32-bf16", "int8-rowwise", "int8-asym-g32-bf16", "nvfp4-swizzled", "mx-fp8-bf16", "mx-fp4-bf16", "mx-fp6-e2m3-bf16", "mx-fp6-e3m2-bf16"}

// BenchmarkDequantizeTorchAO is BenchmarkDequantize for torchao's classes.
func BenchmarkDequantizeTorchAO(b *testing.B) {
	for _, sc := range benchAOCases {
		b.Run(sc, func(b *testing.B) {
			c, w := benchAO(b, sc)
			benchDequantize(b, c, w, false)
		})
	}
}
