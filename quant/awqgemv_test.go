package quant

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// No AutoAWQ package installs here: the GEMV cases pack their codes with
// AutoAWQ's own from_linear loops (gemv.py) and pack_intweight's numpy
// reshapes and transposes (gemv_fast.py) written out in Go, and compute
// the weight with the formula: (q - z) * s for GEMV; for GEMV-fast the
// kernel's __hfma2(q, s, scaled_zero) in half precision, i.e. the exact
// q·s + sz rounded once to half (math/big at 11 bits, ties to even).
func init() {
	variants = append(variants,
		variant{"awq_gemv_g128", func(r *rand.Rand) (*builder, map[string][]float32) { return awqGemvCase(r, 128, 24, 384) }, "awq-gemv"},
		// group 32: zeros width rounded up to 4 words, scales padded
		variant{"awq_gemv_g32", func(r *rand.Rand) (*builder, map[string][]float32) { return awqGemvCase(r, 32, 16, 96) }, "awq-gemv"},
		// the smallest layouts: 8 rows; group -1 (one group of in)
		variant{"awq_gemv_min", func(r *rand.Rand) (*builder, map[string][]float32) { return awqGemvCase(r, 32, 8, 32) }, "awq-gemv"},
		variant{"awq_gemv_fast_min_channel", func(r *rand.Rand) (*builder, map[string][]float32) { return awqGemvFastCase(r, -1, 8, 128) }, "awq-gemv_fast"},
		variant{"awq_gemv_fast_g128", func(r *rand.Rand) (*builder, map[string][]float32) { return awqGemvFastCase(r, 128, 24, 384) }, "awq-gemv_fast"},
		variant{"awq_gemv_fast_g64", func(r *rand.Rand) (*builder, map[string][]float32) { return awqGemvFastCase(r, 64, 16, 192) }, "awq-gemv_fast"},
	)
}

func awqCodes(r *rand.Rand, N, K, G int) (q, z [][]int32, s []float32, sb []byte) {
	q = make([][]int32, N)
	z = make([][]int32, N)
	for n := range q {
		q[n] = make([]int32, K)
		for k := range q[n] {
			q[n][k] = int32(r.IntN(16))
		}
		z[n] = make([]int32, G)
		for g := range z[n] {
			z[n][g] = int32(r.IntN(16))
		}
	}
	sb, s = half(dtype.F16, scales(r, N*G, -9, -4)) // s[n*G+g]
	return
}

// awqGemvCase: gemv.py from_linear: qweight [N, K/8], qzeros [N, zw],
// scales [N, 8·zw] (padding zero).
func awqGemvCase(r *rand.Rand, gs, N, K int) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "awq", "bits": 4, "group_size": gs, "version": "gemv", "zero_point": true}})
	G := K / gs
	zw := int(awqZerosWidthRef(K, gs))
	q, z, s, _ := awqCodes(r, N, K, G)
	qs := make([]float32, N*8*zw) // qscales[:, :G] = scales
	for n := 0; n < N; n++ {
		copy(qs[n*8*zw:], s[n*G:(n+1)*G])
	}
	qsb, _ := half(dtype.F16, qs)
	order := []int{0, 1, 2, 3, 4, 5, 6, 7}
	qw := make([]uint32, N*K/8)
	for col := 0; col < K/8; col++ {
		for i := 0; i < 8; i++ {
			for n := 0; n < N; n++ {
				qw[n*K/8+col] |= uint32(q[n][col*8+order[i]]) << (i * 4)
			}
		}
	}
	qz := make([]uint32, N*zw)
	for col := 0; col < (G+7)/8; col++ {
		for i := 0; i < 8; i++ {
			if col*8+order[i] >= G {
				continue
			}
			for n := 0; n < N; n++ {
				qz[n*zw+col] |= uint32(z[n][col*8+order[i]]) << (i * 4)
			}
		}
	}
	X := "model.layers.0.mlp.gate_proj"
	b.put(X+".qweight", "I32", []int64{int64(N), int64(K / 8)}, u32s(qw))
	b.put(X+".qzeros", "I32", []int64{int64(N), int64(zw)}, u32s(qz))
	b.put(X+".scales", "F16", []int64{int64(N), int64(8 * zw)}, qsb)
	W := make([]float32, N*K)
	for n := 0; n < N; n++ {
		for k := 0; k < K; k++ {
			W[n*K+k] = float32(q[n][k]-z[n][k/gs]) * s[n*G+k/gs]
		}
	}
	return b, map[string][]float32{X + ".weight": W}
}

// awqZerosWidthRef is calculate_zeros_width as written in gemv.py.
func awqZerosWidthRef(in, gs int) int {
	mult := map[int]int{32: 4, 64: 2}[gs]
	if gs >= 128 {
		mult = 1
	}
	md := func(c, d int) int { return (c + d - 1) / d }
	return md(md(in/gs, 8), mult) * mult
}

// transposeND is numpy's a.reshape(shape).transpose(perm), flattened.
func transposeND(a []int32, shape, perm []int) []int32 {
	nd := len(shape)
	stride := make([]int, nd)
	stride[nd-1] = 1
	for i := nd - 2; i >= 0; i-- {
		stride[i] = stride[i+1] * shape[i+1]
	}
	out := make([]int32, len(a))
	idx := make([]int, nd) // index in the output's dims
	for o := range out {
		src := 0
		for d := 0; d < nd; d++ {
			src += idx[d] * stride[perm[d]]
		}
		out[o] = a[src]
		for d := nd - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[perm[d]] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// packIntweight is gemv_fast.py's pack_intweight (interleave 4, kstride
// 64) on the codes [N, K], returning the int16 words [N/4, K].
func packIntweight(q []int32, N, K int) []uint16 {
	p := transposeND(q, []int{N, K / 32, 4, 4, 2}, []int{0, 1, 3, 2, 4})
	p = transposeND(p, []int{N, K / 32, 4, 4, 2}, []int{0, 1, 2, 4, 3})
	p = transposeND(p, []int{N / 4, 4, K / 64, 64}, []int{0, 2, 1, 3})
	// reshape (N/4, K/64, 64, 4): the last axis the four nibbles
	w := make([]uint16, len(p)/4)
	for i := range w {
		w[i] = uint16(p[4*i] | p[4*i+1]<<4 | p[4*i+2]<<8 | p[4*i+3]<<12)
	}
	return w
}

// awqGemvFastCase: gemv_fast.py from_linear: qweight I16 [N/4, K], scales
// and scaled_zeros F16 [8·zw, N], scaled_zeros = -(s * z in float32) to
// half; plus some scaled_zeros replaced by any half of the same size, so
// that q·s + sz rounds.
func awqGemvFastCase(r *rand.Rand, gs, N, K int) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "awq", "bits": 4, "group_size": gs, "version": "gemv_fast", "zero_point": true}})
	if gs < 0 {
		gs = K // the module's group_size (WQLinear.__init__)
	}
	G := K / gs
	zw := awqZerosWidthRef(K, gs)
	q, z, s, _ := awqCodes(r, N, K, G)
	flat := make([]int32, 0, N*K)
	for n := range q {
		flat = append(flat, q[n]...)
	}
	words := packIntweight(flat, N, K)
	qwb := make([]byte, 2*len(words))
	for i, w := range words {
		qwb[2*i], qwb[2*i+1] = byte(w), byte(w>>8)
	}
	st := make([]float32, 8*zw*N) // [8·zw, N]
	szf := make([]float32, 8*zw*N)
	for n := 0; n < N; n++ {
		for g := 0; g < G; g++ {
			st[g*N+n] = s[n*G+g]
			szf[g*N+n] = -(s[n*G+g] * float32(z[n][g]))
			if r.IntN(4) == 0 {
				szf[g*N+n] = -float32(r.Float64()) * 16 * s[n*G+g]
			}
		}
	}
	stb, _ := half(dtype.F16, st)
	szb, sz := half(dtype.F16, szf)
	X := "model.layers.0.mlp.gate_proj"
	b.put(X+".qweight", "I16", []int64{int64(N / 4), int64(K)}, qwb)
	b.put(X+".scales", "F16", []int64{int64(8 * zw), int64(N)}, stb)
	b.put(X+".scaled_zeros", "F16", []int64{int64(8 * zw), int64(N)}, szb)
	W := make([]float32, N*K)
	for n := 0; n < N; n++ {
		for k := 0; k < K; k++ {
			g := k / gs
			exact := new(big.Float).SetPrec(200).SetFloat64(float64(q[n][k]))
			exact.Mul(exact, big.NewFloat(float64(s[n*G+g])))
			exact.Add(exact, big.NewFloat(float64(sz[g*N+n])))
			h, _ := new(big.Float).SetPrec(11).SetMode(big.ToNearestEven).Set(exact).Float32()
			W[n*K+k] = h
		}
	}
	return b, map[string][]float32{X + ".weight": W}
}

// TestF16Round: f16Round and roundF16 of a float32 are dtype's F32→F16 conversion (one
// rounding, ties to even), subnormals and overflow included.
func TestF16Round(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := make([]float32, 1<<16)
	for i := range src {
		// exponents -30..17: zero and subnormal halves, normal ones, overflow
		e := uint32(127 - 30 + r.IntN(48))
		src[i] = math.Float32frombits(r.Uint32()&0x807FFFFF | e<<23)
	}
	src[0], src[1], src[2] = 65519.99, 65520, float32(math.Ldexp(3, -26))
	_, want := half(dtype.F16, src)
	for i, x := range src {
		if got := f16Round(float64(x)); math.Float32bits(got) != math.Float32bits(want[i]) && !(got != got && want[i] != want[i]) {
			t.Fatalf("f16Round(%g) = %g, want %g", x, got, want[i])
		}
		if got := roundF16(x); math.Float32bits(got) != math.Float32bits(want[i]) && !(got != got && want[i] != want[i]) {
			t.Fatalf("roundF16(%g) = %g, want %g", x, got, want[i])
		}
	}
}

// TestAWQGemvBroken: an unpackable group and parts of the wrong layout
// leave the weight out, named, parts hidden.
func TestAWQGemvBroken(t *testing.T) {
	X := "model.layers.0.mlp.gate_proj"
	cases := []struct {
		name, why string
		make      func() *builder
	}{
		{"gemv group 48", "group_size 48", func() *builder {
			b, _ := awqGemvCase(rand.New(rand.NewPCG(1, 1)), 128, 16, 384)
			b.files["config.json"] = []byte(`{"quantization_config":{"quant_method":"awq","bits":4,"group_size":48,"version":"gemv"}}`)
			return b
		}},
		{"gemv qzeros unpadded", "qzeros is I32", func() *builder {
			b, _ := awqGemvCase(rand.New(rand.NewPCG(1, 1)), 32, 16, 96)
			b.edit(X+".qzeros", func(e *stEntryT) { e.shape[1] = 1; e.data = e.data[:4*16] })
			return b
		}},
		{"gemv_fast scales not transposed", "scales is F16", func() *builder {
			b, _ := awqGemvFastCase(rand.New(rand.NewPCG(1, 1)), 64, 32, 192)
			b.edit(X+".scales", func(e *stEntryT) { e.shape[0], e.shape[1] = e.shape[1], e.shape[0] })
			return b
		}},
		{"gemv_fast qweight I32", "not I16", func() *builder {
			b, _ := awqGemvFastCase(rand.New(rand.NewPCG(1, 1)), 64, 16, 192)
			b.edit(X+".qweight", func(e *stEntryT) { e.dt = "I32"; e.shape[1] /= 2 })
			return b
		}},
		{"gemv_fast without scaled_zeros", "missing", func() *builder {
			b, _ := awqGemvFastCase(rand.New(rand.NewPCG(1, 1)), 64, 16, 192)
			b.drop(X + ".scaled_zeros")
			return b
		}},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			c := cs.make().build(t)
			r := c.plan(t)
			if len(r.Weights) != 0 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Why, cs.why) {
				t.Fatalf("weights %v, problems %v: want one saying %q", r.Weights, r.Problems, cs.why)
			}
			for _, tn := range c.tensors {
				if !r.IsHidden(tn.Name) {
					t.Errorf("%s is not hidden", tn.Name)
				}
			}
		})
	}
}
