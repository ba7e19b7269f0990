package dtype

import "math"

// ik_llama.cpp's row-interleaved types Q4_0_R8, Q8_0_R8, IQ4_XS_R8,
// Q4_K_R4, Q6_K_R4, IQ2_K_R4, IQ3_K_R4 and IQ4_K_R4 (ggml type codes 202,
// 208, 223, 212, 214, 337, 338, 339 in ik_llama.cpp's ggml.h): the layout ik_llama.cpp repacks its tensors to
// at load time (-rtr) or with llama-quantize --repack. A group of 8 (or 4)
// consecutive rows is stored as one run of blocks, block b of the run
// holding block b of each row, interleaved 4 bytes at a time; the byte
// size is the base type's. Each value is the float32 ik_llama.cpp's
// dequantize_row_*_r8/_r4 (iqk/iqk_quantize.cpp) gives, with its products
// unfused.
//
// A group's values land in G rows of the output, so a block does not map
// to consecutive elements: these dequantizers take a run of a group's
// interleaved blocks and are not in quantDequantizer. Each row of ikGroups
// is a DType of its own (firstGroup on, RowGroup G; dtype.go's withGroups),
// converted by GroupConverterFor (convert_group.go) into the G rows of
// the output; a view converts whole groups of a tensor (view's
// groupConverted). A row added to ikGroups is served with nothing else
// to change. The dequantizers are checked bit for bit against ik_llama.cpp
// (testdata/ikllama2/seed45r, TestQuantIKRepacked, TestGroupConverter).

// ikGroup is one row-interleaved type: rows per group, elements and bytes
// per interleaved block (all G rows), the block dequantizer and the bytes
// of the group's head.
type ikGroup struct {
	name       string
	code       uint32
	rows       int
	blockElems int // per row
	blockBytes int // the G rows' block
	deq        func(y [][]float32, b []byte, ib int)
	// meta is the bytes at the head of each group, before its blocks: the
	// G rows' row_meta_size in ik_llama.cpp's ggml.c (IQ4_KS_R4, IQ5_KS_R4,
	// IQ2_BN_R4: 4 bytes a row, so a float32 scale for each of the 4 rows,
	// row k's at 4k; IQ1_S_R4, IQ1_M_R4: 2, an fp16 each, row k's at 2k);
	// 0 for the types without. A group of rows of n
	// elements is meta + n/blockElems·blockBytes bytes (each of its rows
	// meta/G + n/blockElems·blockBytes/G, ggml_row_size). Where meta is
	// not 0, deq's b is the whole group (its head, then its blocks) and it
	// converts block ib; otherwise b is block ib alone.
	meta int
	// run, where set, converts nb blocks at once (b holds them, meta 0),
	// as deq would one at a time: for a type whose blocks are too small
	// for a call each (BF16_R16's 2 columns).
	run func(y [][]float32, b []byte, nb int)
}

var ikGroups = [...]ikGroup{
	{"Q4_0_R8", 202, 8, 32, 8 * 18, dequantQ4_0R8Block, 0, nil},
	{"Q8_0_R8", 208, 8, 32, 8 * 34, dequantQ8_0R8Block, 0, nil},
	{"IQ4_XS_R8", 223, 8, 256, 8 * 136, dequantIQ4XSR8Block, 0, nil},
	{"Q4_K_R4", 212, 4, 256, 4 * 144, dequantQ4KR4Block, 0, nil},
	{"Q6_K_R4", 214, 4, 256, 4 * 210, dequantQ6KR4Block, 0, nil},
	{"IQ4_K_R4", 339, 4, 256, 4 * 144, dequantIQ4KR4Block, 0, nil},
	{"IQ2_K_R4", 337, 4, 256, 4 * 76, dequantIQ2KR4Block, 0, nil},
	{"IQ3_K_R4", 338, 4, 256, 4 * 110, dequantIQ3KR4Block, 0, nil},
	// quant_ikrepacked2.go
	{"IQ4_KS_R4", 344, 4, 256, 4 * 136, dequantIQ4KSR4Block, 16, nil},
	{"IQ5_KS_R4", 352, 4, 256, 4 * 168, dequantIQ5KSR4Block, 16, nil},
	{"IQ5_K_R4", 340, 4, 256, 4 * 176, dequantIQ5KR4Block, 0, nil},
	{"Q5_K_R4", 213, 4, 256, 4 * 176, dequantQ5KR4Block, 0, nil},
	{"Q3_K_R4", 211, 4, 256, 4 * 110, dequantQ3KR4Block, 0, nil},
	{"Q2_K_R4", 210, 4, 256, 4 * 84, dequantQ2KR4Block, 0, nil},
	{"IQ4_NL_R4", 220, 4, 32, 4 * 18, dequantIQ4NLR4Block, 0, nil},
	{"Q5_0_R4", 206, 4, 32, 4 * 22, dequantQ5_0R4Block, 0, nil},
	{"Q6_0_R4", 233, 4, 32, 4 * 26, dequantQ6_0R4Block, 0, nil},
	{"IQ2_BN_R4", 335, 4, 64, 4 * 16, dequantIQ2BNR4Block, 16, nil},
	{"IQ1_S_R4", 219, 4, 32, 4 * 6, dequantIQ1SR4Block, 8, nil},
	{"IQ1_M_R4", 229, 4, 32, 4 * 7, dequantIQ1MR4Block, 8, nil},
	{"IQ2_XXS_R4", 216, 4, 256, 4 * 66, dequantIQ2XXSR4Block, 0, nil},
	{"IQ3_XXS_R4", 218, 4, 256, 4 * 98, dequantIQ3XXSR4Block, 0, nil},
	{"IQ2_XS_R4", 217, 4, 256, 4 * 74, dequantIQ2XSR4Block, 0, nil},
	{"IQ2_S_R4", 222, 4, 256, 4 * 82, dequantIQ2SR4Block, 0, nil},
	{"IQ3_S_R4", 221, 4, 256, 4 * 110, dequantIQ3SR4Block, 0, nil},
	// quant_ikrepacked3.go
	{"Q8_K_R8", 399, 8, 256, 8 * 258, dequantQ8KR8Block, 0, nil},
	{"Q8_KV_R8", 398, 8, 32, 8 * 32, dequantQ8KVR8Block, 32, nil},
	{"MXFP4_R8", 353, 8, 32, 8 * 17, dequantMXFP4R8Block, 0, nil},
	{"BF16_R16", 230, 16, 2, 16 * 4, dequantBF16R16Block, 0, dequantBF16R16Run},
}

// ikGroupDequantizer returns, for a row-interleaved type, its rows per
// group and the function that converts one group (src: the G rows' bytes,
// the group's head of ikGroup.meta bytes first) of rows of n elements into
// G·n float32s, row-major, at the start of dst.
func ikGroupDequantizer(code uint32) (int, func(dst []float32, src []byte, n int), bool) {
	for _, g := range ikGroups {
		if g.code != code {
			continue
		}
		return g.rows, func(dst []float32, src []byte, n int) {
			y := make([][]float32, g.rows)
			for k := range y {
				y[k] = dst[k*n : (k+1)*n]
			}
			nb := n / g.blockElems
			if g.run != nil && g.meta == 0 {
				g.run(y, src[:nb*g.blockBytes], nb)
				return
			}
			for ib := 0; ib < nb; ib++ {
				if g.meta != 0 {
					g.deq(y, src[:g.meta+nb*g.blockBytes], ib)
				} else {
					g.deq(y, src[ib*g.blockBytes:(ib+1)*g.blockBytes], ib)
				}
			}
		}, true
	}
	return 0, nil, false
}

// Q4_0_R8: {f16 d[8]; u8 qs[128]}, row k's byte i of 4-byte chunk l at
// qs[32l+4k+i]: elements 4l+i (low nibble) and 4l+i+16 (high), (q−8)·d.
func dequantQ4_0R8Block(y [][]float32, b []byte, ib int) {
	b = b[:144]
	qs := (*[128]byte)(b[16:])
	for k := 0; k < 8; k++ {
		d := quantHalfAt(b[2*k:])
		yk := (*[32]float32)(y[k][32*ib:])
		var t [16]float32 // the 16 products, the same as per element
		for x := range t {
			t[x] = d * float32(int32(x)-8)
		}
		for l := 0; l < 4; l++ {
			q := (*[4]byte)(qs[32*l+4*k:])
			yl, yh := (*[4]float32)(yk[4*l:]), (*[4]float32)(yk[4*l+16:])
			for i, x := range q {
				yl[i], yh[i] = t[x&0xf], t[x>>4]
			}
		}
	}
}

// Q8_0_R8: {f16 d[8]; i8 qs[256]}, row k's elements 4l+i at
// qs[32l+4k+i] and 4l+i+16 at qs[128+32l+4k+i], q·d.
func dequantQ8_0R8Block(y [][]float32, b []byte, ib int) {
	b = b[:272]
	qs := (*[256]byte)(b[16:])
	for k := 0; k < 8; k++ {
		d := quantHalfAt(b[2*k:])
		yk := (*[32]float32)(y[k][32*ib:])
		for l := 0; l < 4; l++ {
			ql, qh := (*[4]byte)(qs[32*l+4*k:]), (*[4]byte)(qs[128+32*l+4*k:])
			yl, yh := (*[4]float32)(yk[4*l:]), (*[4]float32)(yk[4*l+16:])
			for i := range ql {
				yl[i] = d * float32(int8(ql[i]))
				yh[i] = d * float32(int8(qh[i]))
			}
		}
	}
}

// IQ4_XS_R8: {f16 d[8]; u8 scales_h[16]; u8 scales_l[32]; u8 qs[1024]}:
// sub-block j of row k has the 6-bit scale is=8j+k (low 4 bits in
// scales_l[is%32] at nibble is/32, high 2 in scales_h[is%16] at bits
// 2·(is/16)), and its codes at qs[128j+32l+4k+i] (elements 8l+i low, 8l+i+4
// high) into the IQ4_NL codebook.
func dequantIQ4XSR8Block(y [][]float32, b []byte, ib int) {
	b = b[:1088]
	sh, sl, qs := (*[16]byte)(b[16:]), (*[32]byte)(b[32:]), (*[1024]byte)(b[64:])
	v := (*[16]float32)(ikIQ4Values[:16]) // the IQ4_NL codebook, as float32
	for k := 0; k < 8; k++ {
		d := quantHalfAt(b[2*k:])
		yr := (*[256]float32)(y[k][256*ib:])
		for j := 0; j < 8; j++ {
			is := 8*j + k
			ls := int32(sl[is%32]>>(4*(is/32))&0xf | (sh[is%16]>>(2*(is/16))&3)<<4)
			dl := d * float32(ls-32)
			q := (*[100]byte)(qs[128*j+4*k:])
			yk := (*[32]float32)(yr[32*j:])
			for l := 0; l < 4; l++ {
				ql := (*[4]byte)(q[32*l:])
				yl := (*[8]float32)(yk[8*l:])
				for i := 0; i < 4; i++ {
					yl[i], yl[i+4] = dl*v[ql[i]&0xf], dl*v[ql[i]>>4]
				}
			}
		}
	}
}

// Q4_K_R4: {f16 d[4], dmin[4]; u8 scales_h[16]; u8 scales_l[32]; u8
// qs[512]}: sub-block j of row k has scale and min index is=4j+k (low 4
// bits in scales_l[is], 2 high bits each in scales_h[is%16] at 4·(is/16)),
// its codes at qs[64j+4k+i+16m] (m = 0..3), y = dl·q − ml unfused.
func dequantQ4KR4Block(y [][]float32, b []byte, ib int) {
	b = b[:576]
	sh, sl, qs := (*[16]byte)(b[16:]), (*[32]byte)(b[32:]), (*[512]byte)(b[64:])
	for k := 0; k < 4; k++ {
		d, m := quantHalfAt(b[2*k:]), quantHalfAt(b[8+2*k:])
		yr := (*[256]float32)(y[k][256*ib:])
		for j := 0; j < 8; j++ {
			is := 4*j + k
			h := sh[is%16] >> (4 * (is / 16))
			dl := d * float32(sl[is]&0xf|(h&3)<<4)
			ml := m * float32(sl[is]>>4|(h&0xc)<<2)
			// qs +0, +16, +32, +48: elements i and 8+i, 16+i and
			// 24+i, 4+i and 12+i, 20+i and 28+i
			q := (*[52]byte)(qs[64*j+4*k:])
			yk := (*[32]float32)(yr[32*j:])
			for i := 0; i < 4; i++ {
				a, c, e, f := q[i], q[16+i], q[32+i], q[48+i]
				yk[i], yk[8+i] = float32(dl*float32(a&0xf))-ml, float32(dl*float32(a>>4))-ml
				yk[16+i], yk[24+i] = float32(dl*float32(c&0xf))-ml, float32(dl*float32(c>>4))-ml
				yk[4+i], yk[12+i] = float32(dl*float32(e&0xf))-ml, float32(dl*float32(e>>4))-ml
				yk[20+i], yk[28+i] = float32(dl*float32(f&0xf))-ml, float32(dl*float32(f>>4))-ml
			}
		}
	}
}

// Q6_K_R4: {f16 d[4]; i8 scales[64]; u8 qh[256]; u8 ql[512]}: sub-block j
// of row k has scales[8j+k] (its first 16) and scales[8j+k+4], ql from
// 64j+4k, qh from 32j+4k; y = dl·(q − 32).
func dequantQ6KR4Block(y [][]float32, b []byte, ib int) {
	scales, qhAll, qlAll := b[8:72], b[72:328], b[328:840]
	for k := 0; k < 4; k++ {
		d := quantHalfAt(b[2*k:])
		for j := 0; j < 8; j++ {
			dl1 := d * float32(int8(scales[8*j+k]))
			dl2 := d * float32(int8(scales[8*j+k+4]))
			ql, qh := qlAll[64*j+4*k:], qhAll[32*j+4*k:]
			yk := y[k][256*ib+32*j : 256*ib+32*j+32]
			for i := 0; i < 4; i++ {
				h0, h1 := qh[i], qh[i+16]
				yk[i] = dl1 * float32(int32(ql[i]&0xf|h0<<4&0x30)-32)
				yk[i+8] = dl1 * float32(int32(ql[i]>>4|h0<<2&0x30)-32)
				yk[i+16] = dl2 * float32(int32(ql[i+16]&0xf|h1<<4&0x30)-32)
				yk[i+24] = dl2 * float32(int32(ql[i+16]>>4|h1<<2&0x30)-32)
				yk[i+4] = dl1 * float32(int32(ql[i+32]&0xf|h0&0x30)-32)
				yk[i+12] = dl1 * float32(int32(ql[i+32]>>4|h0>>2&0x30)-32)
				yk[i+20] = dl2 * float32(int32(ql[i+48]&0xf|h1&0x30)-32)
				yk[i+28] = dl2 * float32(int32(ql[i+48]>>4|h1>>2&0x30)-32)
			}
		}
	}
}

// IQ4_K_R4: {f16 d[4]; u8 extra[8]; u8 scales_h[16]; u8 scales_l[32]; u8
// qs[512]}: sub-block j of row k has two halves of 16 (elements 0-3, 8-11,
// 4-7, 12-15 and their +16), scale indices is=8j+k and is+4 (6-bit, − 32,
// packed as IQ4_XS_R8's), codebooks chosen by bit j of extra[k] and
// extra[k+4], codes at qs[64j+4k+i+16m] as Q4_K_R4's.
func dequantIQ4KR4Block(y [][]float32, b []byte, ib int) {
	blk := (*[576]byte)(b)
	extra, sh, sl := blk[8:16], blk[16:32], blk[32:64]
	scale := func(is int) float32 { return r4Scale6(sl, sh, is) }
	for k := 0; k < 4; k++ {
		d := quantHalfAt(blk[2*k:])
		for j := 0; j < 8; j++ {
			d1, d2 := d*scale(8*j+k), d*scale(8*j+k+4)
			// ik_llama.cpp's iq4k_values, halves by extra
			v1 := (*[16]float32)(ikIQ4Values[16*int(extra[k]>>j&1):])
			v2 := (*[16]float32)(ikIQ4Values[16*int(extra[k+4]>>j&1):])
			// chunks +0, +32 the first half's scale; +16, +48 the second's
			r4Nibbles4((*[32]float32)(y[k][256*ib+32*j:]), (*[52]byte)(blk[64+64*j+4*k:]), d1, d2, v1, v2)
		}
	}
}

// IQ2_K_R4: {f16 d[4]; u8 extra[8]; u8 scales[32]; u8 qs[256]}: sub-block
// j of row k has 4-bit scales (− 8) at indices 8j+k and 8j+k+4 (nibble
// is/32 of scales[is%32]), codebook halves by bit j of extra[k] and
// extra[k+4], and element 4m+i the 2 bits at 2·(m%4) of
// qs[32j+4k+i+16·(m/4)].
func dequantIQ2KR4Block(y [][]float32, b []byte, ib int) {
	extra, scales, qs := b[8:16], b[16:48], b[48:304]
	for k := 0; k < 4; k++ {
		d := quantHalfAt(b[2*k:])
		for j := 0; j < 8; j++ {
			yk := y[k][256*ib+32*j : 256*ib+32*j+32]
			for h := 0; h < 2; h++ { // the sub-block's halves of 16
				is := 8*j + k + 4*h
				dl := d * float32(int32(scales[is%32]>>(4*(is/32))&0xf)-8)
				v := (*[4]float32)(ikIQ2Values[4*int(extra[k+4*h]>>j&1):])
				yh := (*[16]float32)(yk[16*h:])
				for i := 0; i < 4; i++ {
					q := qs[32*j+4*k+i+16*h]
					yh[i] = dl * v[q&3]
					yh[4+i] = dl * v[q>>2&3]
					yh[8+i] = dl * v[q>>4&3]
					yh[12+i] = dl * v[q>>6]
				}
			}
		}
	}
}

// IQ3_K_R4: {f16 d[4]; u8 extra[8]; u8 scales_h[8]; u8 scales_l[32]; u8
// qs[256]; u8 qh[128]}: IQ2_K_R4's layout with scales 2s+1 (s from
// scales_l as IQ2_K_R4's), negated where bit is/8 of scales_h[is%8] is
// set (C's product by −1), and a third code bit, bit m of
// qh[16j+4k+i] for element 4m+i.
func dequantIQ3KR4Block(y [][]float32, b []byte, ib int) {
	b = b[:440]
	extra, sh, sl := (*[8]byte)(b[8:]), (*[8]byte)(b[16:]), (*[32]byte)(b[24:])
	qs, qh := (*[256]byte)(b[56:]), (*[128]byte)(b[312:])
	var t [2][8]float32 // each half's 8 products, the same as per element
	for k := 0; k < 4; k++ {
		d := quantHalfAt(b[2*k:])
		yr := (*[256]float32)(y[k][256*ib:])
		for j := 0; j < 8; j++ {
			for h := range t {
				is := 8*j + k + 4*h
				// C's product by −1 is a negation (as Go compiles
				// dl *= -1): the sign bit flipped, without a branch
				dl := d * float32(2*int32(sl[is%32]>>(4*(is/32))&0xf)+1)
				dl = math.Float32frombits(math.Float32bits(dl) ^ uint32(sh[is%8]>>(is/8)&1)<<31)
				v := (*[8]float32)(ikIQ3Values[8*int(extra[k+4*h]>>j&1):])
				th := &t[h]
				th[0], th[1], th[2], th[3] = dl*v[0], dl*v[1], dl*v[2], dl*v[3]
				th[4], th[5], th[6], th[7] = dl*v[4], dl*v[5], dl*v[6], dl*v[7]
			}
			q0, q1 := (*[4]byte)(qs[32*j+4*k:]), (*[4]byte)(qs[32*j+4*k+16:])
			h4 := (*[4]byte)(qh[16*j+4*k:])
			y0, y1 := (*[16]float32)(yr[32*j:]), (*[16]float32)(yr[32*j+16:])
			t0, t1 := &t[0], &t[1]
			for i := 0; i < 4; i++ {
				q, r, hb := q0[i], q1[i], h4[i]
				y0[i] = t0[(q&3|hb<<2)&7]
				y0[4+i] = t0[(q>>2&3|hb<<1&4)&7]
				y0[8+i] = t0[(q>>4&3|hb&4)&7]
				y0[12+i] = t0[(q>>6|hb>>1&4)&7]
				hb >>= 4
				y1[i] = t1[(r&3|hb<<2)&7]
				y1[4+i] = t1[(r>>2&3|hb<<1&4)&7]
				y1[8+i] = t1[(r>>4&3|hb&4)&7]
				y1[12+i] = t1[(r>>6|hb>>1&4)&7]
			}
		}
	}
}

// r4Scale6 is scale is of IQ4_K_R4, IQ5_K_R4 and Q3_K_R4 (6 bits, less
// 32): its low 4 bits in sl[is%32] at nibble is/32, its high 2 in
// sh[is%16] at bits 2·(is/16).
func r4Scale6(sl, sh []byte, is int) float32 {
	return float32(int32(sl[is%32]>>(4*(is/32))&0xf|(sh[is%16]>>(2*(is/16))&3)<<4) - 32)
}
