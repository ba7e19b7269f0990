package quant

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/lazyweights/tensorfs/dtype"
)

// GPTQ (AutoGPTQ qlinear_cuda_old.py pack / forward; gptqmodel's
// checkpoint_format gptq_v2): X.qweight I32 [in/f, out] holds f = 32/bits
// values a word (3 bits: 32 values in three words, gptq3.go) along in (row f*p+k of Wt at shift bits*k); X.qzeros I32
// [G, out/f] packed along out the same way; X.scales F16 [G, out];
// X.g_idx I32 [in] (optional; desc_act permutes it) maps in-row i to its
// group, else g = i / group_size. Format gptq (v1) stores zero - 1, so the
// reader adds 1; gptq_v2 stores the zero itself.
// Wt[i, o] = scales[g, o] * (q[i, o] - z[g, o]) (exact in float32), and
// the nn.Linear weight is W[o, i] = Wt[i, o].

type gptqKernel struct {
	in, out, gsize, groups int64
	bits                   uint
	plus1                  float32 // 1 for v1, 0 for v2
	sdt                    dtype.DType
	gidx                   int // part index, -1 when absent
}

func (k *gptqKernel) rect(s *scratch, o0, o1, i0, i1 int64, dst []float32) error {
	if k.bits == 3 {
		return k.rect3(s, o0, o1, i0, i1, dst)
	}
	f := int64(32 / k.bits)
	mask := uint32(1)<<k.bits - 1
	p0, p1 := i0/f, (i1-1)/f+1
	qw, err := s.strided(0, 0, 4*k.out, p0, p1, 4*o0, 4*o1)
	if err != nil {
		return err
	}
	gidx, err := k.groupIndex(s, i0, i1)
	if err != nil {
		return err
	}
	groups, pos := groupsOf(gidx, i0, i1, k.gsize)
	ow, iw := o1-o0, i1-i0
	zp0, zp1 := o0/f, (o1-1)/f+1
	n := int64(len(groups)) * ow
	zs, sc := s.flts[3], s.flts[5]
	if int64(cap(zs)) < n {
		zs = make([]float32, n)
	}
	if int64(cap(sc)) < n {
		sc = make([]float32, n)
	}
	zs, sc = zs[:n], sc[:n]
	s.flts[3], s.flts[5] = zs, sc
	for d, g := range groups {
		qz, err := s.strided(1, 1, 4*(k.out/f), g, g+1, 4*zp0, 4*zp1)
		if err != nil {
			return err
		}
		srow, err := s.stridedFloats(2, 2, k.sdt, k.out, g, g+1, o0, o1)
		if err != nil {
			return err
		}
		copy(sc[int64(d)*ow:], srow)
		for o := o0; o < o1; o++ {
			z := (le32(qz, o/f-zp0) >> (k.bits * uint(o%f))) & mask
			zs[int64(d)*ow+o-o0] = float32(z) + k.plus1
		}
	}
	// a word holds f consecutive in-rows of one out-column: decode it
	// once, into f consecutive elements of that column's output row
	if useLookup && gidx == nil && k.bits == 4 && i0%k.gsize == 0 && (i1%k.gsize == 0 || i1 == k.in) && k.gsize%8 == 0 && iw%8 == 0 {
		k.rows4(s, qw, sc, zs, ow, iw, p1-p0, int64(len(groups)), nil, dst)
		return nil
	}
	if useLookup && gidx != nil && k.bits == 4 && i0%8 == 0 && iw%8 == 0 {
		at := make([]int32, iw)
		for i, d := range pos {
			at[i] = 16 * d
		}
		k.rows4(s, qw, sc, zs, ow, iw, p1-p0, int64(len(groups)), at, dst)
		return nil
	}
	for p := p0; p < p1; p++ {
		ia, ib := max(i0, p*f), min(i1, (p+1)*f)
		row := qw[(p-p0)*4*ow : (p-p0+1)*4*ow]
		for o := int64(0); o < ow; o++ {
			word := le32(row, o) >> (k.bits * uint(ia-p*f))
			out := dst[o*iw+ia-i0 : o*iw+ib-i0]
			ps := pos[ia-i0 : ib-i0]
			if ps[0] == ps[len(ps)-1] && gidx == nil {
				// one group for the whole word
				d := int64(ps[0])*ow + o
				sv, zv := sc[d], zs[d]
				for j := range out {
					out[j] = sv * (float32(word&mask) - zv)
					word >>= k.bits
				}
				continue
			}
			for j := range out {
				d := int64(ps[j])*ow + o
				out[j] = sc[d] * (float32(word&mask) - zs[d])
				word >>= k.bits
			}
		}
	}
	return nil
}

// groupIndex reads and checks g_idx[i0:i1] (nil without a g_idx).
func (k *gptqKernel) groupIndex(s *scratch, i0, i1 int64) ([]int32, error) {
	if k.gidx < 0 {
		return nil, nil
	}
	b, err := s.bytes(4, k.gidx, 4*i0, 4*(i1-i0))
	if err != nil {
		return nil, err
	}
	gidx := make([]int32, i1-i0)
	for i := range gidx {
		g := int32(binary.LittleEndian.Uint32(b[4*i:]))
		if g < 0 || int64(g) >= k.groups {
			return nil, fmt.Errorf("g_idx[%d] is %d, outside its %d groups", i0+int64(i), g, k.groups)
		}
		gidx[i] = g
	}
	return gidx, nil
}

func planGPTQ(p *planner) {
	bits, ok1 := num(p.cfg.Params, "bits", 4)
	gsize, ok2 := num(p.cfg.Params, "group_size", 128)
	format := str(p.cfg.Params, "checkpoint_format")
	if format == "" {
		format = str(p.cfg.Params, "format")
	}
	var plus1 float32
	scheme := "gptq-v2"
	switch format {
	case "", "gptq":
		plus1, scheme = 1, "gptq"
	case "gptq_v2":
	case "marlin":
		planGPTQMarlin(p, bits, gsize) // gptqmarlin.go
		return
	default:
		p.refuseAll(fmt.Sprintf("GPTQ checkpoint_format %q (%s) is not supported: no weight is dequantized", format, p.cfg.File))
		return
	}
	p.scheme = scheme
	for _, nm := range p.names {
		x, ok := cutPart(nm, ".qweight", ".qzeros", ".scales", ".g_idx")
		if !ok {
			continue
		}
		name := x + ".weight"
		if p.planned(name) {
			continue
		}
		qn, zn, sn, gn := x+".qweight", x+".qzeros", x+".scales", x+".g_idx"
		all := []string{qn, zn, sn, gn}
		qt, zt, st, gt := p.t(qn), p.t(zn), p.t(sn), p.t(gn)
		if !ok1 || (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
			p.fail(name, fmt.Sprintf("GPTQ bits %s is not 2, 3, 4 or 8", paramStr(p.cfg.Params["bits"])), all...)
			continue
		}
		if !ok2 || gsize > maxDim {
			p.fail(name, fmt.Sprintf("GPTQ group_size %s is not an integer", paramStr(p.cfg.Params["group_size"])), all...)
			continue
		}
		if qt == nil || zt == nil || st == nil {
			p.fail(name, "its qweight, qzeros or scales is missing", all...)
			continue
		}
		// f values in w words (3 bits: 32 values in three words, gptq3.go)
		f, w := 32/bits, int64(1)
		if bits == 3 {
			f, w = 32, 3
		}
		if qt.DType != dtype.I32 || len(qt.Shape) != 2 || !dimsOK(qt.Shape) || qt.Shape[0]%w != 0 || qt.Shape[1]%f != 0 {
			want := fmt.Sprintf("I32 [in/%d, out] with out a multiple of %d", f, f)
			if w > 1 {
				want = "I32 [in·3/32, out] with in and out multiples of 32"
			}
			p.fail(name, fmt.Sprintf("qweight is %s %v, not %s", qt.DType, qt.Shape, want), all...)
			continue
		}
		in, out := qt.Shape[0]/w*f, qt.Shape[1]
		gs := gsize
		if gs <= 0 {
			gs = in
		}
		groups := ceilDiv(in, gs)
		if gt != nil && len(st.Shape) == 2 {
			groups = st.Shape[0] // with g_idx the groups are as many as scales' rows
		}
		switch {
		case !isScaleDType(st.DType) || !shapeIs(st, groups, out):
			p.fail(name, fmt.Sprintf("scales is %s %v, not a float [%d, %d]", st.DType, st.Shape, groups, out), all...)
		case zt.DType != dtype.I32 || !shapeIs(zt, groups, out/f*w):
			p.fail(name, fmt.Sprintf("qzeros is %s %v, not I32 [%d, %d]", zt.DType, zt.Shape, groups, out/f*w), all...)
		case gt != nil && (gt.DType != dtype.I32 || !shapeIs(gt, in)):
			p.fail(name, fmt.Sprintf("g_idx is %s %v, not I32 [%d]", gt.DType, gt.Shape, in), all...)
		default:
			k := &gptqKernel{in: in, out: out, gsize: gs, groups: groups, bits: uint(bits), plus1: plus1, sdt: st.DType, gidx: -1}
			parts := []string{qn, zn, sn}
			if gt != nil {
				k.gidx = 3
				parts = append(parts, gn)
			}
			p.add(name, scheme, []int64{out, in}, parts, k)
		}
	}
}

// rows4 is rect for 4-bit codes over whole words: the words of 16 output
// rows at a time are transposed into rows of contiguous codes, and each row
// is decoded with a table per group whose 16 values are made by the same
// operations as the loop in rect: by dtype.Lookup4 over whole groups
// without g_idx (at nil), by dtype.Lookup4At with at[i] = 16 * element i's
// group (its index in the rect's groups) with one.
func (k *gptqKernel) rows4(s *scratch, qw []byte, sc, zs []float32, ow, iw, pw, ng int64, at []int32, dst []float32) {
	const blk = 16
	wt := s.bufs[6]
	if int64(cap(wt)) < blk*4*pw {
		wt = make([]byte, blk*4*pw)
	}
	wt = wt[:blk*4*pw]
	s.bufs[6] = wt
	tbls := s.tables(ng)
	gb := k.gsize / 2
	full := iw / k.gsize
	for ob := int64(0); ob < ow; ob += blk {
		oe := min(ow, ob+blk)
		q32, w32 := wordsOf(qw), wordsOf(wt)
		for p := int64(0); p < pw; p++ {
			src := q32[p*ow+ob : p*ow+oe]
			for o, v := range src {
				w32[int64(o)*pw+p] = v
			}
		}
		for o := ob; o < oe; o++ {
			for d := range tbls {
				sv, zv := sc[int64(d)*ow+o], zs[int64(d)*ow+o]
				for v := range tbls[d] {
					tbls[d][v] = sv * (float32(v) - zv)
				}
			}
			row := wt[(o-ob)*4*pw : (o-ob+1)*4*pw]
			out := dst[o*iw : (o+1)*iw]
			if at != nil {
				flat := unsafe.Slice(&tbls[0][0], 16*len(tbls))
				dtype.Lookup4At(out, row[:iw/2], at, flat)
				continue
			}
			dtype.Lookup4(out, row[:full*gb], int(gb), tbls, nil)
			if tail := iw % k.gsize; tail > 0 {
				dtype.Lookup4(out[full*k.gsize:], row[full*gb:iw/2], int(tail/2), tbls[full:], nil)
			}
		}
	}
}
