package quant

import (
	"encoding/binary"
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
)

// GPTQ checkpoint_format "marlin" (AutoGPTQ, and GPTQModel's FORMAT.MARLIN
// saving from 2d9dc853 until 97323025 removed it, with the same buffers): the original Marlin kernel's layout
// (IST-DASLab; AutoGPTQ qlinear_marlin.py QuantLinear.pack and _get_perms,
// AutoGPTQ 9f7d3707, whose tests/test_repacking.py checks that the CUDA
// gptq_repack that writes these checkpoints gives pack's B). 4 bits,
// symmetric, no act-order, groups of 128 or one group (group_size -1).
// X.B I32 [in/16, 2·out]: w = Wᵀ [in, out] of codes q in [0, 16) is cut
// into 16×16 tiles, tile (kt, nt) laid as row kt, elements
// nt·256 + 16·kk + nn; each run of 1024 elements of a row is permuted by
// perm (res[p] = orig[perm[p]]), and element 8j+i of the row is bits 4i of
// word j. X.s F16 [G, out] holds the group scales S[g, o] with each run of
// 64 (one group: 32) consecutive values of S's row-major order permuted
// by scale_perm (scale_perm_single). W[o, i] = S[g, o]·(q − 8), g = i/128
// (one group: 0), exact in float32; the kernel's half product is its
// rounding to f16. X.workspace (the kernel's zeroed lock buffer) is hidden.

// marlinPerm, marlinScalePerm and marlinScaleSingle are _get_perms():
// perm's inverse (orig index → stored index) and the scale permutations'
// inverses;
// marlinFwd is perm itself (stored index → orig index).
var marlinPerm, marlinFwd, marlinScalePerm, marlinScaleSingle = marlinPerms()

// marlinWords is, for each word of a run of 128, its first code's column
// (of 64) and row (of 16) in the tiles: marlinFwd[8w] = 256·(col/16) +
// 16·kk + col%16.
var marlinWords = func() (t [128]struct{ col, kk uint8 }) {
	for w := range t {
		x0 := marlinFwd[8*w]
		t[w].col, t[w].kk = uint8(x0/256*16+x0%16), uint8(x0%256/16)
	}
	return
}()

// marlinScaleGroup32 is marlinScaleSingle over a 64-column window (two
// runs of 32), as marlinScalePerm is over one run of 64.
var marlinScaleGroup32 = func() (t [64]int32) {
	for j := range t {
		t[j] = int32(j/32*32) + marlinScaleSingle[j%32]
	}
	return
}()

func marlinPerms() (inv, fwd [1024]int32, sinv [64]int32, ssinv [32]int32) {
	var perm []int32
	for i := 0; i < 32; i++ {
		var perm1 []int32
		col := i / 4
		for block := 0; block < 2; block++ {
			for _, row := range []int{2 * (i % 4), 2*(i%4) + 1, 2 * (i%4 + 4), 2*(i%4+4) + 1} {
				perm1 = append(perm1, int32(16*row+col+8*block))
			}
		}
		for j := 0; j < 4; j++ {
			for _, p := range perm1 {
				perm = append(perm, p+int32(256*j))
			}
		}
	}
	interleave := [8]int{0, 2, 4, 6, 1, 3, 5, 7}
	for p := range inv {
		fwd[p] = perm[p/8*8+interleave[p%8]]
		inv[fwd[p]] = int32(p)
	}
	for i := 0; i < 8; i++ {
		for j := 0; j < 8; j++ {
			sinv[i+8*j] = int32(8*i + j) // scale_perm[8i+j] = i + 8j
		}
	}
	for i := 0; i < 4; i++ {
		for j, d := range [8]int{0, 1, 8, 9, 16, 17, 24, 25} {
			ssinv[2*i+d] = int32(8*i + j) // scale_perm_single[8i+j] = 2i + d
		}
	}
	return
}

type marlinKernel struct {
	in, out, gsize int64
	single         bool // one group: scale_perm_single
}

func (k *marlinKernel) rect(s *scratch, o0, o1, i0, i1 int64, dst []float32) error {
	// columns o lie in runs of 1024 row elements of 64 columns each: words
	// [128·(o/64), 128·(o/64+1)) of a B row; scales likewise by 64 (32)
	c0, c1 := o0/64, (o1-1)/64+1
	kt0, kt1 := i0/16, (i1-1)/16+1
	bw, err := s.strided(0, 0, 8*k.out, kt0, kt1, 4*128*c0, 4*128*c1)
	if err != nil {
		return err
	}
	rw := 128 * (c1 - c0) // words a B row read
	g0, g1 := i0/k.gsize, (i1-1)/k.gsize+1
	if k.single {
		g0, g1 = 0, 1
	}
	sc, err := s.stridedFloats(1, 1, dtype.F16, k.out, g0, g1, 64*c0, 64*c1)
	if err != nil {
		return err
	}
	sw := 64 * (c1 - c0)
	iw := i1 - i0
	if useLookup && i0%16 == 0 && i1%16 == 0 && o1-o0 >= 16 {
		k.tiles(bw, sc, rw, sw, kt0, kt1, c0, g0, o0, o1, i0, iw, dst)
		return nil
	}
	for o := o0; o < o1; o++ {
		nt, nn := o/16, o%16
		so := o - 64*c0
		if k.single {
			so = so/32*32 + int64(marlinScaleSingle[so%32])
		} else {
			so = so/64*64 + int64(marlinScalePerm[so%64])
		}
		out := dst[(o-o0)*iw : (o-o0+1)*iw]
		for i := i0; i < i1; i++ {
			x := nt*256 + (i%16)*16 + nn // in row i/16 of the tiled w
			p := x/1024*1024 + int64(marlinPerm[x%1024]) - 1024*c0
			word := le32(bw, (i/16-kt0)*rw+p/8)
			q := word >> (4 * uint(p%8)) & 15
			g := int64(0)
			if !k.single {
				g = i/k.gsize - g0
			}
			out[i-i0] = sc[g*sw+so] * (float32(q) - 8)
		}
	}
	return nil
}

// marlinQ is q − 8 for each code q.
var marlinQ = [16]float32{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}

// tiles is rect over whole 16-row tiles of in (i0, i1 multiples of 16).
// perm puts a word's 8 codes in one 16×16 tile at (kk, nn) + (0, 0),
// (8, 0), (0, 8), (8, 8), (1, 0), (9, 0), (1, 8), (9, 8) from its first
// code's (checked against _get_perms' perm by TestMarlinWords): two
// columns, four rows each, written with the same product as rect's loop.
func (k *marlinKernel) tiles(bw []byte, sc []float32, rw, sw, kt0, kt1, c0, g0, o0, o1, i0, iw int64, dst []float32) {
	sidx := &marlinScalePerm
	if k.single {
		sidx = &marlinScaleGroup32
	}
	// each 16-row tile of in, each run of 64 columns (128 words of B)
	for kt := kt0; kt < kt1; kt++ {
		for c := o0 / 64; c <= (o1-1)/64; c++ {
			full := 64*c >= o0 && 64*c+64 <= o1
			g := int64(0)
			if !k.single {
				g = kt*16/k.gsize - g0
			}
			ss := sc[g*sw+64*(c-c0):][:64]
			row := kt*16 - i0
			words := bw[((kt-kt0)*rw+128*(c-c0))*4:][:512]
			for w, pos := range marlinWords {
				a := 64*c + int64(pos.col)
				at := row + int64(pos.kk)
				v := binary.LittleEndian.Uint32(words[4*w:])
				sa, sb := ss[sidx[pos.col]], ss[sidx[pos.col+8]]
				if full {
					da := dst[(a-o0)*iw+at:][:10]
					db := dst[(a+8-o0)*iw+at:][:10]
					da[0] = sa * marlinQ[v&15]
					da[8] = sa * marlinQ[v>>4&15]
					db[0] = sb * marlinQ[v>>8&15]
					db[8] = sb * marlinQ[v>>12&15]
					da[1] = sa * marlinQ[v>>16&15]
					da[9] = sa * marlinQ[v>>20&15]
					db[1] = sb * marlinQ[v>>24&15]
					db[9] = sb * marlinQ[v>>28]
					continue
				}
				if a >= o0 && a < o1 {
					da := dst[(a-o0)*iw+at:][:10]
					da[0], da[8], da[1], da[9] = sa*marlinQ[v&15], sa*marlinQ[v>>4&15], sa*marlinQ[v>>16&15], sa*marlinQ[v>>20&15]
				}
				if a+8 >= o0 && a+8 < o1 {
					db := dst[(a+8-o0)*iw+at:][:10]
					db[0], db[8], db[1], db[9] = sb*marlinQ[v>>8&15], sb*marlinQ[v>>12&15], sb*marlinQ[v>>24&15], sb*marlinQ[v>>28]
				}
			}
		}
	}
}

// planGPTQMarlin plans checkpoint_format marlin's X.B / X.s pairs.
func planGPTQMarlin(p *planner, bits, gsize int64) {
	p.scheme = "gptq-marlin"
	sym, symOK := p.cfg.Params["sym"].(bool)
	act, _ := p.cfg.Params["desc_act"].(bool)
	for _, nm := range p.names {
		if x, ok := cutPart(nm, ".qweight", ".qzeros", ".scales", ".g_idx"); ok {
			// GPTQ's own layout under a marlin configuration (current
			// GPTQModel repacks such parts at load): which zero
			// convention they hold is not said, so not read
			p.fail(x+".weight", `checkpoint_format "marlin" with GPTQ's qweight/qzeros/scales, not the Marlin layout's B and s: not read`,
				x+".qweight", x+".qzeros", x+".scales", x+".g_idx")
			continue
		}
		x, ok := cutPart(nm, ".B", ".s", ".workspace")
		if !ok {
			continue
		}
		name := x + ".weight"
		if p.planned(name) {
			continue
		}
		bn, sn, wn := x+".B", x+".s", x+".workspace"
		all := []string{bn, sn, wn}
		bt, st := p.t(bn), p.t(sn)
		switch {
		case bits != 4:
			p.fail(name, fmt.Sprintf("GPTQ marlin bits %d is not 4 (the Marlin kernel's only width)", bits), all...)
			continue
		case symOK && !sym || act:
			p.fail(name, "GPTQ marlin with sym false or desc_act true: the Marlin kernel of this layout has neither", all...)
			continue
		case bt == nil || st == nil:
			p.fail(name, "its B or s is missing", all...)
			continue
		case bt.DType != dtype.I32 || len(bt.Shape) != 2 || !dimsOK(bt.Shape) || bt.Shape[1]%512 != 0 || bt.Shape[0]%8 != 0:
			p.fail(name, fmt.Sprintf("B is %s %v, not I32 [in/16, 2·out] with in a multiple of 128 and out of 256", bt.DType, bt.Shape), all...)
			continue
		}
		in, out := 16*bt.Shape[0], bt.Shape[1]/2
		gs, single := gsize, gsize <= 0 || gsize == in
		if single {
			gs = in
		} else if gs != 128 {
			p.fail(name, fmt.Sprintf("GPTQ marlin group_size %d is not 128 or -1 (the Marlin kernel's)", gsize), all...)
			continue
		}
		if st.DType != dtype.F16 || !shapeIs(st, in/gs, out) {
			p.fail(name, fmt.Sprintf("s is %s %v, not F16 [%d, %d]", st.DType, st.Shape, in/gs, out), all...)
			continue
		}
		p.add(name, "gptq-marlin", []int64{out, in}, []string{bn, sn}, &marlinKernel{in: in, out: out, gsize: gs, single: single}, wn)
	}
}
