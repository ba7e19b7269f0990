package quant

import (
	"fmt"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// FP8 with a scale per block of the weight: W[b,i,j] = f32(w[b,i,j]) *
// s[b, i/bm, j/bn] (one float32 multiply). One kernel serves
//   - block FP8 (DeepSeek-V3/R1, Qwen3-FP8; deepseek-ai/DeepSeek-V3
//     inference/kernel.py weight_dequant_kernel: x.to(f32) * s, edge tiles
//     masked): bm = bn = 128 by weight_block_size, scale F32, BF16 or
//     F8_E8M0 (scale_fmt ue8m0, DeepSeek-V4's X.scale);
//   - per-channel FP8 (compressed-tensors float-quantized strategy channel:
//     x_q.to(scale.dtype) * scale, scale [out, 1]): bm = 1, bn = in;
//   - per-tensor FP8 (strategy tensor, ModelOpt FP8): bm = out, bn = in;
//   - fbgemm FP8 (transformers integrations/fbgemm_fp8.py; Llama 4 experts
//     [E, H, N] with a scale [E, 1, N]): bm = rows, bn = 1.
// The product of an E4M3 code (4 significant bits) and a scale of at most
// 8 (BF16) or 11 (F16) significant bits is exact in float32, so for those
// the float32 result rounds to bf16 exactly as the reference's bf16
// multiply does; with an F32 scale the reference multiplies in float32.

type fp8Kernel struct {
	m, n   int64 // rows per batch, columns
	bm, bn int64 // block
	sm, sn int64 // scale grid per batch: ceil(m/bm), ceil(n/bn)
	sdt    dtype.DType
	lut    *[256]float32 // the code's value: E4M3, or I8 for int-quantized
	// post, when not 0, multiplies each product again, as a second
	// float32 multiply (bitsandbytes 8-bit's 1/127).
	post float32
	// zdt, when valid, is the dtype of a zero point per scale (part 2,
	// the scale's grid): W = (q - zero_point) * scale (compressed-tensors
	// int-quantized, asymmetric).
	zdt dtype.DType
}

// zeroPoints reads the zero points of scale rows [a, b), columns [x0,
// x1) of the grid as float32 (each an integer, exact).
func (k *fp8Kernel) zeroPoints(s *scratch, a, b, x0, x1 int64) ([]float32, error) {
	if isScaleDType(k.zdt) {
		return s.stridedFloats(2, 2, k.zdt, k.sn, a, b, x0, x1)
	}
	es := k.zdt.ElemSize()
	raw, err := s.strided(2, 2, k.sn*es, a, b, x0*es, x1*es)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(raw)/int(es))
	for i := range out {
		switch k.zdt {
		case dtype.I8:
			out[i] = float32(int8(raw[i]))
		case dtype.U8:
			out[i] = float32(raw[i])
		case dtype.I32:
			out[i] = float32(int32(le32(raw, int64(i))))
		}
	}
	return out, nil
}

func newFP8(shape []int64, bm, bn int64, sdt dtype.DType) *fp8Kernel {
	m, n := shape[len(shape)-2], shape[len(shape)-1]
	if len(shape) == 1 {
		m, n = 1, shape[0]
	}
	return &fp8Kernel{m: m, n: n, bm: bm, bn: bn, sm: ceilDiv(m, bm), sn: ceilDiv(n, bn), sdt: sdt, lut: e4m3Table}
}

// scaleRow is the scale grid row of weight row r.
func (k *fp8Kernel) scaleRow(r int64) int64 { return (r/k.m)*k.sm + (r%k.m)/k.bm }

func (k *fp8Kernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	w := c1 - c0
	codes, err := s.bytes(0, 0, r0*k.n+c0, (r1-r0)*w)
	if err != nil {
		return err
	}
	sr0, sr1 := k.scaleRow(r0), k.scaleRow(r1-1)+1
	j0, j1 := c0/k.bn, (c1-1)/k.bn+1
	sc, err := s.stridedFloats(1, 1, k.sdt, k.sn, sr0, sr1, j0, j1)
	if err != nil {
		return err
	}
	sw := j1 - j0
	var zp []float32
	if k.zdt != dtype.Invalid {
		if zp, err = k.zeroPoints(s, sr0, sr1, j0, j1); err != nil {
			return err
		}
	}
	var shifted [256]float32
	for r := r0; r < r1; r++ {
		srow := sc[(k.scaleRow(r)-sr0)*sw : (k.scaleRow(r)-sr0+1)*sw]
		row := codes[(r-r0)*w : (r-r0+1)*w]
		out := dst[(r-r0)*w : (r-r0+1)*w]
		for c := c0; c < c1; {
			e := min((c/k.bn+1)*k.bn, c1)
			f := srow[c/k.bn-j0]
			in := row[c-c0 : e-c0]
			o := out[c-c0 : e-c0]
			lut := k.lut
			if zp != nil {
				// q - zero_point, exact, then the one multiply
				z := zp[(k.scaleRow(r)-sr0)*sw+c/k.bn-j0]
				for i, v := range lut {
					shifted[i] = v - z
				}
				lut = &shifted
			}
			if useLookup && lut == e4m3Table {
				dtype.ScaleE4M3(o, in, f) // the same bits, computed from the codes' bits
			} else if useLookup {
				dtype.Lookup8(o, in, lut, f)
			} else {
				o = o[:len(in)]
				for i, b := range in {
					o[i] = lut[b] * f
				}
			}
			if k.post != 0 {
				for i := range o {
					o[i] *= k.post
				}
			}
			c = e
		}
	}
	return nil
}

// fp8Weight checks an F8_E4M3 weight and its scale against a block shape
// and adds it, or records why not.
func (p *planner) fp8Weight(scheme, name, wname, sname string, bm, bn int64, batch bool, extra ...string) {
	wt, st := p.t(wname), p.t(sname)
	parts := append([]string{wname, sname}, extra...)
	if wt == nil {
		p.fail(name, "its "+short(wname)+" is missing", parts...)
		return
	}
	if st == nil {
		p.fail(name, "its "+short(sname)+" is missing", parts...)
		return
	}
	code := dtype.F8E4M3
	if strings.HasPrefix(scheme, "int8") {
		code = dtype.I8
	}
	if wt.DType != code {
		p.fail(name, fmt.Sprintf("%s is %s, not %s", short(wname), wt.DType, code), parts...)
		return
	}
	if !(len(wt.Shape) == 2 || (batch && len(wt.Shape) == 3)) || !dimsOK(wt.Shape) {
		p.fail(name, fmt.Sprintf("%s has shape %v, not a matrix", short(wname), wt.Shape), parts...)
		return
	}
	sdt := st.DType
	if sdt == dtype.U8 && p.u8E8M0 {
		sdt = dtype.F8E8M0 // MXFP8's exponent bytes, as transformers reads them
	}
	if !isScaleDType(sdt) && sdt != dtype.F8E8M0 {
		p.fail(name, fmt.Sprintf("%s is %s, not F32, BF16, F16 or F8_E8M0", short(sname), st.DType), parts...)
		return
	}
	m, n := wt.Shape[len(wt.Shape)-2], wt.Shape[len(wt.Shape)-1]
	if bm <= 0 {
		bm = m
	}
	if bn <= 0 {
		bn = n
	}
	k := newFP8(wt.Shape, bm, bn, sdt)
	if code == dtype.I8 {
		k.lut = int8Table
	}
	want := []int64{k.sm, k.sn}
	if len(wt.Shape) == 3 {
		want = []int64{wt.Shape[0], k.sm, k.sn}
	}
	ok := shapeIs(st, want...)
	if k.sm == 1 && k.sn == 1 && len(wt.Shape) == 2 && isScalar(st) {
		ok = true
	}
	if len(wt.Shape) == 3 && k.sm == 1 && bn == 1 && shapeIs(st, wt.Shape[0], n, 1) {
		ok = true // fbgemm's down_proj_scale [E, N, 1]: the same bytes as [E, 1, N]
	}
	if !ok {
		p.fail(name, fmt.Sprintf("%s has shape %v, not %v (weight %v in blocks of %d×%d)", short(sname), st.Shape, want, wt.Shape, bm, bn), parts...)
		return
	}
	p.add(name, scheme, wt.Shape, []string{wname, sname}, k, extra...)
}

// short is the last component of a dotted name, for Problems that already
// name the weight.
func short(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// planFP8Block: quant_method fp8 (transformers' FineGrainedFP8): X.weight
// F8_E4M3 with X.weight_scale_inv (or DeepSeek-V4's X.scale) per block of
// weight_block_size; without weight_block_size, one scale per tensor
// (X.weight_scale). weight_format "mxfp8" (transformers'
// integrations/finegrained core.py weight_formats: E4M3 values, UE8M0
// scales per group of (1, 32), whatever weight_block_size says) is MXFP8:
// W[i, j] = f32(w[i, j]) * 2^(s[i, j/32]-127), E8M0 255 NaN, the scale
// F8_E8M0 or its exponent byte as U8. A parameter that cannot be used
// (weight_block_size not two positive integers, another weight_format)
// leaves every weight out (refuseAll), never served as its codes.
// scale_fmt: fp8scalefmt.go.
func planFP8Block(p *planner) {
	if v, ok := p.cfg.Params["weight_format"]; ok && v != nil {
		switch f, _ := v.(string); strings.ToLower(f) {
		case "fp8":
		case "mxfp8":
			p.scheme = "mxfp8"
			p.u8E8M0 = true
			p.fp8Pairs(p.scheme, 1, 32, true)
			return
		default:
			p.refuseAll(fmt.Sprintf("weight_format %s (%s) is not fp8 or mxfp8: no weight is dequantized", paramStr(v), p.cfg.File))
			return
		}
	}
	if !p.scaleFmt() {
		return
	}
	bm, bn := int64(0), int64(0)
	if v, ok := p.cfg.Params["weight_block_size"]; ok && v != nil {
		if bm, bn, ok = blockPair(v); !ok {
			p.refuseAll(fmt.Sprintf("weight_block_size %s (%s) is not two positive integers: no weight is dequantized", paramStr(v), p.cfg.File))
			return
		}
	}
	if bm == 0 {
		p.scheme = "fp8-tensor"
	} else {
		p.scheme = "fp8-block"
	}
	p.fp8Pairs(p.scheme, bm, bn, true)
}

// fp8Pairs joins every F8_E4M3 X.weight with its scale; an F8 weight
// without one, or a scale without its F8 weight, is a Problem.
func (p *planner) fp8Pairs(scheme string, bm, bn int64, strict bool) {
	for _, nm := range p.names {
		t := p.t(nm)
		var x string
		switch {
		case strings.HasSuffix(nm, ".weight_scale_inv"):
			x = strings.TrimSuffix(nm, "_scale_inv")
		case strings.HasSuffix(nm, ".weight") && t.DType == dtype.F8E4M3:
			x = nm
		case strict && strings.HasSuffix(nm, ".scale") && t.DType == dtype.F8E8M0:
			x = strings.TrimSuffix(nm, ".scale") + ".weight"
		default:
			continue
		}
		if p.planned(x) {
			continue
		}
		base := strings.TrimSuffix(x, ".weight")
		var cands []string
		for _, c := range []string{x + "_scale_inv", base + ".scale", x + "_scale"} {
			if p.t(c) != nil {
				cands = append(cands, c)
			}
		}
		if !strict && (len(cands) != 1 || cands[0] != x+"_scale_inv") {
			continue // without a configuration only the unambiguous pair
		}
		switch len(cands) {
		case 0:
			p.fail(x, "its weight_scale_inv is missing", x)
		case 1:
			b1, b2 := bm, bn
			if !strict {
				b1, b2 = 128, 128
			}
			p.fp8Weight(scheme, x, x, cands[0], b1, b2, false)
		default:
			p.fail(x, fmt.Sprintf("it has %d scales (%s)", len(cands), strings.Join(cands, ", ")), append([]string{x}, cands...)...)
		}
	}
}

// planFbgemm: quant_method fbgemm_fp8: X.weight F8 with X.weight_scale
// [out, 1]; Llama 4 experts P F8 [E, H, N] with P_scale [E, 1, N].
func planFbgemm(p *planner) {
	for _, nm := range p.names {
		t := p.t(nm)
		if t.DType != dtype.F8E4M3 {
			if strings.HasSuffix(nm, "_scale") && !strings.HasSuffix(nm, "input_scale") {
				w := strings.TrimSuffix(nm, "_scale")
				if wt := p.t(w); wt == nil || wt.DType != dtype.F8E4M3 {
					p.fail(w, "it has a "+short(nm)+" but is not a stored F8_E4M3 tensor", w, nm)
				}
			}
			continue
		}
		if len(t.Shape) == 3 {
			p.fp8Weight("fp8-channel", nm, nm, nm+"_scale", t.Shape[1], 1, true)
		} else {
			p.fp8Weight("fp8-channel", nm, nm, nm+"_scale", 1, 0, false, strings.TrimSuffix(nm, "weight")+"input_scale_ub")
		}
	}
}

// ctFP8 is one compressed-tensors float-quantized weight: the scale's shape
// says the strategy (tensor, channel, block; group is refused).
// int8Table is a signed byte's value.
var int8Table = func() *[256]float32 {
	var t [256]float32
	for i := range t {
		t[i] = float32(int8(i))
	}
	return &t
}()

// ctFP8 plans one float-quantized (kind "fp8") or int-quantized (kind
// "int8", symmetric: W = f32(int8 q) * scale, exact) weight.
func (p *planner) ctFP8(x string, blocks [][2]int64, kind string) {
	wname, sname := x+".weight", x+".weight_scale"
	wt, st := p.t(wname), p.t(sname)
	extra := []string{x + ".input_scale", x + ".input_zero_point"}
	if zn := x + ".weight_zero_point"; p.t(zn) != nil {
		defer p.ctZeroPoint(wname, sname, zn, kind)
	}
	if wt == nil || st == nil || len(wt.Shape) != 2 || !dimsOK(wt.Shape) {
		p.fp8Weight(kind+"-channel", wname, wname, sname, 1, 0, false, extra...)
		return
	}
	o, i := wt.Shape[0], wt.Shape[1]
	switch {
	case isScalar(st):
		p.fp8Weight(kind+"-tensor", wname, wname, sname, 0, 0, false, extra...)
	case shapeIs(st, o, 1):
		p.fp8Weight(kind+"-channel", wname, wname, sname, 1, 0, false, extra...)
	default:
		for _, b := range blocks {
			if shapeIs(st, ceilDiv(o, b[0]), ceilDiv(i, b[1])) {
				p.fp8Weight(kind+"-block", wname, wname, sname, b[0], b[1], false, extra...)
				return
			}
		}
		p.fail(wname, fmt.Sprintf("weight_scale has shape %v, which is no tensor, channel or block scale of a %v weight", st.Shape, wt.Shape), wname, sname, x+".input_scale")
	}
}

// ctZeroPoint gives the planned int-quantized weight wname its zero
// points (asymmetric: W = (q - zero_point) * scale, compressed-tensors
// forward.py _dequantize, exact in float32), one per scale; a zero point
// of another shape, of a dtype that is not an integer or float, or on an
// FP8 weight leaves the weight out.
func (p *planner) ctZeroPoint(wname, sname, zn, kind string) {
	w := p.weights[wname]
	if w == nil {
		p.hidden[zn] = true
		return
	}
	zt, st := p.t(zn), p.t(sname)
	k, _ := w.kern.(*fp8Kernel)
	all := []string{wname, sname, zn}
	switch {
	case kind != "int8" || k == nil:
		p.fail(wname, "a zero point on a float-quantized weight is not read", all...)
	case zt.DType != dtype.I8 && zt.DType != dtype.I32 && zt.DType != dtype.U8 && !isScaleDType(zt.DType):
		p.fail(wname, fmt.Sprintf("weight_zero_point is %s, not an integer or float", zt.DType), all...)
	case zt.NumElements() != st.NumElements() || (len(zt.Shape) != len(st.Shape) && !isScalar(zt)):
		p.fail(wname, fmt.Sprintf("weight_zero_point has shape %v, not the weight_scale's %v", zt.Shape, st.Shape), all...)
	default:
		k.zdt = zt.DType
		w.Parts = append(w.Parts, zn)
		p.hidden[zn] = true
	}
}

// planPairs: no configuration; only the unambiguous pairs are joined.
func planPairs(p *planner) {
	p.fp8Pairs("fp8-block", 128, 128, false)
	if len(p.weights) > 0 {
		p.scheme = "fp8-block"
	}
	n := len(p.weights)
	planMXFP4Pairs(p, false)
	if len(p.weights) > n {
		p.scheme = "mxfp4"
	}
}

// blockPair reads a block shape from JSON: two integers in [1, maxDim]
// (fp8's weight_block_size, compressed-tensors' block_structure); ok is
// false for anything else.
func blockPair(v any) (a, b int64, ok bool) {
	l, _ := v.([]any)
	if len(l) != 2 {
		return 0, 0, false
	}
	x, ok1 := l[0].(float64)
	y, ok2 := l[1].(float64)
	if !ok1 || !ok2 || x < 1 || y < 1 || x > maxDim || y > maxDim || x != float64(int64(x)) || y != float64(int64(y)) {
		return 0, 0, false
	}
	return int64(x), int64(y), true
}
