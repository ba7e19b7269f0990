package dtype

import (
	"encoding/binary"
	"math"
)

// The k-quants: super-blocks of 256 elements (ggml's QK_K), ports of
// ggml-quants.c dequantize_row_q{2,3,4,5,6,8}_K.

const qkK = 256

// Q2_K: {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin} = 84 bytes.
// y = d*(sc&15)*q - dmin*(sc>>4) per 16 elements.
func dequantQ2K(dst []float32, src []byte) {
	const bs = 84
	n := len(src) / bs
	dst = dst[:n*qkK]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[qkK]float32)(dst[i*qkK:])
		scales := b[0:16]
		d := quantHalfAt(b[80:])
		min := quantHalfAt(b[82:])
		o, is := 0, 0
		for half := 0; half < 2; half++ {
			q := (*[32]byte)(b[16+32*half:])
			for shift := uint(0); shift < 8; shift += 2 {
				sc := scales[is]
				is++
				dl := d * float32(sc&0x0f)
				ml := min * float32(sc>>4)
				for l := 0; l < 16; l++ {
					y[o] = float32(dl*float32((q[l]>>shift)&3)) - ml
					o++
				}
				sc = scales[is]
				is++
				dl = d * float32(sc&0x0f)
				ml = min * float32(sc>>4)
				for l := 0; l < 16; l++ {
					y[o] = float32(dl*float32((q[l+16]>>shift)&3)) - ml
					o++
				}
			}
		}
	}
}

// Q3_K: {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d} = 110 bytes.
// 16 six-bit scales (offset 32), 3-bit quants (2 low bits in qs, the high
// bit in hmask, inverted: a clear bit subtracts 4).
func dequantQ3K(dst []float32, src []byte) {
	const bs = 110
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	n := len(src) / bs
	dst = dst[:n*qkK]
	var sc [16]int8
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[qkK]float32)(dst[i*qkK:])
		dAll := quantHalfAt(b[108:])
		hm := (*[32]byte)(b[0:])

		a0 := binary.LittleEndian.Uint32(b[96:])
		a1 := binary.LittleEndian.Uint32(b[100:])
		tmp := binary.LittleEndian.Uint32(b[104:])
		aux := [4]uint32{
			(a0 & kmask2) | (((tmp >> 0) & kmask1) << 4),
			(a1 & kmask2) | (((tmp >> 2) & kmask1) << 4),
			((a0 >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4),
			((a1 >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4),
		}
		for k, a := range aux {
			sc[4*k+0] = int8(a)
			sc[4*k+1] = int8(a >> 8)
			sc[4*k+2] = int8(a >> 16)
			sc[4*k+3] = int8(a >> 24)
		}

		o, is := 0, 0
		m := uint8(1)
		for half := 0; half < 2; half++ {
			q := (*[32]byte)(b[32+32*half:])
			for shift := uint(0); shift < 8; shift += 2 {
				dl := dAll * float32(int32(sc[is])-32)
				is++
				for l := 0; l < 16; l++ {
					v := int32((q[l] >> shift) & 3)
					if hm[l]&m == 0 {
						v -= 4
					}
					y[o] = dl * float32(v)
					o++
				}
				dl = dAll * float32(int32(sc[is])-32)
				is++
				for l := 0; l < 16; l++ {
					v := int32((q[l+16] >> shift) & 3)
					if hm[l+16]&m == 0 {
						v -= 4
					}
					y[o] = dl * float32(v)
					o++
				}
				m <<= 1
			}
		}
	}
}

// quantScaleMinK4 is ggml's get_scale_min_k4: the j-th 6-bit scale and min
// of a Q4_K/Q5_K block's 12 packed scale bytes.
func quantScaleMinK4(j int, q *[12]byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0x0f) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

// Q4_K: {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]} = 144 bytes.
// y = d*sc*q - dmin*m per 32 elements.
func dequantQ4K(dst []float32, src []byte) {
	if useAccel {
		dequantQ4KAccel(dst, src)
		return
	}
	const bs = 144
	n := len(src) / bs
	dst = dst[:n*qkK]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[qkK]float32)(dst[i*qkK:])
		d := quantHalfAt(b[0:])
		min := quantHalfAt(b[2:])
		scales := (*[12]byte)(b[4:])
		for k := 0; k < 4; k++ {
			q := (*[32]byte)(b[16+32*k:])
			out := (*[64]float32)(y[64*k:])
			sc, m := quantScaleMinK4(2*k, scales)
			d1, m1 := d*float32(sc), min*float32(m)
			sc, m = quantScaleMinK4(2*k+1, scales)
			d2, m2 := d*float32(sc), min*float32(m)
			for l := 0; l < 32; l++ {
				out[l] = float32(d1*float32(q[l]&0x0f)) - m1
			}
			for l := 0; l < 32; l++ {
				out[32+l] = float32(d2*float32(q[l]>>4)) - m2
			}
		}
	}
}

// Q5_K: {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} = 176
// bytes. As Q4_K with a fifth bit from qh.
func dequantQ5K(dst []float32, src []byte) {
	const bs = 176
	n := len(src) / bs
	dst = dst[:n*qkK]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[qkK]float32)(dst[i*qkK:])
		d := quantHalfAt(b[0:])
		min := quantHalfAt(b[2:])
		scales := (*[12]byte)(b[4:])
		qh := (*[32]byte)(b[16:])
		u1, u2 := uint8(1), uint8(2)
		for k := 0; k < 4; k++ {
			ql := (*[32]byte)(b[48+32*k:])
			out := (*[64]float32)(y[64*k:])
			sc, m := quantScaleMinK4(2*k, scales)
			d1, m1 := d*float32(sc), min*float32(m)
			sc, m = quantScaleMinK4(2*k+1, scales)
			d2, m2 := d*float32(sc), min*float32(m)
			for l := 0; l < 32; l++ {
				v := int32(ql[l] & 0x0f)
				if qh[l]&u1 != 0 {
					v += 16
				}
				out[l] = float32(d1*float32(v)) - m1
			}
			for l := 0; l < 32; l++ {
				v := int32(ql[l] >> 4)
				if qh[l]&u2 != 0 {
					v += 16
				}
				out[32+l] = float32(d2*float32(v)) - m2
			}
			u1 <<= 2
			u2 <<= 2
		}
	}
}

// Q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d} = 210 bytes.
// y = d*sc*(6-bit value - 32) per 16 elements.
func dequantQ6K(dst []float32, src []byte) {
	if useAccel {
		dequantQ6KAccel(dst, src)
		return
	}
	const bs = 210
	n := len(src) / bs
	dst = dst[:n*qkK]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[qkK]float32)(dst[i*qkK:])
		d := quantHalfAt(b[208:])
		for half := 0; half < 2; half++ {
			ql := (*[64]byte)(b[64*half:])
			qh := (*[32]byte)(b[128+32*half:])
			sc := (*[8]byte)(b[192+8*half:])
			out := (*[128]float32)(y[128*half:])
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int32(int8((ql[l]&0x0f)|((qh[l]>>0)&3)<<4)) - 32
				q2 := int32(int8((ql[l+32]&0x0f)|((qh[l]>>2)&3)<<4)) - 32
				q3 := int32(int8((ql[l]>>4)|((qh[l]>>4)&3)<<4)) - 32
				q4 := int32(int8((ql[l+32]>>4)|((qh[l]>>6)&3)<<4)) - 32
				out[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				out[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				out[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				out[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
		}
	}
}

// Q8_K: {f32 d; i8 qs[256]; i16 bsums[16]} = 292 bytes: y = d*q.
func dequantQ8K(dst []float32, src []byte) {
	const bs = 292
	n := len(src) / bs
	dst = dst[:n*qkK]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[qkK]float32)(dst[i*qkK:])
		d := math.Float32frombits(binary.LittleEndian.Uint32(b[0:]))
		for j := 0; j < qkK; j++ {
			y[j] = d * float32(int8(b[4+j]))
		}
	}
}
