package dtype

// ik_llama.cpp's own quantized types (github.com/ikawrakow/ik_llama.cpp,
// ggml/src/iqk/iqk_quantize.cpp), with the type codes of its ggml.h,
// which mainline ggml does not use: IQ2_K (137), IQ3_K (138), IQ4_K
// (139), IQ5_K (140) and IQ6_K (141). Each is a block of 256 elements
// with an fp16 scale d, a 16-bit "extra" word whose bit per group of 16
// elements picks the second half of a non-linear codebook, a small
// integer scale per group of 16, and codes. Every value is d·scale rounded to float32, times the
// codebook entry, rounded to float32, as ik_llama.cpp's dequantize_row_*
// computes it; IQ6_K's codebook is a cubic in the 6-bit code, evaluated
// in float32 in ik_llama.cpp's order without fused multiply-adds (a build
// of ik_llama.cpp that fuses them, -march=native on an FMA machine, gives
// other last bits for 34 of its 64 codes; dtype/testdata/ikllama/README.md).
//
// The types of ik_llama.cpp with a scale per row before the row's blocks
// (IQ4_KS, IQ2_KS, IQ4_KSS, IQ5_KS, IQ3_KS, IQ2_KL) are in the table with
// RowMeta; their dequantizers take the row's scale (quant_ikrow.go).

import "encoding/binary"

// ikDequantizer returns the dequantizer of one of ik_llama.cpp's types.
func ikDequantizer(d DType) (func(dst []float32, src []byte), bool) {
	switch d {
	case IQ2_K:
		return dequantIQ2K, true
	case IQ3_K:
		return dequantIQ3K, true
	case IQ4_K:
		return dequantIQ4K, true
	case IQ5_K:
		return dequantIQ5K, true
	case IQ6_K:
		return dequantIQ6K, true
	}
	return nil, false
}

// The codebooks of ggml-common.h in ik_llama.cpp (iq2nl_values,
// iq3nl_values, iq4k_values, iq5nl_values), as float32: the first half
// for an "extra" bit of 0, the second for 1.
var (
	ikIQ2Values = [8]float32{-31, -13, 1, 17, -26, -8, 6, 22}
	ikIQ3Values = [16]float32{-63, -40, -23, -10, 1, 13, 28, 47, -59, -36, -19, -6, 5, 17, 32, 51}
	ikIQ4Values = [32]float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
		-123, -100, -79, -61, -45, -31, -18, -6, 5, 17, 29, 42, 57, 73, 93, 117}
	ikIQ5Values = [64]float32{-126, -114, -103, -92, -83, -74, -65, -57, -50, -43, -36, -30, -24, -18, -12, -6,
		-1, 5, 11, 17, 23, 29, 36, 43, 51, 59, 68, 77, 87, 97, 109, 121,
		-124, -112, -101, -90, -81, -72, -63, -55, -48, -41, -34, -28, -22, -16, -10, -4,
		1, 7, 13, 19, 25, 31, 38, 45, 53, 61, 70, 79, 89, 99, 111, 123}
	ikIQ6Values = ikIQ6Table()
)

// ikIQ6Table is IQ6_K's codebook: for code q (0..63) and extra bit m,
// entry 64m+q is A + q·(B + q·(−C + q·D)) + m in float32, each operation
// rounded, in iqk_quantize.cpp's order (A_IQ6K..D_IQ6K, S_IQ6K = 1).
func ikIQ6Table() (t [128]float32) {
	const a, b, c, d = float32(-127), float32(6.2568), float32(0.11218), float32(0.0011972)
	for m := 0; m < 2; m++ {
		for q := 0; q < 64; q++ {
			x := float32(q)
			v := float32(-c) + float32(x*d)
			v = b + float32(x*v)
			v = a + float32(x*v)
			t[64*m+q] = v + float32(m)
		}
	}
	return t
}

// IQ2_K: {f16 d; u16 extra; u8 scales[8]; u8 qs[64]}: 2-bit codes, four
// to a byte (bit pair 2·(g%4) of byte j of the g/4-th 32); group of 16
// h has scale (nibble h of scales) − 8 and codebook half extra bit h.
func dequantIQ2K(dst []float32, src []byte) {
	const bs = 76
	n := len(src) / bs
	dst = dst[:n*256]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		d := quantHalfAt(b[0:])
		extra := uint32(binary.LittleEndian.Uint16(b[2:]))
		for ib := 0; ib < 8; ib++ {
			dl1 := d * float32(int32(b[4+ib]&0xf)-8)
			dl2 := d * float32(int32(b[4+ib]>>4)-8)
			// each group's 4 products, the same as per element
			v1 := (*[4]float32)(ikIQ2Values[4*(extra>>(2*ib)&1):])
			v2 := (*[4]float32)(ikIQ2Values[4*(extra>>(2*ib+1)&1):])
			t1 := [4]float32{dl1 * v1[0], dl1 * v1[1], dl1 * v1[2], dl1 * v1[3]}
			t2 := [4]float32{dl2 * v2[0], dl2 * v2[1], dl2 * v2[2], dl2 * v2[3]}
			shift := uint(2*(ib%4)) & 7
			qs := (*[32]byte)(b[12+32*(ib/4):])
			yy := (*[32]float32)(y[32*ib:])
			for j := 0; j < 16; j++ {
				yy[j] = t1[qs[j]>>shift&3]
				yy[j+16] = t2[qs[j+16]>>shift&3]
			}
		}
	}
}

// IQ3_K: {f16 d; u16 extra; u16 scales_h; u8 scales_l[8]; u8 qs[64];
// u8 qh[32]}: 3-bit codes (2 low bits as IQ2_K's, the high bit g of
// qh[j]); group h has scale (2·nibble h + 1), negated where bit h of
// scales_h is set.
func dequantIQ3K(dst []float32, src []byte) {
	const bs = 110
	n := len(src) / bs
	dst = dst[:n*256]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		d := quantHalfAt(b[0:])
		extra := uint32(binary.LittleEndian.Uint16(b[2:]))
		sh := uint32(binary.LittleEndian.Uint16(b[4:]))
		var dl [16]float32
		var v [16]*[8]float32
		for h := 0; h < 16; h++ {
			s := 2*int32(b[6+h/2]>>(4*(h%2))&0xf) + 1
			if sh>>h&1 != 0 {
				s = -s
			}
			dl[h] = d * float32(s)
			v[h] = (*[8]float32)(ikIQ3Values[8*(extra>>h&1):])
		}
		qh := (*[32]byte)(b[78:])
		// Byte j of the k-th 32 of qs holds bit pairs of groups 8k+2l
		// (j < 16) or 8k+2l+1 (j >= 16), l = 0..3; qh[j] bit 4k+l the
		// third bit.
		for k := 0; k < 2; k++ {
			qs := (*[32]byte)(b[14+32*k:])
			yk := (*[128]float32)(y[128*k:])
			for half := 0; half < 2; half++ {
				g := 8*k + half
				d0, d1, d2, d3 := dl[g], dl[g+2], dl[g+4], dl[g+6]
				v0, v1, v2, v3 := v[g], v[g+2], v[g+4], v[g+6]
				for j := 16 * half; j < 16*half+16; j++ {
					q, hb := qs[j&31], qh[j&31]>>(4*k)
					yk[j] = d0 * v0[q&3|hb<<2&4]
					yk[j+32] = d1 * v1[q>>2&3|hb<<1&4]
					yk[j+64] = d2 * v2[q>>4&3|hb&4]
					yk[(j+96)&127] = d3 * v3[q>>6|hb>>1&4]
				}
			}
		}
	}
}

// IQ4_K: {f16 d; u16 extra; u8 scales_h[4]; u8 scales_l[8]; u8 qs[128]}:
// 4-bit codes as IQ4_XS's (low nibbles the first 16 of each 32); group h
// has the 6-bit scale (nibble h of scales_l, bits 2h..2h+1 of scales_h)
// − 32.
func dequantIQ4K(dst []float32, src []byte) {
	const bs = 144
	n := len(src) / bs
	dst = dst[:n*256]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		d := quantHalfAt(b[0:])
		extra := uint32(binary.LittleEndian.Uint16(b[2:]))
		for ib := 0; ib < 8; ib++ {
			sh := int32(b[4+ib/2] >> (4 * (ib % 2)))
			sl := int32(b[8+ib])
			dl1 := d * float32((sl&0xf|sh<<4&0x30)-32)
			dl2 := d * float32((sl>>4|sh<<2&0x30)-32)
			v1 := (*[16]float32)(ikIQ4Values[16*(extra>>(2*ib)&1):])
			v2 := (*[16]float32)(ikIQ4Values[16*(extra>>(2*ib+1)&1):])
			qs := (*[16]byte)(b[16+16*ib:])
			yy := (*[32]float32)(y[32*ib:])
			for j := 0; j < 16; j++ {
				yy[j] = dl1 * v1[qs[j]&0xf]
				yy[j+16] = dl2 * v2[qs[j]>>4]
			}
		}
	}
}

// IQ5_K: {f16 d; u16 extra; u8 scales_h[4]; u8 scales_l[8]; u8 qs[128];
// u8 qh[32]}: per 64 elements k, four groups of 16 with 6-bit scales − 32
// (nibbles of scales_l[2k], scales_l[2k+1], bit pairs of scales_h[k]),
// 4-bit codes plus a fifth bit from qh (bits 2k and 2k+1).
func dequantIQ5K(dst []float32, src []byte) {
	const bs = 176
	n := len(src) / bs
	dst = dst[:n*256]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		d := quantHalfAt(b[0:])
		extra := uint32(binary.LittleEndian.Uint16(b[2:]))
		qh := (*[32]byte)(b[144:])
		for k := 0; k < 4; k++ {
			sh := int32(b[4+k])
			sl0, sl1 := int32(b[8+2*k]), int32(b[9+2*k])
			dl1 := d * float32((sl0&0xf|sh<<4&0x30)-32)
			dl2 := d * float32((sl0>>4|sh<<2&0x30)-32)
			dl3 := d * float32((sl1&0xf|sh&0x30)-32)
			dl4 := d * float32((sl1>>4|sh>>2&0x30)-32)
			e := extra >> (4 * k)
			v1 := (*[32]float32)(ikIQ5Values[32*(e&1):])
			v2 := (*[32]float32)(ikIQ5Values[32*(e>>1&1):])
			v3 := (*[32]float32)(ikIQ5Values[32*(e>>2&1):])
			v4 := (*[32]float32)(ikIQ5Values[32*(e>>3&1):])
			shift := uint(2*k) & 7
			qs := (*[32]byte)(b[16+32*k:])
			yy := (*[64]float32)(y[64*k:])
			for j := 0; j < 16; j++ {
				h0, h1 := qh[j]>>shift, qh[j+16]>>shift
				yy[j] = dl1 * v1[(qs[j]&0xf|(h0&1)<<4)&31]
				yy[j+16] = dl2 * v2[(qs[j+16]&0xf|(h1&1)<<4)&31]
				yy[j+32] = dl3 * v3[(qs[j]>>4|(h0&2)<<3)&31]
				yy[j+48] = dl4 * v4[(qs[j+16]>>4|(h1&2)<<3)&31]
			}
		}
	}
}

// IQ6_K: {f16 d; u16 extra; i8 scales[16]; u8 qs[128]; u8 qh[64]}: per
// 64 elements k, four groups of 16 with int8 scales, 6-bit codes (a
// nibble of qs and two bits of qh) through ikIQ6Values.
func dequantIQ6K(dst []float32, src []byte) {
	const bs = 212
	n := len(src) / bs
	dst = dst[:n*256]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		d := quantHalfAt(b[0:])
		extra := uint32(binary.LittleEndian.Uint16(b[2:]))
		for k := 0; k < 4; k++ {
			dl1 := d * float32(int8(b[4+4*k]))
			dl2 := d * float32(int8(b[5+4*k]))
			dl3 := d * float32(int8(b[6+4*k]))
			dl4 := d * float32(int8(b[7+4*k]))
			e := extra >> (4 * k)
			v1 := (*[64]float32)(ikIQ6Values[64*(e&1):])
			v2 := (*[64]float32)(ikIQ6Values[64*(e>>1&1):])
			v3 := (*[64]float32)(ikIQ6Values[64*(e>>2&1):])
			v4 := (*[64]float32)(ikIQ6Values[64*(e>>3&1):])
			shift := uint(4*(k%2)) & 7
			qs := (*[32]byte)(b[20+32*k:])
			qh := (*[32]byte)(b[148+32*(k/2):])
			yy := (*[64]float32)(y[64*k:])
			for j := 0; j < 16; j++ {
				h0, h1 := qh[j]>>shift, qh[j+16]>>shift
				yy[j] = dl1 * v1[(qs[j]&0xf|(h0&3)<<4)&63]
				yy[j+16] = dl2 * v2[(qs[j+16]&0xf|(h1&3)<<4)&63]
				yy[j+32] = dl3 * v3[(qs[j]>>4|(h0&0xc)<<2)&63]
				yy[j+48] = dl4 * v4[(qs[j+16]>>4|(h1&0xc)<<2)&63]
			}
		}
	}
}
