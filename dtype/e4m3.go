package dtype

import "math"

// ScaleE4M3 sets dst[i] = v(src[i]) * scale, where v is the value of the
// F8_E4M3 code src[i] (the F32 conversion's, NaN codes the default quiet
// NaN with the code's sign): one float32 multiplication each, the code's
// value the first operand, so every result has the bits of Lookup8 with
// the E4M3 table (a block-FP8 weight's code times its block's scale).
// The assembly computes the values from the codes' bits (each E4M3 value
// times 2^-8 is the binary16 of the same sign, exponent and mantissa
// bits; one exact multiply by 2^8 restores it) instead of gathering them
// from a table, a gather per 8 codes being the slower. dst must be as
// long as src.
func ScaleE4M3(dst []float32, src []byte, scale float32) {
	n := len(src)
	if n == 0 {
		return
	}
	_ = dst[n-1]
	i := 0
	if useAccel && n >= 16 {
		i = n &^ 15
		scaleE4M3AVX2(&dst[0], &src[0], i, scale)
	}
	for ; i < n; i++ {
		dst[i] = math.Float32frombits(e4m3ToF32Bits(src[i])) * scale
	}
}
