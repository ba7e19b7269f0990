package dtype

// Q6_0 (ik_llama.cpp's ggml type 133): blocks of 32 in 26 bytes, {f16 d;
// u8 qh[8]; u8 qs[16]}. Element j < 16 is the low nibble of qs[j] with bits
// 4-5 from qh[j%8] (its low nibble for j < 8, its high nibble after), and
// element j+16 the high nibble with the next two bits of the same nibble
// of qh; y = (q - 32)·d, one float32 product as ik_llama.cpp's
// dequantize_row_q6_0 (ggml-quants.c) gives.
func dequantQ6_0(dst []float32, src []byte) {
	const bs, be = 26, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		qh := (*[8]byte)(b[2:])
		qs := (*[16]byte)(b[10:])
		for j := 0; j < 16; j++ {
			h := qh[j&7] >> (4 * (j >> 3))
			y[j] = float32(int32(qs[j]&0x0f|h<<4&0x30)-32) * d
			y[j+16] = float32(int32(qs[j]>>4|h<<2&0x30)-32) * d
		}
	}
}
