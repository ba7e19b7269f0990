package dtype

// Dequantization of ggml block-quantized types (GGUF tensors).
//
// Quantized dtypes (dtype doc lines for quant):
//
//   - A quantized tensor is stored as whole blocks: Info.BlockElems elements
//     in Info.BlockBytes bytes (Q4_0: 32 in 18, Q4_K: 256 in 144, ...). The
//     native view serves the raw blocks; the elements run in row-major order
//     across blocks, a block never straddles two rows (GGUF requires the
//     innermost dimension to be a multiple of the block size).
//   - Dequantizing is block-local: block k of the source gives elements
//     [k*BlockElems, (k+1)*BlockElems) and depends on no other block, so any
//     range of whole blocks converts on its own and equals the same range of
//     the whole tensor's conversion.
//   - quantDequantizer(d) returns the dequantizer to float32 for Q4_0, Q4_1,
//     Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL and MXFP4.
//     Each is a port of ggml's dequantize_row_* (ggml-quants.c) that gives
//     the same float32 bits: fp16 scales are widened exactly (NaN quieted,
//     as the hardware conversion does), and every product and sum is
//     rounded to float32 in ggml's order, with explicit float32 conversions
//     so that Go never fuses a multiply-add that C does not.
//   - The other ggml types (Q8_1, IQ2_*, IQ3_*, IQ1_*, IQ4_XS, TQ1_0, TQ2_0)
//     have no dequantizer here: they are served raw and are absent from the
//     converted views.

import (
	"encoding/binary"
	"math"
)

// quantDequantizer returns, for a quantized dtype, the function that
// converts len(src)/BlockBytes whole blocks of src into
// len(src)/BlockBytes*BlockElems float32s at the start of dst, exactly as
// ggml's dequantize_row_* does. A trailing partial block in src is ignored.
// dst must have room for the whole blocks (the function panics otherwise,
// as a slice index would). ok is false for dtypes without a dequantizer.
func quantDequantizer(d DType) (func(dst []float32, src []byte), bool) {
	switch d {
	case Q4_0:
		return dequantQ4_0, true
	case Q4_1:
		return dequantQ4_1, true
	case Q5_0:
		return dequantQ5_0, true
	case Q5_1:
		return dequantQ5_1, true
	case Q8_0:
		return dequantQ8_0, true
	case Q2_K:
		return dequantQ2K, true
	case Q3_K:
		return dequantQ3K, true
	case Q4_K:
		return dequantQ4K, true
	case Q5_K:
		return dequantQ5K, true
	case Q6_K:
		return dequantQ6K, true
	case Q8_K:
		return dequantQ8K, true
	case IQ4_NL:
		return dequantIQ4NL, true
	case MXFP4:
		return dequantMXFP4, true
	}
	return nil, false
}

// quantHalf widens an IEEE binary16 value to float32 exactly. A NaN keeps
// its payload with the quiet bit set, as x86 F16C and ggml's portable
// conversion both give.
func quantHalf(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		if man != 0 {
			return math.Float32frombits(sign | 0x7fc00000 | man<<13)
		}
		return math.Float32frombits(sign | 0x7f800000)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// subnormal half: man * 2^-24, exact in float32
	e := uint32(113)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

func quantHalfAt(b []byte) float32 { return quantHalf(binary.LittleEndian.Uint16(b)) }

// quantE8M0Half is ggml's GGML_E8M0_TO_FP32_HALF: 2^(e-128), with the two
// smallest exponents as float32 subnormals. 0xFF gives 2^127 (ggml does not
// special-case NaN).
func quantE8M0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// kvaluesIQ4NL is ggml's non-linear 4-bit codebook for IQ4_NL (and IQ4_XS).
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesMXFP4 is twice the E2M1 values, as ggml stores them (the scale is
// halved to match).
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// Q4_0: {f16 d; u8 qs[16]}: y = (nibble-8)*d, low nibbles first half.
func dequantQ4_0(dst []float32, src []byte) {
	const bs, be = 18, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for j := 0; j < 16; j++ {
			q := b[2+j]
			y[j] = float32(int32(q&0x0f)-8) * d
			y[j+16] = float32(int32(q>>4)-8) * d
		}
	}
}

// Q4_1: {f16 d, m; u8 qs[16]}: y = nibble*d + m.
func dequantQ4_1(dst []float32, src []byte) {
	const bs, be = 20, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		m := quantHalfAt(b[2:])
		for j := 0; j < 16; j++ {
			q := b[4+j]
			y[j] = float32(float32(q&0x0f)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
	}
}

// Q5_0: {f16 d; u8 qh[4]; u8 qs[16]}: y = (5-bit value - 16)*d.
func dequantQ5_0(dst []float32, src []byte) {
	const bs, be = 22, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		qh := binary.LittleEndian.Uint32(b[2:])
		for j := 0; j < 16; j++ {
			q := b[6+j]
			xh0 := uint8(qh>>uint(j)<<4) & 0x10
			xh1 := uint8(qh>>uint(j+12)) & 0x10
			y[j] = float32(int32(q&0x0f|xh0)-16) * d
			y[j+16] = float32(int32(q>>4|xh1)-16) * d
		}
	}
}

// Q5_1: {f16 d, m; u8 qh[4]; u8 qs[16]}: y = (5-bit value)*d + m.
func dequantQ5_1(dst []float32, src []byte) {
	const bs, be = 24, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		m := quantHalfAt(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for j := 0; j < 16; j++ {
			q := b[8+j]
			xh0 := uint8(qh>>uint(j)<<4) & 0x10
			xh1 := uint8(qh>>uint(j+12)) & 0x10
			y[j] = float32(float32(q&0x0f|xh0)*d) + m
			y[j+16] = float32(float32(q>>4|xh1)*d) + m
		}
	}
}

// Q8_0: {f16 d; i8 qs[32]}: y = q*d.
func dequantQ8_0(dst []float32, src []byte) {
	const bs, be = 34, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(b[2+j])) * d
		}
	}
}

// IQ4_NL: {f16 d; u8 qs[16]}: y = d*kvalues[nibble].
func dequantIQ4NL(dst []float32, src []byte) {
	const bs, be = 18, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for j := 0; j < 16; j++ {
			q := b[2+j]
			y[j] = d * float32(kvaluesIQ4NL[q&0x0f])
			y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
		}
	}
}

// MXFP4: {u8 e (E8M0); u8 qs[16]}: y = kvalues[nibble]*2^(e-128).
func dequantMXFP4(dst []float32, src []byte) {
	const bs, be = 17, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantE8M0Half(b[0])
		for j := 0; j < 16; j++ {
			q := b[1+j]
			y[j] = float32(kvaluesMXFP4[q&0x0f]) * d
			y[j+16] = float32(kvaluesMXFP4[q>>4]) * d
		}
	}
}
