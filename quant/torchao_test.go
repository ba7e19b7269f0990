package quant

// torchao fixtures: no torchao installs here, so each case writes the
// safetensors file as torchao's flatten_tensor_state_dict lays it out
// (pytorch/ao 36027d82d1ad: M._w_DATA parts, __metadata__ tensor_names
// and one JSON entry per logical name, as TensorSubclassAttributeJSONEncoder
// writes it), and computes each expected value here, element by element
// from the stored bytes, by the formula of torchao's own source (named at
// each case); the E4M3/E5M2 codes decoded from their bit fields and every
// bf16/f16 rounding done by dtype's converters, not by the kernels' code.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/safetensors"
)

// aoCase is a torchao checkpoint: its tensors, its __metadata__ and the
// expected logical weights.
type aoCase struct {
	b    *builder
	meta map[string]string
	want map[string][]float32
}

func newAOCase() *aoCase {
	b := &builder{tensors: map[string]stEntryT{}, files: map[string][]byte{}}
	b.files["config.json"] = []byte(`{"quantization_config": {"quant_method": "torchao", "quant_type": {"default": {"_type": "Float8DynamicActivationFloat8WeightConfig"}}}}`)
	return &aoCase{b: b, meta: map[string]string{}, want: map[string][]float32{}}
}

// entry records name's metadata entry and adds it to tensor_names.
func (c *aoCase) entry(name, typ string, data map[string]any, names ...string) {
	e := map[string]any{"_type": typ, "_data": data, "_tensor_data_names": names}
	if typ == "Tensor" {
		e = map[string]any{"_type": "Tensor"}
	}
	j, _ := json.Marshal(e)
	c.meta[name] = string(j)
	var list []string
	if s, ok := c.meta["tensor_names"]; ok {
		_ = json.Unmarshal([]byte(s), &list)
	}
	j, _ = json.Marshal(append(list, name))
	c.meta["tensor_names"] = string(j)
}

func aoDT(name string) map[string]any { return map[string]any{"_type": "torch.dtype", "_data": name} }

// file is the safetensors file with its __metadata__.
func (c *aoCase) file() []byte {
	hdr := map[string]any{"__metadata__": c.meta}
	var blob []byte
	for _, n := range c.b.order {
		e := c.b.tensors[n]
		hdr[n] = map[string]any{"dtype": e.dt, "shape": e.shape, "data_offsets": []int{len(blob), len(blob) + len(e.data)}}
		blob = append(blob, e.data...)
	}
	h, _ := json.Marshal(hdr)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(file, h...), blob...)
}

// plan parses the file and plans it as formats.Quantize does.
func (c *aoCase) plan(t testing.TB) (*ckpt, *Result) {
	t.Helper()
	file := c.file()
	idx, err := safetensors.Parse(&memFile{"gen.safetensors", file})
	if err != nil {
		t.Fatal(err)
	}
	ck := &ckpt{data: map[string][]byte{}, files: c.b.files}
	ck.addSafetensors(t, "gen.safetensors", file)
	cfg, err := Find(c.b.files)
	if err != nil {
		t.Fatal(err)
	}
	return ck, Plan(WithTorchAO(cfg, idx.Metadata, ck.tensors), ck.tensors, ck.small)
}

// rt rounds v to dt by dtype's converters (F32: v).
func rt(dt dtype.DType, v float32) float32 {
	if dt == dtype.F32 {
		return v
	}
	_, back := half(dt, []float32{v})
	return back[0]
}

// e5m2 decodes an F8_E5M2 code from its fields.
func e5m2(b byte) float32 {
	s, e, m := b>>7, int(b>>2&31), float64(b&3)
	var v float64
	switch {
	case e == 31 && m == 0:
		v = math.Inf(1)
	case e == 31:
		v = math.NaN()
	case e == 0:
		v = m / 4 * math.Ldexp(1, -14)
	default:
		v = (1 + m/4) * math.Ldexp(1, e-15)
	}
	if s == 1 {
		v = -v
	}
	return float32(v)
}

// stored writes values as dt and returns the bytes and the values they hold.
func stored(dt dtype.DType, v []float32) ([]byte, []float32) {
	if dt == dtype.F32 {
		return f32s(v), v
	}
	return half(dt, v)
}

// aoFloat8: Float8Tensor, W = f32(qdata) * scale expanded over its blocks
// (quant_primitives._dequantize_affine_float8,
// _maybe_expand_scale_to_tensor_shape).
func (c *aoCase) aoFloat8(r *rand.Rand, name string, shape, sshape []int64, codes string, sdt dtype.DType) {
	pre, _ := aoPrefix(name)
	n, sn := int64(1), int64(1)
	for i := range shape {
		n *= shape[i]
		sn *= sshape[i]
	}
	q := make([]byte, n)
	for i := range q {
		if codes == "F8_E4M3" {
			q[i] = finiteE4M3(r)
		} else {
			for q[i] = byte(r.IntN(256)); q[i]&0x7f > 0x7c; q[i] = byte(r.IntN(256)) {
			} // no NaN (payloads are not compared); Inf kept
		}
	}
	sb, sv := stored(sdt, scales(r, int(sn), -12, -4))
	c.b.put(pre+"qdata", codes, shape, q)
	c.b.put(pre+"scale", sdt.String(), sshape, sb)
	block := make([]int64, len(shape))
	for i := range shape {
		block[i] = shape[i] / sshape[i]
	}
	c.entry(name, "Float8Tensor", map[string]any{"block_size": block, "mm_config": map[string]any{"_type": "Float8MMConfig", "_data": map[string]any{"use_fast_accum": true}},
		"act_quant_kwargs": nil, "kernel_preference": map[string]any{"_type": "KernelPreference", "_data": "AUTO"}, "dtype": aoDT("bfloat16")}, "qdata", "scale")
	W := make([]float32, n)
	for i := range W {
		// the element's index in each dimension, then its block's
		rem, si, st := int64(i), int64(0), int64(1)
		for d := len(shape) - 1; d >= 0; d-- {
			x := rem % shape[d]
			rem /= shape[d]
			si += x / block[d] * st
			st *= sshape[d]
		}
		v := e4m3(q[i])
		if codes == "F8_E5M2" {
			v = e5m2(q[i])
		}
		W[i] = v * sv[si]
	}
	c.want[name] = W
}

// aoInt4: Int4Tensor (plain): qdata [.., N, K/2] low nibble = even k,
// signed (mslk pack_int4), scale/zero [.., K/gs, N]; torchao's
// _int4_row_dequantize_zp (prototype/gptq/api.py): min = zero − scale·8
// in the scale's dtype, W = (f32(q) + 8)·scale + min in float32.
func (c *aoCase) aoInt4(r *rand.Rand, name string, B, N, K, gs int64, sdt dtype.DType) {
	pre, _ := aoPrefix(name)
	G := K / gs
	q := make([]int8, B*N*K)
	for i := range q {
		q[i] = int8(r.IntN(16) - 8)
	}
	packed := make([]byte, B*N*K/2)
	for i := range packed {
		packed[i] = byte(q[2*i])&15 | byte(q[2*i+1])<<4
	}
	sb, sv := stored(sdt, scales(r, int(B*G*N), -8, -3))
	zr := make([]float32, B*G*N)
	for i := range zr {
		zr[i] = float32(r.NormFloat64() * 0.05)
	}
	zb, zv := stored(sdt, zr)
	shape, qshape, sshape := []int64{N, K}, []int64{N, K / 2}, []int64{G, N}
	block := []int64{1, gs}
	if B > 1 {
		shape, qshape, sshape, block = []int64{B, N, K}, []int64{B, N, K / 2}, []int64{B, G, N}, []int64{1, 1, gs}
	}
	c.b.put(pre+"qdata", "I8", qshape, packed)
	c.b.put(pre+"scale", sdt.String(), sshape, sb)
	c.b.put(pre+"zero_point", sdt.String(), sshape, zb)
	c.entry(name, "Int4Tensor", map[string]any{"block_size": block, "shape": shape, "activation_dtype": aoDT("bfloat16")}, "qdata", "scale", "zero_point")
	W := make([]float32, B*N*K)
	for b := int64(0); b < B; b++ {
		for n := int64(0); n < N; n++ {
			for k := int64(0); k < K; k++ {
				i := (b*N+n)*K + k
				byt := packed[i/2]
				nib := byt & 15
				if k%2 == 1 {
					nib = byt >> 4
				}
				qv := int8(nib<<4) >> 4 // sign-extended
				si := (b*G+k/gs)*N + n
				s, z := sv[si], zv[si]
				mn := rt(sdt, z-rt(sdt, s*8))
				cf := float32(qv) + 8
				t := float32(cf * s)
				W[i] = t + mn
			}
		}
	}
	c.want[name] = W
}

// aoAffineCase: IntxUnpackedToInt8Tensor / Int8Tensor, dequantize_affine
// (quant_primitives._dequantize_affine_no_dtype_check) with output dtype
// out: q.to(out) − zero_point.to(out) in out, × scale in torch's promoted
// dtype. zdt 0: no zero point (Int8Tensor symmetric).
func (c *aoCase) aoAffine(r *rand.Rand, name, cls string, shape, block []int64, bits int, sdt, zdt, out dtype.DType) {
	pre, _ := aoPrefix(name)
	n, gn := int64(1), int64(1)
	grid := make([]int64, len(shape))
	for i := range shape {
		n *= shape[i]
		grid[i] = shape[i] / block[i]
		gn *= grid[i]
	}
	lo := -(1 << (bits - 1))
	q := make([]byte, n)
	for i := range q {
		q[i] = byte(int8(lo + r.IntN(1<<bits)))
	}
	q[n/2] = 100 // outside the target range: torchao does not check it
	sb, sv := stored(sdt, scales(r, int(gn), -10, -2))
	c.b.put(pre+"qdata", "I8", shape, q)
	c.b.put(pre+"scale", sdt.String(), grid, sb)
	names := []string{"qdata", "scale"}
	var zv []float32
	if zdt != 0 {
		zr := make([]float32, gn)
		var zb []byte
		for i := range zr {
			if zdt == dtype.I8 {
				zr[i] = float32(r.IntN(1<<bits) + lo)
				zb = append(zb, byte(int8(zr[i])))
			} else {
				zr[i] = float32(r.NormFloat64() * 3)
			}
		}
		if zdt != dtype.I8 {
			zb, zr = stored(zdt, zr)
		}
		zv = zr
		c.b.put(pre+"zero_point", zdt.String(), grid, zb)
		names = append(names, "zero_point")
	}
	dts := map[dtype.DType]string{dtype.F32: "float32", dtype.BF16: "bfloat16", dtype.F16: "float16"}
	data := map[string]any{"block_size": block, "dtype": aoDT(dts[out])}
	if cls == "IntxUnpackedToInt8Tensor" {
		data["target_dtype"] = aoDT(fmt.Sprintf("int%d", bits))
		data["activation_quantization"] = nil
	}
	c.entry(name, cls, data, names...)
	prod := dtype.F32
	if sdt == out {
		prod = out
	}
	W := make([]float32, n)
	for i := range W {
		rem, gi, st := int64(i), int64(0), int64(1)
		for d := len(shape) - 1; d >= 0; d-- {
			x := rem % shape[d]
			rem /= shape[d]
			gi += x / block[d] * st
			st *= grid[d]
		}
		v := float32(int8(q[i]))
		if zdt != 0 {
			v = rt(out, v-rt(out, zv[gi]))
		}
		W[i] = rt(prod, v*sv[gi])
	}
	c.want[name] = W
}

// toBlocked is torchao's to_blocked (mx_formats/utils.py) written as its
// torch operations: pad rows to 128 and columns to 4, view (nrb, 128, ncb,
// 4), permute (0, 2, 1, 3), reshape (-1, 4, 32, 4), transpose (1, 2),
// flatten.
func toBlocked(m []byte, rows, cols int64) []byte {
	nrb, ncb := (rows+127)/128, (cols+3)/4
	out := make([]byte, nrb*ncb*512)
	for rb := int64(0); rb < nrb; rb++ {
		for cb := int64(0); cb < ncb; cb++ {
			blk := rb*ncb + cb
			for i := int64(0); i < 4; i++ { // reshape (-1, 4, 32, 4): row i*32+j of the tile
				for j := int64(0); j < 32; j++ {
					for c := int64(0); c < 4; c++ {
						row, col := rb*128+i*32+j, cb*4+c
						var v byte
						if row < rows && col < cols {
							v = m[row*cols+col]
						}
						out[((blk*32+j)*4+i)*4+c] = v // after transpose (1, 2)
					}
				}
			}
		}
	}
	return out
}

// aoNVFP4: NVFP4Tensor (nvfp4_tensor.py dequantize, get_hp_scales):
// W = f32(E2M1 code) * (per_tensor_scale * f32(E4M3 scale)); codes low
// nibble first (unpack_uint4); scales plain or to_blocked. pts: 0 none,
// 1 one value, 2 one per expert [L, 1, 1].
func (c *aoCase) aoNVFP4(r *rand.Rand, name string, L, M, K int64, swz bool, pts int) {
	pre, _ := aoPrefix(name)
	nc := K / 16
	codes := make([]byte, L*M*K/2)
	for i := range codes {
		codes[i] = byte(r.IntN(256))
	}
	sm := make([]byte, L*M*nc)
	for i := range sm {
		sm[i] = finiteE4M3(r) & 0x7f
	}
	qshape, sshape := []int64{M, K / 2}, []int64{M, nc}
	if L > 1 {
		qshape, sshape = []int64{L, M, K / 2}, []int64{L, M, nc}
	}
	sb := sm
	if swz {
		sb = toBlocked(sm, L*M, nc)
		sM, sK := (M+127)/128*32, (K+63)/64*16
		sshape = []int64{sM, sK}
		if L > 1 {
			sshape = []int64{L, sM, sK}
		}
	}
	c.b.put(pre+"qdata", "U8", qshape, codes)
	c.b.put(pre+"scale", "F8_E4M3", sshape, sb)
	names := []string{"qdata", "scale"}
	g := []float32{1}
	switch pts {
	case 1:
		g = scales(r, 1, -8, -4)
		c.b.put(pre+"per_tensor_scale", "F32", []int64{}, f32s(g))
	case 2:
		g = scales(r, int(L), -8, -4)
		c.b.put(pre+"per_tensor_scale", "F32", []int64{L, 1, 1}, f32s(g))
	}
	if pts != 0 {
		names = append(names, "per_tensor_scale")
	}
	c.entry(name, "NVFP4Tensor", map[string]any{"block_size": 16, "orig_dtype": aoDT("bfloat16"), "is_swizzled_scales": swz, "use_triton_kernel": false, "act_quant_kwargs": nil}, names...)
	W := make([]float32, L*M*K)
	for i := range W {
		row, k := int64(i)/K, int64(i)%K
		nib := codes[i/2] & 15
		if i%2 == 1 {
			nib = codes[i/2] >> 4
		}
		hp := e4m3(sm[row*nc+k/16])
		switch pts {
		case 1:
			hp = g[0] * hp
		case 2:
			hp = g[row/M] * hp
		}
		W[i] = lut4[nib] * hp
	}
	c.want[name] = W
}

// aoMX: MXTensor (mx_tensor.py to_dtype, get_fp_scale): in orig_dtype D,
// W = D(code) * D(2^(e-127)) (NaN for 255), rounded to D; elem
// "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn_x2" (U8, low nibble
// first) or "fp6_e2m3" / "fp6_e3m2" (U8, one code a byte, decoded by the
// reference table torch computed: fp6Ref). The fp6 cases hold every byte
// (bits 6 and 7 too, which torchao does not write but decodes) and the
// scales 255, 0 and 254.
func (c *aoCase) aoMX(r *rand.Rand, name string, L, M, K, bs int64, elem string, swz bool, out dtype.DType) {
	pre, _ := aoPrefix(name)
	nc := K / bs
	fp4 := elem == "float4_e2m1fn_x2"
	fp6 := strings.HasPrefix(elem, "fp6_")
	var codes []byte
	qshape := []int64{M, K}
	qdt := map[string]string{"float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float4_e2m1fn_x2": "U8", "fp6_e2m3": "U8", "fp6_e3m2": "U8"}[elem]
	if fp4 {
		qshape = []int64{M, K / 2}
		codes = make([]byte, L*M*K/2)
	} else {
		codes = make([]byte, L*M*K)
	}
	for i := range codes {
		switch elem {
		case "float8_e4m3fn":
			codes[i] = finiteE4M3(r)
		case "float8_e5m2":
			for codes[i] = byte(r.IntN(256)); codes[i]&0x7f > 0x7b; codes[i] = byte(r.IntN(256)) {
			}
		case "fp6_e2m3", "fp6_e3m2":
			codes[i] = byte(r.IntN(256)) & []byte{63, 255}[i%2]
		default:
			codes[i] = byte(r.IntN(256))
		}
	}
	sm := make([]byte, L*M*nc)
	for i := range sm {
		sm[i] = byte(105 + r.IntN(40))
	}
	if fp6 {
		sm[0], sm[1], sm[len(sm)-1] = 255, 0, 254
	}
	sshape := []int64{M, nc}
	sb := sm
	if swz {
		sb = toBlocked(sm, L*M, nc)
		sshape = []int64{(M + 127) / 128 * 32, (K + 4*bs - 1) / (4 * bs) * 16}
	}
	if L > 1 {
		qshape, sshape = append([]int64{L}, qshape...), append([]int64{L}, sshape...)
	}
	c.b.put(pre+"qdata", qdt, qshape, codes)
	c.b.put(pre+"scale", "F8_E8M0", sshape, sb)
	dts := map[dtype.DType]string{dtype.F32: "float32", dtype.BF16: "bfloat16", dtype.F16: "float16"}
	var ed any = aoDT(elem)
	if fp6 {
		ed = elem // a str attribute, not a torch.dtype
	}
	c.entry(name, "MXTensor", map[string]any{"elem_dtype": ed, "block_size": bs, "orig_dtype": aoDT(dts[out]),
		"kernel_preference": map[string]any{"_type": "KernelPreference", "_data": "EMULATED"}, "act_quant_kwargs": nil, "is_swizzled_scales": swz}, "qdata", "scale")
	W := make([]float32, L*M*K)
	for i := range W {
		row, k := int64(i)/K, int64(i)%K
		var v float32
		switch elem {
		case "float8_e4m3fn":
			v = e4m3(codes[i])
		case "float8_e5m2":
			v = e5m2(codes[i])
		case "fp6_e2m3", "fp6_e3m2":
			v = fp6Ref(elem)[codes[i]]
		default:
			nib := codes[i/2] & 15
			if i%2 == 1 {
				nib = codes[i/2] >> 4
			}
			v = lut4[nib]
		}
		e := sm[row*nc+k/bs]
		s := rt(out, float32(math.Pow(2, float64(int(e)-127))))
		if e == 255 {
			s = float32(math.NaN())
		}
		W[i] = rt(out, rt(out, v)*s)
	}
	c.want[name] = W
}

// aoCases are the generated torchao checkpoints, each with a plain
// {"_type": "Tensor"} entry beside (served as stored, not planned).
var aoCases = []struct {
	name, scheme string
	make         func(r *rand.Rand, c *aoCase)
}{
	{"float8_rowwise", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoFloat8(r, "model.layers.0.mlp.down_proj.weight", []int64{6, 40}, []int64{6, 1}, "F8_E4M3", dtype.F32)
	}},
	{"float8_block128", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoFloat8(r, "model.layers.0.self_attn.q_proj.weight", []int64{256, 384}, []int64{2, 3}, "F8_E4M3", dtype.F32)
	}},
	{"float8_tensor_e5m2_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoFloat8(r, "model.layers.0.self_attn.k_proj.weight", []int64{12, 24}, []int64{1, 1}, "F8_E5M2", dtype.BF16)
	}},
	{"float8_experts_rowwise", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoFloat8(r, "model.layers.0.mlp.experts.gate_up_proj", []int64{3, 8, 24}, []int64{3, 8, 1}, "F8_E4M3", dtype.F32)
	}},
	{"int4_g32_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoInt4(r, "model.layers.0.mlp.up_proj.weight", 1, 10, 96, 32, dtype.BF16)
	}},
	{"int4_experts_g64_f16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoInt4(r, "model.layers.1.mlp.experts.down_proj", 3, 6, 128, 64, dtype.F16)
	}},
	{"int4_g128_f32", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoInt4(r, "lm_head.weight", 1, 5, 256, 128, dtype.F32)
	}},
	{"intx_int4_g32_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoAffine(r, "model.layers.0.mlp.gate_proj.weight", "IntxUnpackedToInt8Tensor", []int64{8, 64}, []int64{1, 32}, 4, dtype.BF16, dtype.I8, dtype.BF16)
	}},
	{"intx_int2_float_zp_f16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoAffine(r, "model.embed_tokens.weight", "IntxUnpackedToInt8Tensor", []int64{6, 48}, []int64{1, 16}, 2, dtype.F16, dtype.F32, dtype.F16)
	}},
	{"intx_int8_channel_f32", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoAffine(r, "model.layers.2.mlp.down_proj.weight", "IntxUnpackedToInt8Tensor", []int64{7, 33}, []int64{1, 33}, 8, dtype.F32, dtype.I8, dtype.F32)
	}},
	{"int8_rowwise_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoAffine(r, "model.layers.0.self_attn.o_proj.weight", "Int8Tensor", []int64{9, 40}, []int64{1, 40}, 8, dtype.F32, 0, dtype.BF16)
	}},
	{"int8_asym_group_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoAffine(r, "model.layers.0.self_attn.v_proj.weight", "Int8Tensor", []int64{5, 64}, []int64{1, 16}, 8, dtype.BF16, dtype.I8, dtype.BF16)
	}},
	{"int8_experts_3d", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoAffine(r, "model.layers.3.mlp.experts.up_proj", "Int8Tensor", []int64{2, 4, 32}, []int64{1, 1, 32}, 8, dtype.F32, 0, dtype.BF16)
	}},
	{"nvfp4_plain", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoNVFP4(r, "model.layers.0.mlp.gate_proj.weight", 1, 40, 112, false, 0)
	}},
	{"nvfp4_swizzled_tensor_scale", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoNVFP4(r, "model.layers.0.mlp.up_proj.weight", 1, 150, 80, true, 1)
	}},
	{"nvfp4_experts_swizzled_per_expert", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoNVFP4(r, "model.layers.0.mlp.experts.gate_up_proj", 2, 128, 64, true, 2)
	}},
	{"mx_fp8_e4m3_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.0.mlp.down_proj.weight", 1, 12, 96, 32, "float8_e4m3fn", false, dtype.BF16)
	}},
	{"mx_fp8_e5m2_swizzled_f16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.1.mlp.down_proj.weight", 1, 140, 160, 32, "float8_e5m2", true, dtype.F16)
	}},
	{"mx_fp6_e2m3_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.4.mlp.down_proj.weight", 1, 12, 96, 32, "fp6_e2m3", false, dtype.BF16)
	}},
	{"mx_fp6_e2m3_swizzled_f32", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.5.mlp.down_proj.weight", 1, 140, 160, 32, "fp6_e2m3", true, dtype.F32)
	}},
	{"mx_fp6_e3m2_f32", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.6.mlp.down_proj.weight", 1, 9, 128, 32, "fp6_e3m2", false, dtype.F32)
	}},
	{"mx_fp6_e3m2_experts_swizzled_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.7.mlp.experts.down_proj", 2, 128, 64, 32, "fp6_e3m2", true, dtype.BF16)
	}},
	{"mx_fp6_e3m2_f16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.8.mlp.down_proj.weight", 1, 6, 64, 32, "fp6_e3m2", false, dtype.F16)
	}},
	{"mx_fp4_f32", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.2.mlp.down_proj.weight", 1, 9, 128, 32, "float4_e2m1fn_x2", false, dtype.F32)
	}},
	{"mx_fp4_experts_swizzled_bf16", "torchao", func(r *rand.Rand, c *aoCase) {
		c.aoMX(r, "model.layers.3.mlp.experts.down_proj", 2, 128, 64, 32, "float4_e2m1fn_x2", true, dtype.BF16)
	}},
}

// makeAO makes case k with a plain tensor beside its weight.
func makeAO(k int) *aoCase {
	c := newAOCase()
	r := rand.New(rand.NewPCG(20261205, uint64(k)))
	aoCases[k].make(r, c)
	c.b.put("model.norm.weight", "F32", []int64{4}, f32s([]float32{1, 2, 3, 4}))
	c.entry("model.norm.weight", "Tensor", nil)
	return c
}

func TestTorchAO(t *testing.T) {
	for k, tc := range aoCases {
		t.Run(tc.name, func(t *testing.T) {
			c := makeAO(k)
			ck, r := c.plan(t)
			if len(r.Problems) != 0 {
				t.Fatalf("problems %v", r.Problems)
			}
			if r.Scheme != tc.scheme || len(r.Weights) != len(c.want) {
				t.Fatalf("scheme %q with %d weights, want %q with %d", r.Scheme, len(r.Weights), tc.scheme, len(c.want))
			}
			if r.IsHidden("model.norm.weight") || r.Weight("model.norm.weight") != nil {
				t.Errorf("the plain tensor is hidden or planned")
			}
			for name, W := range c.want {
				w := weightByName(r, name)
				if w == nil {
					t.Fatalf("no weight %s in %v", name, r.Weights)
				}
				for _, plain := range []bool{false, true} {
					useLookup = !plain
					got := ck.whole(t, w)
					useLookup = true
					for i := range W {
						if !sameF32(got[i], W[i]) {
							t.Fatalf("%s[%d] = %v, want %v (lookup %v)", name, i, got[i], W[i], !plain)
						}
					}
					checkRanges(t, ck, w, got)
				}
				pre, _ := aoPrefix(name)
				for _, p := range w.Parts {
					if !strings.HasPrefix(p, pre) || !r.IsHidden(p) {
						t.Errorf("part %s is not hidden", p)
					}
				}
			}
		})
	}
}

// sameF32: the same bits, or both NaN (torch's NaN payloads are not
// part of the contract: E8M0 255 gives a NaN block).
func sameF32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// TestRoundTo: the kernels' bf16/f16 rounding agrees with dtype's
// converters over a sweep of float32 bit patterns.
func TestRoundTo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []float32{0, 65504, 65519.99, 65520, 6e-8, 3e-8, 2.98e-8, 6.1e-5, 1e-45, float32(math.Inf(1)), 3.4e38}
	for i := 0; i < 200000; i++ {
		vals = append(vals, math.Float32frombits(r.Uint32()))
	}
	for _, v := range vals {
		for _, x := range []float32{v, -v} {
			for _, dt := range []dtype.DType{dtype.BF16, dtype.F16} {
				want, got := rt(dt, x), roundTo(dt, x)
				if math.IsNaN(float64(want)) && math.IsNaN(float64(got)) {
					continue
				}
				if math.Float32bits(want) != math.Float32bits(got) {
					t.Fatalf("%s(%v = %#x) = %v, dtype's converter %v", dt, x, math.Float32bits(x), got, want)
				}
			}
		}
	}
}

// TestTorchAOProblems: every torchao entry that cannot be served is a
// Problem of one line naming the weight (never its codes under its
// name), its parts hidden, the other weights kept.
func TestTorchAOProblems(t *testing.T) {
	const W = "model.layers.0.mlp.up_proj.weight" // int4_g32_bf16
	pre, _ := aoPrefix(W)
	cases := []struct {
		name, why string
		mutate    func(c *aoCase)
	}{
		{"tile packed", "kernel-specific packing", func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `"Int4Tensor"`, `"Int4TilePackedTo4dTensor"`, 1)
		}},
		{"plain int32", "kernel-specific packing", func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `"Int4Tensor"`, `"Int4PlainInt32Tensor"`, 1)
		}},
		{"nvfp4 of int4 parts", "NVFP4Tensor block_size [1,32] is not", func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `"Int4Tensor"`, `"NVFP4Tensor"`, 1)
		}},
		{"mx fp6 of I8 parts", "qdata is I8 [10 48], not U8 (one fp6 code a byte", func(c *aoCase) {
			c.meta[W] = `{"_type":"MXTensor","_data":{"elem_dtype":"fp6_e2m3","block_size":32},"_tensor_data_names":["qdata","scale"]}`
		}},
		{"mx fp6 packed, K", "K 48 is not a multiple of block_size 32", func(c *aoCase) {
			// 64 codes a row packed 4 in 3 bytes: U8 [10 48] with the
			// scales of K 64
			c.meta[W] = `{"_type":"MXTensor","_data":{"elem_dtype":"fp6_e3m2","block_size":32},"_tensor_data_names":["qdata","scale"]}`
			c.b.edit(pre+"qdata", func(e *stEntryT) { e.dt = "U8" })
			c.b.edit(pre+"scale", func(e *stEntryT) { e.dt, e.shape, e.data = "F8_E8M0", []int64{10, 2}, make([]byte, 20) })
		}},
		{"mx fp6 packed, scales", "scale [10 4] does not hold one scale per 16 of [10 48]", func(c *aoCase) {
			c.meta[W] = `{"_type":"MXTensor","_data":{"elem_dtype":"fp6_e2m3","block_size":16},"_tensor_data_names":["qdata","scale"]}`
			c.b.edit(pre+"qdata", func(e *stEntryT) { e.dt = "U8" })
			c.b.edit(pre+"scale", func(e *stEntryT) { e.dt, e.shape, e.data = "F8_E8M0", []int64{10, 4}, make([]byte, 40) })
		}},
		{"mx fp6 elem", `elem_dtype "fp6_e2m4" is not served`, func(c *aoCase) {
			c.meta[W] = `{"_type":"MXTensor","_data":{"elem_dtype":"fp6_e2m4","block_size":32},"_tensor_data_names":["qdata","scale"]}`
		}},
		{"unknown class", `"MyTensor" is not one tensorfs reads`, func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `"Int4Tensor"`, `"MyTensor"`, 1)
		}},
		{"missing part", "zero_point is missing", func(c *aoCase) { c.b.drop(pre + "zero_point") }},
		{"act_pre_scale", "act_pre_scale", func(c *aoCase) {
			c.b.put(pre+"act_pre_scale", "F32", []int64{96}, make([]byte, 4*96))
			c.meta[W] = strings.Replace(c.meta[W], `"zero_point"]`, `"zero_point","act_pre_scale"]`, 1)
		}},
		{"bad json", "not torchao's JSON object", func(c *aoCase) { c.meta[W] = `{"_type": "Int4Tensor", "_data": [` }},
		{"huge entry", "over 65536", func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `{`, `{"pad": "`+strings.Repeat("x", 70000)+`", `, 1)
		}},
		{"no type", "has no _type", func(c *aoCase) { c.meta[W] = `{"_data": {}}` }},
		{"shape", "does not match qdata", func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `"shape":[10,96]`, `"shape":[10,94]`, 1)
		}},
		{"packed along rows", "packed along another dimension", func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `"shape":[10,96]`, `"shape":[20,48]`, 1)
		}},
		{"group", "does not divide K", func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `"block_size":[1,32]`, `"block_size":[1,36]`, 1)
		}},
		{"block not a list", "block_size is not a list", func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `"block_size":[1,32]`, `"block_size":"32"`, 1)
		}},
		{"scale not transposed", "stored transposed", func(c *aoCase) {
			c.b.edit(pre+"scale", func(e *stEntryT) { e.shape = []int64{10, 3} })
		}},
		{"scale dtype", "not one dtype", func(c *aoCase) {
			c.b.edit(pre+"scale", func(e *stEntryT) { e.dt = "F16" })
		}},
		{"qdata dtype", "not I8", func(c *aoCase) {
			c.b.edit(pre+"qdata", func(e *stEntryT) { e.dt = "F8_E4M3" })
		}},
		{"no qdata name", `without "qdata"`, func(c *aoCase) {
			c.meta[W] = strings.Replace(c.meta[W], `["qdata",`, `[`, 1)
		}},
		{"listed without entry", "without its entry", func(c *aoCase) { delete(c.meta, W) }},
		{"module-less name", "has no module", func(c *aoCase) {
			c.meta["weight"] = c.meta[W]
			delete(c.meta, W)
			c.meta["tensor_names"] = strings.Replace(c.meta["tensor_names"], `"`+W+`"`, `"weight"`, 1)
		}},
	}
	k := slices.IndexFunc(aoCases, func(c struct {
		name, scheme string
		make         func(r *rand.Rand, c *aoCase)
	}) bool {
		return c.name == "int4_g32_bf16"
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := makeAO(k)
			// a second, good weight that must stay
			c.aoFloat8(rand.New(rand.NewPCG(3, 4)), "model.layers.1.mlp.down_proj.weight", []int64{4, 16}, []int64{4, 1}, "F8_E4M3", dtype.F32)
			tc.mutate(c)
			_, r := c.plan(t)
			name := W
			if tc.name == "module-less name" {
				name = "weight"
			}
			var why string
			for _, p := range r.Problems {
				if p.Name == name {
					why = p.Why
				}
			}
			if why == "" || !strings.Contains(why, tc.why) || strings.Contains(why, "\n") {
				t.Fatalf("problem for %s %q, want one line with %q (problems %v)", name, why, tc.why, r.Problems)
			}
			if r.Weight(W) != nil {
				t.Errorf("%s is still a weight", W)
			}
			if r.Weight("model.layers.1.mlp.down_proj.weight") == nil {
				t.Errorf("the good weight was lost: %v", r.Problems)
			}
			for _, s := range []string{"qdata", "scale", "zero_point", "act_pre_scale"} {
				if c.b.tensors[pre+s].data != nil && !r.IsHidden(pre+s) {
					t.Errorf("part %s is not hidden", s)
				}
			}
		})
	}
}

// TestTorchAOCheckpointProblems: a torchao configuration without the
// metadata, or a tensor_names that is not a list, leaves every weight the
// stored names show out, named.
func TestTorchAOCheckpointProblems(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		mutate    func(c *aoCase)
	}{
		{"no metadata", "without a safetensors __metadata__", func(c *aoCase) { c.meta = map[string]string{} }},
		{"tensor_names not a list", "is not a JSON list", func(c *aoCase) { c.meta["tensor_names"] = `{"a": 1}` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := makeAO(0)
			tc.mutate(c)
			_, r := c.plan(t)
			const W = "model.layers.0.mlp.down_proj.weight"
			if len(r.Weights) != 0 || len(r.Problems) != 1 || r.Problems[0].Name != W || !strings.Contains(r.Problems[0].Why, tc.why) {
				t.Fatalf("weights %v problems %v, want only %s: %q", r.Weights, r.Problems, W, tc.why)
			}
			if !r.IsHidden("model.layers.0.mlp._down_proj_weight_qdata") && !r.IsHidden("model.layers.0.mlp._down_proj_weight_scale") {
				pre, _ := aoPrefix(W)
				if !r.IsHidden(pre+"qdata") || !r.IsHidden(pre+"scale") {
					t.Errorf("parts not hidden: %v", r.Hidden)
				}
			}
		})
	}
}

// TestTorchAOExportReopened: a converted view's export keeps the source's
// __metadata__ (torchao's entries included) beside the logical weights
// stored under their names; read again, those weights are served as
// stored, not left out for their missing parts.
func TestTorchAOExportReopened(t *testing.T) {
	c := makeAO(0)
	c.b = &builder{tensors: map[string]stEntryT{}, files: map[string][]byte{}}
	for name, W := range c.want {
		c.b.put(name, "F32", []int64{int64(len(W))}, f32s(W))
	}
	c.b.put("model.norm.weight", "F32", []int64{4}, f32s([]float32{1, 2, 3, 4}))
	_, r := c.plan(t)
	if len(r.Problems) != 0 || len(r.Weights) != 0 || len(r.Hidden) != 0 {
		t.Fatalf("weights %v problems %v hidden %v, want none", r.Weights, r.Problems, r.Hidden)
	}
}

// TestWithTorchAO: the metadata makes a configuration only where it is
// torchao's and no other method is named.
func TestWithTorchAO(t *testing.T) {
	meta := map[string]any{"tensor_names": `["a.weight"]`, "a.weight": `{"_type":"Tensor"}`, "format": "pt"}
	parts := []index.Tensor{{Name: "m._weight_qdata"}}
	plain := []index.Tensor{{Name: "m.weight"}}
	if c := WithTorchAO(nil, map[string]any{"format": "pt"}, parts); c != nil {
		t.Errorf("plain metadata gave %+v", c)
	}
	if c := WithTorchAO(nil, meta, plain); c != nil {
		t.Errorf("metadata without any part (an export of a converted view) gave %+v", c)
	}
	c := WithTorchAO(nil, meta, parts)
	if c == nil || c.Method != "torchao" || c.File != "__metadata__" || c.Meta["a.weight"] == "" {
		t.Fatalf("got %+v", c)
	}
	other := &Config{File: "config.json", Method: "fp8"}
	if WithTorchAO(other, meta, parts) != other {
		t.Errorf("another method was replaced")
	}
	ao := &Config{File: "config.json", Method: "torchao"}
	if c := WithTorchAO(ao, meta, plain); c.File != "config.json" || c.Meta == nil || ao.Meta != nil {
		t.Errorf("got %+v (the given config changed: %v)", c, ao.Meta != nil)
	}
}

// FuzzTorchAO: Plan and Dequantize on arbitrary torchao entries and part
// shapes do not panic, read only inside each part, and allocate by what
// they are asked for.
func FuzzTorchAO(f *testing.F) {
	for k := range aoCases {
		c := makeAO(k)
		for name := range c.want {
			pre, _ := aoPrefix(name)
			var dims []byte
			for _, s := range []string{"qdata", "scale", "zero_point"} {
				e, ok := c.b.tensors[pre+s]
				if !ok {
					continue
				}
				dt, _ := dtype.ByName(e.dt)
				dims = append(dims, byte(dt), byte(len(e.shape)))
				for _, d := range e.shape {
					dims = append(dims, byte(d), byte(d>>8))
				}
			}
			f.Add(c.meta[name], dims)
		}
	}
	f.Fuzz(func(t *testing.T, entry string, dims []byte) {
		const W = "m.weight"
		meta := map[string]string{"tensor_names": `["m.weight"]`, W: entry}
		var ts []index.Tensor
		for _, s := range []string{"qdata", "scale", "zero_point"} {
			if len(dims) < 2 {
				break
			}
			dt := dtype.DType(dims[0])
			nd := int(dims[1] % 5)
			dims = dims[2:]
			shape := []int64{}
			n := int64(1)
			for i := 0; i < nd && len(dims) >= 2; i++ {
				d := int64(dims[0]) | int64(dims[1])<<8
				dims = dims[2:]
				shape = append(shape, d)
				n *= d
			}
			if es := dt.ElemSize(); es > 0 && dt.Valid() {
				ts = append(ts, index.Tensor{Name: "m._weight_" + s, DType: dt, Shape: shape, Size: n * es})
			}
		}
		r := Plan(&Config{File: "__metadata__", Method: "torchao", Meta: meta}, ts, nil)
		size := map[string]int64{}
		for _, x := range ts {
			size[x.Name] = x.Size
		}
		for i := range r.Weights {
			w := &r.Weights[i]
			read := func(part int, off int64, p []byte) error {
				if part < 0 || part >= len(w.Parts) {
					t.Fatalf("%s: part %d of %d", w.Name, part, len(w.Parts))
				}
				if off < 0 || off+int64(len(p)) > size[w.Parts[part]] {
					t.Fatalf("%s: read [%d, +%d) of %s (%d bytes)", w.Name, off, len(p), w.Parts[part], size[w.Parts[part]])
				}
				for j := range p {
					p[j] = byte(off) + byte(j)*7
				}
				return nil
			}
			n := w.NumElements()
			first := int64(len(entry)*131) % n
			l := min(n-first, 4096)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			_ = w.Dequantize(read, first, make([]float32, l))
			runtime.ReadMemStats(&m1)
			if d := m1.TotalAlloc - m0.TotalAlloc; d > 1<<24 {
				t.Fatalf("%s: Dequantize of %d elements allocated %d bytes", w.Name, l, d)
			}
		}
		for _, p := range r.Problems {
			if strings.Contains(p.Why, "\n") {
				t.Fatalf("a problem of several lines: %q", p.Why)
			}
		}
	})
}

// TestTorchAOShards: each shard of a sharded torchao checkpoint lists
// its own tensor_names, and the merged metadata keeps the first shard's
// list; every weight whose entry is there is served all the same.
func TestTorchAOShards(t *testing.T) {
	c := makeAO(0)
	c.aoInt4(rand.New(rand.NewPCG(5, 6)), "model.layers.9.mlp.up_proj.weight", 1, 4, 64, 32, dtype.BF16)
	c.meta["tensor_names"] = `["model.norm.weight"]`
	c.meta["training_args"] = `{"_type": "TrainingArguments", "lr": 1}` // someone else's: no weight
	ck, r := c.plan(t)
	if len(r.Problems) != 0 || len(r.Weights) != 2 {
		t.Fatalf("weights %v problems %v, want 2 weights", r.Weights, r.Problems)
	}
	for name, W := range c.want {
		got := ck.whole(t, weightByName(r, name))
		for i := range W {
			if math.Float32bits(got[i]) != math.Float32bits(W[i]) {
				t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], W[i])
			}
		}
	}
}

// fp6Refs are testdata/torchao_fp6/{e2m3,e3m2}.txt: every byte's value as
// torch computes torchao's _floatx_unpacked_to_f32 (gen.py beside them).
var fp6Refs = map[string]*[256]float32{}

// fp6Ref is elem's ("fp6_e2m3", "fp6_e3m2") reference table.
func fp6Ref(elem string) *[256]float32 {
	if t := fp6Refs[elem]; t != nil {
		return t
	}
	b, err := os.ReadFile(filepath.Join("testdata", "torchao_fp6", strings.TrimPrefix(elem, "fp6_")+".txt"))
	if err != nil {
		panic(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 256 {
		panic(fmt.Sprintf("%s: %d lines", elem, len(lines)))
	}
	t := new([256]float32)
	for i, l := range lines {
		v, err := strconv.ParseUint(l, 16, 32)
		if err != nil {
			panic(err)
		}
		t[i] = math.Float32frombits(uint32(v))
	}
	fp6Refs[elem] = t
	return t
}

// TestFP6Tables: the fp6 tables are torch's values of torchao's
// _floatx_unpacked_to_f32 for all 256 bytes, bit for bit, and for the
// codes 0..63 the OCP MX values (sign · 2^(e−bias) · (1 + m/2^mbits),
// subnormals 2^(1−bias) · m/2^mbits) computed here from the fields; the
// per-orig_dtype tables are those values rounded to bf16 and f16.
func TestFP6Tables(t *testing.T) {
	for i, f := range []struct {
		elem        string
		ebits, mbit int
	}{{"fp6_e2m3", 2, 3}, {"fp6_e3m2", 3, 2}} {
		ref, got := fp6Ref(f.elem), fp6Table(uint(f.ebits), uint(f.mbit))
		for b := range 256 {
			if math.Float32bits(got[b]) != math.Float32bits(ref[b]) {
				t.Errorf("%s byte %#x: %v (%#x), torch %v (%#x)", f.elem, b, got[b], math.Float32bits(got[b]), ref[b], math.Float32bits(ref[b]))
			}
			if math.IsNaN(float64(ref[b])) || math.IsInf(float64(ref[b]), 0) {
				t.Errorf("%s byte %#x: torch gives %v", f.elem, b, ref[b])
			}
			for j, dt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.F16} {
				if w, g := rt(dt, ref[b]), fp6Tables[i][j][b]; math.Float32bits(w) != math.Float32bits(g) {
					t.Errorf("%s byte %#x in %s: %v, want %v", f.elem, b, dt, g, w)
				}
			}
		}
		bias := 1<<(f.ebits-1) - 1
		for c := range 64 {
			e, m := c>>f.mbit&(1<<f.ebits-1), float64(c&(1<<f.mbit-1))/float64(int(1)<<f.mbit)
			v := math.Ldexp(1+m, e-bias)
			if e == 0 {
				v = math.Ldexp(m, 1-bias)
			}
			if c&32 != 0 {
				v = math.Copysign(v, -1)
			}
			if math.Float32bits(ref[c]) != math.Float32bits(float32(v)) {
				t.Errorf("%s code %#x: torch %v, OCP %v", f.elem, c, ref[c], v)
			}
		}
	}
	if fp6Tables[1][2][255] != float32(math.Inf(-1)) || fp6Tables[0][0][63] != -7.5 || fp6Tables[1][0][31] != 28 {
		t.Errorf("e3m2 0xff in f16 %v, e2m3 0x3f %v, e3m2 0x1f %v", fp6Tables[1][2][255], fp6Tables[0][0][63], fp6Tables[1][0][31])
	}
}
