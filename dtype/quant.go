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
//   - quantDequantizer(d) returns the dequantizer to float32 for every ggml
//     type: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, the k-quants
//     (quant_kquants.go), the IQ types (quant_iq.go), TQ1_0, TQ2_0, MXFP4,
//     NVFP4, Q1_0 and Q2_0. Each is a port of ggml's dequantize_row_*
//     (ggml-quants.c) that gives the same float32 bits: fp16 scales are
//     widened exactly (NaN quieted, as the hardware conversion does), and
//     every product and sum is rounded to float32 in ggml's order, with
//     explicit float32 conversions so that Go never fuses a multiply-add
//     that C does not. Q8_1 has no to_float in ggml; it gives q*d.
//     ik_llama.cpp's Q6_0 (quant_q6_0.go) is its dequantize_row_q6_0; its
//     row-scaled and row-interleaved types have row and row-group
//     dequantizers outside this table (quant_ikrow.go, quant_iktrellis.go,
//     quant_ikrepacked.go), served through RowConverterFor and
//     GroupConverterFor.

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
	case Q6_0: // ik_llama.cpp's (quant_q6_0.go)
		return dequantQ6_0, true
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
	case Q8_1:
		return dequantQ8_1, true
	case IQ2_XXS:
		return dequantIQ2XXS, true
	case IQ2_XS:
		return dequantIQ2XS, true
	case IQ2_S:
		return dequantIQ2S, true
	case IQ3_XXS:
		return dequantIQ3XXS, true
	case IQ3_S:
		return dequantIQ3S, true
	case IQ1_S:
		return dequantIQ1S, true
	case IQ1_M:
		return dequantIQ1M, true
	case IQ4_XS:
		return dequantIQ4XS, true
	case TQ1_0:
		return dequantTQ1_0, true
	case TQ2_0:
		return dequantTQ2_0, true
	case NVFP4:
		return dequantNVFP4, true
	case Q1_0:
		return dequantQ1_0, true
	case Q2_0:
		return dequantQ2_0, true
	case IQ2_K, IQ3_K, IQ4_K, IQ5_K, IQ6_K:
		return ikDequantizer(d)
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
	if useAccel {
		dequantQ8Accel(dst, src, 34, 2)
		return
	}
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
	if useAccel {
		dequantIQ4NLAccel(dst, src)
		return
	}
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
	if useAccel {
		dequantMXFP4Accel(dst, src)
		return
	}
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

// quantUE4M3 is ggml's ggml_ue4m3_to_fp32, the NVFP4 sub-block scale: an
// unsigned E4M3 (bias 7) value halved, to match the doubled E2M1 codebook.
// The top bit is ignored; 0x00, 0x7F (and 0x80) give 0.
func quantUE4M3(x uint8) float32 {
	if x == 0 || x == 0x7f {
		return 0
	}
	exp, man := uint32(x>>3&0xf), uint32(x&7)
	if exp == 0 {
		return float32(man) * (1.0 / 1024) // man * 2^-9 / 2, exact
	}
	return math.Float32frombits((exp+119)<<23 | man<<20) // (1 + man/8) * 2^(exp-7) / 2
}

// NVFP4: {u8 d[4] (UE4M3); u8 qs[32]}: four sub-blocks of 16, each
// y = kvalues[nibble]*scale, low nibbles first within the sub-block.
func dequantNVFP4(dst []float32, src []byte) {
	if useAccel {
		dequantNVFP4Accel(dst, src)
		return
	}
	const bs, be = 36, 64
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		for s := 0; s < 4; s++ {
			d := quantUE4M3(b[s])
			q := (*[8]byte)(b[4+8*s:])
			yb := (*[16]float32)(y[16*s:])
			for j := 0; j < 8; j++ {
				yb[j] = float32(kvaluesMXFP4[q[j]&0x0f]) * d
				yb[j+8] = float32(kvaluesMXFP4[q[j]>>4]) * d
			}
		}
	}
}

// Q1_0: {f16 d; u8 qs[16]}: 128 elements, bit j set gives d, clear gives -d.
func dequantQ1_0(dst []float32, src []byte) {
	const bs, be = 18, 128
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		pm := [2]float32{-d, d}
		for j := 0; j < 16; j++ {
			q := b[2+j]
			for k := 0; k < 8; k++ {
				y[8*j+k] = pm[q>>k&1]
			}
		}
	}
}

// Q2_0: {f16 d; u8 qs[16]}: 64 elements of 2 bits, low bits first,
// y = (q-1)*d (-1, 0, +1, +2).
func dequantQ2_0(dst []float32, src []byte) {
	const bs, be = 18, 64
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for j := 0; j < 16; j++ {
			q := b[2+j]
			for k := 0; k < 4; k++ {
				y[4*j+k] = float32(int32(q>>(2*k)&3)-1) * d
			}
		}
	}
}

// Q8_1: {f16 d, s; i8 qs[32]}: y = q*d (s, d times the sum of qs, is for
// dot products). ggml has no to_float for Q8_1 (it is an internal
// activation format); this is the value the block encodes, as Q8_0's.
func dequantQ8_1(dst []float32, src []byte) {
	if useAccel {
		dequantQ8Accel(dst, src, 36, 4)
		return
	}
	const bs, be = 36, 32
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[0:])
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(b[4+j])) * d
		}
	}
}

// quantTernary is the value of trit n (0..4) of a TQ1_0 byte q, as ggml
// packs five base-3 digits into a byte scaled by 256/243: -1, 0 or +1.
func quantTernary(q uint8, n int) float32 {
	q *= [5]uint8{1, 3, 9, 27, 81}[n]
	return float32(int32(uint16(q)*3>>8) - 1)
}

// TQ1_0: {u8 qs[48]; u8 qh[4]; f16 d}: ternary weights, five per qs byte
// (in five passes over 32 then 16 bytes), four per qh byte; y = t*d.
func dequantTQ1_0(dst []float32, src []byte) {
	const bs, be = 54, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[52:])
		k := 0
		for _, r := range [2][2]int{{0, 32}, {32, 48}} {
			for t := 0; t < 5; t++ {
				for m := r[0]; m < r[1]; m++ {
					y[k] = quantTernary(b[m], t) * d
					k++
				}
			}
		}
		for t := 0; t < 4; t++ {
			for j := 0; j < 4; j++ {
				y[k] = quantTernary(b[48+j], t) * d
				k++
			}
		}
	}
}

// TQ2_0: {u8 qs[64]; f16 d}: 2-bit ternary weights (0, 1, 2 for -1, 0, +1;
// 3 gives +2), four passes over each 32 bytes; y = (q-1)*d.
func dequantTQ2_0(dst []float32, src []byte) {
	if useAccel {
		dequantTQ2_0Accel(dst, src)
		return
	}
	const bs, be = 66, 256
	n := len(src) / bs
	dst = dst[:n*be]
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		y := (*[be]float32)(dst[i*be:])
		d := quantHalfAt(b[64:])
		for j := 0; j < 64; j += 32 {
			for l := 0; l < 4; l++ {
				yb := (*[32]float32)(y[4*j+32*l:])
				for m := 0; m < 32; m++ {
					yb[m] = float32(int32(b[j+m]>>(2*l)&3)-1) * d
				}
			}
		}
	}
}
