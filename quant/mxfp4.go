package quant

import (
	"fmt"
	"math"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// gpt-oss MXFP4 (transformers integrations/mxfp4.py
// convert_moe_packed_tensors): P_blocks U8 [E, R, G, 16] holds 32 E2M1
// codes per (e, r, g), low nibble first; P_scales U8 [E, R, G] an E8M0
// exponent each. v[e, r, 32g+k] = ldexp(LUT4[code], scale-127), computed
// by torch as LUT4[code] * 2^(scale-127) in float32 (2^128, scale 255, is
// +Inf); the result [E, R, 32G] is transposed to [E, 32G, R], the layout
// of the unquantized gate_up_proj / down_proj.

type mxfp4Kernel struct {
	e, r, g int64 // experts, stored rows, groups of 32 per stored row
}

var pow2E8M0 = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(math.Ldexp(1, i-127)) // 2^-127 is a float32 subnormal; 2^128 rounds to +Inf
	}
	return
}()

func (k *mxfp4Kernel) rect(s *scratch, q0, q1, r0, r1 int64, dst []float32) error {
	c := 32 * k.g
	w := r1 - r0
	for q := q0; q < q1; {
		e := q / c
		ca := q % c
		cb := min(c, ca+(q1-q))
		b0, b1 := ca/2, (cb-1)/2+1
		g0, g1 := ca/32, (cb-1)/32+1
		blk, err := s.strided(0, 0, 16*k.g, e*k.r+r0, e*k.r+r1, b0, b1)
		if err != nil {
			return err
		}
		sc, err := s.strided(1, 1, k.g, e*k.r+r0, e*k.r+r1, g0, g1)
		if err != nil {
			return err
		}
		bw, gw := b1-b0, g1-g0
		out := dst[(q-q0)*w:]
		// a transpose, by tiles of 16 stored rows × one group of 32
		// columns: decoded into blkT (in L1) in output order, then each
		// output row gets its 16 floats in one store
		var blkT [32][16]float32
		for rs := int64(0); rs < w; rs += 16 {
			re := min(w, rs+16)
			n := re - rs
			for g := g0; g < g1; g++ {
				cs, ce := max(ca, 32*g), min(cb, 32*g+32)
				for r := rs; r < re; r++ {
					f := pow2E8M0[sc[r*gw+g-g0]]
					j := r - rs
					if cs == 32*g && ce == 32*g+32 {
						in := blk[r*bw+16*g-b0 : r*bw+16*g-b0+16]
						for i, b := range in {
							blkT[2*i][j] = fp4Values[b&15] * f
							blkT[2*i+1][j] = fp4Values[b>>4] * f
						}
						continue
					}
					for x := cs; x < ce; x++ {
						b := blk[r*bw+x/2-b0] >> (uint(x&1) * 4)
						blkT[x-32*g][j] = fp4Values[b&15] * f
					}
				}
				for x := cs; x < ce; x++ {
					o := out[(x-ca)*w+rs : (x-ca)*w+re]
					if n == 16 {
						*(*[16]float32)(o) = blkT[x-32*g]
					} else {
						copy(o, blkT[x-32*g][:n])
					}
				}
			}
		}
		q += cb - ca
	}
	return nil
}

func planMXFP4(p *planner) { planMXFP4Pairs(p, true) }

// planMXFP4Pairs joins P_blocks with P_scales into P.
func planMXFP4Pairs(p *planner, strict bool) {
	for _, nm := range p.names {
		var base string
		switch {
		case strings.HasSuffix(nm, "_blocks"):
			base = strings.TrimSuffix(nm, "_blocks")
		case strings.HasSuffix(nm, "_scales"):
			base = strings.TrimSuffix(nm, "_scales")
		default:
			continue
		}
		if _, done := p.weights[base]; done {
			continue
		}
		if _, done := p.probs[base]; done {
			continue
		}
		bn, sn := base+"_blocks", base+"_scales"
		bt, st := p.t(bn), p.t(sn)
		if !strict && (bt == nil || st == nil || bt.DType != dtype.U8 || st.DType != dtype.U8) {
			continue
		}
		switch {
		case bt == nil:
			p.fail(base, "its _blocks is missing", sn)
		case st == nil:
			p.fail(base, "its _scales is missing", bn)
		case bt.DType != dtype.U8 || st.DType != dtype.U8:
			p.fail(base, fmt.Sprintf("_blocks is %s and _scales %s, not U8", bt.DType, st.DType), bn, sn)
		case len(bt.Shape) != 4 || bt.Shape[3] != 16 || !dimsOK(bt.Shape):
			p.fail(base, fmt.Sprintf("_blocks has shape %v, not [E, R, G, 16]", bt.Shape), bn, sn)
		case !shapeIs(st, bt.Shape[:3]...):
			p.fail(base, fmt.Sprintf("_scales has shape %v, not %v", st.Shape, bt.Shape[:3]), bn, sn)
		default:
			e, r, g := bt.Shape[0], bt.Shape[1], bt.Shape[2]
			p.add(base, "mxfp4", []int64{e, 32 * g, r}, []string{bn, sn}, &mxfp4Kernel{e: e, r: r, g: g})
		}
	}
}
