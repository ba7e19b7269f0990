package dtype

import "encoding/binary"

// Q6_0 (ik_llama.cpp's ggml type 133): blocks of 32 in 26 bytes, {f16 d;
// u8 qh[8]; u8 qs[16]}. Element j < 16 is the low nibble of qs[j] with bits
// 4-5 from qh[j%8] (its low nibble for j < 8, its high nibble after), and
// element j+16 the high nibble with the next two bits of the same nibble
// of qh; y = (q - 32)·d, one float32 product as ik_llama.cpp's
// dequantize_row_q6_0 (ggml-quants.c) gives.
func dequantQ6_0(dst []float32, src []byte) {
	if useAccel {
		dequantQ6_0Accel(dst, src)
		return
	}
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

// dequantQ6_0Accel rewrites up to 64 Q6_0 blocks at a time as Q8_0 blocks
// (the fp16 scale, then the 32 codes q − 32 as int8, eight at a time in
// uint64 words) and hands them to the Q8_0 kernel, whose
// float32(int8)·scale is the same product.
func dequantQ6_0Accel(dst []float32, src []byte) {
	const bs, be, batch = 26, 32, 64
	const lo, mid, sign = 0x0f0f0f0f0f0f0f0f, 0x6060606060606060, 0x8080808080808080
	// (v + 0x60) ^ 0x80 is v − 32 as int8 for each byte v < 64, with no
	// carry between bytes.
	var q8 [batch * 34]byte
	n := len(src) / bs
	for i := 0; i < n; i += batch {
		nb := min(batch, n-i)
		for k := 0; k < nb; k++ {
			b := (*[bs]byte)(src[(i+k)*bs:])
			o := (*[34]byte)(q8[k*34:])
			o[0], o[1] = b[0], b[1]
			h := binary.LittleEndian.Uint64(b[2:])
			a := binary.LittleEndian.Uint64(b[10:])
			c := binary.LittleEndian.Uint64(b[18:])
			binary.LittleEndian.PutUint64(o[2:], (a&lo|h&0x0303030303030303<<4)+mid^sign)
			binary.LittleEndian.PutUint64(o[10:], (c&lo|h&0x3030303030303030)+mid^sign)
			binary.LittleEndian.PutUint64(o[18:], (a>>4&lo|h&0x0c0c0c0c0c0c0c0c<<2)+mid^sign)
			binary.LittleEndian.PutUint64(o[26:], (c>>4&lo|h&0xc0c0c0c0c0c0c0c0>>2)+mid^sign)
		}
		quantQ8(dst[i*be:], q8[:nb*34], 34, 2)
	}
}
