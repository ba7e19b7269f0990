package dtype

import (
	"encoding/binary"
	"math"
)

// More of ik_llama.cpp's row-interleaved types (quant_ikrepacked.go):
// IQ4_KS_R4, IQ5_KS_R4, IQ5_K_R4, Q5_K_R4, Q3_K_R4, Q2_K_R4, IQ4_NL_R4,
// Q5_0_R4, Q6_0_R4, IQ2_BN_R4, IQ1_S_R4, IQ1_M_R4, IQ2_XXS_R4, IQ3_XXS_R4,
// IQ2_XS_R4, IQ2_S_R4 and IQ3_S_R4 (codes 344, 352, 340, 213, 211, 210,
// 220, 206, 233, 335, 219, 229, 216, 218, 217, 222, 221), each value the
// float32 its dequantize_row_*_r4 (iqk/iqk_quantize.cpp) gives, products
// and sums unfused; checked bit for bit against testdata/ikllama2/seed46r
// and seed48r. IQ4_KS_R4, IQ5_KS_R4 and IQ2_BN_R4 start each group with
// the 4 rows' float32 scales (ikGroup.meta = 16), IQ1_S_R4 and IQ1_M_R4
// with their fp16 scales (meta = 8): their dequantizers take the whole
// group and convert block ib.
//
// Most of these split a sub-block's 32 elements of a row over four chunks
// c of 4 rows' 4 bytes (row k's bytes at 16c+4k+i): the low nibbles of
// chunks 0..3 hold elements i, 16+i, 4+i, 20+i, the high ones 8 more.

// u8Float[q] is float32(q): a load in place of a conversion, which the
// Go compiler emits with a dependency on its destination register.
var u8Float = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i)
	}
	return t
}()

// q3Float[q] is float32(q − 4) for Q3_K_R4's 3-bit codes.
var q3Float = [8]float32{-4, -3, -2, -1, 0, 1, 2, 3}

// ikGroupScale is row k's float32 scale at the head of a group.
func ikGroupScale(g []byte, k int) float32 { return ikRowF32(g[4*k:]) }

// r4Nibbles4 writes a sub-block of 32 of one row from its four chunks q
// (row k's bytes at q[16c+i]): chunks 0 and 2 through d1·v1, 1 and 3
// through d2·v2.
func r4Nibbles4(yk *[32]float32, q *[52]byte, d1, d2 float32, v1, v2 *[16]float32) {
	for i := 0; i < 4; i++ {
		c0, c1, c2, c3 := q[i], q[16+i], q[32+i], q[48+i]
		yk[i], yk[i+8] = d1*v1[c0&0xf], d1*v1[c0>>4]
		yk[i+16], yk[i+24] = d2*v2[c1&0xf], d2*v2[c1>>4]
		yk[i+4], yk[i+12] = d1*v1[c2&0xf], d1*v1[c2>>4]
		yk[i+20], yk[i+28] = d2*v2[c3&0xf], d2*v2[c3>>4]
	}
}

// r4Nibbles5 is r4Nibbles4 with a fifth bit from qh[i], bits 2c (low
// nibble) and 2c+1 (high), into codebooks of 32.
func r4Nibbles5(yk *[32]float32, q *[52]byte, qh *[4]byte, d1, d2 float32, v1, v2 *[32]float32) {
	for i, h := range qh {
		c0, c1, c2, c3 := q[i], q[16+i], q[32+i], q[48+i]
		yk[i], yk[i+8] = d1*v1[(c0&0xf|h<<4&0x10)&0x1f], d1*v1[(c0>>4|h<<3&0x10)&0x1f]
		yk[i+16], yk[i+24] = d2*v2[(c1&0xf|h<<2&0x10)&0x1f], d2*v2[(c1>>4|h<<1&0x10)&0x1f]
		yk[i+4], yk[i+12] = d1*v1[(c2&0xf|h&0x10)&0x1f], d1*v1[(c2>>4|h>>1&0x10)&0x1f]
		yk[i+20], yk[i+28] = d2*v2[(c3&0xf|h>>2&0x10)&0x1f], d2*v2[(c3>>4|h>>3&0x10)&0x1f]
	}
}

// IQ4_KS_R4: float32 d[4]; blocks {u8 scales[32]; u8 qs[512]}: sub-block
// j of row k has scale s = scales[4j+k] ((s&254) − 127, codebook half
// s&1) and codes at qs[64j+16c+4k+i] (chunk c of 4 rows' 4 bytes).
func dequantIQ4KSR4Block(y [][]float32, g []byte, ib int) {
	const bs = 4 * 136
	b := (*[bs]byte)(g[16+ib*bs:])
	for k := 0; k < 4; k++ {
		d := ikGroupScale(g, k)
		for j := 0; j < 8; j++ {
			sc := b[4*j+k]
			dl := d * float32(int32(sc&254)-127)
			v := (*[16]float32)(ikIQ4Values[16*int(sc&1):])
			r4Nibbles4((*[32]float32)(y[k][256*ib+32*j:]), (*[52]byte)(b[32+64*j+4*k:]), dl, dl, v, v)
		}
	}
}

// IQ5_KS_R4: float32 d[4]; blocks {u8 scales[32]; u8 qs[512]; u8
// qh[128]}: IQ4_KS_R4's with a fifth bit, bit 2c (low nibble) or 2c+1
// (high) of qh[16j+4k+i], into IQ5_K's codebook halves of 32.
func dequantIQ5KSR4Block(y [][]float32, g []byte, ib int) {
	const bs = 4 * 168
	b := (*[bs]byte)(g[16+ib*bs:])
	for k := 0; k < 4; k++ {
		d := ikGroupScale(g, k)
		for j := 0; j < 8; j++ {
			sc := b[4*j+k]
			dl := d * float32(int32(sc&254)-127)
			v := (*[32]float32)(ikIQ5Values[32*int(sc&1):])
			r4Nibbles5((*[32]float32)(y[k][256*ib+32*j:]), (*[52]byte)(b[32+64*j+4*k:]), (*[4]byte)(b[544+16*j+4*k:]), dl, dl, v, v)
		}
	}
}

// IQ5_K_R4: {f16 d[4]; u8 extra[8]; u8 scales_h[16]; u8 scales_l[32]; u8
// qs[512]; u8 qh[128]}: IQ4_K_R4's layout (6-bit scales − 32 at 8j+k for
// chunks 0 and 2, 8j+k+4 for 1 and 3; codebook halves by bit j of
// extra[k] and extra[k+4]) with IQ5_KS_R4's fifth bit, into IQ5_K's
// codebook.
func dequantIQ5KR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[704]byte)(b)
	extra, sh, sl := blk[8:16], blk[16:32], blk[32:64]
	scale := func(is int) float32 { return r4Scale6(sl, sh, is) }
	for k := 0; k < 4; k++ {
		d := quantHalfAt(blk[2*k:])
		for j := 0; j < 8; j++ {
			d1, d2 := d*scale(8*j+k), d*scale(8*j+k+4)
			v1 := (*[32]float32)(ikIQ5Values[32*int(extra[k]>>j&1):])
			v2 := (*[32]float32)(ikIQ5Values[32*int(extra[k+4]>>j&1):])
			r4Nibbles5((*[32]float32)(y[k][256*ib+32*j:]), (*[52]byte)(blk[64+64*j+4*k:]), (*[4]byte)(blk[576+16*j+4*k:]), d1, d2, v1, v2)
		}
	}
}

// Q5_K_R4: {f16 d[4], dmin[4]; u8 scales_h[16]; u8 scales_l[32]; u8
// qh[128]; u8 qs[512]}: Q4_K_R4's scales and mins with a fifth bit: chunk
// c (0..3) takes bits 0,1 / 4,5 / 2,3 / 6,7 of qh[16j+4k+i] (low, high
// nibble); y = dl·q − ml unfused.
func dequantQ5KR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[704]byte)(b)
	sh, sl := blk[16:32], blk[32:64]
	for k := 0; k < 4; k++ {
		d, m := quantHalfAt(blk[2*k:]), quantHalfAt(blk[8+2*k:])
		for j := 0; j < 8; j++ {
			is := 4*j + k
			hs := sh[is%16] >> (4 * (is / 16))
			dl := d * float32(sl[is]&0xf|(hs&3)<<4)
			ml := m * float32(sl[is]>>4|(hs&0xc)<<2)
			q := (*[52]byte)(blk[192+64*j+4*k:])
			qh := (*[4]byte)(blk[64+16*j+4*k:])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for i, h := range qh {
				c0, c1, c2, c3 := q[i], q[16+i], q[32+i], q[48+i]
				yk[i] = float32(dl*u8Float[c0&0xf|h<<4&0x10]) - ml
				yk[i+8] = float32(dl*u8Float[c0>>4|h<<3&0x10]) - ml
				yk[i+16] = float32(dl*u8Float[c1&0xf|h&0x10]) - ml
				yk[i+24] = float32(dl*u8Float[c1>>4|h>>1&0x10]) - ml
				yk[i+4] = float32(dl*u8Float[c2&0xf|h<<2&0x10]) - ml
				yk[i+12] = float32(dl*u8Float[c2>>4|h<<1&0x10]) - ml
				yk[i+20] = float32(dl*u8Float[c3&0xf|h>>2&0x10]) - ml
				yk[i+28] = float32(dl*u8Float[c3>>4|h>>3&0x10]) - ml
			}
		}
	}
}

// Q3_K_R4: {f16 d[4]; u8 scales_h[16]; u8 scales_l[32]; u8 qh[128]; u8
// qs[256]}: sub-block j of row k has 6-bit scales (− 32, packed as
// IQ4_XS_R8's) at 8j+k (its first 16) and 8j+k+4; element 4m+i is the 2
// bits at 2·(m%4) of qs[32j+4k+i+16·(m/4)] with bit m of qh[16j+4k+i]
// above them, y = dl·(q − 4).
func dequantQ3KR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[440]byte)(b)
	sh, sl := blk[8:24], blk[24:56]
	scale := func(is int) float32 { return r4Scale6(sl, sh, is) }
	for k := 0; k < 4; k++ {
		d := quantHalfAt(blk[2*k:])
		for j := 0; j < 8; j++ {
			d1, d2 := d*scale(8*j+k), d*scale(8*j+k+4)
			q := (*[20]byte)(blk[184+32*j+4*k:])
			qh := (*[4]byte)(blk[56+16*j+4*k:])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for i, h := range qh {
				c0, c1 := q[i], q[16+i]
				yk[i] = d1 * q3Float[(c0&3|h<<2&4)&7]
				yk[i+4] = d1 * q3Float[(c0>>2&3|h<<1&4)&7]
				yk[i+8] = d1 * q3Float[(c0>>4&3|h&4)&7]
				yk[i+12] = d1 * q3Float[(c0>>6|h>>1&4)&7]
				yk[i+16] = d2 * q3Float[(c1&3|h>>2&4)&7]
				yk[i+20] = d2 * q3Float[(c1>>2&3|h>>3&4)&7]
				yk[i+24] = d2 * q3Float[(c1>>4&3|h>>4&4)&7]
				yk[i+28] = d2 * q3Float[(c1>>6|h>>5&4)&7]
			}
		}
	}
}

// Q2_K_R4: {f16 d[4], dmin[4]; u8 scales[64]; u8 qs[256]}: sub-block j of
// row k has 4-bit scale and min in scales[8j+k] (its first 16) and
// scales[8j+k+4]; element 4m+i is the 2 bits at 2·(m%4) of
// qs[32j+4k+i+16·(m/4)], y = dl·q − ml unfused.
func dequantQ2KR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[336]byte)(b)
	for k := 0; k < 4; k++ {
		d, m := quantHalfAt(blk[2*k:]), quantHalfAt(blk[8+2*k:])
		for j := 0; j < 8; j++ {
			s1, s2 := blk[16+8*j+k], blk[20+8*j+k]
			d1, m1 := d*float32(s1&0xf), m*float32(s1>>4)
			d2, m2 := d*float32(s2&0xf), m*float32(s2>>4)
			q := (*[20]byte)(blk[80+32*j+4*k:])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for i := 0; i < 4; i++ {
				c0, c1 := q[i], q[16+i]
				yk[i] = float32(d1*u8Float[c0&3]) - m1
				yk[i+4] = float32(d1*u8Float[c0>>2&3]) - m1
				yk[i+8] = float32(d1*u8Float[c0>>4&3]) - m1
				yk[i+12] = float32(d1*u8Float[c0>>6]) - m1
				yk[i+16] = float32(d2*u8Float[c1&3]) - m2
				yk[i+20] = float32(d2*u8Float[c1>>2&3]) - m2
				yk[i+24] = float32(d2*u8Float[c1>>4&3]) - m2
				yk[i+28] = float32(d2*u8Float[c1>>6]) - m2
			}
		}
	}
}

// IQ4_NL_R4: {f16 d[4]; u8 qs[64]}: row k's codes at qs[16c+4k+i], the
// nibbles into IQ4_NL's codebook, d·value.
func dequantIQ4NLR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[72]byte)(b)
	v := (*[16]float32)(ikIQ4Values[:16])
	for k := 0; k < 4; k++ {
		d := quantHalfAt(blk[2*k:])
		r4Nibbles4((*[32]float32)(y[k][32*ib:]), (*[52]byte)(blk[8+4*k:]), d, d, v, v)
	}
}

// Q5_0_R4: {f16 d[4]; u8 qh[16]; u8 qs[64]}: IQ4_NL_R4's nibbles with a
// fifth bit, bit c (low nibble) or c+4 (high) of qh[4k+i]; y = d·q − 16d
// unfused.
func dequantQ5_0R4Block(y [][]float32, b []byte, ib int) {
	blk := (*[88]byte)(b)
	for k := 0; k < 4; k++ {
		d := quantHalfAt(blk[2*k:])
		m := -16 * d
		q := (*[52]byte)(blk[24+4*k:])
		qh := (*[4]byte)(blk[8+4*k:])
		yk := (*[32]float32)(y[k][32*ib:])
		for i, h := range qh {
			c0, c1, c2, c3 := q[i], q[16+i], q[32+i], q[48+i]
			yk[i] = float32(d*u8Float[c0&0xf|h<<4&0x10]) + m
			yk[i+8] = float32(d*u8Float[c0>>4|h&0x10]) + m
			yk[i+16] = float32(d*u8Float[c1&0xf|h<<3&0x10]) + m
			yk[i+24] = float32(d*u8Float[c1>>4|h>>1&0x10]) + m
			yk[i+4] = float32(d*u8Float[c2&0xf|h<<2&0x10]) + m
			yk[i+12] = float32(d*u8Float[c2>>4|h>>2&0x10]) + m
			yk[i+20] = float32(d*u8Float[c3&0xf|h<<1&0x10]) + m
			yk[i+28] = float32(d*u8Float[c3>>4|h>>3&0x10]) + m
		}
	}
}

// Q6_0_R4: {f16 d[4]; u8 qh[32]; u8 qs[64]}: IQ4_NL_R4's nibbles with two
// more bits from qh[16·(c%2)+4k+i], at 2·(c/2) (low nibble) or 2·(c/2)+4
// (high); y = d·q − 32d unfused.
func dequantQ6_0R4Block(y [][]float32, b []byte, ib int) {
	blk := (*[104]byte)(b)
	for k := 0; k < 4; k++ {
		d := quantHalfAt(blk[2*k:])
		m := -32 * d
		q := (*[52]byte)(blk[40+4*k:])
		qh := (*[20]byte)(blk[8+4*k:])
		yk := (*[32]float32)(y[k][32*ib:])
		for i := 0; i < 4; i++ {
			c0, c1, c2, c3 := q[i], q[16+i], q[32+i], q[48+i]
			h0, h1 := qh[i], qh[16+i]
			yk[i] = float32(d*u8Float[c0&0xf|h0<<4&0x30]) + m
			yk[i+8] = float32(d*u8Float[c0>>4|h0&0x30]) + m
			yk[i+16] = float32(d*u8Float[c1&0xf|h1<<4&0x30]) + m
			yk[i+24] = float32(d*u8Float[c1>>4|h1&0x30]) + m
			yk[i+4] = float32(d*u8Float[c2&0xf|h0<<2&0x30]) + m
			yk[i+12] = float32(d*u8Float[c2>>4|h0>>2&0x30]) + m
			yk[i+20] = float32(d*u8Float[c3&0xf|h1<<2&0x30]) + m
			yk[i+28] = float32(d*u8Float[c3>>4|h1>>2&0x30]) + m
		}
	}
}

// IQ2_BN_R4: float32 d[4]; blocks {u8 qs[64]}: element 16l+4m+i of row k
// is bits 2m..2m+1 of qs[16l+4k+i], d·(code − 1) (IQ2_BN's bnValues).
func dequantIQ2BNR4Block(y [][]float32, g []byte, ib int) {
	const bs = 64
	b := (*[bs]byte)(g[16+ib*bs:])
	for k := 0; k < 4; k++ {
		v := bnValues(ikGroupScale(g, k))
		yk := (*[64]float32)(y[k][64*ib:])
		for l := 0; l < 4; l++ {
			q := (*[4]byte)(b[16*l+4*k:])
			yl := (*[16]float32)(yk[16*l:])
			for i, c := range q {
				yl[i] = v[c&3]
				yl[4+i] = v[c>>2&3]
				yl[8+i] = v[c>>4&3]
				yl[12+i] = v[c>>6]
			}
		}
	}
}

// ikGroupHalf is row k's fp16 scale at the head of a group.
func ikGroupHalf(g []byte, k int) float32 { return quantHalfAt(g[2*k:]) }

// iq1Sums[s] holds t + delta for t = −1, 0, 1 at index t&3 (3, 0, 1: a
// grid byte's low bits), delta IQ1S_DELTA with sign bit s; exact sums.
var iq1Sums = [2][4]float32{
	{0 + iq1Delta, 1 + iq1Delta, 0, -1 + iq1Delta},
	{0 - iq1Delta, 1 - iq1Delta, 0, -1 - iq1Delta},
}

// iq1Values returns dl·(t + delta) at index t&3, delta's sign bit s:
// each the product the C computes per element.
func iq1Values(dl float32, s uint32) [4]float32 {
	t := &iq1Sums[s&1]
	return [4]float32{dl * t[0], dl * t[1], 0, dl * t[3]}
}

// iq1Group8 writes the 8 values of grid entry g (signed bytes −1, 0, 1,
// low first) through v (iq1Values).
func iq1Group8(y *[8]float32, v *[4]float32, g uint64) {
	y[0], y[1], y[2], y[3] = v[g&3], v[g>>8&3], v[g>>16&3], v[g>>24&3]
	y[4], y[5], y[6], y[7] = v[g>>32&3], v[g>>40&3], v[g>>48&3], v[g>>56&3]
}

// IQ1_S_R4: f16 d[4]; blocks of 32 {u8 qs[16]; u16 qh[4]}: row k's
// qh[k] holds a 3-bit scale (bits 12–14, dl = d·(2s+1)), the delta's
// sign (bit 15) and the high 3 bits of four 11-bit indices into IQ1_S's
// grid (bits 3i..3i+2, the low 8 in qs[4i+k]), 8 elements each:
// dl·(grid + delta).
func dequantIQ1SR4Block(y [][]float32, g []byte, ib int) {
	const bs = 24
	b := (*[bs]byte)(g[8+ib*bs:])
	for k := 0; k < 4; k++ {
		qh := uint32(b[16+2*k]) | uint32(b[17+2*k])<<8
		dl := ikGroupHalf(g, k) * float32(2*(qh>>12&7)+1)
		v := iq1Values(dl, qh>>15)
		yk := (*[32]float32)(y[k][32*ib:])
		for i := 0; i < 4; i++ {
			idx := uint32(b[4*i+k]) | (qh>>(3*i)&7)<<8
			iq1Group8((*[8]float32)(yk[8*i:]), &v, iq1sGrid[idx&2047])
		}
	}
}

// IQ1_M_R4: f16 d[4]; blocks of 32 {u8 qs[16]; u8 qh[8]; u8 scales[4]}:
// row k's halves of 16 i have scale d·(nibble i of scales[k]) and two
// indices into IQ1_S's grid, qs[8i+k] and qs[8i+k+4] with 3 high bits
// each from qh[4i+k] (bits 0–2, 4–6; the deltas' signs bits 3 and 7).
func dequantIQ1MR4Block(y [][]float32, g []byte, ib int) {
	const bs = 28
	b := (*[bs]byte)(g[8+ib*bs:])
	for k := 0; k < 4; k++ {
		d := ikGroupHalf(g, k)
		sc := b[24+k]
		yk := (*[32]float32)(y[k][32*ib:])
		for i := 0; i < 2; i++ {
			dl := d * float32(sc>>(4*i)&0xf)
			h := uint32(b[16+4*i+k])
			v1, v2 := iq1Values(dl, h>>3), iq1Values(dl, h>>7)
			iq1Group8((*[8]float32)(yk[16*i:]), &v1, iq1sGrid[(uint32(b[8*i+k])|(h&7)<<8)&2047])
			iq1Group8((*[8]float32)(yk[16*i+8:]), &v2, iq1sGrid[(uint32(b[8*i+k+4])|(h&0x70)<<4)&2047])
		}
	}
}

// iqxxsR4Scale reads the IQ2_XXS_R4/IQ3_XXS_R4 word of row k's sub-block:
// its 4-bit scale (bit 0 of each byte), and the sign bits, bit j of each
// byte (after clearing bit 0) XOR bit j+1.
func iqxxsR4Scale(w uint32) (scale float32, signs uint32) {
	s := w&1 | w>>7&2 | w>>14&4 | w>>21&8
	w &= 0xfefefefe
	return float32(2*s + 1), w ^ w>>1
}

// The float32 bits of the grids' magnitudes, entry by entry: IQ2_XXS's,
// IQ2_XS's and IQ2_S's 8 a entry, IQ3_XXS's and IQ3_S's 4.
var (
	iq2xxsBits = func() (t [256][8]uint32) { gridBits8(t[:], iq2xxsGrid[:]); return }()
	iq2xsBits  = func() (t [512][8]uint32) { gridBits8(t[:], iq2xsGrid[:]); return }()
	iq2sBits   = func() (t [1024][8]uint32) { gridBits8(t[:], iq2sGrid[:]); return }()
	iq3xxsBits = func() (t [256][4]uint32) { gridBits4(t[:], iq3xxsGrid[:]); return }()
	iq3sBits   = func() (t [512][4]uint32) { gridBits4(t[:], iq3sGrid[:]); return }()
)

func gridBits8(t [][8]uint32, grid []uint64) {
	for i, g := range grid {
		for m := range t[i] {
			t[i][m] = math.Float32bits(float32(uint8(g >> (8 * m))))
		}
	}
}

func gridBits4(t [][4]uint32, grid []uint32) {
	for i, g := range grid {
		for m := range t[i] {
			t[i][m] = math.Float32bits(float32(uint8(g >> (8 * m))))
		}
	}
}

// signed8 is signed4 for 8 magnitudes and 8 sign bits.
func signed8(y *[8]float32, dl float32, g *[8]uint32, sg uint32) {
	signed4((*[4]float32)(y[:4]), dl, (*[4]uint32)(g[:4]), sg)
	signed4((*[4]float32)(y[4:]), dl, (*[4]uint32)(g[4:]), sg>>4)
}

// signed4 writes dl·g_m·±1 for 4 grid magnitudes (float32 bits g), the
// sign of m bit m of sg (1: −1). The C rounds dl·g_m, then negates by a
// product; dl·(−g_m) is the same float32 in every case (rounding is
// symmetric, and a NaN dl comes out as itself either way), so the sign
// goes on g_m's bits and one product remains.
func signed4(y *[4]float32, dl float32, g *[4]uint32, sg uint32) {
	y[0] = dl * math.Float32frombits(g[0]|sg<<31)
	y[1] = dl * math.Float32frombits(g[1]|sg>>1&1<<31)
	y[2] = dl * math.Float32frombits(g[2]|sg>>2&1<<31)
	y[3] = dl * math.Float32frombits(g[3]|sg>>3&1<<31)
}

// IQ2_XXS_R4: {f16 d[4]; u32 sas[32]; u8 qs[128]}: sub-block j of row k
// has scale, signs (iqxxsR4Scale) in sas[4j+k] and 4 groups of 8 from
// IQ2_XXS's grid, qs[16j+4k+i], their signs byte i; d/8·(2s+1)·g·±1.
func dequantIQ2XXSR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[264]byte)(b)
	for k := 0; k < 4; k++ {
		d := 0.125 * quantHalfAt(blk[2*k:])
		for j := 0; j < 8; j++ {
			sc, signs := iqxxsR4Scale(binary.LittleEndian.Uint32(blk[8+16*j+4*k:]))
			dl := d * sc
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for i := 0; i < 4; i++ {
				signed8((*[8]float32)(yk[8*i:]), dl, &iq2xxsBits[blk[136+16*j+4*k+i]], signs>>(8*i))
			}
		}
	}
}

// IQ3_XXS_R4: {f16 d[4]; u32 sas[32]; u8 qs[256]}: as IQ2_XXS_R4 with
// d/4 and 8 groups of 4 from IQ3_XXS's grid, qs[32j+8k+i], their signs
// nibble i.
func dequantIQ3XXSR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[392]byte)(b)
	for k := 0; k < 4; k++ {
		d := 0.25 * quantHalfAt(blk[2*k:])
		for j := 0; j < 8; j++ {
			sc, signs := iqxxsR4Scale(binary.LittleEndian.Uint32(blk[8+16*j+4*k:]))
			dl := d * sc
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for i := 0; i < 8; i++ {
				signed4((*[4]float32)(yk[4*i:]), dl, &iq3xxsBits[blk[136+32*j+8*k+i]], signs>>(4*i))
			}
		}
	}
}

// iq2R4Scales is IQ2_XS_R4's and IQ2_S_R4's pair of scales d·(2s+1) from
// the nibbles of a scale byte (groups 0–1, 2–3 of a sub-block).
func iq2R4Scales(d float32, sc byte) [2]float32 {
	return [2]float32{d * float32(2*(sc&0xf)+1), d * float32(2*(sc>>4)+1)}
}

// IQ2_XS_R4: {f16 d[4]; u16 qs[128]; u8 scales[32]}: sub-block j of row
// k has scales d/8·(2s+1) from the nibbles of scales[4j+k] (groups 0–1,
// 2–3) and 4 groups of 8: qs[16j+4k+i] holds a 9-bit index into IQ2_XS's
// grid and 7 sign bits s, element m negative where bit m of s ^ s<<1.
func dequantIQ2XSR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[296]byte)(b)
	for k := 0; k < 4; k++ {
		d := 0.125 * quantHalfAt(blk[2*k:])
		for j := 0; j < 8; j++ {
			dl := iq2R4Scales(d, blk[264+4*j+k])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for i := 0; i < 4; i++ {
				q := uint32(binary.LittleEndian.Uint16(blk[8+2*(16*j+4*k+i):]))
				s := q >> 9
				signed8((*[8]float32)(yk[8*i:]), dl[i/2], &iq2xsBits[q&511], s^s<<1)
			}
		}
	}
}

// IQ2_S_R4: {f16 d[4]; u8 qs[128]; u8 qh[32]; u8 signs[128]; u8
// scales[32]}: IQ2_XS_R4's scales; group i's 10-bit index into IQ2_S's
// grid is qs[16j+4k+i] with bits 2i, 2i+1 of qh[4j+k] above it, its signs
// signs[16j+4k+i].
func dequantIQ2SR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[328]byte)(b)
	for k := 0; k < 4; k++ {
		d := 0.125 * quantHalfAt(blk[2*k:])
		for j := 0; j < 8; j++ {
			dl := iq2R4Scales(d, blk[296+4*j+k])
			qh := uint32(blk[136+4*j+k])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for i := 0; i < 4; i++ {
				idx := uint32(blk[8+16*j+4*k+i]) | qh>>(2*i)&3<<8
				signed8((*[8]float32)(yk[8*i:]), dl[i/2], &iq2sBits[idx&1023], uint32(blk[168+16*j+4*k+i]))
			}
		}
	}
}

// IQ3_S_R4: {f16 d[4]; u8 qs[256]; u8 qh[32]; u8 signs[128]; u8
// scales[16]}: sub-block j of row k has scale d·(1+2s), s nibble l/16 of
// scales[l%16] (l = 4j+k); its 8 groups of 4 are IQ3_S grid entries
// qs[32j+8i+k] (elements 4i..) and qs[32j+8i+k+4] (16+4i..) with bits i
// and i+4 of qh[4j+k] as their ninth bit; element m of them is negative
// where bit i (or i+4) of signs[16j+4k+m] is set.
func dequantIQ3SR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[440]byte)(b)
	for k := 0; k < 4; k++ {
		d := quantHalfAt(blk[2*k:])
		for j := 0; j < 8; j++ {
			l := 4*j + k
			dl := d * float32(1+2*(blk[424+l%16]>>(4*(l/16))&0xf))
			qh := uint32(blk[264+4*j+k])
			sw := binary.LittleEndian.Uint32(blk[296+16*j+4*k:]) // signs of elements m = 0..3, a byte each
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for i := 0; i < 4; i++ {
				g1 := uint32(blk[8+32*j+8*i+k]) | qh>>i&1<<8
				g2 := uint32(blk[8+32*j+8*i+k+4]) | qh>>(i+4)&1<<8
				s1, s2 := sw>>i&0x01010101, sw>>(i+4)&0x01010101
				signed4((*[4]float32)(yk[4*i:]), dl, &iq3sBits[g1&511], (s1|s1>>7|s1>>14|s1>>21)&15)
				signed4((*[4]float32)(yk[16+4*i:]), dl, &iq3sBits[g2&511], (s2|s2>>7|s2>>14|s2>>21)&15)
			}
		}
	}
}
