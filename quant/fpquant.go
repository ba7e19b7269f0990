package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/lazyweights/tensorfs/dtype"
)

// FP-Quant / Quartet (quant_method "fp_quant"; IST-DASLab/FP-Quant
// inference_lib fp_quant/module/linear.py FPQuantLinear and
// linear_fns.py, read at commit d2e3092f; qutlass qutlass_ops' scale
// swizzle at e74319e3; transformers' quantizers/quantizer_fp_quant.py at
// 03904cb3 and integrations/fp_quant.py at 05b48160). A quantized module
// X stores one of three forms, as its configuration says:
//
//   - store_master_weights: X.weight in BF16, the full-precision weight,
//     quantized only at run time: a plain tensor, served as stored.
//   - real quantization: X.qweight U8 [out, in/2] (E2M1 codes, the even
//     column in the low nibble) and X.scales U8 [out, in/32] (E8M0,
//     forward_dtype mxfp4; row-major: swizzled only for the GEMM) or
//     [out, in/16] (E4M3, nvfp4), with X.weight_global_scale.
//   - pseudoquantization: X.dqweight in BF16 [out, in].
//
// beside X.forward_hadamard_matrix and X.backward_hadamard_matrix H
// [g, g] (g = hadamard_group_size: a Hadamard, identity or "gsr" matrix
// times g^-1/2, in bf16) and X.act_global_scale. The codes are the weight
// after a rotation: each group of g inputs of W (a row vector) is
// multiplied by H, then quantized (Q ≈ W·H); the forward pass rotates the
// activations by the same H, so the layer's weight is W = Q·Hᵀ per group:
// W[o, gk+j] = Σ_i Q[o, gk+i]·H[j, i], with the GEMM's alpha
// 1/(weight_global_scale·act_global_scale) in bf16. The reference never
// computes W; it is served only where that sum is exact in any order:
// forward_dtype mxfp4 with g = 32 (one E8M0 scale for the whole group),
// weight_global_scale 1 (forward_method quest) and H's nonzero entries
// all of one magnitude m (Hadamard, gsr, identity): then every term is
// c_i·m·2^(s−127), c_i an E2M1 value, and the sum m·2^(s−127)·Σ±c_i has
// at most 17 significant bits. It is computed exactly and rounded once
// to float32 (fpQuantKernel). Everything else (nvfp4, whose global scale
// is applied only with the activations'; g 64 or 128, whose groups span
// scale blocks that differ; dqweight; another H) is named and left out,
// its parts but its bias hidden: serving Q (or dqweight) under X.weight
// would be another matrix under the weight's name. Unconverted modules
// (modules_to_not_convert, lm_head) are plain tensors. The rotation
// matrices and global scales of a master-weight module are hidden as the
// KV-cache scales are: not weights of the unquantized model.

// fpQuantCodes are the parts that hold a module's rotated weight.
var fpQuantCodes = []string{".qweight", ".scales", ".dqweight"}

// fpQuantBuffers are the module's other FP-Quant buffers.
var fpQuantBuffers = []string{".weight_global_scale", ".act_global_scale", ".forward_hadamard_matrix", ".backward_hadamard_matrix"}

const fpQuantWhy = "the stored weight is rotated by a Hadamard transform that only dequantization undoes (a matmul in no fixed order): not bit-exact reproducible"

func planFPQuant(p *planner) {
	p.scheme = "fp-quant"
	why := fmt.Sprintf("FP-Quant (%s): %s", p.cfg.File, fpQuantWhy)
	// the one served form's parameters
	g, gOK := num(p.cfg.Params, "hadamard_group_size", 0)
	pseudo, _ := p.cfg.Params["pseudoquantization"].(bool)
	served := str(p.cfg.Params, "forward_dtype") == "mxfp4" && gOK && g == 32 && !pseudo
	done := map[string]bool{}
	for _, nm := range p.names {
		x, ok := cutPart(nm, fpQuantCodes...)
		if !ok {
			if _, ok := cutPart(nm, fpQuantBuffers...); ok {
				p.hidden[nm] = true
			}
			continue
		}
		if done[x] {
			continue
		}
		done[x] = true
		var parts []string
		for _, s := range append(append([]string{".weight"}, fpQuantCodes...), fpQuantBuffers...) {
			parts = append(parts, x+s)
		}
		name := x + ".weight"
		if !served {
			p.fail(name, fmt.Sprintf("FP-Quant (%s, forward_dtype %s, hadamard_group_size %s): %s", p.cfg.File,
				paramStr(p.cfg.Params["forward_dtype"]), paramStr(p.cfg.Params["hadamard_group_size"]), fpQuantWhy), parts...)
			continue
		}
		if reason := p.fpQuantMX(x, name, parts); reason != "" {
			p.fail(name, why+": "+reason, parts...)
		}
	}
}

// fpQuantMX plans module x's MXFP4 weight (g 32); "" when added, else why not.
func (p *planner) fpQuantMX(x, name string, parts []string) string {
	q, sc, h, gs := p.t(x+".qweight"), p.t(x+".scales"), p.t(x+".forward_hadamard_matrix"), p.t(x+".weight_global_scale")
	switch {
	case p.t(x+".dqweight") != nil || p.t(x+".weight") != nil:
		return "a module with more than one stored form"
	case q == nil || sc == nil || h == nil || gs == nil:
		return "qweight, scales, forward_hadamard_matrix or weight_global_scale is missing"
	case q.DType != dtype.U8 || len(q.Shape) != 2 || q.Shape[1]%16 != 0 || q.Shape[1] == 0:
		return fmt.Sprintf("qweight is %s %v, not U8 [out, in/2] with in a multiple of 32", q.DType, q.Shape)
	case sc.DType != dtype.U8 && sc.DType != dtype.F8E8M0 || !shapeIs(sc, q.Shape[0], q.Shape[1]/16):
		return fmt.Sprintf("scales is %s %v, not U8 %v (E8M0 per 32)", sc.DType, sc.Shape, []int64{q.Shape[0], q.Shape[1] / 16})
	case h.DType != dtype.BF16 || !shapeIs(h, 32, 32):
		return fmt.Sprintf("forward_hadamard_matrix is %s %v, not BF16 [32 32]", h.DType, h.Shape)
	case gs.DType != dtype.BF16 || !isScalar(gs):
		return fmt.Sprintf("weight_global_scale is %s %v, not one BF16", gs.DType, gs.Shape)
	}
	gb, err := p.readSmall(gs.Name)
	if err != nil {
		return err.Error()
	}
	if v := bf16At(gb, 0); v != 1 {
		return fmt.Sprintf("weight_global_scale %v, not 1 (it is applied only with the activations')", v)
	}
	hb, err := p.readSmall(h.Name)
	if err != nil {
		return err.Error()
	}
	var m float32
	for i := 0; i < 32*32; i++ {
		v := bf16At(hb, i)
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v != 0 && m != 0 && abs32(v) != m {
			return "forward_hadamard_matrix's nonzero entries differ in magnitude"
		}
		if v != 0 {
			m = abs32(v)
		}
	}
	if m < 0x1p-20 || m > 0x1p20 {
		return fmt.Sprintf("forward_hadamard_matrix's entries are %v, outside [2^-20, 2^20]", m)
	}
	k := &fpQuantKernel{cols: q.Shape[1] * 2}
	var sign [32][32]int8
	for i := range 32 * 32 {
		if v := bf16At(hb, i); v > 0 {
			sign[i/32][i%32] = 1
		} else if v < 0 {
			sign[i/32][i%32] = -1
		}
	}
	if k.fwht = dtype.NewHadamard32(&sign, m/2); k.fwht == nil {
		if p.fpqTables == nil {
			p.fpqTables = map[string]*[16][256][8]uint64{}
		}
		k.table(hb, m, p.fpqTables)
	}
	p.add(name, "fp-quant-mxfp4", []int64{q.Shape[0], k.cols}, []string{q.Name, sc.Name}, k, parts...)
	return ""
}

// table sets k's table path up for H (hb) of magnitude m, sharing the
// tables in cache (by H's bytes).
func (k *fpQuantKernel) table(hb []byte, m float32, cache map[string]*[16][256][8]uint64) {
	k.nm = new([1024]float32)
	for i := range k.nm {
		k.nm[i] = float32(i-16*fpQuantBias) * (m / 2)
	}
	if k.tbl = cache[string(hb)]; k.tbl == nil {
		k.tbl = fpQuantTable(hb, m)
		cache[string(hb)] = k.tbl
	}
}

func bf16At(b []byte, i int) float32 {
	return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// fpQuantBias keeps each 16-bit lane of a table entry positive, so that
// 16 of them add in a uint64 without a carry between lanes.
const fpQuantBias = 24

// fpQuantTable is, for each byte position p of a group's 16 and each
// byte b (codes b&15 at column 2p, b>>4 at 2p+1), the terms
// 2·e2m1·σ[j, i] of both columns plus fpQuantBias, for the 32 outputs j
// (σ = H/m: −1, 0 or 1), four 16-bit lanes a word: 256 KiB, one per
// distinct H.
func fpQuantTable(hb []byte, m float32) *[16][256][8]uint64 {
	t := new([16][256][8]uint64)
	term := func(n byte, i, j int) int64 {
		c, h := int64(2*fp4Values[n]), bf16At(hb, 32*j+i)
		switch {
		case h > 0:
			return c
		case h < 0:
			return -c
		}
		return 0
	}
	for p := 0; p < 16; p++ {
		for b := 0; b < 256; b++ {
			for j := 0; j < 32; j++ {
				v := fpQuantBias + term(byte(b&15), 2*p, j) + term(byte(b>>4), 2*p+1, j)
				t[p][b][j/4] |= uint64(v) << (16 * (j % 4))
			}
		}
	}
	return t
}

// fpQuantKernel: W[o, 32k+j] = 2^(s−127) · Σ_i e2m1(q[o, 32k+i])·H[j, i]
// (E8M0 255 NaN), all of H's nonzero entries ±m: Σ_i 2·e2m1·σ[j, i] is
// an integer n (|n| ≤ 384) summed in 16-bit lanes, n·m/2 is exact in
// float32 (17 bits, m in [2^-20, 2^20]), and the product by 2^(s−127)
// its one rounding.
//
// Where H's signs are a Sylvester Hadamard matrix up to a column
// permutation, an affine relabelling of the rows and sign flips (FP-Quant's
// hadamard and gsr matrices: gsr sorts the columns by sign changes), the same integers n come
// from a 32-point fast Walsh–Hadamard transform instead (fwht: 5 butterfly
// stages; any order of an exact integer sum gives the same n); else from
// the table.
type fpQuantKernel struct {
	cols int64
	fwht *dtype.Hadamard32 // nil: the table
	tbl  *[16][256][8]uint64
	nm   *[1024]float32 // a lane's sum (n + 16·fpQuantBias) → n·m/2, exact
}

func (k *fpQuantKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	g0, g1 := c0/32, (c1-1)/32+1
	blk, err := s.strided(0, 0, k.cols/2, r0, r1, 16*g0, 16*g1)
	if err != nil {
		return err
	}
	sc, err := s.strided(1, 1, k.cols/32, r0, r1, g0, g1)
	if err != nil {
		return err
	}
	bw, gw, w := 16*(g1-g0), g1-g0, c1-c0
	if k.fwht != nil {
		var tmp [32]float32
		for r := r0; r < r1; r++ {
			row, srow, drow := blk[(r-r0)*bw:(r-r0+1)*bw], sc[(r-r0)*gw:(r-r0+1)*gw], dst[(r-r0)*w:(r-r0+1)*w]
			// whole groups [f0, f1) straight into dst, the edges through tmp
			f0, f1 := ceilDiv(c0, 32), c1/32
			if f0 < f1 {
				k.fwht.MXFP4(drow[32*f0-c0:32*f1-c0], row[16*(f0-g0):16*(f1-g0)], srow[f0-g0:f1-g0])
			}
			for g := g0; g < g1; g++ {
				if f0 <= g && g < f1 {
					continue
				}
				k.fwht.MXFP4(tmp[:], row[16*(g-g0):16*(g-g0+1)], srow[g-g0:g-g0+1])
				a, b := max(c0, 32*g), min(c1, 32*g+32)
				copy(drow[a-c0:b-c0], tmp[a-32*g:b-32*g])
			}
		}
		return nil
	}
	for r := r0; r < r1; r++ {
		for g := g0; g < g1; g++ {
			e := sc[(r-r0)*gw+g-g0]
			f := pow2E8M0[e]
			if e == 255 {
				f = float32(math.NaN())
			}
			in := (*[16]byte)(blk[(r-r0)*bw+16*(g-g0):])
			var a0, a1, a2, a3, a4, a5, a6, a7 uint64
			for i := range in {
				t := &k.tbl[i][in[i]]
				a0, a1, a2, a3 = a0+t[0], a1+t[1], a2+t[2], a3+t[3]
				a4, a5, a6, a7 = a4+t[4], a5+t[5], a6+t[6], a7+t[7]
			}
			a := [8]uint64{a0, a1, a2, a3, a4, a5, a6, a7}
			j0, j1 := max(c0, 32*g)-32*g, min(c1, 32*g+32)-32*g
			base := (r-r0)*w + 32*g - c0
			if j0 == 0 && j1 == 32 {
				out := (*[32]float32)(dst[base:])
				for x, v := range a {
					out[4*x] = k.nm[v&1023] * f
					out[4*x+1] = k.nm[v>>16&1023] * f
					out[4*x+2] = k.nm[v>>32&1023] * f
					out[4*x+3] = k.nm[v>>48&1023] * f
				}
				continue
			}
			for j := j0; j < j1; j++ {
				dst[base+j] = k.nm[a[j/4]>>(16*(j%4))&1023] * f
			}
		}
	}
	return nil
}
