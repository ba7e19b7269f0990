package quant

import (
	"encoding/binary"
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
)

// compressed-tensors pack-quantized (neuralmagic/compressed-tensors
// compressors/quantized_compressors/pack_quantized.py): X.weight_packed I32
// [out, ceil(in/f)] holds f = 32/bits values a word, value i at shift
// bits*i (LSB first), offset binary (stored = q + 2^(bits-1));
// X.weight_scale [out, G] (G groups of group_size along in, or 1 for
// channel); X.weight_zero_point I32 [ceil(out/f), G] packed the same way
// along dim 0 (absent when symmetric); X.weight_g_idx I32 [in] (actorder
// group) maps a column to its group; X.weight_shape I32 [2] = [out, in].
// forward.py _dequantize: (q - zero_point) * scale, exact in float32 for
// int4/int8 codes and 16-bit scales.

type packedKernel struct {
	cols      int64 // in
	bits      uint
	groups    int64 // G
	gsize     int64 // group size (cols when G == 1)
	sdt       dtype.DType
	zp, gidx  int // part index, -1 when absent
	shapePart int // weight_shape part, -1 when absent; checked on every call
	rows      int64
}

func (k *packedKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	if k.shapePart >= 0 && !s.checked {
		if err := k.checkShape(s); err != nil {
			return err
		}
	}
	f := int64(32 / k.bits)
	mask := uint32(1)<<k.bits - 1
	half := int32(1) << (k.bits - 1)
	words := ceilDiv(k.cols, f)
	p0, p1 := c0/f, (c1-1)/f+1
	packed, err := s.strided(0, 0, 4*words, r0, r1, 4*p0, 4*p1)
	if err != nil {
		return err
	}
	var gi []int32
	if k.gidx >= 0 {
		if gi, err = k.groupIndex(s, c0, c1); err != nil {
			return err
		}
	}
	groups, pos := groupsOf(gi, c0, c1, k.gsize)
	gw := int64(len(groups))
	raw, err := s.gather(1, 1, k.sdt.ElemSize(), k.groups, r0, r1, groups)
	if err != nil {
		return err
	}
	sc, err := s.decode(1, k.sdt, raw, (r1-r0)*gw)
	if err != nil {
		return err
	}
	var zw []byte
	if k.zp >= 0 {
		zw, err = s.gather(2, k.zp, 4, k.groups, r0/f, (r1-1)/f+1, groups)
		if err != nil {
			return err
		}
	}
	zero := make([]float32, gw) // the row's zero point per group
	w := c1 - c0
	pw := p1 - p0
	for r := r0; r < r1; r++ {
		srow := sc[(r-r0)*gw : (r-r0+1)*gw]
		for g := range zero {
			zero[g] = 0
			if zw != nil {
				word := le32(zw, ((r/f)-r0/f)*gw+int64(g))
				zero[g] = float32(int32((word>>(k.bits*uint(r%f)))&mask) - half)
			}
		}
		prow := packed[(r-r0)*4*pw : (r-r0+1)*4*pw]
		out := dst[(r-r0)*w : (r-r0+1)*w]
		if useLookup && gi == nil && k.bits == 4 && c0%k.gsize == 0 && (c1%k.gsize == 0 || c1 == k.cols) && k.gsize%8 == 0 && (c1-c0)%8 == 0 {
			// whole groups (the last may be short, whole words): each
			// group's 16 values by the same operations, then the row's
			// codes by table in one call per whole-group run
			tbls := s.tables(gw)
			for g := range tbls {
				for v := range tbls[g] {
					tbls[g][v] = (float32(int32(v)-half) - zero[g]) * srow[g]
				}
			}
			full := (c1 - c0) / k.gsize
			dtype.Lookup4(out, prow[:full*k.gsize/2], int(k.gsize/2), tbls, nil)
			if tail := (c1 - c0) % k.gsize; tail > 0 {
				dtype.Lookup4(out[full*k.gsize:], prow[full*k.gsize/2:(c1-c0)/2], int(tail/2), tbls[full:], nil)
			}
			continue
		}
		if gi != nil || k.bits > 4 {
			for c := c0; c < c1; c++ {
				word := le32(prow, c/f-p0)
				q := int32((word>>(k.bits*uint(c%f)))&mask) - half
				g := pos[c-c0]
				out[c-c0] = (float32(q) - zero[g]) * srow[g]
			}
			continue
		}
		// groups of contiguous columns: a table of the 2^bits values
		// (the same operations, once per code) and whole words
		var tbl [16]float32
		for c := c0; c < c1; {
			e := min((c/k.gsize+1)*k.gsize, c1)
			g := pos[c-c0]
			for v := range tbl[:1<<k.bits] {
				tbl[v] = (float32(int32(v)-half) - zero[g]) * srow[g]
			}
			decodeRun(prow, p0, c, e, k.bits, &tbl, out[c-c0:e-c0])
			c = e
		}
	}
	return nil
}

// checkShape checks weight_shape against the weight (once per scratch).
func (k *packedKernel) checkShape(s *scratch) error {
	b, err := s.bytes(6, k.shapePart, 0, 8)
	if err != nil {
		return err
	}
	o, i := int64(int32(binary.LittleEndian.Uint32(b))), int64(int32(binary.LittleEndian.Uint32(b[4:])))
	if o != k.rows || i != k.cols {
		return fmt.Errorf("weight_shape is [%d, %d], not the [%d, %d] its weight_packed holds", o, i, k.rows, k.cols)
	}
	s.checked = true
	return nil
}

// groupIndex reads weight_g_idx for columns [c0, c1), each checked.
func (k *packedKernel) groupIndex(s *scratch, c0, c1 int64) ([]int32, error) {
	b, err := s.bytes(3, k.gidx, 4*c0, 4*(c1-c0))
	if err != nil {
		return nil, err
	}
	gi := make([]int32, c1-c0)
	for i := range gi {
		g := int32(binary.LittleEndian.Uint32(b[4*i:]))
		if g < 0 || int64(g) >= k.groups {
			return nil, fmt.Errorf("weight_g_idx[%d] is %d, outside its %d groups", c0+int64(i), g, k.groups)
		}
		gi[i] = g
	}
	return gi, nil
}

// ctPacked plans one pack-quantized weight X.
func (p *planner) ctPacked(x string, bits, gsize int64) {
	pn, sn, zn, gn, shn := x+".weight_packed", x+".weight_scale", x+".weight_zero_point", x+".weight_g_idx", x+".weight_shape"
	all := []string{pn, sn, zn, gn, shn}
	name := x + ".weight"
	pt, st, zt, gt, sht := p.t(pn), p.t(sn), p.t(zn), p.t(gn), p.t(shn)
	if pt == nil || st == nil {
		p.fail(name, "its weight_packed or weight_scale is missing", all...)
		return
	}
	if bits != 4 && bits != 8 && bits != 2 {
		p.fail(name, fmt.Sprintf("num_bits %d is not 2, 4 or 8", bits), all...)
		return
	}
	f := 32 / bits
	if pt.DType != dtype.I32 || len(pt.Shape) != 2 || !dimsOK(pt.Shape) {
		p.fail(name, fmt.Sprintf("weight_packed is %s %v, not I32 [out, in/%d]", pt.DType, pt.Shape, f), all...)
		return
	}
	o, in := pt.Shape[0], pt.Shape[1]*f
	if sht != nil {
		if sht.DType != dtype.I32 && sht.DType != dtype.I64 || !shapeIs(sht, 2) {
			p.fail(name, fmt.Sprintf("weight_shape is %s %v, not I32 [2]", sht.DType, sht.Shape), all...)
			return
		}
		if b, err := p.readSmall(shn); err == nil {
			var so, si int64
			if sht.DType == dtype.I32 {
				so, si = int64(int32(binary.LittleEndian.Uint32(b))), int64(int32(binary.LittleEndian.Uint32(b[4:])))
			} else {
				so, si = int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))
			}
			if so != o || si <= in-f || si > in {
				p.fail(name, fmt.Sprintf("weight_shape [%d, %d] does not fit weight_packed %v", so, si, pt.Shape), all...)
				return
			}
			in = si
			sht = nil // checked here
		}
	}
	if !isScaleDType(st.DType) || len(st.Shape) != 2 || st.Shape[0] != o || !dimsOK(st.Shape) {
		p.fail(name, fmt.Sprintf("weight_scale is %s %v, not a float [%d, groups]", st.DType, st.Shape, o), all...)
		return
	}
	groups := st.Shape[1]
	if groups == 1 {
		gsize = in
	} else if gsize <= 0 || ceilDiv(in, gsize) != groups {
		if gt == nil {
			p.fail(name, fmt.Sprintf("weight_scale has %d groups, not ceil(%d/%d)", groups, in, gsize), all...)
			return
		}
		gsize = in
	}
	k := &packedKernel{cols: in, rows: o, bits: uint(bits), groups: groups, gsize: gsize, sdt: st.DType, zp: -1, gidx: -1, shapePart: -1}
	parts := []string{pn, sn}
	if zt != nil {
		if zt.DType != dtype.I32 || !shapeIs(zt, ceilDiv(o, f), groups) {
			p.fail(name, fmt.Sprintf("weight_zero_point is %s %v, not I32 [%d, %d]", zt.DType, zt.Shape, ceilDiv(o, f), groups), all...)
			return
		}
		k.zp = len(parts)
		parts = append(parts, zn)
	}
	if gt != nil {
		if gt.DType != dtype.I32 || !shapeIs(gt, in) {
			p.fail(name, fmt.Sprintf("weight_g_idx is %s %v, not I32 [%d]", gt.DType, gt.Shape, in), all...)
			return
		}
		k.gidx = len(parts)
		parts = append(parts, gn)
	}
	if p.t(shn) != nil {
		if sht != nil {
			k.shapePart = len(parts)
		}
		parts = append(parts, shn)
	}
	p.add(name, fmt.Sprintf("int%d-packed", bits), []int64{o, in}, parts, k)
}
