package quant

import (
	"fmt"
	"math"
	"strings"
	"unsafe"

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
		g0, g1 := ca/32, (cb-1)/32+1
		b0, b1 := 16*g0, 16*g1 // whole groups, also where [ca, cb) has part of one
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
		if useLookup {
			mxWhole(s, blk, sc, bw, gw, w, ca-32*g0, cb-ca, out[:(cb-ca)*w])
			q += cb - ca
			continue
		}
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

// mxTables[s][n] = fp4Values[n] * 2^(s-127), the one multiplication of
// rect, for every scale byte.
var mxTables = func() (t [256][16]float32) {
	for s := range t {
		for n := range t[s] {
			t[s][n] = fp4Values[n] * pow2E8M0[s]
		}
	}
	return
}()

// mxWhole is rect's loop by dtype.Lookup4: 16 stored rows at a time, up to
// 8 groups (256 logical rows) of each decoded into a tile in L1, then the
// logical rows [x0, x0+n) of the groups written out transposed. blk and sc
// hold the stored rows' whole groups (bw bytes and gw scales a row), out
// the w stored rows' n logical rows.
func mxWhole(s *scratch, blk, sc []byte, bw, gw, w, x0, n int64, out []float32) {
	const rows, cols = 16, 256
	tile := s.flts[6]
	if cap(tile) < rows*cols {
		tile = make([]float32, rows*cols)
	}
	tile = tile[:rows*cols]
	s.flts[6] = tile
	for rs := int64(0); rs < w; rs += rows {
		re := min(w, rs+rows)
		for gc := int64(0); gc < gw; gc += cols / 32 {
			ge := min(gw, gc+cols/32)
			nx := 32 * (ge - gc)
			for r := rs; r < re; r++ {
				dtype.Lookup4(tile[(r-rs)*cols:(r-rs)*cols+nx], blk[r*bw+16*gc:r*bw+16*ge], 16, mxTables[:], sc[r*gw+gc:r*gw+ge])
			}
			for x := max(int64(0), x0-32*gc); x < min(nx, x0+n-32*gc); x++ {
				y := 32*gc + x - x0
				o := out[y*w+rs : y*w+re]
				if len(o) == rows {
					t, xi, o := (*[rows][cols]float32)(unsafe.Pointer(&tile[0])), uint8(x), (*[rows]float32)(o)
					o[0], o[1], o[2], o[3] = t[0][xi], t[1][xi], t[2][xi], t[3][xi]
					o[4], o[5], o[6], o[7] = t[4][xi], t[5][xi], t[6][xi], t[7][xi]
					o[8], o[9], o[10], o[11] = t[8][xi], t[9][xi], t[10][xi], t[11][xi]
					o[12], o[13], o[14], o[15] = t[12][xi], t[13][xi], t[14][xi], t[15][xi]
					continue
				}
				for j := range o {
					o[j] = tile[int64(j)*cols+x]
				}
			}
		}
	}
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
		if p.planned(base) {
			continue
		}
		bn, sn := base+"_blocks", base+"_scales"
		bt, st := p.codes(bn), p.t(sn)
		if !strict && (bt == nil || st == nil || bt.DType != dtype.U8 || st.DType != dtype.U8) {
			continue
		}
		switch {
		case bt == nil:
			p.fail(base, "its _blocks is missing", sn)
		case st == nil:
			p.fail(base, "its _scales is missing", bn)
		case bt.DType != dtype.U8 || st.DType != dtype.U8:
			p.fail(base, fmt.Sprintf("_blocks is %s and _scales %s, not U8 (or F4 _blocks)", p.t(bn).DType, st.DType), bn, sn)
		case len(bt.Shape) != 4 || bt.Shape[3] != 16 || !dimsOK(bt.Shape):
			p.fail(base, fmt.Sprintf("_blocks is %s, not U8 [E, R, G, 16] or F4 [E, R, G, 32]", p.stored(bt)), bn, sn)
		case !shapeIs(st, bt.Shape[:3]...):
			p.fail(base, fmt.Sprintf("_scales has shape %v, not %v", st.Shape, bt.Shape[:3]), bn, sn)
		default:
			e, r, g := bt.Shape[0], bt.Shape[1], bt.Shape[2]
			p.add(base, "mxfp4", []int64{e, 32 * g, r}, []string{bn, sn}, &mxfp4Kernel{e: e, r: r, g: g})
		}
	}
}
