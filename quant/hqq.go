package quant

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// HQQ (mobiusml/hqq hqq/core/quantize.py Quantizer.dequantize and
// HQQLinear.state_dict, bitpack.py; quant_method "hqq", transformers'
// HqqHfQuantizer). A module X stores X.W_q, X.scale, X.zero and its meta
// as tensors (utils.py encode_safetensor_type: ints I32, or U8 in older
// versions, bools U8, strings their bytes as U8, the shape I64; the
// tensor's dtype says which). With axis 1 the weight [O, I] is G = O·I/g
// rows of g values (g = group_size; absent: I), each row a group with
// scale[G, 1] and zero[G, 1]; W_q packs the rows in k = 8/nbits row
// blocks of G/k rows (pack_4bit_u8: rows [0, G/2) in the high nibble,
// [G/2, G) in the low: "row halves"; 2 and 1 bits likewise from the top
// bits; 8 bits as is) or, for 3 bits, ten blocks of ceil(G/10) rows in a
// 32-bit word from bit 27 down (padding rows sliced off). view_as_float
// only relabels W_q's bytes. Then W = ((W_r − zero) · scale) in
// compute_dtype (absent: float16), each operation rounded to it: done in
// float32 and rounded to bf16 or f16 (one float32 operation rounded to a
// format of p ≤ 11 bits is that operation correctly rounded, as 24 ≥
// 2p + 2). Axis 0, quantized scale or zero (quant_scale, quant_zero),
// nbits 1.58, 5 and 6 (stored 8-bit but only in new versions), a scale or
// zero not in compute_dtype, and meta that cannot be read are named and
// the module left out, its tensors but its bias hidden.

type hqqKernel struct {
	cols, gs, groups int64 // logical in; values a group; groups G
	nbits            uint
	step             int64 // rows of W_q: G/k, or ceil(G/10) for 3 bits
	cd               dtype.DType
	sdt              dtype.DType
}

func (k *hqqKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	e0, e1 := r0*k.cols+c0, (r1-1)*k.cols+c1
	g0, g1 := e0/k.gs, (e1-1)/k.gs+1
	sc, err := s.floats(2, 1, k.sdt, g0, g1-g0)
	if err != nil {
		return err
	}
	zr, err := s.floats(3, 2, k.sdt, g0, g1-g0)
	if err != nil {
		return err
	}
	var tbl [256]float32
	n := 1 << k.nbits
	es := int64(1)
	if k.nbits == 3 {
		es = 4
	}
	// the groups of one row block are consecutive rows of W_q: read
	// them at once
	for j := g0 / k.step; j <= (g1-1)/k.step; j++ {
		ga, gb := max(g0, j*k.step), min(g1, (j+1)*k.step)
		rowB := k.gs * es
		blk, err := s.bytes(0, 0, (ga-j*k.step)*rowB, (gb-ga)*rowB)
		if err != nil {
			return err
		}
		slot := uint(j)
		fa, fb := ga, ga // whole groups done at once
		nib := k.nbits == 4 && k.cd == dtype.BF16 && k.sdt == dtype.BF16
		if useLookup && k.sdt == k.cd && (nib || k.gs%8 == 0) {
			// round(round(v − z) · s), the table's operations, per element
			fa, fb = max(ga, ceilDiv(e0, k.gs)), min(gb, e1/k.gs)
			if fa < fb {
				d, src := dst[fa*k.gs-e0:fb*k.gs-e0], blk[(fa-ga)*rowB:(fb-ga)*rowB]
				switch {
				case nib:
					dtype.AffineNibbleBF16(d, src, 4-4*slot, int(k.gs), zr[fa-g0:fb-g0], sc[fa-g0:fb-g0])
				case k.nbits == 3:
					dtype.AffineBits(d, src, 4, 27-3*slot, 7, int(k.gs), zr[fa-g0:fb-g0], sc[fa-g0:fb-g0], k.cd)
				default:
					dtype.AffineBits(d, src, 1, 8-k.nbits*(slot+1), uint32(n-1), int(k.gs), zr[fa-g0:fb-g0], sc[fa-g0:fb-g0], k.cd)
				}
			}
		}
		for g := ga; g < gb; g++ {
			if fa <= g && g < fb {
				continue
			}
			sv, zv := sc[g-g0], zr[g-g0]
			switch k.cd {
			case dtype.BF16:
				for v := 0; v < n; v++ {
					tbl[v] = roundBF16(roundBF16(float32(v)-zv) * sv)
				}
			default:
				for v := 0; v < n; v++ {
					tbl[v] = roundTo(k.cd, roundTo(k.cd, float32(v)-zv)*sv)
				}
			}
			a, b := max(e0, g*k.gs), min(e1, (g+1)*k.gs)
			raw := blk[(g-ga)*rowB+(a-g*k.gs)*es : (g-ga)*rowB+(b-g*k.gs)*es]
			out := dst[a-e0 : b-e0]
			if k.nbits == 3 {
				sh := 27 - 3*slot
				for i := range out {
					out[i] = tbl[(binary.LittleEndian.Uint32(raw[4*i:])>>sh)&7]
				}
				continue
			}
			sh := 8 - k.nbits*(slot+1)
			mask := byte(n - 1)
			for i, c := range raw {
				out[i] = tbl[(c>>sh)&mask]
			}
		}
	}
	return nil
}

// hqqMeta reads module x's meta tensors.
type hqqMeta struct {
	p   *planner
	x   string
	err string
}

func (m *hqqMeta) raw(key string) ([]byte, dtypeShape, bool) {
	t := m.p.t(m.x + "." + key)
	if t == nil {
		return nil, dtypeShape{}, false
	}
	b, err := m.p.readSmall(t.Name)
	if err != nil {
		if m.err == "" {
			m.err = err.Error()
		}
		return nil, dtypeShape{}, false
	}
	return b, dtypeShape{t.DType, t.Shape}, true
}

type dtypeShape struct {
	dt    dtype.DType
	shape []int64
}

// ints reads an integer meta tensor's values (I32, I64, U8, I8, I16).
func (m *hqqMeta) ints(key string) ([]int64, bool) {
	b, ds, ok := m.raw(key)
	if !ok {
		return nil, false
	}
	var v []int64
	switch ds.dt {
	case dtype.U8:
		for _, c := range b {
			v = append(v, int64(c))
		}
	case dtype.I8:
		for _, c := range b {
			v = append(v, int64(int8(c)))
		}
	case dtype.I16:
		for i := 0; i+2 <= len(b); i += 2 {
			v = append(v, int64(int16(binary.LittleEndian.Uint16(b[i:]))))
		}
	case dtype.I32:
		for i := 0; i+4 <= len(b); i += 4 {
			v = append(v, int64(int32(binary.LittleEndian.Uint32(b[i:]))))
		}
	case dtype.I64:
		for i := 0; i+8 <= len(b); i += 8 {
			v = append(v, int64(binary.LittleEndian.Uint64(b[i:])))
		}
	default:
		if m.err == "" {
			m.err = fmt.Sprintf("%s is %s, not an integer", key, ds.dt)
		}
		return nil, false
	}
	return v, true
}

func (m *hqqMeta) int1(key string) (int64, bool) {
	v, ok := m.ints(key)
	if ok && len(v) != 1 {
		if m.err == "" {
			m.err = fmt.Sprintf("%s has %d values, not one", key, len(v))
		}
		return 0, false
	}
	if !ok {
		return 0, false
	}
	return v[0], true
}

func (m *hqqMeta) str(key string) (string, bool) {
	b, ds, ok := m.raw(key)
	if !ok {
		return "", false
	}
	if ds.dt != dtype.U8 {
		if m.err == "" {
			m.err = fmt.Sprintf("%s is %s, not a string's U8 bytes", key, ds.dt)
		}
		return "", false
	}
	return string(b), true
}

var hqqPacking = map[int64]string{8: "8bit_u8", 4: "4bit_u8", 3: "3bit_32", 2: "2bit_u8", 1: "1bit_u8"}

func planHQQ(p *planner) {
	p.scheme = "hqq"
	for _, nm := range p.names {
		x, ok := strings.CutSuffix(nm, ".W_q")
		if !ok || x == "" {
			continue
		}
		var parts []string
		for _, other := range p.names {
			if strings.HasPrefix(other, x+".") && other != x+".bias" && !strings.Contains(other[len(x)+1:], ".") {
				parts = append(parts, other)
			}
		}
		name := x + ".weight"
		if why := p.hqqWeight(x, name, parts); why != "" {
			p.fail(name, "HQQ "+why, parts...)
		}
	}
	if len(p.probs) == 0 && len(p.weights) == 0 {
		p.refuseAll(fmt.Sprintf("HQQ (%s): no module has a W_q", p.cfg.File))
	}
}

// hqqWeight plans module x, or says why not.
func (p *planner) hqqWeight(x, name string, parts []string) string {
	m := &hqqMeta{p: p, x: x}
	wt, st, zt := p.t(x+".W_q"), p.t(x+".scale"), p.t(x+".zero")
	if st == nil || zt == nil {
		return "module without its scale or zero (quantized scale or zero, offloaded meta) is not read"
	}
	for _, k := range []string{"quant_scale", "quant_zero"} {
		if v, ok := m.int1(k); ok && v != 0 {
			return k + " (scale or zero themselves quantized) is not read"
		}
	}
	nbits, ok := m.int1("nbits")
	if !ok {
		return "nbits not read: " + m.errOr("nbits is missing or not an integer (1.58 bits is not read)")
	}
	want, known := hqqPacking[nbits]
	if !known {
		return fmt.Sprintf("nbits %d is not 1, 2, 3, 4 or 8", nbits)
	}
	if pk, ok := m.str("packing"); !ok || pk != want {
		return fmt.Sprintf("packing %q, not %q for %d bits (unpacked W_q is not read)", pk, want, nbits) + m.errSuffix()
	}
	if axis, ok := m.int1("axis"); !ok || axis != 1 {
		return fmt.Sprintf("axis %d: only axis 1 (groups along in) is read", axis) + m.errSuffix()
	}
	shape, ok := m.ints("shape")
	if !ok || len(shape) != 2 || !dimsOK(shape) || shape[0] <= 0 || shape[1] <= 0 {
		return fmt.Sprintf("shape %v is not [out, in]", shape) + m.errSuffix()
	}
	O, I := shape[0], shape[1]
	gs := I
	if p.t(x+".group_size") != nil {
		if gs, ok = m.int1("group_size"); !ok || gs <= 0 || gs > maxDim || (O*I)%gs != 0 {
			return fmt.Sprintf("group_size %d does not divide the %d×%d weight", gs, O, I) + m.errSuffix()
		}
	}
	cd := dtype.F16 // dequantize's default
	if cs, present := m.str("compute_dtype"); present {
		switch cs {
		case "torch.float16":
		case "torch.bfloat16":
			cd = dtype.BF16
		case "torch.float32":
			cd = dtype.F32
		default:
			return fmt.Sprintf("compute_dtype %q is not torch.float16, torch.bfloat16 or torch.float32", cs)
		}
	} else if m.err != "" {
		return m.err
	}
	G := O * I / gs
	if st.DType != cd || zt.DType != cd || !(shapeIs(st, G, 1) || shapeIs(st, G)) || !(shapeIs(zt, G, 1) || shapeIs(zt, G)) {
		return fmt.Sprintf("scale %s %v and zero %s %v are not %s [%d, 1] (the compute dtype)", st.DType, st.Shape, zt.DType, zt.Shape, cd, G)
	}
	k := &hqqKernel{cols: I, gs: gs, groups: G, nbits: uint(nbits), cd: cd, sdt: cd}
	size := int64(0)
	if nbits == 3 {
		k.step = ceilDiv(G, 10)
		size = 4 * k.step * gs
	} else {
		per := 8 / nbits
		if G%per != 0 {
			return fmt.Sprintf("%d groups do not split into %d row blocks", G, per)
		}
		k.step = G / per
		size = k.step * gs
	}
	if wt.Size != size || len(wt.Shape) != 2 || wt.Shape[len(wt.Shape)-1]*wt.DType.ElemSize() != gs*map[bool]int64{true: 4, false: 1}[nbits == 3] {
		return fmt.Sprintf("W_q is %s %v (%d bytes), not %d rows of %d packed groups (%d bytes)", wt.DType, wt.Shape, wt.Size, k.step, gs, size)
	}
	p.add(name, "hqq", []int64{O, I}, []string{x + ".W_q", x + ".scale", x + ".zero"}, k, parts...)
	return ""
}

func (m *hqqMeta) errOr(def string) string {
	if m.err != "" {
		return m.err
	}
	return def
}

func (m *hqqMeta) errSuffix() string {
	if m.err != "" {
		return " (" + m.err + ")"
	}
	return ""
}
