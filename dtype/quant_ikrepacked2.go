package dtype

// More of ik_llama.cpp's row-interleaved types (quant_ikrepacked.go):
// IQ4_KS_R4, IQ5_KS_R4, IQ5_K_R4, Q5_K_R4, Q3_K_R4, Q2_K_R4, IQ4_NL_R4,
// Q5_0_R4, Q6_0_R4 and IQ2_BN_R4 (codes 344, 352, 340, 213, 211, 210, 220,
// 206, 233, 335), each value the float32 its dequantize_row_*_r4
// (iqk/iqk_quantize.cpp) gives, products and sums unfused; checked bit
// for bit against testdata/ikllama2/seed46r. IQ4_KS_R4, IQ5_KS_R4 and
// IQ2_BN_R4 start each group with the 4 rows' float32 scales (ikGroup.meta
// = 16): their dequantizers take the whole group and convert block ib.
//
// Most of these split a row's 32 elements of a sub-block over four
// 4-byte chunks of 4 rows each (the chunk of row k at 16s + 4k), the low
// and high nibbles of chunk s landing at r4Lo[s] and r4Hi[s].

var (
	r4Lo = [4]int{0, 16, 4, 20}
	r4Hi = [4]int{8, 24, 12, 28}
)

// ikGroupScale is row k's float32 scale at the head of a group.
func ikGroupScale(g []byte, k int) float32 { return ikRowF32(g[4*k:]) }

// IQ4_KS_R4: float32 d[4]; blocks {u8 scales[32]; u8 qs[512]}: sub-block
// j of row k has scale s = scales[4j+k] ((s&254) − 127, codebook half
// s&1) and codes at qs[64j+16m+4k+i].
func dequantIQ4KSR4Block(y [][]float32, g []byte, ib int) {
	const bs = 4 * 136
	b := (*[bs]byte)(g[16+ib*bs:])
	for k := 0; k < 4; k++ {
		d := ikGroupScale(g, k)
		for j := 0; j < 8; j++ {
			sc := b[4*j+k]
			dl := d * float32(int32(sc&254)-127)
			v := (*[16]float32)(ikIQ4Values[16*int(sc&1):])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for s := 0; s < 4; s++ {
				q := (*[4]byte)(b[32+64*j+16*s+4*k:])
				lo, hi := (*[4]float32)(yk[r4Lo[s]:]), (*[4]float32)(yk[r4Hi[s]:])
				for i, c := range q {
					lo[i] = dl * v[c&0xf]
					hi[i] = dl * v[c>>4]
				}
			}
		}
	}
}

// IQ5_KS_R4: float32 d[4]; blocks {u8 scales[32]; u8 qs[512]; u8
// qh[128]}: IQ4_KS_R4's with a fifth bit, bit 2s (low nibble) or 2s+1
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
			qh := (*[4]byte)(b[544+16*j+4*k:])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for s := 0; s < 4; s++ {
				q := (*[4]byte)(b[32+64*j+16*s+4*k:])
				lo, hi := (*[4]float32)(yk[r4Lo[s]:]), (*[4]float32)(yk[r4Hi[s]:])
				for i, c := range q {
					h := qh[i] >> (2 * s)
					lo[i] = dl * v[c&0xf|h<<4&0x10]
					hi[i] = dl * v[c>>4|h<<3&0x10]
				}
			}
		}
	}
}

// IQ5_K_R4: {f16 d[4]; u8 extra[8]; u8 scales_h[16]; u8 scales_l[32]; u8
// qs[512]; u8 qh[128]}: IQ4_K_R4's layout (6-bit scales − 32 at 8j+k and
// 8j+k+4, codebook halves by bit j of extra[k] and extra[k+4]) with
// IQ5_KS_R4's fifth bit, into IQ5_K's codebook.
func dequantIQ5KR4Block(y [][]float32, b []byte, ib int) {
	extra, sh, sl := b[8:16], b[16:32], b[32:64]
	qs, qhAll := b[64:576], b[576:704]
	scale := func(is int) float32 {
		return float32(int32(sl[is%32]>>(4*(is/32))&0xf|(sh[is%16]>>(2*(is/16))&3)<<4) - 32)
	}
	for k := 0; k < 4; k++ {
		d := quantHalfAt(b[2*k:])
		for j := 0; j < 8; j++ {
			dl := [2]float32{d * scale(8*j+k), d * scale(8*j+k+4)}
			var v [2]*[32]float32
			for h := 0; h < 2; h++ {
				v[h] = (*[32]float32)(ikIQ5Values[32*int(extra[k+4*h]>>j&1):])
			}
			qh := (*[4]byte)(qhAll[16*j+4*k:])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for s := 0; s < 4; s++ {
				h := s & 1
				q := (*[4]byte)(qs[64*j+16*s+4*k:])
				lo, hi := (*[4]float32)(yk[r4Lo[s]:]), (*[4]float32)(yk[r4Hi[s]:])
				for i, c := range q {
					hb := qh[i] >> (2 * s)
					lo[i] = dl[h] * v[h][c&0xf|hb<<4&0x10]
					hi[i] = dl[h] * v[h][c>>4|hb<<3&0x10]
				}
			}
		}
	}
}

// Q5_K_R4: {f16 d[4], dmin[4]; u8 scales_h[16]; u8 scales_l[32]; u8
// qh[128]; u8 qs[512]}: Q4_K_R4's scales and mins with a fifth bit: chunk
// s's low nibbles take bit b0[s] of qh[16j+4k+i], its high ones b0[s]+1;
// y = dl·q − ml unfused.
func dequantQ5KR4Block(y [][]float32, b []byte, ib int) {
	sh, sl, qhAll, qs := b[16:32], b[32:64], b[64:192], b[192:704]
	b0 := [4]uint{0, 4, 2, 6}
	for k := 0; k < 4; k++ {
		d, m := quantHalfAt(b[2*k:]), quantHalfAt(b[8+2*k:])
		for j := 0; j < 8; j++ {
			is := 4*j + k
			h := sh[is%16] >> (4 * (is / 16))
			dl := d * float32(sl[is]&0xf|(h&3)<<4)
			ml := m * float32(sl[is]>>4|(h&0xc)<<2)
			qh := (*[4]byte)(qhAll[16*j+4*k:])
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for s := 0; s < 4; s++ {
				q := (*[4]byte)(qs[64*j+16*s+4*k:])
				lo, hi := (*[4]float32)(yk[r4Lo[s]:]), (*[4]float32)(yk[r4Hi[s]:])
				for i, c := range q {
					hb := qh[i] >> b0[s]
					lo[i] = float32(dl*float32(c&0xf|hb<<4&0x10)) - ml
					hi[i] = float32(dl*float32(c>>4|hb<<3&0x10)) - ml
				}
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
	sh, sl, qhAll, qs := b[8:24], b[24:56], b[56:184], b[184:440]
	scale := func(is int) float32 {
		return float32(int32(sl[is%32]>>(4*(is/32))&0xf|(sh[is%16]>>(2*(is/16))&3)<<4) - 32)
	}
	for k := 0; k < 4; k++ {
		d := quantHalfAt(b[2*k:])
		for j := 0; j < 8; j++ {
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			qh := (*[4]byte)(qhAll[16*j+4*k:])
			for h := 0; h < 2; h++ {
				dl := d * scale(8*j+k+4*h)
				q := (*[4]byte)(qs[32*j+16*h+4*k:])
				yh := (*[16]float32)(yk[16*h:])
				for i, c := range q {
					hb := qh[i] >> (4 * h)
					yh[i] = dl * float32(int32(c&3|hb<<2&4)-4)
					yh[4+i] = dl * float32(int32(c>>2&3|hb<<1&4)-4)
					yh[8+i] = dl * float32(int32(c>>4&3|hb&4)-4)
					yh[12+i] = dl * float32(int32(c>>6|hb>>1&4)-4)
				}
			}
		}
	}
}

// Q2_K_R4: {f16 d[4], dmin[4]; u8 scales[64]; u8 qs[256]}: sub-block j of
// row k has 4-bit scale and min in scales[8j+k] (its first 16) and
// scales[8j+k+4]; element 4m+i is the 2 bits at 2·(m%4) of
// qs[32j+4k+i+16·(m/4)], y = dl·q − ml unfused.
func dequantQ2KR4Block(y [][]float32, b []byte, ib int) {
	scales, qs := b[16:80], b[80:336]
	for k := 0; k < 4; k++ {
		d, m := quantHalfAt(b[2*k:]), quantHalfAt(b[8+2*k:])
		for j := 0; j < 8; j++ {
			yk := (*[32]float32)(y[k][256*ib+32*j:])
			for h := 0; h < 2; h++ {
				sc := scales[8*j+k+4*h]
				dl, ml := d*float32(sc&0xf), m*float32(sc>>4)
				q := (*[4]byte)(qs[32*j+16*h+4*k:])
				yh := (*[16]float32)(yk[16*h:])
				for i, c := range q {
					yh[i] = float32(dl*float32(c&3)) - ml
					yh[4+i] = float32(dl*float32(c>>2&3)) - ml
					yh[8+i] = float32(dl*float32(c>>4&3)) - ml
					yh[12+i] = float32(dl*float32(c>>6)) - ml
				}
			}
		}
	}
}

// IQ4_NL_R4: {f16 d[4]; u8 qs[64]}: row k's codes at qs[16s+4k+i], the
// nibbles into IQ4_NL's codebook, d·value.
func dequantIQ4NLR4Block(y [][]float32, b []byte, ib int) {
	v := (*[16]float32)(ikIQ4Values[:16])
	for k := 0; k < 4; k++ {
		d := quantHalfAt(b[2*k:])
		yk := (*[32]float32)(y[k][32*ib:])
		for s := 0; s < 4; s++ {
			q := (*[4]byte)(b[8+16*s+4*k:])
			lo, hi := (*[4]float32)(yk[r4Lo[s]:]), (*[4]float32)(yk[r4Hi[s]:])
			for i, c := range q {
				lo[i] = d * v[c&0xf]
				hi[i] = d * v[c>>4]
			}
		}
	}
}

// Q5_0_R4: {f16 d[4]; u8 qh[16]; u8 qs[64]}: IQ4_NL_R4's nibbles with a
// fifth bit, bit s (low nibble) or s+4 (high) of qh[4k+i]; y = d·q − 16d
// unfused.
func dequantQ5_0R4Block(y [][]float32, b []byte, ib int) {
	for k := 0; k < 4; k++ {
		d := quantHalfAt(b[2*k:])
		m := -16 * d
		qh := (*[4]byte)(b[8+4*k:])
		yk := (*[32]float32)(y[k][32*ib:])
		for s := 0; s < 4; s++ {
			q := (*[4]byte)(b[24+16*s+4*k:])
			lo, hi := (*[4]float32)(yk[r4Lo[s]:]), (*[4]float32)(yk[r4Hi[s]:])
			for i, c := range q {
				h := qh[i] >> s
				lo[i] = float32(d*float32(c&0xf|h<<4&0x10)) + m
				hi[i] = float32(d*float32(c>>4|h&0x10)) + m
			}
		}
	}
}

// Q6_0_R4: {f16 d[4]; u8 qh[32]; u8 qs[64]}: IQ4_NL_R4's nibbles with two
// more bits from qh[16·(s%2)+4k+i], at 2·(s/2) (low nibble) or 2·(s/2)+4
// (high); y = d·q − 32d unfused.
func dequantQ6_0R4Block(y [][]float32, b []byte, ib int) {
	for k := 0; k < 4; k++ {
		d := quantHalfAt(b[2*k:])
		m := -32 * d
		yk := (*[32]float32)(y[k][32*ib:])
		for s := 0; s < 4; s++ {
			q := (*[4]byte)(b[40+16*s+4*k:])
			qh := (*[4]byte)(b[8+16*(s%2)+4*k:])
			lo, hi := (*[4]float32)(yk[r4Lo[s]:]), (*[4]float32)(yk[r4Hi[s]:])
			for i, c := range q {
				h := qh[i] >> (2 * (s / 2))
				lo[i] = float32(d*float32(c&0xf|h<<4&0x30)) + m
				hi[i] = float32(d*float32(c>>4|h&0x30)) + m
			}
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
