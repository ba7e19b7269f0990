package dtype

// ik_llama.cpp's row-scaled types: each row is a scale (row_meta_size in
// its ggml.c: a float32 for IQ4_KS, IQ4_KSS and IQ5_KS, an fp16 for
// IQ2_KS, IQ3_KS and IQ2_KL) followed by the row's blocks of 256. They
// are in the table with their blocks' size and RowMeta for the scale;
// their blocks are dequantized with the row's scale, so a run of blocks
// anywhere in a row converts on its own given that row's meta
// (RowConverterFor). The dequantizers are checked bit for bit against
// ik_llama.cpp's own (TestQuantIKRows, on the rows of
// dtype/testdata/ikllama).

import (
	"encoding/binary"
	"math"
)

// ikRowType is one row-scaled type: its ggml code, the bytes of the row's
// scale and of each block, and the dequantizer of whole blocks of a row
// given the row's meta (the scale).
type ikRowType struct {
	name       string
	code       uint32
	meta       int
	blockBytes int
	deq        func(dst []float32, meta, blocks []byte) // len(dst) = the blocks' elements (256 each; 64 for the _BN types)
}

// rowDequantizer returns the dequantizer of whole blocks of a row of a
// type with row meta, given the row's meta.
func rowDequantizer(d DType) (func(dst []float32, meta, blocks []byte), bool) {
	if d.RowMeta() == 0 {
		return nil, false
	}
	for _, ts := range [][]ikRowType{ikRowTypes, ktRowTypes, bnRowTypes} {
		for _, rt := range ts {
			if c := d.Info().GGML; c >= 0 && uint32(c) == rt.code {
				return rt.deq, true
			}
		}
	}
	return nil, false
}

var ikRowTypes = []ikRowType{
	{"IQ4_KS", 144, 4, 136, dequantIQ4KSRow},
	{"IQ2_KS", 145, 2, 70, dequantIQ2KSRow},
	{"IQ4_KSS", 146, 4, 128, dequantIQ4KSSRow},
	{"IQ5_KS", 152, 4, 168, dequantIQ5KSRow},
	{"IQ3_KS", 156, 2, 102, dequantIQ3KSRow},
	{"IQ2_KL", 157, 2, 86, dequantIQ2KLRow},
}

func ikRowF32(row []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(row)) }

// IQ4_KS: float32 d; blocks {u8 scales[8]; u8 qs[128]}: per 32, scale
// (s&254) − 127 and codebook half s&1, 4-bit codes as IQ4_K's.
func dequantIQ4KSRow(dst []float32, meta, blocks []byte) {
	const bs = 136
	d := ikRowF32(meta)
	for i := 0; i < len(dst)/256; i++ {
		b := (*[bs]byte)(blocks[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		for ib := 0; ib < 8; ib++ {
			s := b[ib]
			dl := d * float32(int32(s&254)-127)
			v := (*[16]float32)(ikIQ4Values[16*(s&1):])
			qs := (*[16]byte)(b[8+16*ib:])
			yy := (*[32]float32)(y[32*ib:])
			for j := 0; j < 16; j++ {
				yy[j] = dl * v[qs[j]&0xf]
				yy[j+16] = dl * v[qs[j]>>4]
			}
		}
	}
}

// IQ5_KS: float32 d; blocks {u8 scales[8]; u8 qs[128]; u8 qh[32]}: per
// 64 elements k, two groups of 32 with IQ4_KS's scales, 4-bit codes (low
// then high nibbles of 32 bytes) and a fifth bit, bits 2k and 2k+1 of qh.
func dequantIQ5KSRow(dst []float32, meta, blocks []byte) {
	const bs = 168
	d := ikRowF32(meta)
	for i := 0; i < len(dst)/256; i++ {
		b := (*[bs]byte)(blocks[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		qh := (*[32]byte)(b[136:])
		for k := 0; k < 4; k++ {
			s1, s2 := b[2*k], b[2*k+1]
			dl1 := d * float32(int32(s1&254)-127)
			dl2 := d * float32(int32(s2&254)-127)
			v1 := (*[32]float32)(ikIQ5Values[32*(s1&1):])
			v2 := (*[32]float32)(ikIQ5Values[32*(s2&1):])
			qs := (*[32]byte)(b[8+32*k:])
			yy := (*[64]float32)(y[64*k:])
			sh := uint(2*k) & 7
			for j := 0; j < 32; j++ {
				h := qh[j] >> sh
				yy[j] = dl1 * v1[(qs[j]&0xf|(h&1)<<4)&31]
				yy[j+32] = dl2 * v2[(qs[j]>>4|(h&2)<<3)&31]
			}
		}
	}
}

// IQ4_KSS: float32 d; blocks of 32 u32 words: per 32 elements, eight
// 16-bit words whose low bits make an IQ4_KS scale byte, and whose other
// bits, w&^1 xor'ed with itself shifted right by one, are 16 bytes of
// nibbles as IQ4_KS's.
func dequantIQ4KSSRow(dst []float32, meta, blocks []byte) {
	const bs = 128
	d := ikRowF32(meta)
	var aux [16]byte
	for i := 0; i < len(dst)/256; i++ {
		b := (*[bs]byte)(blocks[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		for ib := 0; ib < 8; ib++ {
			var ls uint32
			for k := 0; k < 8; k++ {
				w := binary.LittleEndian.Uint16(b[16*ib+2*k:])
				a := w & 0xfffe
				a ^= a >> 1
				aux[2*k], aux[2*k+1] = byte(a), byte(a>>8)
				ls |= uint32(w&1) << k
			}
			v := (*[16]float32)(ikIQ4Values[16*(ls&1):])
			dl := d * float32(int32(ls&254)-127)
			yy := (*[32]float32)(y[32*ib:])
			for j := 0; j < 16; j++ {
				yy[j] = dl * v[aux[j]&0xf]
				yy[j+16] = dl * v[aux[j]>>4]
			}
		}
	}
}

// IQ2_KS: fp16 d; blocks {u16 extra; u8 scales[4]; u8 qs[64]}: per 64
// elements k, two groups of 32 with scale (nibble | bit 8+2k or 9+2k of
// extra as 16) − 16, codebook half bit 2k or 2k+1 of extra, and 2-bit
// codes, bit pairs 4(k%2) and 4(k%2)+2 of byte j of the k/2-th 32.
func dequantIQ2KSRow(dst []float32, meta, blocks []byte) {
	const bs = 70
	d := quantHalfAt(meta)
	for i := 0; i < len(dst)/256; i++ {
		b := (*[bs]byte)(blocks[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		extra := uint32(binary.LittleEndian.Uint16(b[0:]))
		for k := 0; k < 4; k++ {
			e := extra >> (2 * k)
			sc := int32(b[2+k])
			dl1 := d * float32((sc&0xf|int32(e>>4&0x10))-16)
			dl2 := d * float32((sc>>4|int32(e>>5&0x10))-16)
			v1 := (*[4]float32)(ikIQ2Values[4*(e&1):])
			v2 := (*[4]float32)(ikIQ2Values[4*(e>>1&1):])
			sh := uint(4*(k%2)) & 7
			qs := (*[32]byte)(b[6+32*(k/2):])
			yy := (*[64]float32)(y[64*k:])
			for j := 0; j < 32; j++ {
				q := qs[j] >> sh
				yy[j] = dl1 * v1[q&3]
				yy[j+32] = dl2 * v2[q>>2&3]
			}
		}
	}
}

// IQ3_KS: fp16 d; blocks {u16 extra; u8 scales[4]; u8 qs[64]; u8 qh[32]}:
// eight groups of 32, group g with scale (nibble | bit g of extra as 16)
// − 16 (nibbles: low of scales[0..3] for groups 0..3, high for 4..7),
// codebook half bit 8+g of extra, 3-bit codes (bit pair 2(g%4) of byte j
// of the g/4-th 32 of qs, bit g of qh[j]).
func dequantIQ3KSRow(dst []float32, meta, blocks []byte) {
	const bs = 102
	d := quantHalfAt(meta)
	for i := 0; i < len(dst)/256; i++ {
		b := (*[bs]byte)(blocks[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		extra := uint32(binary.LittleEndian.Uint16(b[0:]))
		var dl [8]float32
		for j := 0; j < 4; j++ {
			ls1 := int32(b[2+j]&0xf) | int32(extra>>j&1)<<4
			ls2 := int32(b[2+j]>>4) | int32(extra>>(j+4)&1)<<4
			dl[j] = d * float32(ls1-16)
			dl[j+4] = d * float32(ls2-16)
		}
		// each group's 8 products, the same as per element
		var t [8][8]float32
		for g := range t {
			v := (*[8]float32)(ikIQ3Values[8*(extra>>(8+g)&1):])
			for k := range t[g] {
				t[g][k] = dl[g] * v[k]
			}
		}
		qh := (*[32]byte)(b[70:])
		for h := 0; h < 2; h++ {
			qs := (*[32]byte)(b[6+32*h:])
			t0, t1, t2, t3 := &t[4*h], &t[4*h+1], &t[4*h+2], &t[4*h+3]
			yh := (*[128]float32)(y[128*h:])
			for j := 0; j < 32; j++ {
				q, hb := qs[j], qh[j]>>(4*h)
				yh[j] = t0[q&3|hb<<2&4]
				yh[j+32] = t1[q>>2&3|hb<<1&4]
				yh[j+64] = t2[q>>4&3|hb&4]
				yh[j+96] = t3[q>>6|hb>>1&4]
			}
		}
	}
}

// ikIQ2KLValues is ik_llama.cpp's iq2kl_values: 32 pairs of int8 values
// (low byte first), as float32.
var ikIQ2KLValues = func() (t [32][2]float32) {
	w := [32]uint16{0xe9c1, 0x0dc1, 0xc1d8, 0xf6d8, 0x0dd8, 0x2fd8, 0xd8e9, 0xe9e9, 0x01e9, 0x0de9, 0x1ce9, 0xc1f6, 0x01f6, 0x0df6, 0x2ff6, 0xe901,
		0xf601, 0x0101, 0x0d01, 0x1c01, 0xd80d, 0xe90d, 0xf60d, 0x010d, 0x0d0d, 0xc11c, 0xe91c, 0x011c, 0x1c1c, 0x2f1c, 0xe92f, 0x0d2f}
	for i, v := range w {
		t[i] = [2]float32{float32(int8(v)), float32(int8(v >> 8))}
	}
	return t
}()

// IQ2_KL: fp16 d; blocks {u16 scales_h; u8 scales_l[4]; u8 qs[64]; u8
// qh[16]}: per 64 elements k, two groups of 32 with 6-bit scales − 32
// (nibble k/2 of scales_l[2k%4], scales_l[(2k+1)%4]; bit pairs 4k and
// 4k+2 of scales_h), each 5-bit code (a nibble of qs[16k+j] and bit 2k or
// 2k+1 of qh[j]) giving two consecutive values.
func dequantIQ2KLRow(dst []float32, meta, blocks []byte) {
	const bs = 86
	d := quantHalfAt(meta)
	for i := 0; i < len(dst)/256; i++ {
		b := (*[bs]byte)(blocks[i*bs:])
		y := (*[256]float32)(dst[i*256:])
		sh := uint32(binary.LittleEndian.Uint16(b[0:]))
		qh := (*[16]byte)(b[70:])
		for k := 0; k < 4; k++ {
			s1 := int32(b[2+(2*k)%4]>>(4*(k/2))&0xf) | int32(sh>>(4*k)&3)<<4
			s2 := int32(b[2+(2*k+1)%4]>>(4*(k/2))&0xf) | int32(sh>>(4*k+2)&3)<<4
			dl1, dl2 := d*float32(s1-32), d*float32(s2-32)
			qs := (*[16]byte)(b[6+16*k:])
			hs := uint(2*k) & 7
			yy := (*[64]float32)(y[64*k:])
			for j := 0; j < 16; j++ {
				h := qh[j] >> hs
				v1 := &ikIQ2KLValues[(qs[j]&0xf|(h&1)<<4)&31]
				v2 := &ikIQ2KLValues[(qs[j]>>4|(h&2)<<3)&31]
				yy[2*j] = dl1 * v1[0]
				yy[2*j+1] = dl1 * v1[1]
				yy[2*j+32] = dl2 * v2[0]
				yy[2*j+33] = dl2 * v2[1]
			}
		}
	}
}
