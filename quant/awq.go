package quant

import (
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
)

// AWQ GEMM (casper-hansen/AutoAWQ awq/utils/packing_utils.py unpack_awq,
// reverse_awq_order, dequantize_gemm): X.qweight I32 [in, out/8] and
// X.qzeros I32 [in/group, out/8] hold 8 nibbles a word, nibble k of word p
// being column 8p + [0,2,4,6,1,3,5,7][k]; X.scales F16 [in/group, out].
// Wt[i, o] = (q[i, o] - z[i/group, o]) * s[i/group, o] (exact in float32),
// and the nn.Linear weight is its transpose W[o, i].

// awqShift[m] is the bit shift of column 8p+m within word p.
var awqShift = [8]uint{0, 16, 4, 20, 8, 24, 12, 28}

type awqKernel struct {
	in, out, gsize int64
	sdt            dtype.DType
}

func (k *awqKernel) rect(s *scratch, o0, o1, i0, i1 int64, dst []float32) error {
	wpr := k.out / 8
	p0, p1 := o0/8, (o1-1)/8+1
	qw, err := s.strided(0, 0, 4*wpr, i0, i1, 4*p0, 4*p1)
	if err != nil {
		return err
	}
	g0, g1 := i0/k.gsize, (i1-1)/k.gsize+1
	qz, err := s.strided(1, 1, 4*wpr, g0, g1, 4*p0, 4*p1)
	if err != nil {
		return err
	}
	sc, err := s.stridedFloats(2, 2, k.sdt, k.out, g0, g1, o0, o1)
	if err != nil {
		return err
	}
	ow, iw, pw := o1-o0, i1-i0, p1-p0
	// zs[(g-g0)*ow + o-o0] = z as float32
	zs := s.flts[3]
	if int64(cap(zs)) < (g1-g0)*ow {
		zs = make([]float32, (g1-g0)*ow)
	}
	zs = zs[:(g1-g0)*ow]
	s.flts[3] = zs
	for g := int64(0); g < g1-g0; g++ {
		for o := o0; o < o1; o++ {
			zs[g*ow+o-o0] = float32((le32(qz, g*pw+o/8-p0) >> awqShift[o%8]) & 15)
		}
	}
	if useLookup && o0%8 == 0 && o1%8 == 0 {
		k.planes(s, qw, zs, sc, o0, i0, i1, g0, pw, ow, iw, dst)
		return nil
	}
	// a word holds eight out-columns of one in-row: eight output rows,
	// each written along i
	for p := p0; p < p1; p++ {
		oa, ob := max(o0, 8*p), min(o1, 8*p+8)
		for i := i0; i < i1; {
			ie := min((i/k.gsize+1)*k.gsize, i1)
			g := i/k.gsize - g0
			if ob-oa == 8 {
				// the group's eight zeros and scales held in registers
				var zz, ss [8]float32
				var outs [8][]float32
				for m := range zz {
					d := g*ow + 8*p + int64(m) - o0
					zz[m], ss[m] = zs[d], sc[d]
					outs[m] = dst[(8*p+int64(m)-o0)*iw+i-i0 : (8*p+int64(m)-o0)*iw+ie-i0]
				}
				for ii := int64(0); ii < ie-i; ii++ {
					word := le32(qw, (i+ii-i0)*pw+p-p0)
					for m := range outs {
						outs[m][ii] = (float32((word>>awqShift[m])&15) - zz[m]) * ss[m]
					}
				}
			} else {
				for ii := i; ii < ie; ii++ {
					word := le32(qw, (ii-i0)*pw+p-p0)
					for o := oa; o < ob; o++ {
						d := g*ow + o - o0
						q := float32((word >> awqShift[o%8]) & 15)
						dst[(o-o0)*iw+ii-i0] = (q - zs[d]) * sc[d]
					}
				}
			}
			i = ie
		}
	}
	return nil
}

func planAWQ(p *planner) {
	bits, ok1 := num(p.cfg.Params, "bits", 4)
	gsize, ok2 := num(p.cfg.Params, "group_size", 128)
	ver := str(p.cfg.Params, "version")
	switch ver {
	case "gemv", "gemv_fast":
		planAWQGemv(p, ver == "gemv_fast") // awqgemv.go
		return
	}
	for _, nm := range p.names {
		x, ok := cutPart(nm, ".qweight", ".qzeros", ".scales")
		if !ok {
			continue
		}
		name := x + ".weight"
		if p.planned(name) {
			continue
		}
		qn, zn, sn := x+".qweight", x+".qzeros", x+".scales"
		all := []string{qn, zn, sn}
		qt, zt, st := p.t(qn), p.t(zn), p.t(sn)
		switch {
		case !ok1 || !ok2 || bits != 4 || gsize <= 0 || (ver != "" && ver != "gemm"):
			p.fail(name, fmt.Sprintf("AWQ bits %v, group_size %v, version %q: only 4-bit GEMM with a positive group size is read", p.cfg.Params["bits"], p.cfg.Params["group_size"], ver), all...)
		case qt == nil || zt == nil || st == nil:
			p.fail(name, "its qweight, qzeros or scales is missing", all...)
		case qt.DType != dtype.I32 || len(qt.Shape) != 2 || !dimsOK(qt.Shape) || qt.Shape[0]%gsize != 0:
			p.fail(name, fmt.Sprintf("qweight is %s %v, not I32 [in, out/8] with in a multiple of %d", qt.DType, qt.Shape, gsize), all...)
		case zt.DType != dtype.I32 || !shapeIs(zt, qt.Shape[0]/gsize, qt.Shape[1]):
			p.fail(name, fmt.Sprintf("qzeros is %s %v, not I32 [%d, %d]", zt.DType, zt.Shape, qt.Shape[0]/gsize, qt.Shape[1]), all...)
		case !isScaleDType(st.DType) || !shapeIs(st, qt.Shape[0]/gsize, 8*qt.Shape[1]):
			p.fail(name, fmt.Sprintf("scales is %s %v, not a float [%d, %d]", st.DType, st.Shape, qt.Shape[0]/gsize, 8*qt.Shape[1]), all...)
		default:
			in, out := qt.Shape[0], 8*qt.Shape[1]
			p.add(name, "awq", []int64{out, in}, all, &awqKernel{in: in, out: out, gsize: gsize, sdt: st.DType})
		}
	}
}

// cutPart returns the module prefix of a name ending in one of suffixes.
func cutPart(name string, suffixes ...string) (string, bool) {
	for _, s := range suffixes {
		if len(name) > len(s) && name[len(name)-len(s):] == s {
			return name[:len(name)-len(s)], true
		}
	}
	return "", false
}

// planes is rect for whole words of out-columns: a column of words is
// copied out contiguous along i, and each of its eight output rows is one
// nibble of every word, decoded by dtype.Plane4 with a table per group
// whose 16 values are made by the same operations as the loop in rect.
func (k *awqKernel) planes(s *scratch, qw []byte, zs, sc []float32, o0, i0, i1, g0, pw, ow, iw int64, dst []float32) {
	col := s.bufs[6]
	if int64(cap(col)) < 4*iw {
		col = make([]byte, 4*iw)
	}
	col = col[:4*iw]
	s.bufs[6] = col
	for p := int64(0); p < pw; p++ {
		q32, c32 := wordsOf(qw), wordsOf(col)
		for i := range c32 {
			c32[i] = q32[int64(i)*pw+p]
		}
		for m := int64(0); m < 8; m++ {
			o := 8*p + m // relative to o0
			out := dst[o*iw : (o+1)*iw]
			var tbl [16]float32
			for i := i0; i < i1; {
				ie := min((i/k.gsize+1)*k.gsize, i1)
				d := (i/k.gsize-g0)*ow + o
				zz, ss := zs[d], sc[d]
				for v := range tbl {
					tbl[v] = (float32(v) - zz) * ss
				}
				dtype.Plane4(out[i-i0:ie-i0], col[4*(i-i0):4*(ie-i0)], awqShift[m], &tbl)
				i = ie
			}
		}
	}
}
