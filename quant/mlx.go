package quant

import (
	"fmt"
	"math"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// MLX affine quantization (ml-explore mlx.core.dequantize, mode affine):
// X.weight U32 [..., in*bits/32] holds 32/bits values a word, LSB first;
// X.scales and X.biases [..., in/group_size] (BF16, F16 or F32).
// W = scales * q + biases per group, computed as the float32 product,
// rounded, then the float32 add (no fused multiply-add). bits 2, 3, 4,
// 5, 6 and 8: the codes are one little-endian bit stream, value i at bits
// [i·bits, (i+1)·bits) (mlx/backend/cpu/quantized.cpp: quantize packs
// 3- and 5-bit codes 8 to 3 or 5 bytes and 6-bit codes 4 to 3 bytes,
// extract_bits reads them LSB first; for 2, 4 and 8 bits that is
// 32/bits codes a uint32 word, LSB first); config.json's
// "quantization" gives bits and group_size, with per-module overrides
// (a module's own object, or false for a module left unquantized).

type mlxKernel struct {
	cols, gsize int64
	bits        uint
	sdt, bdt    dtype.DType
}

func (k *mlxKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	if k.bits&(k.bits-1) != 0 {
		return k.rectStream(s, r0, r1, c0, c1, dst)
	}
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

// rectStream is rect for 3, 5 and 6 bits: codes that cross bytes.
func (k *mlxKernel) rectStream(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	bits := int64(k.bits)
	mask := uint32(1)<<k.bits - 1
	groups := k.cols / k.gsize
	b0, b1 := c0*bits/8, (c1*bits+7)/8
	packed, err := s.strided(0, 0, k.cols*bits/8, r0, r1, b0, b1)
	if err != nil {
		return err
	}
	sc, err := s.stridedFloats(1, 1, k.sdt, groups, r0, r1, c0/k.gsize, (c1-1)/k.gsize+1)
	if err != nil {
		return err
	}
	bi, err := s.stridedFloats(2, 2, k.bdt, groups, r0, r1, c0/k.gsize, (c1-1)/k.gsize+1)
	if err != nil {
		return err
	}
	w, pw, g0, gw := c1-c0, b1-b0, c0/k.gsize, (c1-1)/k.gsize+1-c0/k.gsize
	// A pack: 8 codes in 3 or 5 bytes (3, 5 bits), 4 in 3 bytes (6 bits).
	f := int64(8)
	if bits == 6 {
		f = 4
	}
	bpp := f * bits / 8
	var tbl [64]float32
	for r := int64(0); r < r1-r0; r++ {
		prow := packed[r*pw : (r+1)*pw]
		srow, brow := sc[r*gw:(r+1)*gw], bi[r*gw:(r+1)*gw]
		out := dst[r*w : (r+1)*w]
		for c := c0; c < c1; {
			e := min((c/k.gsize+1)*k.gsize, c1)
			sv, bv := srow[c/k.gsize-g0], brow[c/k.gsize-g0]
			if c%f == 0 && (e-c)%f == 0 && e-c >= 2*f {
				// whole packs: the group's 2^bits values by the same two
				// operations, then each pack's codes by table
				for v := range tbl[:1<<k.bits] {
					prod := float32(sv * float32(v))
					tbl[v] = prod + bv
				}
				sh, m := uint(bits), uint64(mask)
				at := c*bits/8 - b0
				o := out[c-c0 : e-c0]
				for len(o) >= int(f) {
					p := prow[at : at+bpp]
					v := uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16
					if bpp == 5 {
						v |= uint64(p[3])<<24 | uint64(p[4])<<32
					}
					if f == 8 {
						o = o[:len(o):len(o)]
						_ = o[7]
						o[0], o[1], o[2], o[3] = tbl[v&m], tbl[v>>sh&m], tbl[v>>(2*sh)&m], tbl[v>>(3*sh)&m]
						o[4], o[5], o[6], o[7] = tbl[v>>(4*sh)&m], tbl[v>>(5*sh)&m], tbl[v>>(6*sh)&m], tbl[v>>(7*sh)&m]
					} else {
						_ = o[3]
						o[0], o[1], o[2], o[3] = tbl[v&m], tbl[v>>sh&m], tbl[v>>(2*sh)&m], tbl[v>>(3*sh)&m]
					}
					o = o[f:]
					at += bpp
				}
				c = e
				continue
			}
			for cc := c; cc < e; cc++ {
				bit := cc*bits - b0*8
				i := bit >> 3
				v := uint32(prow[i])
				if i+1 < int64(len(prow)) {
					v |= uint32(prow[i+1]) << 8
				}
				q := (v >> uint(bit&7)) & mask
				prod := float32(sv * float32(q))
				out[cc-c0] = prod + bv
			}
			c = e
		}
	}
	return nil
}

// MLX's floating-point modes (mlx/backend/cpu/quantized.cpp, fp_qmm and
// dequantize_scale; mode "mxfp4", "nvfp4", "mxfp8" in config.json's
// quantization): X.weight U32 holds E2M1 codes (4 bits, low nibble first)
// or E4M3 codes (8 bits), X.scales U8 one per group, no biases: an
// E8M0 exponent for groups of 32 (read as the bf16 of bits s<<7, s = 0
// as 0x40, that is 2^(s-127) and 2^-127), an E4M3 value for groups of 16
// (nvfp4). W = scale * value: a power of two or a 4-bit significand times
// at most 4 significant bits, exact in float32, so the order of
// operations does not matter.

type mlxFPKernel struct {
	cols, gsize int64
	bits        uint // 4 or 8
	e4m3Scales  bool // nvfp4: E4M3 scales, else E8M0
}

func (k *mlxFPKernel) scale(b byte) float32 {
	if k.e4m3Scales {
		return e4m3Table[b]
	}
	if b == 0 {
		return math.Float32frombits(0x00400000) // bf16 0x0040: 2^-127
	}
	return math.Float32frombits(uint32(b) << 23)
}

func (k *mlxFPKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	rowBytes := k.cols * int64(k.bits) / 8
	b0, b1 := c0*int64(k.bits)/8, (c1*int64(k.bits)+7)/8
	codes, err := s.strided(0, 0, rowBytes, r0, r1, b0, b1)
	if err != nil {
		return err
	}
	groups := k.cols / k.gsize
	g0, g1 := c0/k.gsize, (c1-1)/k.gsize+1
	sc, err := s.strided(1, 1, groups, r0, r1, g0, g1)
	if err != nil {
		return err
	}
	w, pw, gw := c1-c0, b1-b0, g1-g0
	var tbl [16]float32
	for r := int64(0); r < r1-r0; r++ {
		prow := codes[r*pw : (r+1)*pw]
		out := dst[r*w : (r+1)*w]
		for c := c0; c < c1; {
			e := min((c/k.gsize+1)*k.gsize, c1)
			f := k.scale(sc[r*gw+c/k.gsize-g0])
			if k.bits == 8 {
				dtype.Lookup8(out[c-c0:e-c0], prow[c-b0:e-b0], e4m3Table, f)
				c = e
				continue
			}
			for v := range tbl {
				tbl[v] = f * fp4Values[v]
			}
			for cc := c; cc < e; cc++ {
				b := prow[cc/2-b0]
				out[cc-c0] = tbl[(b>>(4*uint(cc&1)))&15]
			}
			c = e
		}
	}
	return nil
}

// planMLXFP plans a weight of one of MLX's floating-point modes.
func planMLXFP(p *planner, wn, sn, mode string, b, g int64, all []string) {
	wt, st := p.t(wn), p.t(sn)
	if c := p.codes(wn); b == 4 && c != wt && c.Shape[len(c.Shape)-1]%4 == 0 {
		// F4 [..., in] (f4codes.go): the U32 [..., in/8] words it holds,
		// little-endian, element 0 in the low nibble as MLX packs them
		c.DType, c.Shape[len(c.Shape)-1], wt = dtype.U32, c.Shape[len(c.Shape)-1]/4, c
	}
	want := map[string][2]int64{"mxfp4": {4, 32}, "nvfp4": {4, 16}, "mxfp8": {8, 32}}[mode]
	switch {
	case b != want[0] || g != want[1]:
		p.fail(wn, fmt.Sprintf("MLX mode %s with bits %d / group_size %d: want bits %d, group_size %d", mode, b, g, want[0], want[1]), all...)
	case wt == nil:
		p.fail(wn, "its weight is missing", all...)
	case wt.DType != dtype.U32 || len(wt.Shape) < 2 || !dimsOK(wt.Shape):
		p.fail(wn, fmt.Sprintf("weight is %s, not U32 [..., in*%d/32]%s", p.stored(wt), b, map[bool]string{true: " or F4 [..., in]"}[b == 4]), all...)
	default:
		in := wt.Shape[len(wt.Shape)-1] * 32 / b
		gs := append(append([]int64{}, wt.Shape[:len(wt.Shape)-1]...), in/g)
		if in%g != 0 || st.DType != dtype.U8 || !shapeIs(st, gs...) {
			p.fail(wn, fmt.Sprintf("scales is %s %v, not U8 %v", st.DType, st.Shape, gs), all...)
			return
		}
		shape := append(append([]int64{}, wt.Shape[:len(wt.Shape)-1]...), in)
		p.add(wn, "mlx-"+mode, shape, []string{wn, sn}, &mlxFPKernel{cols: in, gsize: g, bits: uint(b), e4m3Scales: mode == "nvfp4"}, all...)
	}
}

// mlxBits are the code widths MLX's affine mode has.
func mlxBits(b int64) bool { return b == 2 || b == 3 || b == 4 || b == 5 || b == 6 || b == 8 }

// mlxScheme is MLX's affine quantization (Result.Scheme): another mode
// is "mlx-" and its name.
const mlxScheme = "mlx-affine"

func planMLX(p *planner) {
	bits, ok1 := num(p.cfg.Params, "bits", 0)
	gsize, ok2 := num(p.cfg.Params, "group_size", 0)
	mode := str(p.cfg.Params, "mode")
	p.scheme = mlxScheme
	if mode != "" && mode != "affine" {
		p.scheme = "mlx-" + mode
	}
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
		case m == "mxfp4" || m == "nvfp4" || m == "mxfp8":
			if p.t(bn) != nil {
				p.fail(wn, fmt.Sprintf("MLX mode %s has no biases, but %s is there", m, bn), all...)
				continue
			}
			planMLXFP(p, wn, sn, m, b, g, all[:2])
		case m != "" && m != "affine":
			p.fail(wn, fmt.Sprintf("MLX mode %q is not supported", m), all...)
		case !okb || !okg || !mlxBits(b) || g <= 0 || g > maxDim:
			p.fail(wn, fmt.Sprintf("MLX bits %d / group_size %d: only 2, 3, 4, 5, 6 and 8 bits with a positive group are read", b, g), all...)
		case wt == nil || bt == nil:
			p.fail(wn, "its weight or biases is missing", all...)
		case wt.DType != dtype.U32 || len(wt.Shape) < 2 || !dimsOK(wt.Shape):
			p.fail(wn, fmt.Sprintf("weight is %s %v, not U32 [..., in*%d/32]", wt.DType, wt.Shape, b), all...)
		default:
			// Codes a pack: 32/bits a word for 2, 4 and 8 bits; 8 (3 and
			// 5 bits) or 4 (6 bits) a pack of bytes otherwise.
			f := 32 / b
			if b&(b-1) != 0 {
				f = 8
				if b == 6 {
					f = 4
				}
			}
			in := wt.Shape[len(wt.Shape)-1] * 32 / b
			gs := append(append([]int64{}, wt.Shape[:len(wt.Shape)-1]...), in/g)
			switch {
			case in%g != 0 || g%f != 0 || (wt.Shape[len(wt.Shape)-1]*32)%b != 0:
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
