//go:build amd64 && !purego

package dtype

//go:noescape
func quantNibAVX2(dst *float32, q *byte, chunks, chunk, stride int, scale, min *float32, lut *[16]int8)

//go:noescape
func quantQ6KAVX2(dst *float32, b *byte, scale *float32)

//go:noescape
func quantQ8AVX2(dst *float32, b *byte, blocks, stride, off int)

//go:noescape
func quantTQ2AVX2(dst *float32, b *byte, blocks int, scale *float32)

//go:noescape
func quantSignedAVX2(dst *float32, q, neg *byte, n int, scale *float32)

// quantNib dequantizes chunks of packed nibbles (see quant_accel.go) in
// assembly: chunks of chunk bytes (a multiple of 8) at q[c*stride:], into
// 2*chunk floats each at dst, lows then highs, float32(lut[nibble]) *
// scale[2c+hi] - min[2c+hi].
func quantNib(dst []float32, q []byte, chunks, chunk, stride int, scale, min []float32, lut *[16]int8) {
	_, _, _, _ = dst[2*chunks*chunk-1], q[(chunks-1)*stride+chunk-1], scale[2*chunks-1], min[2*chunks-1]
	quantNibAVX2(&dst[0], &q[0], chunks, chunk, stride, &scale[0], &min[0], lut)
}

// quantQ6K dequantizes one Q6_K block b (its 16 scales already computed)
// in assembly.
func quantQ6K(dst *[256]float32, b *[210]byte, scale *[16]float32) {
	quantQ6KAVX2(&dst[0], &b[0], &scale[0])
}

// quantSigned sets dst[i] = float32(q[i])*scale[i/16]*(±1), -1 where
// neg[i] is 0xFF, for the len(q) codes, a multiple of 16 (in assembly).
func quantSigned(dst []float32, q, neg []byte, scale []float32) {
	n := len(q)
	_, _, _ = dst[n-1], neg[n-1], scale[n/16-1]
	quantSignedAVX2(&dst[0], &q[0], &neg[0], n, &scale[0])
}

// quantQ8 dequantizes the whole blocks of b (stride bytes each: an fp16
// scale first, 32 int8 codes at off) into dst (in assembly).
func quantQ8(dst []float32, b []byte, stride, off int) {
	blocks := len(b) / stride
	if blocks == 0 {
		return
	}
	_ = dst[32*blocks-1]
	quantQ8AVX2(&dst[0], &b[0], blocks, stride, off)
}

// quantTQ2 dequantizes whole TQ2_0 blocks of b, their scales computed, into
// dst (in assembly).
func quantTQ2(dst []float32, b []byte, blocks int, scale []float32) {
	_, _, _ = dst[256*blocks-1], b[66*blocks-1], scale[blocks-1]
	quantTQ2AVX2(&dst[0], &b[0], blocks, &scale[0])
}
