package quant

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// No hqq package installs here: the cases store an HQQLinear's
// state_dict as hqq's encode_safetensor_type writes it, pack the codes
// with bitpack.py's row blocks written out in Go, and compute each value
// by Quantizer.dequantize's ((W_r − zero) · scale) in the compute dtype,
// each operation rounded by dtype's own float32 → bf16/f16 converter.
func init() {
	variants = append(variants,
		variant{"hqq_4bit_bf16_g64", func(r *rand.Rand) (*builder, map[string][]float32) {
			return hqqCase(r, 4, 64, 16, 128, "bfloat16", false, false)
		}, "hqq"},
		// 3 bits: G = 36 groups in 4 rows of ten blocks, the last 4 slots padding
		variant{"hqq_3bit_f16_g32", func(r *rand.Rand) (*builder, map[string][]float32) {
			return hqqCase(r, 3, 32, 12, 96, "float16", false, false)
		}, "hqq"},
		// 2 bits, W_q viewed as bf16 (view_as_float), ints as U8 (older hqq)
		variant{"hqq_2bit_view_as_float_u8ints", func(r *rand.Rand) (*builder, map[string][]float32) {
			return hqqCase(r, 2, 64, 8, 128, "bfloat16", true, true)
		}, "hqq"},
		variant{"hqq_1bit_f16", func(r *rand.Rand) (*builder, map[string][]float32) {
			return hqqCase(r, 1, 16, 8, 64, "float16", false, false)
		}, "hqq"},
		variant{"hqq_8bit_f32", func(r *rand.Rand) (*builder, map[string][]float32) {
			return hqqCase(r, 8, 32, 4, 64, "float32", false, false)
		}, "hqq"},
	)
}

func hqqCase(r *rand.Rand, nbits, gs, O, I int, cd string, viewAsFloat, u8ints bool) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "hqq",
		"quant_config": map[string]any{"weight_quant_params": map[string]any{"nbits": nbits, "group_size": gs, "axis": 1}}}})
	cdt := map[string]dtype.DType{"bfloat16": dtype.BF16, "float16": dtype.F16, "float32": dtype.F32}[cd]
	G := O * I / gs
	q := make([][]uint32, G)
	for g := range q {
		q[g] = make([]uint32, gs)
		for c := range q[g] {
			q[g][c] = uint32(r.IntN(1 << nbits))
		}
	}
	sf := scales(r, G, -9, -3)
	zf := make([]float32, G)
	for g := range zf {
		zf[g] = float32(r.Float64() * float64(int(1)<<nbits))
	}
	var sb, zb []byte
	var s, z []float32
	if cdt == dtype.F32 {
		sb, s, zb, z = f32s(sf), sf, f32s(zf), zf
	} else {
		sb, s = half(cdt, sf)
		zb, z = half(cdt, zf)
	}
	// bitpack.py: k row blocks of step rows, block j in the bits from the top
	var wq []byte
	var wqShape []int64
	if nbits == 3 {
		step := (G + 9) / 10
		w := make([]uint32, step*gs)
		for g := 0; g < G; g++ {
			for c := 0; c < gs; c++ {
				w[(g%step)*gs+c] |= q[g][c] << (27 - 3*(g/step))
			}
		}
		wq, wqShape = u32s(w), []int64{int64(step), int64(gs)}
	} else {
		k := 8 / nbits
		step := G / k
		wq = make([]byte, step*gs)
		for g := 0; g < G; g++ {
			for c := 0; c < gs; c++ {
				wq[(g%step)*gs+c] |= byte(q[g][c] << (8 - nbits*(g/step+1)))
			}
		}
		wqShape = []int64{int64(step), int64(gs)}
	}
	X := "model.layers.0.self_attn.o_proj"
	wdt := map[bool]string{true: "I32", false: "U8"}[nbits == 3]
	if viewAsFloat {
		wdt = map[dtype.DType]string{dtype.BF16: "BF16", dtype.F16: "F16", dtype.F32: "F32"}[cdt]
		wqShape[1] = int64(len(wq)) / wqShape[0] / cdt.ElemSize()
	}
	i32 := func(v int) ([]byte, string) {
		if u8ints {
			return []byte{byte(v)}, "U8"
		}
		return binary.LittleEndian.AppendUint32(nil, uint32(v)), "I32"
	}
	b.put(X+".W_q", wdt, wqShape, wq)
	for _, kv := range []struct {
		k string
		v int
	}{{"nbits", nbits}, {"group_size", gs}, {"axis", 1}} {
		d, t := i32(kv.v)
		b.put(X+"."+kv.k, t, []int64{}, d)
	}
	b.put(X+".shape", "I64", []int64{2}, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(O)), uint64(I)))
	b.put(X+".scale", map[dtype.DType]string{dtype.BF16: "BF16", dtype.F16: "F16", dtype.F32: "F32"}[cdt], []int64{int64(G), 1}, sb)
	b.put(X+".zero", map[dtype.DType]string{dtype.BF16: "BF16", dtype.F16: "F16", dtype.F32: "F32"}[cdt], []int64{int64(G), 1}, zb)
	packing := map[int]string{8: "8bit_u8", 4: "4bit_u8", 3: "3bit_32", 2: "2bit_u8", 1: "1bit_u8"}[nbits]
	b.put(X+".packing", "U8", []int64{int64(len(packing))}, []byte(packing))
	b.put(X+".compute_dtype", "U8", []int64{int64(len("torch." + cd))}, []byte("torch."+cd))
	b.put(X+".unpack_view_dtype", "U8", []int64{11}, []byte("torch.uint8"))
	for _, k := range []string{"view_as_float", "quant_scale", "quant_zero", "channel_wise", "optimize", "round_zero", "offload_meta", "encoded_state_dict", "stores_quant_config"} {
		v := byte(0)
		if k == "view_as_float" && viewAsFloat || k == "channel_wise" || k == "encoded_state_dict" || k == "stores_quant_config" {
			v = 1
		}
		b.put(X+"."+k, "U8", []int64{}, []byte{v})
	}
	b.put(X+".bias", "BF16", []int64{int64(O)}, make([]byte, 2*O))
	// (W_r − zero) · scale, each rounded to the compute dtype
	rd := func(v float32) float32 {
		if cdt == dtype.F32 {
			return v
		}
		_, back := half(cdt, []float32{v})
		return back[0]
	}
	W := make([]float32, O*I)
	for e := range W {
		g, c := e/gs, e%gs
		W[e] = rd(rd(float32(q[g][c])-z[g]) * s[g])
	}
	return b, map[string][]float32{X + ".weight": W}
}

// TestHQQRefused: what HQQ does not read is named, the module's tensors
// but its bias hidden.
func TestHQQRefused(t *testing.T) {
	X := "model.layers.0.self_attn.o_proj"
	for _, cs := range []struct {
		name, why string
		mutate    func(b *builder)
	}{
		{"axis 0", "axis 0", func(b *builder) { b.edit(X+".axis", func(e *stEntryT) { e.data = []byte{0, 0, 0, 0} }) }},
		{"quantized zero", "quant_zero", func(b *builder) { b.edit(X+".quant_zero", func(e *stEntryT) { e.data = []byte{1} }) }},
		{"nbits 1.58", "nbits not read", func(b *builder) {
			b.edit(X+".nbits", func(e *stEntryT) { e.dt = "F32"; e.data = f32s([]float32{1.58}) })
		}},
		{"scale in float32", "not BF16", func(b *builder) {
			b.edit(X+".scale", func(e *stEntryT) { e.dt = "F32"; e.data = make([]byte, 2*len(e.data)) })
		}},
		{"W_q short", "W_q is U8", func(b *builder) {
			b.edit(X+".W_q", func(e *stEntryT) { e.shape[0]--; e.data = e.data[e.shape[1]:] })
		}},
		{"packing other", `packing "4bit_u8_x"`, func(b *builder) {
			b.edit(X+".packing", func(e *stEntryT) { e.data = []byte("4bit_u8_x"); e.shape[0] = 9 })
		}},
	} {
		t.Run(cs.name, func(t *testing.T) {
			b, _ := hqqCase(rand.New(rand.NewPCG(3, 3)), 4, 64, 16, 128, "bfloat16", false, false)
			cs.mutate(b)
			c := b.build(t)
			r := c.plan(t)
			if len(r.Weights) != 0 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Why, cs.why) || !strings.HasPrefix(r.Problems[0].Why, "HQQ ") {
				t.Fatalf("weights %v, problems %v: want one saying %q", r.Weights, r.Problems, cs.why)
			}
			for _, tn := range c.tensors {
				if r.IsHidden(tn.Name) == (tn.Name == X+".bias") {
					t.Errorf("%s hidden %v", tn.Name, r.IsHidden(tn.Name))
				}
			}
		})
	}
}

// TestHQQNamed: an HQQ module without its meta is named, every HQQ
// tensor of its hidden (the scale and zero are floats, which the views
// would otherwise list), and its bias and the unquantized tensors served.
func TestHQQNamed(t *testing.T) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "hqq",
		"quant_config": map[string]any{"weight_quant_params": map[string]any{"nbits": 4, "group_size": 64, "axis": 1}}}})
	X := "model.layers.0.mlp.down_proj"
	b.put(X+".W_q", "U8", []int64{2, 64}, make([]byte, 128))
	b.put(X+".scale", "BF16", []int64{4, 1}, make([]byte, 8))
	b.put(X+".zero", "BF16", []int64{4, 1}, make([]byte, 8))
	b.put(X+".bias", "BF16", []int64{64}, make([]byte, 128))
	b.put("model.norm.weight", "BF16", []int64{64}, make([]byte, 128))
	c := b.build(t)
	r := c.plan(t)
	if len(r.Weights) != 0 || len(r.Problems) != 1 || r.Problems[0].Name != X+".weight" || !strings.Contains(r.Problems[0].Why, "HQQ nbits") {
		t.Fatalf("weights %v, problems %v", r.Weights, r.Problems)
	}
	for _, n := range []string{X + ".W_q", X + ".scale", X + ".zero"} {
		if !r.IsHidden(n) {
			t.Errorf("%s is not hidden", n)
		}
	}
	for _, n := range []string{X + ".bias", "model.norm.weight"} {
		if r.IsHidden(n) {
			t.Errorf("%s is hidden", n)
		}
	}
}

// TestHQQWidths: HQQ 8/3/2/1-bit (and 4-bit outside bf16) in each compute
// dtype, whole groups of a row block at once through dtype.AffineBits,
// gives hqq's values bit for bit, with lookups and without, whole and in
// every sub-range; a group size that is not a multiple of 8 stays on the
// per-group table.
func TestHQQWidths(t *testing.T) {
	for i, nbits := range []int{1, 2, 3, 4, 8} {
		for j, cd := range []string{"bfloat16", "float16", "float32"} {
			for _, gs := range []int{64, 32, 24, 12} {
				t.Run(fmt.Sprintf("%dbit/%s/g%d", nbits, cd, gs), func(t *testing.T) {
					b, want := hqqCase(rand.New(rand.NewPCG(uint64(i), uint64(j*100+gs))), nbits, gs, 10, 4*gs, cd, false, false)
					c := b.build(t)
					r := c.plan(t)
					if len(r.Problems) != 0 || len(r.Weights) != len(want) {
						t.Fatalf("problems %v", r.Problems)
					}
					for name, W := range want {
						bothPaths(t, c, weightByName(r, name), W)
					}
				})
			}
		}
	}
}
