package dtype

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ik_llama.cpp's trellis types IQ1_KT, IQ2_KT, IQ3_KT and IQ4_KT (ggml
// type codes 158, 153, 154, 155 in ik_llama.cpp's ggml.h), and the other
// ik_llama.cpp codes tensorfs names but does not serve.
//
// A _KT row is a float32 scale d (the "row meta" of ik_llama.cpp's type
// traits, 4 bytes) followed by blocks of 256 elements. Each group of 8 (4
// for IQ4_KT) elements is an index i into a trellis: x = i + offset (4096,
// or 4096+32768 for an IQ4_KT block whose scale byte is odd) and, per
// element, x = 0xCBAC1FED·x (uint32, wrapping), s = x & 0x3f3f3f3f, and
// the value (s's four bytes summed) − 126, scaled by the block's scale:
// the float32 product scale·(sum − 126), |sum − 126| for IQ3_KT, as
// ik_llama.cpp's QuantizerIQKT::set_values (iqk/iqk_quantize.cpp) gives.
//
// The row scale is the type's RowMeta: the dequantizers take it and whole
// blocks of the row (any run of them), as quant_ikrow.go's, and the views
// convert a row's blocks with its scale (RowConverterFor). They are
// checked bit-exact against ik_llama.cpp's own dequantize_row_*
// (testdata/ikllama2).

// ktRowTypes are the _KT types, in quant_ikrow.go's shape (a dequantizer
// of a row's blocks given the row's scale: len(dst) = 256 × blocks).
var ktRowTypes = []ikRowType{
	{"IQ1_KT", 158, 4, 56, dequantIQ1KTRow},
	{"IQ2_KT", 153, 4, 68, dequantIQ2KTRow},
	{"IQ3_KT", 154, 4, 100, dequantIQ3KTRow},
	{"IQ4_KT", 155, 4, 128, dequantIQ4KTRow},
}

// ktRowDequantizer returns the row dequantizer of the _KT type of ggml code
// code: it converts one row (4-byte scale, then whole blocks) into
// 256·blocks float32s at the start of dst, and fails on a row that is not
// 4 bytes plus whole blocks.
func ktRowDequantizer(code uint32) (func(dst []float32, row []byte) error, bool) {
	for _, k := range ktRowTypes {
		if k.code != code {
			continue
		}
		return func(dst []float32, row []byte) error {
			if len(row) < k.meta || (len(row)-k.meta)%k.blockBytes != 0 {
				return fmt.Errorf("%s row of %d bytes is not a %d-byte scale and whole %d-byte blocks", k.name, len(row), k.meta, k.blockBytes)
			}
			k.deq(dst[:(len(row)-k.meta)/k.blockBytes*256], row[:k.meta], row[k.meta:])
			return nil
		}, true
	}
	return nil, false
}

// ktPow are the trellis multiplier's powers: the k-th value of index x
// comes from x·0xCBAC1FED^(k+1) (uint32), independent of the others.
var ktPow = func() (p [8]uint32) {
	m := uint32(1)
	for k := range p {
		m *= 0xCBAC1FED
		p[k] = m
	}
	return p
}()

// ktSum is the trellis value of x before scaling: the four bytes of
// x & 0x3f3f3f3f summed (each < 64: the multiply makes no carries), − 126,
// as a float32 (exact) from a table.
func ktSum(x uint32) float32 {
	return ktSumF[(x&0x3f3f3f3f)*0x01010101>>24]
}

// ktSumF and ktAbsF are s − 126 and |s − 126| as float32 for each byte sum
// s (0..252; the table is 256 long so that any byte indexes it).
var ktSumF, ktAbsF = func() (f, a [256]float32) {
	for s := range f {
		f[s] = float32(s - 126)
		a[s] = float32(max(s-126, 126-s))
	}
	return f, a
}()

// ktValues8 writes the 8 trellis values of index x (offset added), times
// scale.
func ktValues8(y *[8]float32, x uint32, scale float32) {
	y[0] = scale * ktSum(x*ktPow[0])
	y[1] = scale * ktSum(x*ktPow[1])
	y[2] = scale * ktSum(x*ktPow[2])
	y[3] = scale * ktSum(x*ktPow[3])
	y[4] = scale * ktSum(x*ktPow[4])
	y[5] = scale * ktSum(x*ktPow[5])
	y[6] = scale * ktSum(x*ktPow[6])
	y[7] = scale * ktSum(x*ktPow[7])
}

// ktValues4 is ktValues8 for a group of 4 (IQ4_KT).
func ktValues4(y *[4]float32, x uint32, scale float32) {
	y[0] = scale * ktSum(x*ktPow[0])
	y[1] = scale * ktSum(x*ktPow[1])
	y[2] = scale * ktSum(x*ktPow[2])
	y[3] = scale * ktSum(x*ktPow[3])
}

// ktAbs is |sum − 126| of the trellis value of x, times scale, its sign
// bit flipped where neg (0 or 1) is 1, as C's unary minus does.
func ktAbs(x uint32, scale float32, neg uint64) float32 {
	return math.Float32frombits(math.Float32bits(scale*ktAbsF[(x&0x3f3f3f3f)*0x01010101>>24]) ^ uint32(neg)<<31)
}

// ktValuesAbs8 is ktValues8 with |sum − 126| (IQ3_KT), element k negated
// where bit 0 of byte k of qh is set.
func ktValuesAbs8(y *[8]float32, x uint32, scale float32, qh uint64) {
	y[0] = ktAbs(x*ktPow[0], scale, qh&1)
	y[1] = ktAbs(x*ktPow[1], scale, qh>>8&1)
	y[2] = ktAbs(x*ktPow[2], scale, qh>>16&1)
	y[3] = ktAbs(x*ktPow[3], scale, qh>>24&1)
	y[4] = ktAbs(x*ktPow[4], scale, qh>>32&1)
	y[5] = ktAbs(x*ktPow[5], scale, qh>>40&1)
	y[6] = ktAbs(x*ktPow[6], scale, qh>>48&1)
	y[7] = ktAbs(x*ktPow[7], scale, qh>>56&1)
}

// ktRun8 writes len(x) groups of 8 trellis values, group g from index
// x[g] (offset added) times s[g]: AVX2 where the CPU has it, ktValues8
// otherwise (the same bits: TestKTRuns).
func ktRun8(y []float32, x []uint32, s []float32) {
	if useAccel && len(x) > 0 {
		_, _ = y[8*len(x)-1], s[len(x)-1]
		kt8AVX2(&y[0], &x[0], &s[0], len(x))
		return
	}
	for g, v := range x {
		ktValues8((*[8]float32)(y[8*g:]), v, s[g])
	}
}

// ktRun4 is ktRun8 for groups of 4 (IQ4_KT); len(x) even.
func ktRun4(y []float32, x []uint32, s []float32) {
	if useAccel && len(x) > 0 && len(x)%2 == 0 {
		_, _ = y[4*len(x)-1], s[len(x)-1]
		kt4AVX2(&y[0], &x[0], &s[0], len(x))
		return
	}
	for g, v := range x {
		ktValues4((*[4]float32)(y[4*g:]), v, s[g])
	}
}

// ktRunAbs8 is ktRun8 with |sum − 126| (IQ3_KT), element k of group g
// negated where byte k of neg[g] is 1 (each byte 0 or 1).
func ktRunAbs8(y []float32, x []uint32, s []float32, neg []uint64) {
	if useAccel && len(x) > 0 {
		_, _, _ = y[8*len(x)-1], s[len(x)-1], neg[len(x)-1]
		kt8AbsAVX2(&y[0], &x[0], &s[0], &neg[0], len(x))
		return
	}
	for g, v := range x {
		ktValuesAbs8((*[8]float32)(y[8*g:]), v, s[g], neg[g])
	}
}

// The row dequantizers below gather a block's group indices (offset
// added) and scales, and write its 256 values by ktRun8/ktRun4/ktRunAbs8.

// IQ1_KT row: float32 d, then blocks of sh[8] (4-bit scale index, and bit
// 4+g the 13th index bit of group g), ql[32], qh[16] (4 more index bits per
// group: the low nibbles for blocks 0-3, the high ones for 4-7).
func dequantIQ1KTRow(dst []float32, meta, src []byte) {
	const bs = 56
	d := ikRowF32(meta)
	var x [32]uint32
	var sc [32]float32
	for i := 0; i < len(dst)/256*bs; i += bs {
		b := (*[bs]byte)(src[i:])
		for ib := 0; ib < 8; ib++ {
			sh := b[ib]
			sl := d * ikIQ4Values[sh&0xf]
			for ig := 0; ig < 4; ig++ {
				idx := uint32(b[8+ib*4+ig]) | uint32(b[40+(ib&3)*4+ig])<<(8-4*(ib>>2))&0xf00 | uint32(sh)<<(8-ig)&0x1000
				x[ib*4+ig], sc[ib*4+ig] = idx+4096, sl
			}
		}
		ktRun8(dst[i/bs*256:], x[:], sc[:])
	}
}

// IQ2_KT row: float32 d, then blocks of scales[4] (two 4-bit indices into
// ikIQ4Values: the low nibble for a block of the first half, the high one
// for the same block of the second half), ql as 32 uint16 indices (16 per
// half).
func dequantIQ2KTRow(dst []float32, meta, src []byte) {
	const bs = 68
	d := ikRowF32(meta)
	var x [32]uint32
	var sc [32]float32
	for i := 0; i < len(dst)/256*bs; i += bs {
		b := (*[bs]byte)(src[i:])
		for ib := 0; ib < 4; ib++ {
			sl := d * ikIQ4Values[b[ib]&0xf]
			sh := d * ikIQ4Values[b[ib]>>4]
			for ig := 0; ig < 4; ig++ {
				g := ib*4 + ig
				x[g], sc[g] = uint32(binary.LittleEndian.Uint16(b[4+2*g:]))+4096, sl
				x[16+g], sc[16+g] = uint32(binary.LittleEndian.Uint16(b[36+2*g:]))+4096, sh
			}
		}
		ktRun8(dst[i/bs*256:], x[:], sc[:])
	}
}

// IQ3_KT row: float32 d, then blocks of scales[4] (4-bit, the values
// themselves), ql as 32 uint16 indices, qh[32] (sign bits: bit b of
// qh[8g+j] negates element j of group g of block b, blocks 0-3 the first
// half, 4-7 the second).
func dequantIQ3KTRow(dst []float32, meta, src []byte) {
	const bs = 100
	const ones = 0x0101010101010101
	d := ikRowF32(meta)
	var x [32]uint32
	var sc [32]float32
	var neg [32]uint64
	for i := 0; i < len(dst)/256*bs; i += bs {
		b := (*[bs]byte)(src[i:])
		qh := (*[32]byte)(b[68:])
		for ib := 0; ib < 4; ib++ {
			sl := d * float32(b[ib]&0xf)
			sh := d * float32(b[ib]>>4)
			for ig := 0; ig < 4; ig++ {
				g := ib*4 + ig
				h := binary.LittleEndian.Uint64(qh[8*ig:])
				x[g], sc[g], neg[g] = uint32(binary.LittleEndian.Uint16(b[4+2*g:]))+4096, sl, h>>ib&ones
				x[16+g], sc[16+g], neg[16+g] = uint32(binary.LittleEndian.Uint16(b[36+2*g:]))+4096, sh, h>>(ib+4)&ones
			}
		}
		ktRunAbs8(dst[i/bs*256:], x[:], sc[:], neg[:])
	}
}

// IQ4_KT row: float32 d, then blocks of 8 uint32 words (one per block of
// 32: bit 0 the offset choice, bits 1-7 the scale + 64, bits 8+3g.. the top
// 3 index bits of group g of 4), ql[64], qh[32] (4 more index bits: low
// nibbles for groups 0-31, high for 32-63).
func dequantIQ4KTRow(dst []float32, meta, src []byte) {
	const bs = 128
	d := ikRowF32(meta)
	var x [64]uint32
	var sc [64]float32
	for i := 0; i < len(dst)/256*bs; i += bs {
		b := (*[bs]byte)(src[i:])
		ql, qh := (*[64]byte)(b[32:]), (*[32]byte)(b[96:])
		for ib := 0; ib < 8; ib++ {
			w := binary.LittleEndian.Uint32(b[4*ib:])
			offset := uint32(4096)
			if w&1 != 0 {
				offset += 32768
			}
			sl := d * float32(int32(w&0xff>>1)-64)
			for ig := 0; ig < 8; ig++ {
				jj := ib*8 + ig
				idx := uint32(ql[jj]) | uint32(qh[jj&31])<<(8-4*(jj>>5))&0xf00 | (w>>(8+3*ig)&7)<<12
				x[jj], sc[jj] = idx+offset, sl
			}
		}
		ktRun4(dst[i/bs*256:], x[:], sc[:])
	}
}

// ikTypes are ik_llama.cpp's row-interleaved ggml type codes (ggml.h at
// 8337e4cd), with why tensorfs would not serve them: the _R4/_R8/_R16
// types interleave 4, 8 or 16 rows (ik_llama.cpp's run-time repacking,
// also written by llama-quantize with --repack), and tensorfs serves those
// of them that have a group dequantizer (ikGroups, in the dtype table):
// IKType skips every code the table has (all but Q8_K_R16, a repack of
// its matrix multiplications' operands, named).
var ikTypes = map[uint32]struct{ name, why string }{
	202: {"Q4_0_R8", ikRepacked}, 206: {"Q5_0_R4", ikRepacked}, 208: {"Q8_0_R8", ikRepacked},
	210: {"Q2_K_R4", ikRepacked}, 211: {"Q3_K_R4", ikRepacked}, 212: {"Q4_K_R4", ikRepacked},
	213: {"Q5_K_R4", ikRepacked}, 214: {"Q6_K_R4", ikRepacked}, 216: {"IQ2_XXS_R4", ikRepacked},
	217: {"IQ2_XS_R4", ikRepacked}, 218: {"IQ3_XXS_R4", ikRepacked}, 219: {"IQ1_S_R4", ikRepacked},
	220: {"IQ4_NL_R4", ikRepacked}, 221: {"IQ3_S_R4", ikRepacked}, 222: {"IQ2_S_R4", ikRepacked},
	223: {"IQ4_XS_R8", ikRepacked}, 229: {"IQ1_M_R4", ikRepacked}, 230: {"BF16_R16", ikRepacked},
	233: {"Q6_0_R4", ikRepacked}, 335: {"IQ2_BN_R4", ikRepacked}, 337: {"IQ2_K_R4", ikRepacked},
	338: {"IQ3_K_R4", ikRepacked}, 339: {"IQ4_K_R4", ikRepacked}, 340: {"IQ5_K_R4", ikRepacked},
	344: {"IQ4_KS_R4", ikRepacked}, 352: {"IQ5_KS_R4", ikRepacked}, 353: {"MXFP4_R8", ikRepacked},
	397: {"Q8_K_R16", ikRepacked}, 398: {"Q8_KV_R8", ikRepacked}, 399: {"Q8_K_R8", ikRepacked},
}

const (
	ikRepacked = "interleaves its rows in groups of 4, 8 or 16 (the layout ik_llama.cpp repacks to at load time, -rtr, or with llama-quantize --repack); tensorfs has no dequantizer for this one checked against ik_llama.cpp's and does not serve it"
)

// IKType names an ik_llama.cpp ggml type code that tensorfs recognises but
// does not serve: its name ("IQ2_KT") and why (a predicate: "keeps a scale
// per row ..."), in one line. ok is false for other codes.
func IKType(code uint32) (name, why string, ok bool) {
	if _, served := ByGGML(code); served {
		return "", "", false
	}
	t, ok := ikTypes[code]
	return t.name, t.why, ok
}
