package quant

import (
	"fmt"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// MLX affine quantization (ml-explore mlx.core.dequantize, mode affine):
// X.weight U32 [..., in*bits/32] holds 32/bits values a word, LSB first;
// X.scales and X.biases [..., in/group_size] (BF16, F16 or F32).
// W = scales * q + biases per group, computed as the float32 product,
// rounded, then the float32 add (no fused multiply-add). bits 2, 4 and 8
// (3, 5 and 6 pack across words and are refused); config.json's
// "quantization" gives bits and group_size, with per-module overrides
// (a module's own object, or false for a module left unquantized).

type mlxKernel struct {
	cols, gsize int64
	bits        uint
	sdt, bdt    dtype.DType
}

func (k *mlxKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	f := int64(32 / k.bits)
	mask := uint32(1)<<k.bits - 1
	words, groups := k.cols/f, k.cols/k.gsize
	p0, p1 := c0/f, (c1-1)/f+1
	g0, g1 := c0/k.gsize, (c1-1)/k.gsize+1
	packed, err := s.strided(0, 0, 4*words, r0, r1, 4*p0, 4*p1)
	if err != nil {
		return err
	}
	sc, err := s.stridedFloats(1, 1, k.sdt, groups, r0, r1, g0, g1)
	if err != nil {
		return err
	}
	bi, err := s.stridedFloats(2, 2, k.bdt, groups, r0, r1, g0, g1)
	if err != nil {
		return err
	}
	w, pw, gw := c1-c0, p1-p0, g1-g0
	if useLookup && k.bits == 4 && c0%k.gsize == 0 && c1%k.gsize == 0 && k.gsize%8 == 0 {
		// whole groups: each group's 16 values by the same two
		// operations, then the row's codes by table in one call
		tbls := s.tables(gw)
		for r := int64(0); r < r1-r0; r++ {
			srow, brow := sc[r*gw:(r+1)*gw], bi[r*gw:(r+1)*gw]
			for g := range tbls {
				sv, bv := srow[g], brow[g]
				for v := range tbls[g] {
					prod := float32(sv * float32(v))
					tbls[g][v] = prod + bv
				}
			}
			dtype.Lookup4(dst[r*w:(r+1)*w], packed[r*4*pw:(r+1)*4*pw], int(k.gsize/2), tbls, nil)
		}
		return nil
	}
	for r := int64(0); r < r1-r0; r++ {
		prow := packed[r*4*pw : (r+1)*4*pw]
		srow, brow := sc[r*gw:(r+1)*gw], bi[r*gw:(r+1)*gw]
		out := dst[r*w : (r+1)*w]
		for c := c0; c < c1; {
			e := min((c/k.gsize+1)*k.gsize, c1)
			sv, bv := srow[c/k.gsize-g0], brow[c/k.gsize-g0]
			if k.bits <= 4 {
				// the 2^bits values of this group, each by the same
				// two operations, then whole words by table
				var tbl [16]float32
				for v := range tbl[:1<<k.bits] {
					prod := float32(sv * float32(v))
					tbl[v] = prod + bv
				}
				decodeRun(prow, p0, c, e, k.bits, &tbl, out[c-c0:e-c0])
			} else {
				for cc := c; cc < e; cc++ {
					q := (le32(prow, cc/f-p0) >> (k.bits * uint(cc%f))) & mask
					prod := float32(sv * float32(q))
					out[cc-c0] = prod + bv
				}
			}
			c = e
		}
	}
	return nil
}

func planMLX(p *planner) {
	bits, ok1 := num(p.cfg.Params, "bits", 0)
	gsize, ok2 := num(p.cfg.Params, "group_size", 0)
	mode := str(p.cfg.Params, "mode")
	p.scheme = "mlx-affine"
	for _, nm := range p.names {
		x, ok := strings.CutSuffix(nm, ".scales")
		if !ok {
			continue
		}
		b, g, okb, okg, m := bits, gsize, ok1, ok2, mode
		if o, isObj := p.cfg.Params[x].(map[string]any); isObj {
			b, okb = num(o, "bits", bits)
			g, okg = num(o, "group_size", gsize)
			if mm := str(o, "mode"); mm != "" {
				m = mm
			}
		}
		wn, sn, bn := x+".weight", nm, x+".biases"
		all := []string{wn, sn, bn}
		wt, st, bt := p.t(wn), p.t(sn), p.t(bn)
		switch {
		case m != "" && m != "affine":
			p.fail(wn, fmt.Sprintf("MLX mode %q is not supported", m), all...)
		case !okb || !okg || (b != 2 && b != 4 && b != 8) || g <= 0 || g > maxDim:
			p.fail(wn, fmt.Sprintf("MLX bits %d / group_size %d: only 2, 4 and 8 bits with a positive group are read", b, g), all...)
		case wt == nil || bt == nil:
			p.fail(wn, "its weight or biases is missing", all...)
		case wt.DType != dtype.U32 || len(wt.Shape) < 2 || !dimsOK(wt.Shape):
			p.fail(wn, fmt.Sprintf("weight is %s %v, not U32 [..., in*%d/32]", wt.DType, wt.Shape, b), all...)
		default:
			f := 32 / b
			in := wt.Shape[len(wt.Shape)-1] * f
			gs := append(append([]int64{}, wt.Shape[:len(wt.Shape)-1]...), in/g)
			switch {
			case in%g != 0 || g%f != 0:
				p.fail(wn, fmt.Sprintf("in %d is not a multiple of group_size %d", in, g), all...)
			case !isScaleDType(st.DType) || !shapeIs(st, gs...):
				p.fail(wn, fmt.Sprintf("scales is %s %v, not a float %v", st.DType, st.Shape, gs), all...)
			case !isScaleDType(bt.DType) || !shapeIs(bt, gs...):
				p.fail(wn, fmt.Sprintf("biases is %s %v, not a float %v", bt.DType, bt.Shape, gs), all...)
			default:
				shape := append(append([]int64{}, wt.Shape[:len(wt.Shape)-1]...), in)
				p.add(wn, fmt.Sprintf("mlx-affine-%d", b), shape, all, &mlxKernel{cols: in, gsize: g, bits: uint(b), sdt: st.DType, bdt: bt.DType})
			}
		}
	}
}
