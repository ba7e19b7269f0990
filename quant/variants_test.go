package quant

// Variants the shared fixtures lack, generated here: each case writes a
// safetensors file the way its producer lays the parts out, and computes
// the expected values with the reference's formula written out element by
// element (the reference each follows is named at each case), in float32
// one operation at a time. The E4M3 and E8M0 codes are decoded here from
// their bit fields, not through dtype's tables.

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

type builder struct {
	tensors map[string]stEntryT
	order   []string
	files   map[string][]byte
}

type stEntryT struct {
	dt    string
	shape []int64
	data  []byte
}

func newBuilder(config any) *builder {
	cfg, _ := json.Marshal(config)
	return &builder{tensors: map[string]stEntryT{}, files: map[string][]byte{"config.json": cfg}}
}

func (b *builder) put(name, dt string, shape []int64, data []byte) {
	b.tensors[name] = stEntryT{dt, shape, data}
	b.order = append(b.order, name)
}

func (b *builder) build(t testing.TB) *ckpt {
	t.Helper()
	hdr := map[string]any{}
	var blob []byte
	for _, n := range b.order {
		e := b.tensors[n]
		hdr[n] = map[string]any{"dtype": e.dt, "shape": e.shape, "data_offsets": []int{len(blob), len(blob) + len(e.data)}}
		blob = append(blob, e.data...)
	}
	h, _ := json.Marshal(hdr)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	file = append(append(file, h...), blob...)
	c := &ckpt{data: map[string][]byte{}, files: b.files}
	c.addSafetensors(t, "gen.safetensors", file)
	return c
}

func u32s(v []uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

func f32s(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// half converts float32 values to 16-bit floats (round to nearest even)
// and returns their bytes and the float32 values they hold.
func half(to dtype.DType, v []float32) ([]byte, []float32) {
	b := make([]byte, 2*len(v))
	conv, _ := dtype.ConverterFor(dtype.F32, to)
	conv(b, f32s(v))
	back := make([]float32, len(v))
	conv2, _ := dtype.ConverterFor(to, dtype.F32)
	conv2(f32Bytes(back), b)
	return b, back
}

// e4m3 decodes an F8_E4M3 (fn) code from its fields.
func e4m3(b byte) float32 {
	s, e, m := b>>7, int(b>>3&15), float64(b&7)
	var v float64
	switch {
	case e == 15 && m == 7:
		v = math.NaN()
	case e == 0:
		v = m / 8 * math.Ldexp(1, -6)
	default:
		v = (1 + m/8) * math.Ldexp(1, e-7)
	}
	if s == 1 {
		v = -v
	}
	return float32(v)
}

func finiteE4M3(r *rand.Rand) byte {
	for {
		b := byte(r.IntN(256))
		if b&0x7F != 0x7F {
			return b
		}
	}
}

func scales(r *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Exp2(lo + r.Float64()*(hi-lo)))
	}
	return v
}

var lut4 = [16]float32{0, .5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -.5, -1, -1.5, -2, -3, -4, -6}

type variant struct {
	name   string
	make   func(r *rand.Rand) (*builder, map[string][]float32)
	scheme string
}

var variants = []variant{
	// gptqmodel checkpoint_format gptq_v2: zeros stored as is (no +1),
	// 4-bit, group 32, no g_idx; AutoGPTQ forward otherwise.
	{"gptq_v2", func(r *rand.Rand) (*builder, map[string][]float32) {
		return gptqCase(r, 4, 32, "gptq_v2", false, 48, 96)
	}, "gptq-v2"},
	// GPTQ v1 8-bit with a permuted g_idx (desc_act).
	{"gptq_v1_8bit_desc_act", func(r *rand.Rand) (*builder, map[string][]float32) {
		return gptqCase(r, 8, 16, "gptq", true, 24, 64)
	}, "gptq"},
	// GPTQ 4-bit, in not a multiple of the group: the last group is short
	// (the table kernel's tail).
	{"gptq_v1_short_group", func(r *rand.Rand) (*builder, map[string][]float32) {
		return gptqCase(r, 4, 64, "gptq", false, 40, 200)
	}, "gptq"},
	// GPTQ 4-bit with a permuted g_idx (dtype.Lookup4At).
	{"gptq_v1_4bit_desc_act", func(r *rand.Rand) (*builder, map[string][]float32) {
		return gptqCase(r, 4, 32, "gptq", true, 24, 160)
	}, "gptq"},
	// GPTQ 2-bit, group_size -1 (one group).
	{"gptq_v2_2bit_channel", func(r *rand.Rand) (*builder, map[string][]float32) {
		return gptqCase(r, 2, -1, "gptq_v2", false, 32, 80)
	}, "gptq-v2"},
	{"bnb_fp4", func(r *rand.Rand) (*builder, map[string][]float32) { return bnbCase(r, "fp4", false) }, "bnb-fp4"},
	{"bnb_fp4_double", func(r *rand.Rand) (*builder, map[string][]float32) { return bnbCase(r, "fp4", true) }, "bnb-fp4"},
	{"bnb_nf4_single", func(r *rand.Rand) (*builder, map[string][]float32) { return bnbCase(r, "nf4", false) }, "bnb-nf4"},
	{"bnb_int8", func(r *rand.Rand) (*builder, map[string][]float32) { return bnbInt8Case(r, true) }, "bnb-int8"},
	{"bnb_int8_no_format", func(r *rand.Rand) (*builder, map[string][]float32) { return bnbInt8Case(r, false) }, "bnb-int8"},
	{"mlx_2bit_g32", func(r *rand.Rand) (*builder, map[string][]float32) { return mlxCase(r, 2, 32, dtype.BF16, false) }, "mlx-affine"},
	{"mlx_8bit_g128_f16", func(r *rand.Rand) (*builder, map[string][]float32) {
		return mlxCase(r, 8, 128, dtype.F16, false)
	}, "mlx-affine"},
	{"mlx_4bit_experts_override", func(r *rand.Rand) (*builder, map[string][]float32) {
		return mlxCase(r, 4, 64, dtype.BF16, true)
	}, "mlx-affine"},
	// 3, 5 and 6 bits: codes that cross bytes (mlx-community's 3bit and
	// 6bit releases).
	{"mlx_3bit_g64", func(r *rand.Rand) (*builder, map[string][]float32) { return mlxCase(r, 3, 64, dtype.BF16, false) }, "mlx-affine"},
	{"mlx_5bit_g32_f16", func(r *rand.Rand) (*builder, map[string][]float32) {
		return mlxCase(r, 5, 32, dtype.F16, false)
	}, "mlx-affine"},
	{"mlx_6bit_experts_override", func(r *rand.Rand) (*builder, map[string][]float32) {
		return mlxCase(r, 6, 64, dtype.BF16, true)
	}, "mlx-affine"},
	{"mlx_mxfp4", func(r *rand.Rand) (*builder, map[string][]float32) { return mlxFPCase(r, "mxfp4") }, "mlx-mxfp4"},
	{"mlx_nvfp4", func(r *rand.Rand) (*builder, map[string][]float32) { return mlxFPCase(r, "nvfp4") }, "mlx-nvfp4"},
	{"mlx_mxfp8", func(r *rand.Rand) (*builder, map[string][]float32) { return mlxFPCase(r, "mxfp8") }, "mlx-mxfp8"},
	{"ct_int8_asym_channel", func(r *rand.Rand) (*builder, map[string][]float32) { return ctIntAsymCase(r, 0) }, "int8-channel"},
	{"ct_int8_asym_group", func(r *rand.Rand) (*builder, map[string][]float32) { return ctIntAsymCase(r, 32) }, "int8-channel"},
	{"fbgemm_fp8", fbgemmCase, "fp8-channel"},
	{"deepseek_v4_e8m0", dsv4Case, "fp8-block"},
	{"ct_nvfp4", ctNVFP4Case, "nvfp4"},
	{"ct_int8_channel", ctInt8Case, "int8-packed"},
	{"ct_int_quantized", ctIntQuantizedCase, "int8-channel"},
	{"ct_int4_actorder", func(r *rand.Rand) (*builder, map[string][]float32) { return ctInt4ActorderCase(r, 32) }, "int4-packed"},
	// group size 8: 12 groups scattered by g_idx, so that a short range's
	// groups span widely and are read one by one (scratch.gather)
	{"ct_int4_actorder_g8", func(r *rand.Rand) (*builder, map[string][]float32) { return ctInt4ActorderCase(r, 8) }, "int4-packed"},
}

// gptqCase: AutoGPTQ qlinear_cuda_old.py pack/forward; v2 per gptqmodel.
// Wt[i,o] = scales[g,o] * (q[i,o] - z[g,o]), z = stored (+1 in v1).
func gptqCase(r *rand.Rand, bits, gs int, format string, descAct bool, out, in int) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "gptq", "bits": bits, "group_size": gs, "desc_act": descAct, "checkpoint_format": format}})
	f := 32 / bits
	g := gs
	if gs < 0 {
		g = in
	}
	G := (in + g - 1) / g
	q := make([][]uint32, in)
	for i := range q {
		q[i] = make([]uint32, out)
		for o := range q[i] {
			q[i][o] = uint32(r.IntN(1 << bits))
		}
	}
	zst := make([][]uint32, G)
	for k := range zst {
		zst[k] = make([]uint32, out)
		for o := range zst[k] {
			zst[k][o] = uint32(r.IntN(1 << bits))
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
	qw := make([]uint32, in/f*out)
	for i := 0; i < in; i++ {
		for o := 0; o < out; o++ {
			qw[(i/f)*out+o] |= q[i][o] << (bits * (i % f))
		}
	}
	qz := make([]uint32, G*out/f)
	for k := 0; k < G; k++ {
		for o := 0; o < out; o++ {
			qz[k*out/f+o/f] |= zst[k][o] << (bits * (o % f))
		}
	}
	X := "model.layers.0.mlp.up_proj"
	b.put(X+".qweight", "I32", []int64{int64(in / f), int64(out)}, u32s(qw))
	b.put(X+".qzeros", "I32", []int64{int64(G), int64(out / f)}, u32s(qz))
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

// bnbCase: bitsandbytes functional.py dequantize_4bit (codes high nibble
// first, W = code[v] * absmax[n/blocksize]), QuantState.from_dict
// (nested: absmax = nested_code[a] * nested_absmax[j/256], then + offset).
// fp4's code is get_4bit_type("fp4"): [0, 0.0625, 8, 12, 4, 6, 2, 3]/12,
// negated for codes 8..15.
func bnbCase(r *rand.Rand, typ string, nested bool) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "bitsandbytes", "load_in_4bit": true,
		"bnb_4bit_quant_type": typ, "bnb_4bit_use_double_quant": nested}})
	var code [16]float32
	if typ == "fp4" {
		for i, v := range []float32{0, 0.0625, 8, 12, 4, 6, 2, 3} {
			code[i] = v / 12
			code[i+8] = -v / 12
		}
	} else {
		for i := range code {
			code[i] = float32(i-8) / 8 // any table: the checkpoint's is used
		}
	}
	out := map[string][]float32{}
	for k, shape := range [][2]int{{33, 21}, {8, 40}} {
		X := []string{"model.layers.0.mlp.down_proj", "model.layers.0.self_attn.k_proj"}[k]
		n := shape[0] * shape[1]
		bs, nbs := 64, 4
		nb := (n + bs - 1) / bs
		v := make([]byte, n)
		for i := range v {
			v[i] = byte(r.IntN(16))
		}
		packed := make([]byte, (n+1)/2)
		for i := range v {
			if i%2 == 0 {
				packed[i/2] |= v[i] << 4
			} else {
				packed[i/2] |= v[i]
			}
		}
		absmax := make([]float32, nb)
		st := map[string]any{"quant_type": typ, "blocksize": bs, "dtype": "bfloat16", "shape": shape}
		b.put(X+".weight", "U8", []int64{int64(len(packed)), 1}, packed)
		if nested {
			a := make([]byte, nb)
			nn := (nb + nbs - 1) / nbs
			nabs := scales(r, nn, -6, -2)
			nqm := make([]float32, 256)
			for i := range nqm {
				nqm[i] = float32(r.Float64()*2 - 1)
			}
			off := float32(0.03125 + r.Float64()/16)
			for j := range a {
				a[j] = byte(r.IntN(256))
				p := float32(nqm[a[j]] * nabs[j/nbs])
				absmax[j] = p + off
			}
			st["nested_blocksize"], st["nested_dtype"], st["nested_offset"] = nbs, "float32", float64(off)
			b.put(X+".weight.absmax", "U8", []int64{int64(nb)}, a)
			b.put(X+".weight.nested_absmax", "F32", []int64{int64(nn)}, f32s(nabs))
			b.put(X+".weight.nested_quant_map", "F32", []int64{256}, f32s(nqm))
		} else {
			absmax = scales(r, nb, -6, -1)
			b.put(X+".weight.absmax", "F32", []int64{int64(nb)}, f32s(absmax))
		}
		b.put(X+".weight.quant_map", "F32", []int64{16}, f32s(code[:]))
		js, _ := json.Marshal(st)
		b.put(X+".weight.quant_state.bitsandbytes__"+typ, "U8", []int64{int64(len(js))}, js)
		W := make([]float32, n)
		for i := range W {
			W[i] = code[v[i]] * absmax[i/bs]
		}
		out[X+".weight"] = W
	}
	return b, out
}

// bnbInt8Case: bitsandbytes 8-bit as transformers saves it (X.weight I8,
// X.SCB F32 [out], X.weight_format U8 0 = "row"; an unquantized module
// beside it, llm_int8_skip_modules): W = A * SCB.view(-1, 1) *
// 7.874015718698502e-3, the float32 product, then times 1/127 as a
// float32 (checked against torch 1.13 running that expression: the same
// bits in 19,200 of 19,200 elements; multiplying the scale by 1/127
// first differs).
func bnbInt8Case(r *rand.Rand, format bool) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "bitsandbytes", "load_in_8bit": true,
		"llm_int8_threshold": 6.0, "llm_int8_skip_modules": []string{"lm_head"}}})
	X := "model.layers.0.mlp.down_proj"
	O, I := 24, 72
	q := make([]byte, O*I)
	for i := range q {
		q[i] = byte(int8(r.IntN(255) - 127))
	}
	scb := scales(r, O, -2, 3)
	b.put(X+".weight", "I8", []int64{int64(O), int64(I)}, q)
	b.put(X+".SCB", "F32", []int64{int64(O)}, f32s(scb))
	if format {
		b.put(X+".weight_format", "U8", []int64{}, []byte{0})
	}
	b.put("lm_head.weight", "F16", []int64{2, 2}, make([]byte, 8))
	W := make([]float32, O*I)
	for i := range W {
		p := float32(float32(int8(q[i])) * scb[i/I])
		W[i] = p * float32(7.874015718698502e-3)
	}
	return b, map[string][]float32{X + ".weight": W}
}

// decodeE4M3 is an OCP E4M3 byte's value (bias 7, subnormals, 0x7f and
// 0xff NaN), written here from the format, apart from the package's table.
func decodeE4M3(b byte) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	e, m := int(b>>3&15), float64(b&7)
	if e == 0 {
		return sign * float32(math.Ldexp(m/8, -6))
	}
	return sign * float32(math.Ldexp(1+m/8, e-7))
}

// mlxFPCase: MLX's floating-point modes (quantized.cpp fp_qmm,
// dequantize_scale): mxfp4 (E2M1 codes low nibble first, an E8M0 scale a
// group of 32), nvfp4 (E4M3 scale a group of 16), mxfp8 (E4M3 codes);
// W = scale * value. E8M0 0 is 2^-127 (bf16 0x0040).
func mlxFPCase(r *rand.Rand, mode string) (*builder, map[string][]float32) {
	bits, gs := 4, 32
	switch mode {
	case "nvfp4":
		gs = 16
	case "mxfp8":
		bits = 8
	}
	X := "model.layers.0.mlp.experts.down_proj"
	b := newBuilder(map[string]any{"model_type": "gpt_oss", "quantization": map[string]any{"group_size": gs, "bits": bits, "mode": mode}})
	shape := []int{2, 6, 4 * gs} // experts, out, in
	in, rows := shape[2], shape[0]*shape[1]
	G := in / gs
	codes := make([]byte, rows*in*bits/8)
	for i := range codes {
		codes[i] = byte(r.IntN(256))
		if bits == 8 && codes[i]&0x7f == 0x7f {
			codes[i] ^= 1 // no NaN
		}
	}
	sc := make([]byte, rows*G)
	scale := make([]float32, rows*G)
	for i := range sc {
		if mode == "nvfp4" {
			sc[i] = byte(0x20 + r.IntN(0x40))
			scale[i] = decodeE4M3(sc[i])
		} else {
			sc[i] = byte(115 + r.IntN(20))
			if i == 0 {
				sc[i] = 0
			}
			scale[i] = float32(math.Ldexp(1, int(sc[i])-127))
		}
	}
	e2m1 := []float32{0, .5, 1, 1.5, 2, 3, 4, 6}
	W := make([]float32, rows*in)
	for i := range W {
		var v float32
		if bits == 8 {
			v = decodeE4M3(codes[i])
		} else {
			c := codes[i/2] >> (4 * (i % 2)) & 15
			v = e2m1[c&7]
			if c&8 != 0 {
				v = -v
			}
		}
		W[i] = scale[(i/in)*G+(i%in)/gs] * v
	}
	b.put(X+".weight", "U32", []int64{int64(shape[0]), int64(shape[1]), int64(in * bits / 32)}, codes)
	b.put(X+".scales", "U8", []int64{int64(shape[0]), int64(shape[1]), int64(G)}, sc)
	return b, map[string][]float32{X + ".weight": W}
}

// mlxCase: mlx.core.dequantize (affine): w = scales * q + biases, q a
// little-endian bit stream (LSB first in uint32 words for 2, 4, 8 bits);
// per-module override in config's quantization.
func mlxCase(r *rand.Rand, bits, gs int, sdt dtype.DType, experts bool) (*builder, map[string][]float32) {
	X := "model.layers.0.self_attn.q_proj"
	quant := map[string]any{"group_size": gs, "bits": bits}
	shape := []int{40, 2 * gs}
	if experts {
		X = "model.layers.0.mlp.switch_mlp.up_proj"
		quant = map[string]any{"group_size": 32, "bits": 8, X: map[string]any{"group_size": gs, "bits": bits}}
		shape = []int{3, 8, 3 * gs}
	}
	b := newBuilder(map[string]any{"model_type": "llama", "quantization": quant})
	in := shape[len(shape)-1]
	rows := 1
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	G := in / gs
	q := make([]uint32, rows*in)
	for i := range q {
		q[i] = uint32(r.IntN(1 << bits))
	}
	// One little-endian bit stream (quantized.cpp's quantize: 2, 4, 8
	// bits LSB first in uint32 words; 3, 5, 6 bits packed into 3 or 5
	// bytes, LSB first), as uint32 words.
	stream := make([]byte, rows*in*bits/8)
	for i, x := range q {
		for k := range bits {
			if x>>k&1 != 0 {
				bit := i*bits + k
				stream[bit/8] |= 1 << (bit % 8)
			}
		}
	}
	words := make([]uint32, len(stream)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(stream[4*i:])
	}
	sb, s := half(sdt, scales(r, rows*G, -9, -4))
	biasv := make([]float32, rows*G)
	for i := range biasv {
		biasv[i] = float32(r.NormFloat64() * 0.05)
	}
	bb, bias := half(sdt, biasv)
	wshape := make([]int64, len(shape))
	gshape := make([]int64, len(shape))
	for i, d := range shape {
		wshape[i], gshape[i] = int64(d), int64(d)
	}
	wshape[len(shape)-1] = int64(in * bits / 32)
	gshape[len(shape)-1] = int64(G)
	b.put(X+".weight", "U32", wshape, u32s(words))
	b.put(X+".scales", sdt.String(), gshape, sb)
	b.put(X+".biases", sdt.String(), gshape, bb)
	W := make([]float32, rows*in)
	for i := range W {
		row, c := i/in, i%in
		p := float32(s[row*G+c/gs] * float32(q[i]))
		W[i] = p + bias[row*G+c/gs]
	}
	return b, map[string][]float32{X + ".weight": W}
}

// fbgemmCase: transformers integrations/fbgemm_fp8.py: FbgemmFp8Linear
// (weight F8 [out, in], weight_scale F32 [out, 1]) and
// FbgemmFp8Llama4TextExperts (gate_up_proj [E, H, 2I] with
// gate_up_proj_scale [E, 1, 2I]; down_proj [E, I, H] with down_proj_scale
// [E, H, 1]): W = f32(w) * scale, the scale per output column.
func fbgemmCase(r *rand.Rand) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}})
	out := map[string][]float32{}
	X := "model.layers.0.self_attn.o_proj.weight"
	O, I := 24, 40
	w := make([]byte, O*I)
	for i := range w {
		w[i] = finiteE4M3(r)
	}
	s := scales(r, O, -10, -3)
	b.put(X, "F8_E4M3", []int64{int64(O), int64(I)}, w)
	b.put(X+"_scale", "F32", []int64{int64(O), 1}, f32s(s))
	W := make([]float32, O*I)
	for i := range W {
		W[i] = e4m3(w[i]) * s[i/I]
	}
	out[X] = W
	E, H, N := 2, 16, 24
	for _, pr := range []struct {
		name         string
		m, n         int
		scaleLastOne bool
	}{{"gate_up_proj", H, 2 * N, false}, {"down_proj", N, H, true}} {
		P := "model.layers.0.feed_forward.experts." + pr.name
		w := make([]byte, E*pr.m*pr.n)
		for i := range w {
			w[i] = finiteE4M3(r)
		}
		s := scales(r, E*pr.n, -10, -3)
		b.put(P, "F8_E4M3", []int64{int64(E), int64(pr.m), int64(pr.n)}, w)
		if pr.scaleLastOne {
			b.put(P+"_scale", "F32", []int64{int64(E), int64(pr.n), 1}, f32s(s))
		} else {
			b.put(P+"_scale", "F32", []int64{int64(E), 1, int64(pr.n)}, f32s(s))
		}
		W := make([]float32, len(w))
		for i := range W {
			e, c := i/(pr.m*pr.n), i%pr.n
			W[i] = e4m3(w[i]) * s[e*pr.n+c]
		}
		out[P] = W
	}
	return b, out
}

// dsv4Case: DeepSeek-V4's block FP8 with X.scale F8_E8M0 per 128×128
// (scale_fmt ue8m0): W = f32(w) * 2^(e-127), as DeepSeek-V3's
// weight_dequant with the scale decoded from E8M0.
func dsv4Case(r *rand.Rand) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0", "weight_block_size": []int{128, 128}}})
	X := "layers.0.attn.wq_a"
	O, I := 200, 260
	w := make([]byte, O*I)
	for i := range w {
		w[i] = finiteE4M3(r)
	}
	SO, SI := 2, 3
	sc := make([]byte, SO*SI)
	for i := range sc {
		sc[i] = byte(100 + r.IntN(40))
	}
	b.put(X+".weight", "F8_E4M3", []int64{int64(O), int64(I)}, w)
	b.put(X+".scale", "F8_E8M0", []int64{int64(SO), int64(SI)}, sc)
	W := make([]float32, O*I)
	for i := range W {
		o, c := i/I, i%I
		W[i] = e4m3(w[i]) * float32(math.Ldexp(1, int(sc[(o/128)*SI+c/128])-127))
	}
	return b, map[string][]float32{X + ".weight": W}
}

// ctNVFP4Case: compressed-tensors nvfp4-pack-quantized (forward.py
// _dequantize with global_scale: scale = f32(weight_scale) /
// weight_global_scale, then x * scale; pack_fp4_to_uint8 low nibble first).
func ctNVFP4Case(r *rand.Rand) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
		"config_groups": map[string]any{"group_0": map[string]any{"targets": []string{"Linear"}, "weights": map[string]any{"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}}})
	X := "model.layers.0.mlp.gate_proj"
	O, I := 24, 96
	w := make([]byte, O*I/2)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	sc := make([]byte, O*I/16)
	for i := range sc {
		sc[i] = byte(0x08 + r.IntN(0x70))
	}
	gs := float32(r.Float64()*3000 + 100)
	b.put(X+".weight_packed", "U8", []int64{int64(O), int64(I / 2)}, w)
	b.put(X+".weight_scale", "F8_E4M3", []int64{int64(O), int64(I / 16)}, sc)
	b.put(X+".weight_global_scale", "F32", []int64{1}, f32s([]float32{gs}))
	b.put(X+".input_global_scale", "F32", []int64{1}, f32s([]float32{1}))
	W := make([]float32, O*I)
	for i := range W {
		o, c := i/I, i%I
		nib := w[o*I/2+c/2]
		if c%2 == 1 {
			nib >>= 4
		}
		s := e4m3(sc[o*I/16+c/16]) / gs
		W[i] = lut4[nib&15] * s
	}
	return b, map[string][]float32{X + ".weight": W}
}

// ctInt8Case: compressed-tensors pack-quantized, 8-bit, symmetric, channel
// (pack_to_int32: four values a word, offset binary; no zero point).
func ctInt8Case(r *rand.Rand) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "pack-quantized",
		"config_groups": map[string]any{"group_0": map[string]any{"targets": []string{"Linear"}, "weights": map[string]any{"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": true}}}}})
	X := "model.layers.0.mlp.down_proj"
	O, I := 20, 36
	q := make([]int32, O*I)
	words := make([]uint32, O*I/4)
	for i := range q {
		q[i] = int32(r.IntN(256)) - 128
		words[i/4] |= uint32(q[i]+128) << (8 * (i % 4))
	}
	sb, s := half(dtype.BF16, scales(r, O, -9, -4))
	b.put(X+".weight_packed", "I32", []int64{int64(O), int64(I / 4)}, u32s(words))
	b.put(X+".weight_scale", "BF16", []int64{int64(O), 1}, sb)
	b.put(X+".weight_shape", "I32", []int64{2}, u32s([]uint32{uint32(O), uint32(I)}))
	W := make([]float32, O*I)
	for i := range W {
		W[i] = float32(q[i]) * s[i/I]
	}
	return b, map[string][]float32{X + ".weight": W}
}

func TestVariants(t *testing.T) {
	for k, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			b, want := v.make(rand.New(rand.NewPCG(20261128, uint64(k))))
			c := b.build(t)
			r := c.plan(t)
			if len(r.Problems) != 0 {
				t.Fatalf("problems %v", r.Problems)
			}
			if r.Scheme != v.scheme {
				t.Errorf("scheme %q, want %q", r.Scheme, v.scheme)
			}
			if len(r.Weights) != len(want) {
				t.Fatalf("%d weights, want %d", len(r.Weights), len(want))
			}
			for name, W := range want {
				w := weightByName(r, name)
				if w == nil {
					t.Fatalf("no weight %s in %v", name, r.Weights)
				}
				got := c.whole(t, w)
				for i := range W {
					if math.Float32bits(got[i]) != math.Float32bits(W[i]) {
						t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], W[i])
					}
				}
				checkRanges(t, c, w, got)
				for _, p := range w.Parts {
					if p != name && !slices.Contains(r.Hidden, p) {
						t.Errorf("part %s is not hidden", p)
					}
				}
			}
		})
	}
}

// ctInt4ActorderCase: compressed-tensors pack-quantized int4, group 32,
// asymmetric, actorder "group": weight_g_idx [in] maps each column to its
// group (forward.py _dequantize with g_idx: scale[:, g_idx],
// zero_point[:, g_idx]); zero points packed along dim 0; out not a
// multiple of 8, so the last zero-point word is padded.
func ctInt4ActorderCase(r *rand.Rand, gs int) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "pack-quantized",
		"config_groups": map[string]any{"group_0": map[string]any{"targets": []string{"Linear"}, "weights": map[string]any{"num_bits": 4, "type": "int", "strategy": "group", "group_size": gs, "symmetric": false, "actorder": "group"}}}}})
	X := "model.layers.0.self_attn.o_proj"
	O, I := 13, 320
	G := I / gs
	q := make([]int32, O*I)
	words := make([]uint32, O*I/8)
	for i := range q {
		q[i] = int32(r.IntN(16)) - 8
		words[i/8] |= uint32(q[i]+8) << (4 * (i % 8))
	}
	zp := make([]int32, O*G)
	zw := make([]uint32, (O+7)/8*G)
	for o := 0; o < O; o++ {
		for g := 0; g < G; g++ {
			zp[o*G+g] = int32(r.IntN(16)) - 8
			zw[(o/8)*G+g] |= uint32(zp[o*G+g]+8) << (4 * (o % 8))
		}
	}
	gidx := make([]uint32, I)
	for i := range gidx {
		gidx[i] = uint32(i / gs)
	}
	r.Shuffle(len(gidx), func(i, j int) { gidx[i], gidx[j] = gidx[j], gidx[i] })
	sb, s := half(dtype.BF16, scales(r, O*G, -9, -4))
	b.put(X+".weight_packed", "I32", []int64{int64(O), int64(I / 8)}, u32s(words))
	b.put(X+".weight_scale", "BF16", []int64{int64(O), int64(G)}, sb)
	b.put(X+".weight_zero_point", "I32", []int64{int64((O + 7) / 8), int64(G)}, u32s(zw))
	b.put(X+".weight_g_idx", "I32", []int64{int64(I)}, u32s(gidx))
	b.put(X+".weight_shape", "I32", []int64{2}, u32s([]uint32{uint32(O), uint32(I)}))
	W := make([]float32, O*I)
	for i := range W {
		o, c := i/I, i%I
		g := int(gidx[c])
		W[i] = (float32(q[i]) - float32(zp[o*G+g])) * s[o*G+g]
	}
	return b, map[string][]float32{X + ".weight": W}
}

// ctIntQuantizedCase: compressed-tensors int-quantized (W8A8 int8, as
// llm-compressor writes it): weight I8 [out, in], weight_scale [out, 1];
// forward.py _dequantize: x_q.to(scale.dtype) * scale (exact in float32).
func ctIntQuantizedCase(r *rand.Rand) (*builder, map[string][]float32) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "int-quantized",
		"config_groups": map[string]any{"group_0": map[string]any{"targets": []string{"Linear"}, "weights": map[string]any{"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": true}}}}})
	X := "model.layers.0.mlp.up_proj"
	O, I := 24, 72
	q := make([]byte, O*I)
	for i := range q {
		q[i] = byte(r.IntN(256))
	}
	sb, s := half(dtype.BF16, scales(r, O, -9, -4))
	b.put(X+".weight", "I8", []int64{int64(O), int64(I)}, q)
	b.put(X+".weight_scale", "BF16", []int64{int64(O), 1}, sb)
	b.put(X+".input_scale", "F32", []int64{1}, f32s([]float32{0.02}))
	W := make([]float32, O*I)
	for i := range W {
		W[i] = float32(int8(q[i])) * s[i/I]
	}
	return b, map[string][]float32{X + ".weight": W}
}

// ctIntAsymCase: compressed-tensors int-quantized, asymmetric (W8A8 with
// zero points; forward.py _dequantize: (x_q - zero_point) * scale), per
// channel (scale and zero point [out, 1]) or per group (gs columns:
// [out, in/gs]); the zero point I8 (or I32 for groups).
func ctIntAsymCase(r *rand.Rand, gs int) (*builder, map[string][]float32) {
	w := map[string]any{"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": false}
	if gs > 0 {
		w["strategy"], w["group_size"] = "group", gs
	}
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "int-quantized",
		"config_groups": map[string]any{"group_0": map[string]any{"targets": []string{"Linear"}, "weights": w}}}})
	X := "model.layers.0.mlp.up_proj"
	O, I := 24, 96
	G := 1
	if gs > 0 {
		G = I / gs
	}
	q := make([]byte, O*I)
	for i := range q {
		q[i] = byte(r.IntN(256))
	}
	sb, s := half(dtype.BF16, scales(r, O*G, -9, -4))
	zp := make([]int32, O*G)
	for i := range zp {
		zp[i] = int32(r.IntN(41)) - 20
	}
	b.put(X+".weight", "I8", []int64{int64(O), int64(I)}, q)
	b.put(X+".weight_scale", "BF16", []int64{int64(O), int64(G)}, sb)
	if gs > 0 {
		zw := make([]uint32, len(zp))
		for i, z := range zp {
			zw[i] = uint32(z)
		}
		b.put(X+".weight_zero_point", "I32", []int64{int64(O), int64(G)}, u32s(zw))
	} else {
		zb := make([]byte, len(zp))
		for i, z := range zp {
			zb[i] = byte(int8(z))
		}
		b.put(X+".weight_zero_point", "I8", []int64{int64(O), 1}, zb)
	}
	W := make([]float32, O*I)
	for i := range W {
		g := (i/I)*G + (i%I)/max(gs, I)
		if gs > 0 {
			g = (i/I)*G + (i%I)/gs
		}
		W[i] = (float32(int8(q[i])) - float32(zp[g])) * s[g]
	}
	return b, map[string][]float32{X + ".weight": W}
}
