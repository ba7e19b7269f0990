package quant

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// bench2Schemes are the round-2 schemes (issue 44), read as
// BenchmarkDequantize reads its own: go test ./quant -bench 'Dequantize2/' -cpu 1.
var bench2Schemes = map[string]func(r *rand.Rand) *builder{
	"gptq-3bit": func(r *rand.Rand) *builder {
		b, _ := gptq3Case(r, 128, "gptq", false, 2048, 4096)
		return b
	},
	"awq-gemv": func(r *rand.Rand) *builder {
		b, _ := awqGemvCase(r, 128, 2048, 4096)
		return b
	},
	"awq-gemv-fast": func(r *rand.Rand) *builder {
		b, _ := awqGemvFastCase(r, 128, 2048, 4096)
		return b
	},
	"nvfp4-fused-experts": func(r *rand.Rand) *builder {
		// 8 experts of [2·512, 2048] with a scale per gate/up half
		b := newBuilder(map[string]any{})
		b.files["hf_quant_config.json"] = []byte(`{"quantization":{"quant_algo":"NVFP4","group_size":16}}`)
		const E, R, C = 8, 1024, 2048
		P := "model.layers.0.mlp.experts.gate_up_proj"
		codes := make([]byte, E*R*C/2)
		for i := range codes {
			codes[i] = byte(r.Uint32())
		}
		sc := make([]byte, E*R*C/16)
		for i := range sc {
			sc[i] = byte(0x08 + r.IntN(0x70))
		}
		b.put(P, "U8", []int64{E, R, C / 2}, codes)
		b.put(P+"_weight_scale", "F8_E4M3", []int64{E, R, C / 16}, sc)
		b.put(P+"_weight_scale_2", "F32", []int64{E, 2}, f32s(scales(r, 2*E, -12, -6)))
		return b
	},
	"mxfp8": func(r *rand.Rand) *builder {
		// transformers' finegrained MXFP8 (mxfp8Case's layout), [2048, 4096]
		b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fp8", "weight_format": "mxfp8", "activation_scheme": "dynamic"}})
		const O, I = 2048, 4096
		X := "model.layers.0.mlp.up_proj"
		w := make([]byte, O*I)
		for i := range w {
			w[i] = byte(r.IntN(256))&^0x80 | byte(r.IntN(2))<<7
			if w[i]&0x7f == 0x7f {
				w[i]-- // no NaN codes: finite weights
			}
		}
		sc := make([]byte, O*I/32)
		for i := range sc {
			sc[i] = byte(110 + r.IntN(20))
		}
		b.put(X+".weight", "F8_E4M3", []int64{O, I}, w)
		b.put(X+".weight_scale_inv", "F8_E8M0", []int64{O, I / 32}, sc)
		return b
	},
	"hqq-4bit": func(r *rand.Rand) *builder {
		b, _ := hqqCase(r, 4, 64, 2048, 4096, "bfloat16", false, false)
		return b
	},
	"hqq-3bit": func(r *rand.Rand) *builder {
		b, _ := hqqCase(r, 3, 64, 2048, 4096, "bfloat16", false, false)
		return b
	},
	"hqq-2bit": func(r *rand.Rand) *builder {
		b, _ := hqqCase(r, 2, 64, 2048, 4096, "bfloat16", false, false)
		return b
	},
	"hqq-1bit": func(r *rand.Rand) *builder {
		b, _ := hqqCase(r, 1, 64, 2048, 4096, "bfloat16", false, false)
		return b
	},
	"hqq-4bit-f16": func(r *rand.Rand) *builder {
		b, _ := hqqCase(r, 4, 64, 2048, 4096, "float16", false, false)
		return b
	},
	"gptq-3bit-desc-act": func(r *rand.Rand) *builder {
		b, _ := gptq3Case(r, 128, "gptq", true, 2048, 4096)
		return b
	},
}

func BenchmarkDequantize2(b *testing.B) {
	for _, sc := range sortedKeys(bench2Schemes) {
		b.Run(sc, func(b *testing.B) {
			c := bench2Schemes[sc](rand.New(rand.NewPCG(1, 2))).build(b)
			res := c.plan(b)
			if len(res.Weights) != 1 || len(res.Problems) != 0 {
				b.Fatalf("%s: %+v", sc, res)
			}
			w := &res.Weights[0]
			benchDequantize(b, c, w, true)
		})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}
