package quant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// torchao (pytorch/ao) checkpoints saved as safetensors (transformers'
// default since its PR #40735): a quantized M.w is not stored under its
// name but as M._w_qdata, M._w_scale, M._w_zero_point, ... and the
// header's __metadata__ holds "tensor_names" (a JSON list) and, per
// logical name, a JSON string {"_type": CLASS, "_data": {attributes},
// "_tensor_data_names": [stored data names]} (torchao
// prototype/safetensors/safetensors_support.py flatten_tensor_state_dict,
// safetensors_utils.py TensorSubclassAttributeJSONEncoder; read at
// pytorch/ao 36027d82d1ad, 2026-08-21). Each part is named by the
// metadata's own _tensor_data_names, so no prefix is guessed (transformers
// has to match _weight_scale_and_zero before _weight_scale; here the names
// are exact). Served, each by the formula of torchao's own source:
//
//   - Float8Tensor (quantize_/workflows/float8/float8_tensor.py,
//     quant_primitives._dequantize_affine_float8): W = f32(qdata) *
//     f32(scale), the scale expanded over its blocks: per tensor, per row
//     ([N, 1]), 128×128 or any block that divides the shape (scale dim ×
//     block = dim, _maybe_expand_scale_to_tensor_shape); 2-D or 3-D.
//   - Int4Tensor (int4/int4_tensor.py, plain packing): qdata I8/U8 [N, K/2]
//     or [B, N, K/2], two signed nibbles a byte, low nibble = even k
//     (mslk pack_int4); scale and zero_point stored transposed
//     [K/gs, N] / [B, K/gs, N] in the original dtype. torchao's own
//     dequantizer of this layout (prototype/gptq/api.py
//     _int4_row_dequantize_zp): min = zero − scale·8 in the scale's dtype,
//     then W = (f32(q) + 8) · scale + min in float32.
//   - IntxUnpackedToInt8Tensor (intx/intx_unpacked_to_int8_tensor.py) and
//     Int8Tensor (int8/int8_tensor.py): qdata I8 of the logical shape,
//     scale (and zero_point, I8 or float; optional for Int8Tensor) per
//     block of block_size, dequantize_affine with output_dtype the
//     metadata's dtype: q → dtype, − zero_point (in dtype), × scale, each
//     operation in torch's promoted dtype (bf16·bf16 rounds to bf16,
//     bf16·f32 is f32), as _dequantize_affine_no_dtype_check computes it.
//
//   - NVFP4Tensor and MXTensor: torchao_fp.go.
//
// Named, not served: the kernel packings (Int4TilePackedTo4dTensor,
// Int4PlainInt32Tensor, Int4PreshuffledTensor), an MXTensor element
// other than fp8, fp6 (unpacked, one code a byte) and fp4, an
// Int4Tensor packed along another dimension than the last, any weight
// with an act_pre_scale (an activation scale the weight would have to be
// multiplied by: not folded), and any class torchao's loader does not
// allow. Plain {"_type":"Tensor"} entries are stored tensors, left as
// they are; so is an entry whose weight is stored under its own name with
// no part beside it (a converted view's export keeps the metadata).
//
// The metadata is untrusted: each entry is decoded only within
// maxAOEntry bytes, all of them within MaxObject, every attribute is
// checked against the parts' stored dtypes and shapes before a weight is
// made, and each problem is one line naming the weight.

// maxAOEntry bounds the JSON of one weight's metadata entry.
const maxAOEntry = 64 << 10

// TorchAOKey is the __metadata__ key that marks a torchao checkpoint.
const TorchAOKey = "tensor_names"

// WithTorchAO returns the configuration to plan a checkpoint whose
// safetensors __metadata__ is meta and whose stored tensors are tensors:
// cfg itself unless meta holds torchao's "tensor_names" and cfg names no
// other method, in which case a configuration of method "torchao"
// carrying meta's string entries (File: cfg's, or "__metadata__" when
// there is no configuration). Without a configuration, some tensor must
// be a torchao part (M._w_qdata): a converted view's export keeps the
// metadata beside weights that are no longer quantized.
func WithTorchAO(cfg *Config, meta map[string]any, tensors []index.Tensor) *Config {
	if _, ok := meta[TorchAOKey].(string); !ok {
		return cfg
	}
	if cfg != nil && cfg.Method != "torchao" {
		return cfg
	}
	if cfg == nil && !slices.ContainsFunc(tensors, func(t index.Tensor) bool { _, ok := aoWeightOf(t.Name); return ok }) {
		return nil
	}
	out := &Config{File: "__metadata__", Method: "torchao", Meta: map[string]string{}}
	if cfg != nil {
		c := *cfg
		out = &c
		out.Meta = map[string]string{}
	}
	for k, v := range meta {
		if s, ok := v.(string); ok {
			out.Meta[k] = s
		}
	}
	return out
}

// aoEntry is one weight's metadata entry, decoded.
type aoEntry struct {
	Type  string                     `json:"_type"`
	Data  map[string]json.RawMessage `json:"_data"`
	Names []string                   `json:"_tensor_data_names"`
}

// aoNamed are the torchao classes named and left out, with why.
var aoNamed = map[string]string{
	"Int4TilePackedTo4dTensor": "a kernel-specific packing (tinygemm's tiles), not served",
	"Int4PlainInt32Tensor":     "a kernel-specific packing (int32 words for XPU/NPU kernels), not served",
	"Int4PreshuffledTensor":    "a kernel-specific packing (preshuffled for mslk's kernels), not served",
}

// planTorchAO plans the weights torchao's metadata describes.
func planTorchAO(p *planner) {
	meta := p.cfg.Meta
	if meta == nil || meta[TorchAOKey] == "" {
		p.aoRefuse(fmt.Sprintf("torchao checkpoint (%s) without a safetensors __metadata__ %q: its weights cannot be rebuilt", p.cfg.File, TorchAOKey))
		return
	}
	var names []string
	if len(meta[TorchAOKey]) > MaxObject {
		p.aoRefuse(fmt.Sprintf("__metadata__ %q is %d bytes, over %d", TorchAOKey, len(meta[TorchAOKey]), MaxObject))
		return
	}
	if err := json.Unmarshal([]byte(meta[TorchAOKey]), &names); err != nil {
		p.aoRefuse(fmt.Sprintf("__metadata__ %q is not a JSON list of names: %v", TorchAOKey, err))
		return
	}
	// every entry, not only tensor_names' (a sharded checkpoint's shards
	// each list their own; the merged metadata keeps the first list)
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	for k, v := range meta {
		// only where its parts are stored: another key of the metadata
		// may hold a JSON object of someone else's
		if !seen[k] && k != TorchAOKey && strings.HasPrefix(strings.TrimSpace(v), "{") && strings.Contains(v, `"_type"`) && len(p.aoStored(k)) > 0 {
			names = append(names, k)
			seen[k] = true
		}
	}
	sort.Strings(names)
	budget := MaxObject
	for _, name := range names {
		raw, ok := meta[name]
		if !ok {
			if p.t(name) == nil {
				p.fail(name, fmt.Sprintf("listed in __metadata__ %q without its entry", TorchAOKey), p.aoStored(name)...)
			}
			continue
		}
		if len(raw) > maxAOEntry || len(raw) > budget {
			p.fail(name, fmt.Sprintf("its __metadata__ entry is %d bytes, over %d", len(raw), min(maxAOEntry, budget)), p.aoStored(name)...)
			continue
		}
		budget -= len(raw)
		var e aoEntry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			p.fail(name, fmt.Sprintf("its __metadata__ entry is not torchao's JSON object: %v", err), p.aoStored(name)...)
			continue
		}
		p.aoWeight(name, &e)
	}
	// parts whose weight has no entry: never served as codes
	for _, nm := range p.names {
		if w, ok := aoWeightOf(nm); ok && p.weights[w] == nil && p.probs[w] == "" {
			p.fail(w, "its parts have no __metadata__ entry", p.aoStored(w)...)
		}
	}
}

// aoWeightOf is the logical weight of a stored M._w_qdata: M.w.
func aoWeightOf(stored string) (string, bool) {
	x, ok := strings.CutSuffix(stored, "_qdata")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(x, "._")
	if i <= 0 || i+2 == len(x) {
		return "", false
	}
	return x[:i] + "." + x[i+2:], true
}

// aoRefuse leaves out every weight the stored names show (M._w_qdata → M.w).
func (p *planner) aoRefuse(why string) {
	for _, nm := range p.names {
		if w, ok := aoWeightOf(nm); ok {
			p.fail(w, why, p.aoStored(w)...)
		}
	}
	if len(p.probs) == 0 {
		p.probs["(checkpoint)"] = why
	}
}

// aoPrefix is the stored names' prefix of logical weight name: M._w_.
func aoPrefix(name string) (string, bool) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || i == len(name)-1 {
		return "", false
	}
	return name[:i] + "._" + name[i+1:] + "_", true
}

// aoStored returns the stored tensors under name's prefix (to hide).
func (p *planner) aoStored(name string) []string {
	pre, ok := aoPrefix(name)
	if !ok {
		return nil
	}
	i := sort.SearchStrings(p.names, pre)
	var out []string
	for ; i < len(p.names) && strings.HasPrefix(p.names[i], pre); i++ {
		out = append(out, p.names[i])
	}
	return out
}

// aoWeight plans one entry.
func (p *planner) aoWeight(name string, e *aoEntry) {
	switch e.Type {
	case "Tensor", "torch.Tensor":
		return // a plain tensor, stored under its name
	case "":
		p.fail(name, "its __metadata__ entry has no _type", p.aoStored(name)...)
		return
	}
	stored := p.aoStored(name)
	if len(stored) == 0 && p.t(name) != nil {
		// stored under its own name, no part beside it: a converted
		// view's export keeps the source's __metadata__, and its weights
		// are the logical ones already
		return
	}
	if why, ok := aoNamed[e.Type]; ok {
		p.fail(name, "torchao "+e.Type+" is "+why, stored...)
		return
	}
	pre, ok := aoPrefix(name)
	if !ok {
		p.fail(name, "torchao names its parts M._w_DATA: this name has no module", stored...)
		return
	}
	part := map[string]string{}
	for _, d := range e.Names {
		if len(d) > 64 || d == "" {
			p.fail(name, fmt.Sprintf("its _tensor_data_names holds %q", shorten(d)), stored...)
			return
		}
		if p.t(pre+d) == nil {
			p.fail(name, fmt.Sprintf("its part %s is missing", pre+d), stored...)
			return
		}
		part[d] = pre + d
	}
	if part["act_pre_scale"] != "" {
		p.fail(name, fmt.Sprintf("torchao %s with an act_pre_scale (the weight times an activation scale, AWQ/SmoothQuant): not folded, not served", shorten(e.Type)), stored...)
		return
	}
	for _, need := range []string{"qdata", "scale"} {
		if part[need] == "" {
			p.fail(name, fmt.Sprintf("torchao %s without %q in its _tensor_data_names", shorten(e.Type), need), stored...)
			return
		}
	}
	var why string
	switch e.Type {
	case "Float8Tensor":
		why = p.aoFloat8(name, e, part, stored)
	case "Int4Tensor":
		why = p.aoInt4(name, e, part, stored)
	case "IntxUnpackedToInt8Tensor", "Int8Tensor":
		why = p.aoAffine(name, e, part, stored)
	case "NVFP4Tensor", "MXTensor":
		why = p.aoFP(name, e, part, stored) // torchao_fp.go
	default:
		why = fmt.Sprintf("torchao class %q is not one tensorfs reads", shorten(e.Type))
	}
	if why != "" {
		p.fail(name, why, stored...)
	}
}

func shorten(s string) string {
	if len(s) > 48 {
		s = s[:45] + "..."
	}
	return index.Printable(s) // a class name from the file: never a second line
}

// aoInts decodes attribute key as a list of positive integers (absent: nil, true).
func aoInts(e *aoEntry, key string) ([]int64, bool) {
	raw, ok := e.Data[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, true
	}
	var f []float64
	if err := json.Unmarshal(raw, &f); err != nil || len(f) > 8 {
		return nil, false
	}
	out := make([]int64, len(f))
	for i, v := range f {
		if v != float64(int64(v)) || v < 1 || v > maxDim {
			return nil, false
		}
		out[i] = int64(v)
	}
	return out, true
}

// aoDType decodes attribute key, {"_type": "torch.dtype", "_data":
// "bfloat16"}, as the float dtype it names (absent: def).
func aoDType(e *aoEntry, key string, def dtype.DType) (dtype.DType, bool) {
	raw, ok := e.Data[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return def, true
	}
	var v struct {
		Type string `json:"_type"`
		Data string `json:"_data"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Type != "torch.dtype" {
		return 0, false
	}
	switch v.Data {
	case "float32":
		return dtype.F32, true
	case "bfloat16":
		return dtype.BF16, true
	case "float16":
		return dtype.F16, true
	}
	return 0, false
}

// aoScale checks that the scale-like part t (float, or I8 for a zero
// point when intOK) holds one value per block of shape: its element count
// the blocks'. It returns its dtype or why not.
func (p *planner) aoBlockPart(name, what string, shape, grid []int64, intOK bool) (dtype.DType, string) {
	t := p.t(name)
	if !(isScaleDType(t.DType) || intOK && t.DType == dtype.I8) {
		return 0, fmt.Sprintf("its %s is %s, not a float", short(name), t.DType)
	}
	n, ok := int64(1), dimsOK(t.Shape)
	for _, g := range grid {
		n *= g
	}
	m := int64(1)
	for _, d := range t.Shape {
		m *= d
	}
	if !ok || m != n {
		return 0, fmt.Sprintf("its %s %s %v does not hold one value per block of %v (%v blocks)", what, short(name), t.Shape, shape, grid)
	}
	return t.DType, ""
}

func (p *planner) aoFloat8(name string, e *aoEntry, part map[string]string, stored []string) string {
	q, sc := p.t(part["qdata"]), p.t(part["scale"])
	if q.DType != dtype.F8E4M3 && q.DType != dtype.F8E5M2 {
		return fmt.Sprintf("torchao Float8Tensor qdata is %s, not F8_E4M3 or F8_E5M2", q.DType)
	}
	if len(q.Shape) < 1 || len(q.Shape) > 4 || !dimsOK(q.Shape) {
		return fmt.Sprintf("torchao Float8Tensor qdata has shape %v", q.Shape)
	}
	if !isScaleDType(sc.DType) {
		return fmt.Sprintf("torchao Float8Tensor scale is %s, not a float", sc.DType)
	}
	// the scale expanded over the data: each dimension 1, equal, or a
	// divisor (_maybe_expand_scale_to_tensor_shape); one value: per tensor
	grid := make([]int64, len(q.Shape))
	if isScalar(sc) {
		for i := range grid {
			grid[i] = 1
		}
	} else if len(sc.Shape) == len(q.Shape) && dimsOK(sc.Shape) {
		for i, d := range q.Shape {
			if d%sc.Shape[i] != 0 {
				return fmt.Sprintf("torchao Float8Tensor scale %v does not divide qdata %v", sc.Shape, q.Shape)
			}
			grid[i] = sc.Shape[i]
		}
	} else {
		return fmt.Sprintf("torchao Float8Tensor scale %v does not match qdata %v", sc.Shape, q.Shape)
	}
	block := make([]int64, len(q.Shape))
	for i := range block {
		block[i] = q.Shape[i] / grid[i]
	}
	if bs, ok := aoInts(e, "block_size"); !ok {
		return "torchao Float8Tensor block_size is not a list of sizes"
	} else if len(bs) == len(block) {
		for i := range bs {
			if bs[i] != block[i] && !(grid[i] == 1 && bs[i] >= q.Shape[i]) {
				return fmt.Sprintf("torchao Float8Tensor block_size %v contradicts scale %v for qdata %v", bs, sc.Shape, q.Shape)
			}
		}
	}
	if _, ok := aoDType(e, "dtype", dtype.F32); !ok {
		return "torchao Float8Tensor dtype is not float32, bfloat16 or float16"
	}
	k := &aoAffineKernel{shape: q.Shape, block: block, grid: grid, codes: q.DType, sdt: sc.DType, float8: true}
	k.init()
	p.add(name, "torchao-float8", append([]int64{}, q.Shape...), []string{part["qdata"], part["scale"]}, k, stored...)
	return ""
}

func (p *planner) aoAffine(name string, e *aoEntry, part map[string]string, stored []string) string {
	cls := e.Type
	q := p.t(part["qdata"])
	if q.DType != dtype.I8 {
		return fmt.Sprintf("torchao %s qdata is %s, not I8", cls, q.DType)
	}
	if len(q.Shape) < 1 || len(q.Shape) > 4 || !dimsOK(q.Shape) {
		return fmt.Sprintf("torchao %s qdata has shape %v", cls, q.Shape)
	}
	bs, ok := aoInts(e, "block_size")
	if !ok || len(bs) != len(q.Shape) {
		return fmt.Sprintf("torchao %s block_size is not a list of %d sizes", cls, len(q.Shape))
	}
	grid := make([]int64, len(bs))
	for i, b := range bs {
		if q.Shape[i]%b != 0 {
			return fmt.Sprintf("torchao %s block_size %v does not divide qdata %v", cls, bs, q.Shape)
		}
		grid[i] = q.Shape[i] / b
	}
	out, ok := aoDType(e, "dtype", 0)
	if !ok || out == 0 {
		return fmt.Sprintf("torchao %s dtype is not float32, bfloat16 or float16", cls)
	}
	sdt, why := p.aoBlockPart(part["scale"], "scale", q.Shape, grid, false)
	if why != "" {
		return "torchao " + cls + " " + why
	}
	parts := []string{part["qdata"], part["scale"]}
	var zdt dtype.DType
	if zp := part["zero_point"]; zp != "" {
		if zdt, why = p.aoBlockPart(zp, "zero_point", q.Shape, grid, true); why != "" {
			return "torchao " + cls + " " + why
		}
		parts = append(parts, zp)
	} else if cls == "IntxUnpackedToInt8Tensor" {
		return "torchao IntxUnpackedToInt8Tensor without zero_point"
	}
	scheme := "torchao-int8"
	if cls == "IntxUnpackedToInt8Tensor" {
		scheme = "torchao-intx"
	}
	k := &aoAffineKernel{shape: q.Shape, block: bs, grid: grid, codes: dtype.I8, sdt: sdt, zdt: zdt, out: out}
	if raw, ok := e.Data["target_dtype"]; ok && cls == "IntxUnpackedToInt8Tensor" {
		var v struct {
			Data string `json:"_data"`
		}
		if json.Unmarshal(raw, &v) == nil && len(v.Data) == 4 && strings.HasPrefix(v.Data, "int") && v.Data[3] >= '1' && v.Data[3] <= '4' {
			k.qbits = int(v.Data[3] - '0') // a speed hint only: any code is read right
		}
	}
	k.init()
	p.add(name, scheme, append([]int64{}, q.Shape...), parts, k, stored...)
	return ""
}

func (p *planner) aoInt4(name string, e *aoEntry, part map[string]string, stored []string) string {
	q, sc := p.t(part["qdata"]), p.t(part["scale"])
	zpn := part["zero_point"]
	if zpn == "" {
		return "torchao Int4Tensor without zero_point"
	}
	zp := p.t(zpn)
	if q.DType != dtype.I8 && q.DType != dtype.U8 {
		return fmt.Sprintf("torchao Int4Tensor qdata is %s, not I8 (two int4 a byte)", q.DType)
	}
	nd := len(q.Shape)
	if (nd != 2 && nd != 3) || !dimsOK(q.Shape) {
		return fmt.Sprintf("torchao Int4Tensor qdata has shape %v, not [N, K/2] or [B, N, K/2]", q.Shape)
	}
	shape, ok := aoInts(e, "shape")
	if !ok || len(shape) != nd {
		return fmt.Sprintf("torchao Int4Tensor shape attribute is not %d sizes", nd)
	}
	for i := 0; i < nd-1; i++ {
		if shape[i] != q.Shape[i] {
			return fmt.Sprintf("torchao Int4Tensor shape %v with qdata %v is packed along another dimension than the last (not served)", shape, q.Shape)
		}
	}
	if shape[nd-1] != 2*q.Shape[nd-1] {
		return fmt.Sprintf("torchao Int4Tensor shape %v does not match qdata %v (two values a byte along the last dimension)", shape, q.Shape)
	}
	bs, ok := aoInts(e, "block_size")
	if !ok || len(bs) != nd {
		return fmt.Sprintf("torchao Int4Tensor block_size is not a list of %d sizes", nd)
	}
	for _, b := range bs[:nd-1] {
		if b != 1 {
			return fmt.Sprintf("torchao Int4Tensor block_size %v is not groupwise along the last dimension", bs)
		}
	}
	gs := bs[nd-1]
	K := shape[nd-1]
	if gs%2 != 0 || K%gs != 0 {
		return fmt.Sprintf("torchao Int4Tensor group size %d does not divide K %d in whole bytes", gs, K)
	}
	N, B := shape[nd-2], int64(1)
	want := []int64{K / gs, N}
	if nd == 3 {
		B = shape[0]
		want = []int64{B, K / gs, N}
	}
	for _, x := range []struct {
		what string
		t    string
	}{{"scale", part["scale"]}, {"zero_point", zpn}} {
		t := p.t(x.t)
		if !isScaleDType(t.DType) || !shapeIs(t, want...) {
			return fmt.Sprintf("torchao Int4Tensor %s is %s %v, not a float [%s] (stored transposed)", x.what, t.DType, t.Shape, strings.Trim(fmt.Sprint(want), "[]"))
		}
	}
	if zp.DType != sc.DType {
		return fmt.Sprintf("torchao Int4Tensor scale is %s and zero_point %s, not one dtype", sc.DType, zp.DType)
	}
	k := &aoInt4Kernel{n: N, k: K, gs: gs, b: B, sdt: sc.DType}
	p.add(name, "torchao-int4", shape, []string{part["qdata"], part["scale"], zpn}, k, stored...)
	return ""
}
