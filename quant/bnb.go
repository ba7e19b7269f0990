package quant

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// bitsandbytes 4-bit (nf4 and fp4; bitsandbytes functional.py
// QuantState.from_dict and dequantize_4bit, the CUDA kernel
// kDequantizeBlockwise with dDequantizeNF4 / dDequantizeFP4Tree): X.weight
// U8 holds the flattened tensor's 4-bit codes two a byte, high nibble
// first; X.weight.quant_map F32 [16] the code's values (the NF4 table, or
// get_4bit_type("fp4") = the FP4 tree's values); X.weight.absmax one scale
// per blocksize elements; X.weight.quant_state.bitsandbytes__<type> the
// JSON state (shape, blocksize, nested_*).
// W[n] = quant_map[code] * absmax[n / blocksize] (one float32 multiply).
// With double quantization absmax is U8 and
// absmax[j] = nested_quant_map[a[j]] * nested_absmax[j / nested_blocksize]
// (dequantize_blockwise, float32), then + nested_offset as a separate
// float32 add.

type bnbKernel struct {
	cols, n  int64
	bs, nbs  int64
	nested   bool
	offset   float32
	absmaxDT dtype.DType
}

// parts: 0 weight, 1 absmax, 2 quant_map, [3 nested_absmax, 4 nested_quant_map], state.

func (k *bnbKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	p0 := r0*k.cols + c0
	p1 := (r1-1)*k.cols + c1
	qm, err := s.floats(2, 2, dtype.F32, 0, 16)
	if err != nil {
		return err
	}
	var qmap [16]float32
	copy(qmap[:], qm)
	codes, err := s.bytes(0, 0, p0/2, (p1-1)/2+1-p0/2)
	if err != nil {
		return err
	}
	j0, j1 := p0/k.bs, (p1-1)/k.bs+1
	var am []float32
	if !k.nested {
		if am, err = s.floats(1, 1, k.absmaxDT, j0, j1-j0); err != nil {
			return err
		}
	} else {
		a, err := s.bytes(1, 1, j0, j1-j0)
		if err != nil {
			return err
		}
		nq, err := s.floats(4, 4, dtype.F32, 0, 256)
		if err != nil {
			return err
		}
		var nqm [256]float32
		copy(nqm[:], nq)
		n0, n1 := j0/k.nbs, (j1-1)/k.nbs+1
		na, err := s.floats(3, 3, dtype.F32, n0, n1-n0)
		if err != nil {
			return err
		}
		am = s.flts[5]
		if int64(cap(am)) < j1-j0 {
			am = make([]float32, j1-j0)
		}
		am = am[:j1-j0]
		s.flts[5] = am
		for j := j0; j < j1; j++ {
			// two float32 operations, not fused (bitsandbytes adds the
			// offset after dequantize_blockwise has rounded the product)
			v := float32(nqm[a[j-j0]] * na[j/k.nbs-n0])
			am[j-j0] = v + k.offset
		}
	}
	b0 := p0 / 2
	if useLookup && p0%k.bs == 0 && k.bs%8 == 0 && (p1-p0)%8 == 0 {
		// whole blocks (the last may be short, whole words): each
		// block's 16 values by the same multiplication, then every code
		// by table, high nibble first, in one call per run
		tbls := s.tables(j1 - j0)
		for j := range tbls {
			f := am[j]
			for i := range tbls[j] {
				tbls[j][i] = qmap[i] * f
			}
		}
		full := (p1 - p0) / k.bs
		dtype.Lookup4Hi(dst, codes[:full*k.bs/2], int(k.bs/2), tbls, nil)
		if tail := (p1 - p0) % k.bs; tail > 0 {
			dtype.Lookup4Hi(dst[full*k.bs:], codes[full*k.bs/2:(p1-p0)/2], int(tail/2), tbls[full:], nil)
		}
		return nil
	}
	for p := p0; p < p1; {
		e := min((p/k.bs+1)*k.bs, p1)
		f := am[p/k.bs-j0]
		var blk [16]float32
		for i := range blk {
			blk[i] = qmap[i] * f
		}
		out := dst[p-p0 : e-p0]
		q := p
		if q&1 == 1 {
			out[0] = blk[codes[q/2-b0]&15]
			out = out[1:]
			q++
		}
		in := codes[q/2-b0 : q/2-b0+(e-q)/2]
		o := out[:2*len(in)]
		for i, b := range in {
			o[2*i] = blk[b>>4]
			o[2*i+1] = blk[b&15]
		}
		if (e-q)&1 == 1 {
			out[len(out)-1] = blk[codes[(e-1)/2-b0]>>4]
		}
		p = e
	}
	return nil
}

type bnbState struct {
	QuantType       string   `json:"quant_type"`
	Blocksize       int64    `json:"blocksize"`
	Shape           []int64  `json:"shape"`
	NestedBlocksize *int64   `json:"nested_blocksize"`
	NestedDType     *string  `json:"nested_dtype"`
	NestedOffset    *float64 `json:"nested_offset"`
}

func planBnb(p *planner) {
	if v, present := p.cfg.Params["load_in_8bit"]; present && v != nil {
		b, ok := v.(bool)
		if !ok {
			p.refuseAll(fmt.Sprintf("load_in_8bit %s (%s) is not true or false: no weight is dequantized", paramStr(v), p.cfg.File))
			return
		}
		if b {
			planBnb8(p)
			return
		}
	}
	p.scheme = "bnb-" + str(p.cfg.Params, "bnb_4bit_quant_type")
	for _, nm := range p.names {
		i := strings.Index(nm, ".quant_state.bitsandbytes__")
		if i < 0 {
			continue
		}
		x := nm[:i] // X.weight
		parts := []string{x, x + ".absmax", x + ".quant_map", x + ".nested_absmax", x + ".nested_quant_map", nm}
		why := p.bnbWeight(x, nm, parts)
		if why != "" {
			p.fail(x, why, parts...)
		}
	}
	// codes and scales without a state
	for _, nm := range p.names {
		if x, ok := cutPart(nm, ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map"); ok {
			if _, done := p.weights[x]; !done {
				p.fail(x, "its quant_state is missing", x, nm)
			}
		}
		if x, ok := strings.CutSuffix(nm, ".SCB"); ok {
			p.fail(x+".weight", "it is stored 8-bit (SCB), but the configuration does not say load_in_8bit", x+".weight", nm, x+".weight_format")
		}
	}
}

func (p *planner) bnbWeight(x, stn string, parts []string) string {
	b, err := p.readSmall(stn)
	if err != nil {
		return "its quant_state cannot be read: " + err.Error()
	}
	var st bnbState
	if err := json.Unmarshal(b, &st); err != nil {
		return "its quant_state is not JSON: " + err.Error()
	}
	if st.QuantType != "nf4" && st.QuantType != "fp4" {
		return fmt.Sprintf("quant_state's quant_type %q is not nf4 or fp4", st.QuantType)
	}
	if !strings.HasSuffix(stn, "__"+st.QuantType) {
		return fmt.Sprintf("quant_state's quant_type %q differs from its name", st.QuantType)
	}
	if len(st.Shape) == 0 || !dimsOK(st.Shape) || st.Blocksize <= 0 || st.Blocksize > maxDim {
		return fmt.Sprintf("quant_state's shape %v or blocksize %d is not valid", st.Shape, st.Blocksize)
	}
	n := int64(1)
	for _, d := range st.Shape {
		n *= d
	}
	wt, at, qt := p.t(x), p.t(x+".absmax"), p.t(x+".quant_map")
	if wt == nil || at == nil || qt == nil {
		return "its weight codes, absmax or quant_map is missing"
	}
	if wt.DType != dtype.U8 || wt.NumElements() != (n+1)/2 {
		return fmt.Sprintf("weight codes are %s %v, not %d bytes of U8", wt.DType, wt.Shape, (n+1)/2)
	}
	if qt.DType != dtype.F32 || qt.NumElements() != 16 {
		return fmt.Sprintf("quant_map is %s %v, not F32 [16]", qt.DType, qt.Shape)
	}
	nb := ceilDiv(n, st.Blocksize)
	k := &bnbKernel{n: n, cols: st.Shape[len(st.Shape)-1], bs: st.Blocksize}
	use := parts[:3]
	if st.NestedBlocksize != nil || st.NestedOffset != nil {
		nt, nqt := p.t(x+".nested_absmax"), p.t(x+".nested_quant_map")
		if st.NestedBlocksize == nil || st.NestedOffset == nil || *st.NestedBlocksize <= 0 || *st.NestedBlocksize > maxDim {
			return "quant_state's nested_blocksize or nested_offset is missing or not valid"
		}
		if st.NestedDType != nil && *st.NestedDType != "float32" {
			return fmt.Sprintf("quant_state's nested_dtype %q is not float32", *st.NestedDType)
		}
		if nt == nil || nqt == nil {
			return "its nested_absmax or nested_quant_map is missing"
		}
		k.nested, k.nbs = true, *st.NestedBlocksize
		k.offset = float32(*st.NestedOffset)
		if math.IsNaN(*st.NestedOffset) {
			return "quant_state's nested_offset is NaN"
		}
		if at.DType != dtype.U8 || at.NumElements() != nb {
			return fmt.Sprintf("absmax is %s %v, not U8 [%d]", at.DType, at.Shape, nb)
		}
		if nt.DType != dtype.F32 || nt.NumElements() != ceilDiv(nb, k.nbs) {
			return fmt.Sprintf("nested_absmax is %s %v, not F32 [%d]", nt.DType, nt.Shape, ceilDiv(nb, k.nbs))
		}
		if nqt.DType != dtype.F32 || nqt.NumElements() != 256 {
			return fmt.Sprintf("nested_quant_map is %s %v, not F32 [256]", nqt.DType, nqt.Shape)
		}
		use = parts[:5]
	} else {
		if !isScaleDType(at.DType) || at.NumElements() != nb {
			return fmt.Sprintf("absmax is %s %v, not a float [%d]", at.DType, at.Shape, nb)
		}
		k.absmaxDT = at.DType
	}
	p.add(x, "bnb-"+st.QuantType, st.Shape, append(append([]string{}, use...), stn), k, parts...)
	return ""
}

// bitsandbytes 8-bit (LLM.int8, load_in_8bit; transformers
// integrations/bitsandbytes.py dequantize_bnb_weight and bitsandbytes
// int8_vectorwise_dequant): X.weight I8 [out, in] with X.SCB F32 [out],
// the absmax of each row; X.weight_format U8, 0 for the plain row-major
// layout ("row"; 1-3 are GPU tile layouts, not read).
// W = A * SCB.view(-1, 1) * 7.874015718698502e-3: the float32 product,
// then a second float32 multiply by 1/127 rounded to float32 (torch's
// float32 op with a Python scalar), never the scale times 1/127 first
// (that order differs in most elements).

// bnbInt8Scale is 7.874015718698502e-3 (1/127) as float32.
const bnbInt8Scale = float32(7.874015718698502e-3)

func planBnb8(p *planner) {
	p.scheme = "bnb-int8"
	for _, nm := range p.names {
		x, ok := strings.CutSuffix(nm, ".SCB")
		if !ok {
			continue
		}
		wn, fn := x+".weight", x+".weight_format"
		all := []string{wn, nm, fn}
		wt, st := p.t(wn), p.t(nm)
		switch {
		case wt == nil:
			p.fail(wn, "its int8 weight is missing", all...)
		case wt.DType != dtype.I8 || len(wt.Shape) != 2 || !dimsOK(wt.Shape):
			p.fail(wn, fmt.Sprintf("weight is %s %v, not I8 [out, in]", wt.DType, wt.Shape), all...)
		case st.DType != dtype.F32 || !(shapeIs(st, wt.Shape[0]) || shapeIs(st, wt.Shape[0], 1)):
			p.fail(wn, fmt.Sprintf("SCB is %s %v, not F32 [%d]", st.DType, st.Shape, wt.Shape[0]), all...)
		default:
			if p.t(fn) != nil {
				b, err := p.readSmall(fn)
				switch {
				case err != nil:
					p.fail(wn, "its weight_format cannot be read: "+err.Error(), all...)
					continue
				case p.t(fn).DType != dtype.U8 || len(b) != 1:
					p.fail(wn, fmt.Sprintf("weight_format is %s %v, not one U8", p.t(fn).DType, p.t(fn).Shape), all...)
					continue
				case b[0] != 0:
					p.fail(wn, fmt.Sprintf("weight_format %d is a GPU tile layout (col32, col_turing, col_ampere), not the row-major one (0) tensorfs reads", b[0]), all...)
					continue
				}
			}
			k := newFP8(wt.Shape, 1, wt.Shape[1], dtype.F32)
			k.lut, k.post = int8Table, bnbInt8Scale
			p.add(wn, "bnb-int8", wt.Shape, []string{wn, nm}, k, fn)
		}
	}
}
