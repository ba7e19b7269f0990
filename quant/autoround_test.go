package quant

import (
	"encoding/json"
	"math/rand/v2"

	"github.com/lazyweights/tensorfs/dtype"
)

// AutoRound releases (Intel/OPEA) store AutoGPTQ's or AutoAWQ's packing:
// the cases are the GPTQ and AWQ generators' files under AutoRound's
// quantization_config (as auto-round 0.5 writes it).
func init() {
	variants = append(variants,
		variant{"autoround_auto_gptq", func(r *rand.Rand) (*builder, map[string][]float32) {
			b, w := gptqCase(r, 4, 32, "gptq", false, 32, 64)
			autoRoundConfig(b, "auto-round", "auto_round:auto_gptq", 4, 32, nil)
			return b, w
		}, "gptq"},
		// 3 bits, no packing_format (convert_model.py: auto_gptq), the
		// older quant_method, an extra_config leaving a layer unquantized
		variant{"autoround_3bit_default", func(r *rand.Rand) (*builder, map[string][]float32) {
			b, w := gptq3Case(r, 32, "gptq", false, 32, 64)
			autoRoundConfig(b, "intel/auto-round", nil, 3, 32, map[string]any{"lm_head": map[string]any{"bits": 16}, "model.layers.0.mlp.up_proj": map[string]any{"bits": 3, "group_size": 32, "sym": false}})
			return b, w
		}, "gptq"},
		// the default export of an asymmetric model: zeros as they are
		variant{"autoround_default_asym", func(r *rand.Rand) (*builder, map[string][]float32) {
			b, w := gptqCase(r, 4, 32, "gptq_v2", false, 32, 64)
			autoRoundConfig(b, "auto-round", "auto_round", 4, 32, nil)
			return b, w
		}, "gptq-v2"},
		// gptqmodel's packing, with a g_idx
		variant{"autoround_gptqmodel_gidx", func(r *rand.Rand) (*builder, map[string][]float32) {
			b, w := gptqCase(r, 8, 16, "gptq_v2", true, 24, 64)
			autoRoundConfig(b, "auto-round", "auto_round:gptqmodel", 8, 16, nil)
			return b, w
		}, "gptq-v2"},
		variant{"autoround_auto_awq", func(r *rand.Rand) (*builder, map[string][]float32) {
			b, w := awqGemmCase(r, 32, 24, 96)
			autoRoundConfig(b, "auto-round", "auto_round:auto_awq", 4, 32, nil)
			return b, w
		}, "awq"},
	)
}

func autoRoundConfig(b *builder, method string, packing any, bits, gs int, extra map[string]any) {
	qc := map[string]any{"quant_method": method, "bits": bits, "group_size": gs, "sym": true, "data_type": "int", "autoround_version": "0.5.1", "iters": 200}
	if packing != nil {
		qc["packing_format"] = packing
	}
	if extra != nil {
		qc["extra_config"] = extra
	}
	b.files["config.json"], _ = json.Marshal(map[string]any{"quantization_config": qc})
}

// awqGemmCase: AutoAWQ gemm.py from_linear: intweight transposed to
// [in, out], qweight[:, col] |= intweight[:, 8col + order_map[i]] << 4i
// with order_map [0, 2, 4, 6, 1, 3, 5, 7]; qzeros [in/group, out/8] the
// same; scales F16 [in/group, out]. W[o, i] = (q - z) * s.
func awqGemmCase(r *rand.Rand, gs, out, in int) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "awq", "bits": 4, "group_size": gs, "version": "gemm"}})
	G := in / gs
	q, z, s, _ := awqCodes(r, out, in, G) // q[o][i], z[o][g], s[o*G+g]
	st := make([]float32, G*out)
	for o := 0; o < out; o++ {
		for g := 0; g < G; g++ {
			st[g*out+o] = s[o*G+g]
		}
	}
	sb, _ := half(dtype.F16, st)
	order := []int{0, 2, 4, 6, 1, 3, 5, 7}
	qw := make([]uint32, in*out/8)
	qz := make([]uint32, G*out/8)
	for col := 0; col < out/8; col++ {
		for i := 0; i < 8; i++ {
			for k := 0; k < in; k++ {
				qw[k*out/8+col] |= uint32(q[col*8+order[i]][k]) << (4 * i)
			}
			for g := 0; g < G; g++ {
				qz[g*out/8+col] |= uint32(z[col*8+order[i]][g]) << (4 * i)
			}
		}
	}
	X := "model.layers.0.self_attn.v_proj"
	b.put(X+".qweight", "I32", []int64{int64(in), int64(out / 8)}, u32s(qw))
	b.put(X+".qzeros", "I32", []int64{int64(G), int64(out / 8)}, u32s(qz))
	b.put(X+".scales", "F16", []int64{int64(G), int64(out)}, sb)
	W := make([]float32, out*in)
	for o := 0; o < out; o++ {
		for i := 0; i < in; i++ {
			W[o*in+i] = float32(q[o][i]-z[o][i/gs]) * s[o*G+i/gs]
		}
	}
	return b, map[string][]float32{X + ".weight": W}
}
