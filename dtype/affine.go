package dtype

import "math"

// Affine dequantization to bf16, the inner loop of the quantized-checkpoint
// kernels (package quant) whose compute dtype is bf16 (HQQ, torchao's
// Int8Tensor and IntxUnpackedToInt8Tensor): each value is
// bf16(bf16(q − zero) · scale), both operations in float32, each result
// rounded to bf16 to nearest even (a NaN kept as it is, payload and all),
// with q the element's code and zero and scale its group's. Assembly on
// amd64 with AVX2 (affine_amd64.s), the loop below elsewhere.

// AffineI8BF16 sets dst[i] = bf16(bf16(int8(src[i]) − zero[j]) · scale[j]),
// j = i/gsize, as above. dst must be as long as src, and zero and scale
// hold a value for each of the groups src touches; it panics otherwise.
func AffineI8BF16(dst []float32, src []byte, gsize int, zero, scale []float32) {
	affineBF16(dst, src, gsize, zero, scale, 0, true)
}

// AffineNibbleBF16 is AffineI8BF16 with q the 4-bit code (src[i]>>shift)&15
// (shift at most 4), as HQQ packs one group per nibble of a byte.
func AffineNibbleBF16(dst []float32, src []byte, shift uint, gsize int, zero, scale []float32) {
	if shift > 4 {
		panic("dtype.AffineNibbleBF16: shift over 4")
	}
	affineBF16(dst, src, gsize, zero, scale, shift, false)
}

func affineBF16(dst []float32, src []byte, gsize int, zero, scale []float32, shift uint, signed bool) {
	n := len(src)
	if n == 0 {
		return
	}
	if gsize <= 0 {
		panic("dtype: affine group size not positive")
	}
	groups := (n + gsize - 1) / gsize
	_ = dst[n-1]
	_, _ = zero[groups-1], scale[groups-1]
	i := 0
	if full := n / gsize; useAccel && gsize%8 == 0 && full > 0 {
		affineBF16AVX2(&dst[0], &src[0], full, gsize, &zero[0], &scale[0], shift, signed)
		i = full * gsize
	}
	for ; i < n; i++ {
		j := i / gsize
		var q float32
		if signed {
			q = float32(int8(src[i]))
		} else {
			q = float32((src[i] >> shift) & 15)
		}
		dst[i] = roundBF16(roundBF16(q-zero[j]) * scale[j])
	}
}

// roundBF16 is v rounded to bf16 to nearest even, a NaN unchanged.
func roundBF16(v float32) float32 {
	b := math.Float32bits(v)
	if b&0x7fffffff > 0x7f800000 {
		return v
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}
