package dtype

import "math"

// AffineBits dequantizes packed codes group by group, HQQ's
// Quantizer.dequantize on a row block of W_q (quant/hqq.go):
//
//	dst[i] = round(round(q_i − zero[g]) · scale[g]),  g = i / gsize
//
// where q_i = (e_i >> shift) & mask, e_i the i-th element of src (width 1:
// bytes; width 4: little-endian uint32s), and round is to cd: BF16 or F16
// to nearest even (each float32 operation rounded once more, which is the
// operation correctly rounded to the narrower format), F32 none. A NaN is
// kept as it is (no quieting or payload change by the rounding). len(src)
// is width·len(dst); zero and scale hold a value per group; mask < 256.
// With AVX2 and F16C, whole groups of a multiple of 8 go through
// assembly, 8 values a step; the rest runs in Go.
func AffineBits(dst []float32, src []byte, width int, shift uint, mask uint32, gsize int, zero, scale []float32, cd DType) {
	n := len(dst)
	if n == 0 {
		return
	}
	if gsize <= 0 || (width != 1 && width != 4) || mask > 255 || shift > 31 {
		panic("dtype.AffineBits: bad group size, width, mask or shift")
	}
	var mode int
	switch cd {
	case F32:
	case BF16:
		mode = 1
	case F16:
		mode = 2
	default:
		panic("dtype.AffineBits: compute dtype not F32, BF16 or F16")
	}
	groups := (n + gsize - 1) / gsize
	_ = src[width*n-1]
	_, _ = zero[groups-1], scale[groups-1]
	i := 0
	if full := n / gsize; useAccel && gsize%8 == 0 && full > 0 {
		affineBitsAVX2(&dst[0], &src[0], full, gsize, &zero[0], &scale[0], shift, uint(mask), width, mode)
		i = full * gsize
	}
	round := func(v float32) float32 { return v }
	switch mode {
	case 1:
		round = roundBF16
	case 2:
		round = roundF16Keep
	}
	for ; i < n; i++ {
		e := uint32(src[i])
		if width == 4 {
			e = uint32(src[4*i]) | uint32(src[4*i+1])<<8 | uint32(src[4*i+2])<<16 | uint32(src[4*i+3])<<24
		}
		j := i / gsize
		dst[i] = round(round(float32(e>>shift&mask)-zero[j]) * scale[j])
	}
}

// roundF16Keep rounds v to binary16 to nearest even; a NaN stays as it is.
func roundF16Keep(v float32) float32 {
	b := math.Float32bits(v)
	if b&0x7fffffff > 0x7f800000 {
		return v
	}
	return math.Float32frombits(f16ToF32Bits(f32ToF16Bits(b)))
}
