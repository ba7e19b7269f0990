package quant

import (
	"math"

	"github.com/lazyweights/tensorfs/dtype"
)

// The kernels of torchao's classes (torchao.go holds the plan and the
// references). Each value is torchao's computation one operation at a
// time in torch's dtypes: an operation on bf16 (f16) tensors is computed
// in float32 and rounded to bf16 (f16) to nearest even, as torch does; a
// bf16 tensor times a float32 one is float32 (type promotion).

// aoAffineKernel: Float8Tensor (float8: f32(q) · f32(scale)) and
// Int8Tensor / IntxUnpackedToInt8Tensor (dequantize_affine: q in out,
// − zero_point in out, × scale in promote(out, scale)), the scale (and
// zero point) one value per block of block, laid out row-major over the
// grid of blocks.
type aoAffineKernel struct {
	shape, block, grid []int64
	codes              dtype.DType // F8E4M3, F8E5M2 or I8
	sdt, zdt           dtype.DType // scale's, zero point's (0: none)
	out                dtype.DType // the metadata's dtype (affine only)
	qbits              int         // IntxUnpackedToInt8Tensor's target_dtype int1..int4 (else 0)
	float8             bool

	cols, bl int64
	gstride  []int64
	tbl      *[256]float32 // each code byte's value
	prod     dtype.DType   // the dtype of q·scale: promote(out, sdt)
	// bf16Affine: int8 codes, out, scale and prod bf16, a zero point of
	// I8 or BF16: each value is bf16(bf16(q − z) · s)
	bf16Affine bool
}

var (
	e5m2Table = table(dtype.F8E5M2)
	i8Table   = func() *[256]float32 {
		var t [256]float32
		for i := range t {
			t[i] = float32(int8(uint8(i)))
		}
		return &t
	}()
)

func (k *aoAffineKernel) init() {
	nd := len(k.shape)
	k.cols, k.bl = k.shape[nd-1], k.block[nd-1]
	k.gstride = make([]int64, nd)
	st := int64(1)
	for d := nd - 1; d >= 0; d-- {
		k.gstride[d] = st
		st *= k.grid[d]
	}
	switch k.codes {
	case dtype.F8E4M3:
		k.tbl = e4m3Table
	case dtype.F8E5M2:
		k.tbl = e5m2Table
	default:
		k.tbl = i8Table
	}
	k.prod = promote(k.out, k.sdt)
	k.bf16Affine = !k.float8 && k.codes == dtype.I8 && k.out == dtype.BF16 && k.sdt == dtype.BF16 &&
		(k.zdt == dtype.I8 || k.zdt == dtype.BF16)
}

// promote is torch's result dtype of an operation on two float dtypes
// among F32, BF16 and F16.
func promote(a, b dtype.DType) dtype.DType {
	if a == b {
		return a
	}
	return dtype.F32
}

// base is the index of row r's first block in the grid.
func (k *aoAffineKernel) base(r int64) int64 {
	b := int64(0)
	for d := len(k.shape) - 2; d >= 0; d-- {
		i := r % k.shape[d]
		r /= k.shape[d]
		b += i / k.block[d] * k.gstride[d]
	}
	return b
}

func (k *aoAffineKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	codes, err := s.strided(0, 0, k.cols, r0, r1, c0, c1)
	if err != nil {
		return err
	}
	j0, j1 := c0/k.bl, (c1-1)/k.bl+1
	w := c1 - c0
	var sc, zp []float32
	last := int64(-1)
	for r := r0; r < r1; r++ {
		if b := k.base(r); b != last {
			last = b
			if sc, err = s.floats(1, 1, k.sdt, b+j0, j1-j0); err != nil {
				return err
			}
			if k.zdt != 0 {
				if zp, err = s.zeros(k.zdt, b+j0, j1-j0); err != nil {
					return err
				}
			}
		}
		row := codes[(r-r0)*w : (r-r0+1)*w]
		out := dst[(r-r0)*w : (r-r0+1)*w]
		if k.bf16Affine && useLookup && c0%k.bl == 0 {
			// every block of the row at once: bf16(bf16(q − z) · s), the
			// operations of value (the zero point, I8 or bf16, is its own
			// value in bf16), whatever target_dtype's range
			dtype.AffineI8BF16(out, row, int(k.bl), zp, sc)
			continue
		}
		for c, j := c0, int64(0); c < c1; j++ { // block j0+j, one division a row
			e := min((j0+j+1)*k.bl, c1)
			in, o := row[c-c0:e-c0], out[c-c0:e-c0]
			switch {
			case k.float8 || k.zdt == 0 && k.prod == dtype.F32:
				// f32(q) * scale, one multiplication, table first (q in
				// bf16 or f16 is exact for int8)
				dtype.Lookup8(o, in, k.tbl, sc[j])
			default:
				k.affine(o, in, sc[j], zp, j)
			}
			c = e
		}
	}
	return nil
}

// affine is dequantize_affine's operations on one block's codes.
func (k *aoAffineKernel) affine(o []float32, in []byte, sv float32, zp []float32, j int64) {
	var z float32
	hasZ := k.zdt != 0
	if hasZ {
		z = roundTo(k.out, zp[j]) // zero_point.to(out)
	}
	if n := 1 << k.qbits; useLookup && k.qbits > 0 && len(in) >= 2*n {
		// target_dtype int1..int4: the 2^bits values of its range first,
		// each by the element's own operations; a code outside the range
		// (the format does not forbid it) takes them one by one
		var t [16]float32
		lo := -(n / 2)
		switch {
		case (!hasZ || k.zdt == dtype.I8) && k.prod == dtype.BF16:
			for i := 0; i < n; i++ { // as the loop below: q − z exact
				t[i] = roundBF16(float32((float32(lo+i) - z) * sv))
			}
		default:
			for i := 0; i < n; i++ {
				t[i] = k.value(float32(lo+i), z, sv, hasZ)
			}
		}
		o = o[:len(in)]
		for i, b := range in {
			if u := uint8(b) - uint8(lo); u < uint8(n) {
				o[i] = t[u]
			} else {
				o[i] = k.value(k.tbl[b], z, sv, hasZ)
			}
		}
		return
	}
	if useLookup && (!hasZ || k.zdt == dtype.I8) {
		// q − z of two int8 is an integer within ±255: exact in every
		// output dtype, so only the product is rounded (inlined loops)
		switch k.prod {
		case dtype.BF16:
			for i, b := range in {
				o[i] = roundBF16(float32((k.tbl[b] - z) * sv))
			}
			return
		case dtype.F32:
			for i, b := range in {
				o[i] = float32(k.tbl[b]-z) * sv
			}
			return
		}
	}
	for i, b := range in {
		o[i] = k.value(k.tbl[b], z, sv, hasZ)
	}
}

// value is one element of dequantize_affine: q (in out: exact for int8)
// − z in out, × sv in prod.
func (k *aoAffineKernel) value(v, z, sv float32, hasZ bool) float32 {
	if hasZ {
		v = roundTo(k.out, float32(v-z))
	}
	return roundTo(k.prod, float32(v*sv))
}

// zeros reads n zero points (I8 or a float) from element first of part 2.
func (s *scratch) zeros(dt dtype.DType, first, n int64) ([]float32, error) {
	if dt != dtype.I8 {
		return s.floats(2, 2, dt, first, n)
	}
	b, err := s.bytes(2, 2, first, n)
	if err != nil {
		return nil, err
	}
	f := s.flts[2]
	if int64(cap(f)) < n {
		f = make([]float32, n)
	}
	f = f[:n]
	s.flts[2] = f
	for i, x := range b {
		f[i] = float32(int8(x))
	}
	return f, nil
}

// aoInt4Kernel: Int4Tensor, qdata [B·N, K/2] two signed nibbles a byte
// (low = even k), scale and zero point [B, K/gs, N] (transposed) of
// dtype sdt: min = zero − scale·8 (in sdt), W = (f32(q) + 8)·scale + min
// in float32 (torchao prototype/gptq/api.py _int4_row_dequantize_zp).
type aoInt4Kernel struct {
	n, k, gs, b int64
	sdt         dtype.DType
}

func (k *aoInt4Kernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	G := k.k / k.gs
	b0, b1 := c0/2, (c1-1)/2+1
	g0, g1 := c0/k.gs, (c1-1)/k.gs+1
	w, bw := c1-c0, b1-b0
	var tbl [16]float32
	for ra := r0; ra < r1; {
		bi := ra / k.n
		rb := min(r1, (bi+1)*k.n)
		n0, n1 := ra-bi*k.n, rb-bi*k.n
		codes, err := s.strided(0, 0, k.k/2, ra, rb, b0, b1)
		if err != nil {
			return err
		}
		sc, err := s.stridedFloats(1, 1, k.sdt, k.n, bi*G+g0, bi*G+g1, n0, n1)
		if err != nil {
			return err
		}
		zp, err := s.stridedFloats(2, 2, k.sdt, k.n, bi*G+g0, bi*G+g1, n0, n1)
		if err != nil {
			return err
		}
		nw := n1 - n0
		for r := ra; r < rb; r++ {
			nn := r - ra
			brow := codes[(r-ra)*bw : (r-ra+1)*bw]
			out := dst[(r-r0)*w : (r-r0+1)*w]
			for c := c0; c < c1; {
				g := c / k.gs
				e := min((g+1)*k.gs, c1)
				sv, zv := sc[(g-g0)*nw+nn], zp[(g-g0)*nw+nn]
				mn := roundTo(k.sdt, zv-roundTo(k.sdt, sv*8))
				for nib := range tbl {
					q := float32(nib)
					if nib >= 8 {
						q -= 16
					}
					t := float32((q + 8) * sv)
					tbl[nib] = t + mn
				}
				if c&1 == 0 && e&1 == 0 {
					in := brow[c/2-b0 : e/2-b0]
					o := out[c-c0 : e-c0]
					o = o[:2*len(in)]
					for i, x := range in {
						o[2*i] = tbl[x&15]
						o[2*i+1] = tbl[x>>4]
					}
				} else {
					for cc := c; cc < e; cc++ {
						x := brow[cc/2-b0]
						if cc&1 == 1 {
							x >>= 4
						}
						out[cc-c0] = tbl[x&15]
					}
				}
				c = e
			}
		}
		ra = rb
	}
	return nil
}

// roundTo rounds v to dt (F32: v itself; BF16, F16: to nearest even, as
// torch stores the result of an operation in that dtype).
func roundTo(dt dtype.DType, v float32) float32 {
	switch dt {
	case dtype.BF16:
		return roundBF16(v)
	case dtype.F16:
		return roundF16(v)
	}
	return v
}

func roundBF16(v float32) float32 {
	b := math.Float32bits(v)
	if b&0x7fffffff > 0x7f800000 {
		return v // NaN stays NaN
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

func roundF16(v float32) float32 {
	b := math.Float32bits(v)
	sign, a := b&0x80000000, b&0x7fffffff
	switch {
	case a >= 0x7f800000:
		return v // Inf, NaN
	case a >= 0x477ff000: // 65520: past the largest half way, to Inf
		return math.Float32frombits(sign | 0x7f800000)
	case a < 0x38800000: // under 2^-14: a multiple of 2^-24
		f := math.RoundToEven(float64(math.Float32frombits(a)) * (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(float32(f/(1<<24))))
	}
	a += 0xfff + (a>>13)&1
	return math.Float32frombits(sign | a&^0x1fff)
}
