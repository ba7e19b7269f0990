package quant

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// dsv31Shards: DeepSeek-V3.1's quantization_config (fp8, e4m3, scale_fmt
// ue8m0, blocks of 128×128) over two shards: one with F32 scales that
// are powers of two and an o_proj whose F32 scales are not (as V3.1's
// are, deepseek-ai/DeepSeek-V3 issue 961), the other with the scales
// stored as E8M0 exponent bytes, U8 and F8_E8M0. Reference: DeepSeek-V3
// inference/kernel.py weight_dequant, x.to(f32) * s, s the stored
// float32 or 2^(e-127) for an exponent byte (255: NaN).
func dsv31Shards(t *testing.T, r *rand.Rand, scaleFmt any) (*ckpt, map[string][]float32) {
	qc := map[string]any{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": []int{128, 128}}
	if scaleFmt != nil {
		qc["scale_fmt"] = scaleFmt
	}
	cfg := map[string]any{"quantization_config": qc}
	want := map[string][]float32{}
	const O, I = 200, 260 // edge blocks: 2×3 scales
	layer := func(b *builder, X, sdt string, pow2 bool) {
		w := make([]byte, O*I)
		for i := range w {
			w[i] = finiteE4M3(r)
		}
		b.put(X+".weight", "F8_E4M3", []int64{O, I}, w)
		s := make([]float32, 6)
		switch sdt {
		case "F32":
			for i := range s {
				if pow2 {
					s[i] = float32(math.Ldexp(1, -r.IntN(20)))
				} else {
					s[i] = float32(math.Ldexp(1.3228756, -r.IntN(20)))
				}
			}
			b.put(X+".weight_scale_inv", "F32", []int64{2, 3}, f32s(s))
		default: // U8, F8_E8M0: exponent bytes
			e := make([]byte, 6)
			for i := range e {
				e[i] = byte(110 + r.IntN(20))
			}
			e[5] = 255
			for i := range s {
				s[i] = float32(math.Ldexp(1, int(e[i])-127))
			}
			s[5] = float32(math.NaN())
			b.put(X+".weight_scale_inv", sdt, []int64{2, 3}, e)
		}
		W := make([]float32, O*I)
		for i := range W {
			o, c := i/I, i%I
			W[i] = e4m3(w[i]) * s[(o/128)*3+c/128]
		}
		want[X+".weight"] = W
	}
	b1, b2 := newBuilder(cfg), newBuilder(cfg)
	layer(b1, "model.layers.0.mlp.down_proj", "F32", true)
	layer(b1, "model.layers.0.self_attn.o_proj", "F32", false)
	layer(b2, "model.layers.1.mlp.down_proj", "U8", true)
	layer(b2, "model.layers.1.mlp.up_proj", "F8_E8M0", true)
	c := b1.build(t)
	c2 := b2.build(t)
	c.tensors = append(c.tensors, c2.tensors...)
	for n, d := range c2.data {
		c.data[n] = d
	}
	slices.SortFunc(c.tensors, func(a, b index.Tensor) int { return strings.Compare(a.Name, b.Name) })
	return c, want
}

// TestScaleFmtUE8M0: with scale_fmt ue8m0 every weight of both shards is
// its reference's values bit for bit (the NaN of E8M0 255 a NaN); without
// it the U8 scale's weight is left out, named; another scale_fmt leaves
// every weight out.
func TestScaleFmtUE8M0(t *testing.T) {
	c, want := dsv31Shards(t, rand.New(rand.NewPCG(31, 32)), "ue8m0")
	r := c.plan(t)
	if len(r.Problems) != 0 || len(r.Weights) != len(want) || r.Scheme != "fp8-block" {
		t.Fatalf("scheme %q, weights %d, problems %v", r.Scheme, len(r.Weights), r.Problems)
	}
	for name, W := range want {
		w := weightByName(r, name)
		got := c.whole(t, w)
		for i := range W {
			if math.Float32bits(got[i]) != math.Float32bits(W[i]) && !(W[i] != W[i] && got[i] != got[i]) {
				t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], W[i])
			}
		}
		checkRanges(t, c, w, got)
	}

	c, _ = dsv31Shards(t, rand.New(rand.NewPCG(31, 32)), nil)
	r = c.plan(t)
	if len(r.Weights) != 3 || len(r.Problems) != 1 || r.Problems[0].Name != "model.layers.1.mlp.down_proj.weight" || !strings.Contains(r.Problems[0].Why, "is U8") {
		t.Fatalf("without scale_fmt: weights %d, problems %v", len(r.Weights), r.Problems)
	}

	for _, f := range []any{"ue4m3", 8} {
		c, want = dsv31Shards(t, rand.New(rand.NewPCG(31, 32)), f)
		r = c.plan(t)
		if len(r.Weights) != 0 {
			t.Fatalf("scale_fmt %v: weights %v", f, r.Weights)
		}
		for name := range want {
			if !slices.ContainsFunc(r.Problems, func(p Problem) bool { return p.Name == name }) {
				t.Errorf("scale_fmt %v: no problem names %s: %v", f, name, r.Problems)
			}
		}
		for _, p := range r.Problems {
			if !strings.Contains(p.Why, "scale_fmt") || strings.Contains(p.Why, "\n") {
				t.Errorf("scale_fmt %v: %s", f, p)
			}
		}
		for _, tn := range c.tensors {
			if !r.IsHidden(tn.Name) && isCodeDType(tn.DType) {
				t.Errorf("scale_fmt %v: %s is in the views", f, tn.Name)
			}
		}
	}
}
