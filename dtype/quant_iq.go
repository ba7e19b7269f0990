package dtype

// The IQ types: ggml's codebook ("importance") quantizations. Each group of
// 8 (or 4) elements is an index into a grid of magnitudes (quant_iqgrid_iq{1,2,3}.go,
// generated from ggml-common.h) and, for IQ2 and IQ3, 7 sign bits whose
// parity gives the 8th (ksignsIQ2XS). Every function below gives the float32
// bits of ggml's dequantize_row_*: the same operations on float32 in the
// same order, each product rounded on its own.

import "encoding/binary"

// quantSign multiplies by +1 or -1 (a load, not a constant, so that the
// compiler keeps the multiplication C does: a NaN keeps its sign).
var quantSign = [2]float32{1, -1}

// quantSigned8 writes y[j] = db * float32(grid byte j) * (±1 from bit j of
// signs), for the 8 bytes of g.
func quantSigned8(y *[8]float32, db float32, g uint64, signs uint8) {
	for j := 0; j < 8; j++ {
		y[j] = float32(db*float32(uint8(g>>(8*j)))) * quantSign[signs>>j&1]
	}
}

// quantSigned4x2 writes the two 4-element halves of a group of 8 from two
// 4-byte grid entries, signs as in quantSigned8.
func quantSigned4x2(y *[8]float32, db float32, g1, g2 uint32, signs uint8) {
	for j := 0; j < 4; j++ {
		y[j] = float32(db*float32(uint8(g1>>(8*j)))) * quantSign[signs>>j&1]
		y[j+4] = float32(db*float32(uint8(g2>>(8*j)))) * quantSign[signs>>(j+4)&1]
	}
}

// IQ2_XXS: {f16 d; u16 qs[32]}: per 32 elements two u32: four 8-bit grid
// indices, then four 7-bit sign groups and a 4-bit scale in the top bits.
func dequantIQ2XXS(dst []float32, src []byte) {
	if useAccel {
		dequantIQ2XXSAccel(dst, src)
		return
	}
	const bs, be = 66, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			a0 := binary.LittleEndian.Uint32(b[2+8*ib:])
			a1 := binary.LittleEndian.Uint32(b[6+8*ib:])
			db := float32(d*(0.5+float32(a1>>28))) * 0.25
			for l := 0; l < 4; l++ {
				g := iq2xxsGrid[uint8(a0>>(8*l))]
				quantSigned8((*[8]float32)(y[32*ib+8*l:]), db, g, ksignsIQ2XS[a1>>(7*l)&127])
			}
		}
	}
}

// IQ2_XS: {f16 d; u16 qs[32]; u8 scales[8]}: each u16 a 9-bit grid index
// and a 7-bit sign group; two 4-bit scales per 32 elements.
func dequantIQ2XS(dst []float32, src []byte) {
	if useAccel {
		dequantIQ2XSAccel(dst, src)
		return
	}
	const bs, be = 74, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			sc := b[66+ib]
			db := [2]float32{
				float32(d*(0.5+float32(sc&0xf))) * 0.25,
				float32(d*(0.5+float32(sc>>4))) * 0.25,
			}
			for l := 0; l < 4; l++ {
				q := binary.LittleEndian.Uint16(b[2+2*(4*ib+l):])
				quantSigned8((*[8]float32)(y[32*ib+8*l:]), db[l/2], iq2xsGrid[q&511], ksignsIQ2XS[q>>9])
			}
		}
	}
}

// IQ2_S: {f16 d; u8 qs[32]; u8 signs[32]; u8 qh[8]; u8 scales[8]}: 10-bit
// grid indices (8 low bits in qs, 2 high in qh), 8 explicit sign bits per
// group.
func dequantIQ2S(dst []float32, src []byte) {
	if useAccel {
		dequantIQ2SAccel(dst, src)
		return
	}
	const bs, be = 82, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			sc := b[74+ib]
			db := [2]float32{
				float32(d*(0.5+float32(sc&0xf))) * 0.25,
				float32(d*(0.5+float32(sc>>4))) * 0.25,
			}
			qh := uint32(b[66+ib])
			for l := 0; l < 4; l++ {
				idx := uint32(b[2+4*ib+l]) | qh<<(8-2*l)&0x300
				quantSigned8((*[8]float32)(y[32*ib+8*l:]), db[l/2], iq2sGrid[idx], b[34+4*ib+l])
			}
		}
	}
}

// IQ3_XXS: {f16 d; u8 qs[64]; u32 scales_and_signs[8]}: two 8-bit indices
// into a grid of 4 per group of 8, four 7-bit sign groups and a 4-bit scale
// per 32 elements.
func dequantIQ3XXS(dst []float32, src []byte) {
	if useAccel {
		dequantIQ3XXSAccel(dst, src)
		return
	}
	const bs, be = 98, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			aux := binary.LittleEndian.Uint32(b[66+4*ib:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.5
			for l := 0; l < 4; l++ {
				g1 := iq3xxsGrid[b[2+8*ib+2*l]]
				g2 := iq3xxsGrid[b[2+8*ib+2*l+1]]
				quantSigned4x2((*[8]float32)(y[32*ib+8*l:]), db, g1, g2, ksignsIQ2XS[aux>>(7*l)&127])
			}
		}
	}
}

// IQ3_S: {f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]}: 9-bit
// indices into a grid of 4, explicit signs, odd scales 1..31.
func dequantIQ3S(dst []float32, src []byte) {
	if useAccel {
		dequantIQ3SAccel(dst, src)
		return
	}
	const bs, be = 110, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ { // 32 elements each; the scale byte holds two
			sc := b[106+ib/2] >> (4 * (ib & 1)) & 0xf
			db := d * float32(1+2*int32(sc))
			qh := uint32(b[66+ib])
			for l := 0; l < 4; l++ {
				g1 := iq3sGrid[uint32(b[2+8*ib+2*l])|qh<<(8-2*l)&256]
				g2 := iq3sGrid[uint32(b[2+8*ib+2*l+1])|qh<<(7-2*l)&256]
				quantSigned4x2((*[8]float32)(y[32*ib+8*l:]), db, g1, g2, b[74+4*ib+l])
			}
		}
	}
}

// iq1Delta is ggml's IQ1S_DELTA (and IQ1M_DELTA): the grid's offset.
const iq1Delta = 0.125

// quantIQ1Group writes y[j] = dl * (grid byte j + delta) for the 8 signed
// bytes of g.
func quantIQ1Group(y *[8]float32, dl float32, g uint64, delta float32) {
	for j := 0; j < 8; j++ {
		y[j] = dl * (float32(int8(uint8(g>>(8*j)))) + delta)
	}
}

// IQ1_S: {f16 d; u8 qs[32]; u16 qh[8]}: 11-bit indices into a grid of
// -1/0/+1 (8 low bits in qs, 3 in qh), a 3-bit scale and the delta's sign
// per 32 elements.
func dequantIQ1S(dst []float32, src []byte) {
	const bs, be = 50, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			qh := uint32(binary.LittleEndian.Uint16(b[34+2*ib:]))
			dl := d * float32(2*(qh>>12&7)+1)
			delta := float32(iq1Delta)
			if qh&0x8000 != 0 {
				delta = -iq1Delta
			}
			for l := 0; l < 4; l++ {
				idx := uint32(b[2+4*ib+l]) | (qh>>(3*l)&7)<<8
				quantIQ1Group((*[8]float32)(y[32*ib+8*l:]), dl, iq1sGrid[idx], delta)
			}
		}
	}
}

// IQ1_M: {u8 qs[32]; u8 qh[16]; u8 scales[8]}: the IQ1_S grid, a delta sign
// per 8 elements, 3-bit scales per 16; the fp16 block scale is spread over
// the top 4 bits of the four u16 scale words.
func dequantIQ1M(dst []float32, src []byte) {
	const bs, be = 56, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		var sc [4]uint16
		for k := range sc {
			sc[k] = binary.LittleEndian.Uint16(b[48+2*k:])
		}
		d := quantHalf(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000)
		for ib := 0; ib < 8; ib++ {
			s := uint32(sc[ib/2]) >> (6 * (ib % 2))
			dl1 := d * float32(2*(s&7)+1)
			dl2 := d * float32(2*(s>>3&7)+1)
			qh0, qh1 := uint32(b[32+2*ib]), uint32(b[33+2*ib])
			q := b[4*ib:]
			idx := [4]uint32{
				uint32(q[0]) | qh0<<8&0x700,
				uint32(q[1]) | qh0<<4&0x700,
				uint32(q[2]) | qh1<<8&0x700,
				uint32(q[3]) | qh1<<4&0x700,
			}
			var delta [4]float32
			for l, h := range [4]uint32{qh0 & 0x08, qh0 & 0x80, qh1 & 0x08, qh1 & 0x80} {
				delta[l] = iq1Delta
				if h != 0 {
					delta[l] = -iq1Delta
				}
			}
			for l := 0; l < 4; l++ {
				dl := dl1
				if l >= 2 {
					dl = dl2
				}
				quantIQ1Group((*[8]float32)(y[32*ib+8*l:]), dl, iq1sGrid[idx[l]], delta[l])
			}
		}
	}
}

// IQ4_XS: {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}: the IQ4_NL
// codebook with a 6-bit scale (offset 32) per 32 elements.
func dequantIQ4XS(dst []float32, src []byte) {
	if useAccel {
		dequantIQ4XSAccel(dst, src)
		return
	}
	const bs, be = 136, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		sh := uint32(binary.LittleEndian.Uint16(b[2:]))
		for ib := 0; ib < 8; ib++ {
			ls := int32(b[4+ib/2]>>(4*(ib%2))&0xf) | int32(sh>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			q := (*[16]byte)(b[8+16*ib:])
			yb := (*[32]float32)(y[32*ib:])
			for j := 0; j < 16; j++ {
				yb[j] = dl * float32(kvaluesIQ4NL[q[j]&0xf])
				yb[j+16] = dl * float32(kvaluesIQ4NL[q[j]>>4])
			}
		}
	}
}
