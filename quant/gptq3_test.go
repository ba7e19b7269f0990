package quant

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// No GPTQ, AutoGPTQ or GPTQModel package installs here: the 3-bit cases
// pack their codes with AutoGPTQ's own loop (qlinear_cuda_old.py pack,
// bits == 3, commit 179776bd) written out in Go, word by word, and compute
// the weight with its forward's formula.
func init() {
	variants = append(variants,
		variant{"gptq_v1_3bit_g32", func(r *rand.Rand) (*builder, map[string][]float32) {
			return gptq3Case(r, 32, "gptq", false, 64, 96)
		}, "gptq"},
		// 3-bit with a permuted g_idx, group 16 (a triple spans two groups)
		variant{"gptq_v2_3bit_desc_act", func(r *rand.Rand) (*builder, map[string][]float32) {
			return gptq3Case(r, 16, "gptq_v2", true, 32, 128)
		}, "gptq-v2"},
		// desc_act with 136 groups, a triple's 32 values from any of them
		variant{"gptq_v2_3bit_desc_act_many_groups", func(r *rand.Rand) (*builder, map[string][]float32) {
			return gptq3Case(r, 16, "gptq_v2", true, 32, 16*136)
		}, "gptq-v2"},
		// group 16 without g_idx: a triple spans two groups in order
		variant{"gptq_v1_3bit_g16", func(r *rand.Rand) (*builder, map[string][]float32) {
			return gptq3Case(r, 16, "gptq", false, 64, 160)
		}, "gptq"},
		// the smallest: one triple of rows, one of columns
		variant{"gptq_v2_3bit_min", func(r *rand.Rand) (*builder, map[string][]float32) {
			return gptq3Case(r, 32, "gptq_v2", false, 32, 32)
		}, "gptq-v2"},
		// group_size -1 (one group), v1
		variant{"gptq_v1_3bit_channel", func(r *rand.Rand) (*builder, map[string][]float32) {
			return gptq3Case(r, -1, "gptq", false, 96, 64)
		}, "gptq"},
	)
}

// pack3 is AutoGPTQ's 3-bit pack of a run of 32·n values into 3·n words:
// ten values at 3j, the eleventh's low two bits at 30; its high bit at 0
// of the next word, ten values at 3j+1, the 22nd's low bit at 31; its two
// high bits at 0 of the third word, ten values at 3j+2.
func pack3(v []uint32) []uint32 {
	w := make([]uint32, len(v)/32*3)
	i, row := 0, 0
	for row < len(w) {
		for j := i; j < i+10; j++ {
			w[row] |= v[j] << (3 * (j - i))
		}
		i += 10
		w[row] |= v[i] << 30
		row++
		w[row] |= (v[i] >> 2) & 1
		i++
		for j := i; j < i+10; j++ {
			w[row] |= v[j] << (3*(j-i) + 1)
		}
		i += 10
		w[row] |= v[i] << 31
		row++
		w[row] |= (v[i] >> 1) & 3
		i++
		for j := i; j < i+10; j++ {
			w[row] |= v[j] << (3*(j-i) + 2)
		}
		i += 10
		row++
	}
	return w
}

// gptq3Case: AutoGPTQ 3-bit: qweight I32 [in/32·3, out] packed along in
// (pack3 down each column), qzeros I32 [G, out/32·3] packed along out,
// scales F16 [G, out], g_idx I32 [in] with desc_act.
// Wt[i,o] = scales[g,o] * (q[i,o] - z[g,o]), z = stored (+1 in v1).
func gptq3Case(r *rand.Rand, gs int, format string, descAct bool, out, in int) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "gptq", "bits": 3, "group_size": gs, "desc_act": descAct, "checkpoint_format": format}})
	g := gs
	if gs < 0 {
		g = in
	}
	G := (in + g - 1) / g
	q := make([][]uint32, in) // q[i][o]
	for i := range q {
		q[i] = make([]uint32, out)
		for o := range q[i] {
			q[i][o] = uint32(r.IntN(8))
		}
	}
	zst := make([][]uint32, G)
	for k := range zst {
		zst[k] = make([]uint32, out)
		for o := range zst[k] {
			zst[k][o] = uint32(r.IntN(8))
		}
	}
	sb, s := half(dtype.F16, scales(r, G*out, -9, -4))
	gidx := make([]uint32, in)
	for i := range gidx {
		gidx[i] = uint32(i / g)
	}
	if descAct {
		r.Shuffle(len(gidx), func(i, j int) { gidx[i], gidx[j] = gidx[j], gidx[i] })
	}
	qw := make([]uint32, in/32*3*out)
	col := make([]uint32, in)
	for o := 0; o < out; o++ {
		for i := range col {
			col[i] = q[i][o]
		}
		for p, w := range pack3(col) {
			qw[p*out+o] = w
		}
	}
	qz := make([]uint32, 0, G*out/32*3)
	for k := 0; k < G; k++ {
		qz = append(qz, pack3(zst[k])...)
	}
	X := "model.layers.0.mlp.up_proj"
	b.put(X+".qweight", "I32", []int64{int64(in / 32 * 3), int64(out)}, u32s(qw))
	b.put(X+".qzeros", "I32", []int64{int64(G), int64(out / 32 * 3)}, u32s(qz))
	b.put(X+".scales", "F16", []int64{int64(G), int64(out)}, sb)
	if descAct {
		b.put(X+".g_idx", "I32", []int64{int64(in)}, u32s(gidx))
	}
	var plus float32
	if format == "gptq" {
		plus = 1
	}
	W := make([]float32, out*in)
	for o := 0; o < out; o++ {
		for i := 0; i < in; i++ {
			k := int(gidx[i])
			z := float32(zst[k][o]) + plus
			W[o*in+i] = s[k*out+o] * (float32(q[i][o]) - z)
		}
	}
	return b, map[string][]float32{X + ".weight": W}
}

// TestGPTQ3Broken: a 3-bit weight whose qweight rows are not whole
// triples, or whose qzeros are packed as for another width, is left out,
// named, its parts hidden.
func TestGPTQ3Broken(t *testing.T) {
	X := "model.layers.0.mlp.up_proj"
	cases := []struct {
		name, why string
		mutate    func(b *builder)
	}{
		{"qweight rows not triples", "in·3/32", func(b *builder) {
			b.edit(X+".qweight", func(e *stEntryT) { e.shape[0]--; e.data = e.data[4*e.shape[1]:] })
		}},
		{"qzeros packed 8 a word", "qzeros is I32", func(b *builder) {
			b.edit(X+".qzeros", func(e *stEntryT) { e.shape[1] = e.shape[1] / 3 * 4; e.data = make([]byte, 4*e.shape[0]*e.shape[1]) })
		}},
		{"out not a multiple of 32", "multiples of 32", func(b *builder) {
			b.edit(X+".qweight", func(e *stEntryT) { e.shape[1] -= 8; e.data = e.data[:4*e.shape[0]*e.shape[1]] })
		}},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			b, _ := gptq3Case(rand.New(rand.NewPCG(1, 2)), 32, "gptq", false, 64, 96)
			cs.mutate(b)
			c := b.build(t)
			r := c.plan(t)
			if len(r.Weights) != 0 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Why, cs.why) {
				t.Fatalf("weights %v, problems %v: want one saying %q", r.Weights, r.Problems, cs.why)
			}
			for _, p := range []string{X + ".qweight", X + ".qzeros", X + ".scales"} {
				if !r.IsHidden(p) {
					t.Errorf("%s is not hidden", p)
				}
			}
		})
	}
}
