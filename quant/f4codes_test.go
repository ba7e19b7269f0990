package quant

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// asF4 rewrites builder b's code tensors (U8 two E2M1 codes a byte, or
// MLX's U32 eight a word) as safetensors' torch writer stores
// torch.float4_e2m1fn_x2: dtype F4 with the element shape, same bytes.
func asF4(t *testing.T, b *builder, names ...string) *builder {
	t.Helper()
	o := &builder{tensors: map[string]stEntryT{}, order: b.order, files: b.files}
	for n, e := range b.tensors {
		o.tensors[n] = e
	}
	for _, n := range names {
		e, ok := o.tensors[n]
		per := map[string]int64{"U8": 2, "U32": 8}[e.dt]
		if !ok || per == 0 {
			t.Fatalf("%s: %s, not a code tensor", n, e.dt)
		}
		e.shape = slices.Clone(e.shape)
		e.shape[len(e.shape)-1] *= per
		e.dt = "F4"
		o.tensors[n] = e
	}
	return o
}

// fpQuantF4Case is one FP-Quant MXFP4 module (Sylvester H, g 32).
func fpQuantF4Case(r *rand.Rand) *builder {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fp_quant", "forward_dtype": "mxfp4",
		"forward_method": "quest", "backward_dtype": "bf16", "hadamard_group_size": 32, "store_master_weights": false,
		"pseudoquantization": false}})
	x, O, I := "model.layers.0.mlp.up_proj", 4, 64
	q, sc := make([]byte, O*I/2), make([]byte, O*I/32)
	for i := range q {
		q[i] = byte(r.IntN(256))
	}
	for i := range sc {
		sc[i] = byte(110 + r.IntN(30))
	}
	hb, _ := fpqHadamard(nil)
	one := []byte{0x80, 0x3f}
	b.put(x+".qweight", "U8", []int64{int64(O), int64(I / 2)}, q)
	b.put(x+".scales", "U8", []int64{int64(O), int64(I / 32)}, sc)
	b.put(x+".weight_global_scale", "BF16", []int64{1}, one)
	b.put(x+".act_global_scale", "BF16", []int64{1}, one)
	b.put(x+".forward_hadamard_matrix", "BF16", []int64{32, 32}, hb)
	b.put(x+".backward_hadamard_matrix", "BF16", []int64{32, 32}, hb)
	return b
}

// TestF4Codes: each FP4 scheme whose fixtures are built here (MLX mxfp4
// and nvfp4, compressed-tensors nvfp4, FP-Quant mxfp4) serves a
// checkpoint whose codes are F4 [.., K] as the one with U8 [.., K/2] (MLX:
// U32 [.., K/8]) codes, bit for bit, under the same names; an F4 code
// tensor of the wrong shape is named with its own dtype and shape.
// (torch-written F4 checkpoints: TestTorch214F4.)
func TestF4Codes(t *testing.T) {
	variant := func(name string) func(*rand.Rand) (*builder, map[string][]float32) {
		for _, v := range variants {
			if v.name == name {
				return v.make
			}
		}
		t.Fatalf("no variant %s", name)
		return nil
	}
	cases := []struct {
		name string
		make func(*rand.Rand) *builder
	}{
		{"mlx_mxfp4", func(r *rand.Rand) *builder { b, _ := variant("mlx_mxfp4")(r); return b }},
		{"mlx_nvfp4", func(r *rand.Rand) *builder { b, _ := variant("mlx_nvfp4")(r); return b }},
		{"ct_nvfp4", func(r *rand.Rand) *builder { b, _ := variant("ct_nvfp4")(r); return b }},
		{"fp_quant", fpQuantF4Case},
		{"modelopt_fused_experts", func(r *rand.Rand) *builder { b, _ := nvfp4MoECase(r); return b }},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.make(rand.New(rand.NewPCG(44, uint64(k))))
			var codes []string
			for _, n := range b.order {
				e := b.tensors[n]
				if strings.HasSuffix(n, ".weight_packed") || strings.HasSuffix(n, ".qweight") || strings.HasSuffix(n, ".weight") && e.dt == "U32" ||
					strings.HasSuffix(n, "_proj") && e.dt == "U8" {
					codes = append(codes, n)
				}
			}
			if len(codes) == 0 {
				t.Fatal("no code tensor")
			}
			u8, f4 := b.build(t), asF4(t, b, codes...).build(t)
			ru, rf := u8.plan(t), f4.plan(t)
			if len(ru.Problems) != 0 || len(rf.Problems) != 0 || len(ru.Weights) == 0 || len(rf.Weights) != len(ru.Weights) || rf.Scheme != ru.Scheme {
				t.Fatalf("U8 codes: %s %v %v; F4 codes: %s %v %v", ru.Scheme, ru.Weights, ru.Problems, rf.Scheme, rf.Weights, rf.Problems)
			}
			for i := range ru.Weights {
				wu := &ru.Weights[i]
				wf := weightByName(rf, wu.Name)
				if wf == nil || !slices.Equal(wf.Shape, wu.Shape) || !slices.Equal(wf.Parts, wu.Parts) {
					t.Fatalf("%s: F4 codes give %+v, U8 codes %+v", wu.Name, wf, wu)
				}
				want, got := u8.whole(t, wu), f4.whole(t, wf)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s[%d] = %v, with U8 codes %v", wu.Name, i, got[i], want[i])
					}
				}
				checkRanges(t, f4, wf, got)
				for _, p := range wf.Parts {
					if p != wf.Name && !slices.Contains(rf.Hidden, p) {
						t.Errorf("part %s is not hidden", p)
					}
				}
			}
			// one element too few along K: named as stored, F4 and its shape
			bad := asF4(t, b, codes[0])
			e := bad.tensors[codes[0]]
			e.shape = slices.Clone(e.shape)
			e.shape[len(e.shape)-1] -= 2
			rows := int64(1)
			for _, d := range e.shape[:len(e.shape)-1] {
				rows *= d
			}
			e.data = e.data[:rows*e.shape[len(e.shape)-1]/2]
			bad.tensors[codes[0]] = e
			rb := bad.build(t).plan(t)
			if len(rb.Problems) == 0 || !strings.Contains(rb.Problems[0].Why, "F4 [") {
				t.Errorf("short F4 codes: problems %v, want one naming F4 and its shape", rb.Problems)
			}
		})
	}
}

// TestLooseF4: in a quantized checkpoint, an F4 tensor no weight reads
// (here fused experts' codes whose scales are all missing) is named, not
// served as plain E2M1 values under its name; the other weights are.
func TestLooseF4(t *testing.T) {
	b, _ := nvfp4MoECase(rand.New(rand.NewPCG(44, 1)))
	P := "model.layers.0.mlp.experts.down_proj"
	b = asF4(t, b, P)
	var order []string
	for _, n := range b.order {
		if n == P || !strings.HasPrefix(n, P) {
			order = append(order, n)
		}
	}
	b.order = order
	r := b.build(t).plan(t)
	if len(r.Problems) != 1 || r.Problems[0].Name != P || !strings.Contains(r.Problems[0].Why, "F4 (E2M1 codes) that no nvfp4 weight reads") {
		t.Fatalf("problems %v, want %s named", r.Problems, P)
	}
	if !slices.Contains(r.Hidden, P) || len(r.Weights) != 1 || r.Weights[0].Name != "model.layers.0.mlp.experts.gate_up_proj" {
		t.Errorf("hidden %v, weights %v", r.Hidden, r.Weights)
	}
}
