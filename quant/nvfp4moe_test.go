package quant

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// ModelOpt NVFP4 fused experts: no ModelOpt package installs here; the
// case writes the parts as the releases name them and computes each
// value by NVFP4QTensor.dequantize's formula (per_block = f32(scale) *
// scale_2 of its expert, or of its half with [E, 2]; W = LUT4[code] *
// per_block), the E4M3 scale decoded from its bit fields.
func init() {
	variants = append(variants, variant{"modelopt_nvfp4_fused_experts", nvfp4MoECase, "nvfp4"})
}

func nvfp4MoECase(r *rand.Rand) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{})
	b.files["hf_quant_config.json"] = []byte(`{"producer":{"name":"modelopt"},"quantization":{"quant_algo":"NVFP4","group_size":16}}`)
	const E, I, H = 3, 8, 64
	want := map[string][]float32{}
	for _, pc := range []struct {
		P      string
		R, C   int
		halves bool
	}{
		{"model.layers.0.mlp.experts.gate_up_proj", 2 * I, H, true},
		{"model.layers.0.mlp.experts.down_proj", H, 2 * I, false},
	} {
		R, C := pc.R, pc.C
		codes := make([]byte, E*R*C/2)
		for i := range codes {
			codes[i] = byte(r.IntN(256))
		}
		sc := make([]byte, E*R*C/16)
		for i := range sc {
			sc[i] = byte(0x08 + r.IntN(0x70))
		}
		n := E
		shape2 := []int64{E}
		if pc.halves {
			n, shape2 = 2*E, []int64{E, 2}
		}
		g := scales(r, n, -12, -6)
		b.put(pc.P, "U8", []int64{E, int64(R), int64(C / 2)}, codes)
		b.put(pc.P+"_weight_scale", "F8_E4M3", []int64{E, int64(R), int64(C / 16)}, sc)
		b.put(pc.P+"_weight_scale_2", "F32", shape2, f32s(g))
		b.put(pc.P+"_input_scale", "F32", []int64{E}, f32s(scales(r, E, -4, 0)))
		W := make([]float32, E*R*C)
		for i := range W {
			e, row := i/(R*C), i/C%R
			gi := e
			if pc.halves {
				gi = 2*e + row/(R/2)
			}
			perBlock := e4m3(sc[i/16]) * g[gi]
			code := codes[i/2] >> (4 * (i % 2)) & 15
			W[i] = lut4[code] * perBlock
		}
		want[pc.P] = W
	}
	return b, want
}

// TestNVFP4MoEBroken: a fused expert parameter whose global scale has
// another shape, or whose codes are missing, is left out, named.
func TestNVFP4MoEBroken(t *testing.T) {
	P := "model.layers.0.mlp.experts.gate_up_proj"
	for _, cs := range []struct {
		name, weight, why string
		mutate            func(b *builder)
	}{
		{"scale_2 per row", P, "not [3] (one per expert) or [3, 2]", func(b *builder) {
			b.edit(P+"_weight_scale_2", func(e *stEntryT) { e.shape = []int64{3, 16}; e.data = make([]byte, 4*48) })
		}},
		{"codes missing", P, "packed codes gate_up_proj are missing", func(b *builder) { b.drop(P) }},
		{"block scale per 32", P, "weight_scale is F8_E4M3", func(b *builder) {
			b.edit(P+"_weight_scale", func(e *stEntryT) { e.shape[2] /= 2; e.data = e.data[:len(e.data)/2] })
		}},
	} {
		t.Run(cs.name, func(t *testing.T) {
			b, _ := nvfp4MoECase(rand.New(rand.NewPCG(7, 8)))
			cs.mutate(b)
			c := b.build(t)
			r := c.plan(t)
			i := -1
			for j, pr := range r.Problems {
				if pr.Name == cs.weight {
					i = j
				}
			}
			if i < 0 || !strings.Contains(r.Problems[i].Why, cs.why) {
				t.Fatalf("problems %v: want %s saying %q", r.Problems, cs.weight, cs.why)
			}
			if r.Weight(cs.weight) != nil || len(r.Weights) != 1 {
				t.Fatalf("weights %v", r.Weights)
			}
			for _, tn := range c.tensors {
				if strings.HasPrefix(tn.Name, P) && !r.IsHidden(tn.Name) {
					t.Errorf("%s is in the views", tn.Name)
				}
			}
		})
	}
}

// TestNVFP4MoERefused: when ModelOpt's configuration cannot be applied
// (group_size 32), the fused experts are named and every part hidden,
// their F32 global scales included (a float the views would list).
func TestNVFP4MoERefused(t *testing.T) {
	b, want := nvfp4MoECase(rand.New(rand.NewPCG(7, 8)))
	b.files["hf_quant_config.json"] = []byte(`{"quantization":{"quant_algo":"NVFP4","group_size":32}}`)
	c := b.build(t)
	r := c.plan(t)
	if len(r.Weights) != 0 {
		t.Fatalf("weights %v", r.Weights)
	}
	for P := range want {
		if !slices.ContainsFunc(r.Problems, func(p Problem) bool { return p.Name == P && strings.Contains(p.Why, "group_size 32") }) {
			t.Errorf("no problem names %s: %v", P, r.Problems)
		}
	}
	for _, tn := range c.tensors {
		if !r.IsHidden(tn.Name) {
			t.Errorf("%s (%s) is in the views", tn.Name, tn.DType)
		}
	}
}
