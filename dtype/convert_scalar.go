package dtype

import (
	"math"
	"sync"
)

// Bit-level conversions of one element. Every function here rounds to
// nearest, ties to even, in one step from the source value, and follows the
// NaN rule in doc.go: a NaN result is quiet, keeps the source's sign, and
// keeps as much of the source payload as fits (the payload's top bits,
// left-aligned in the target mantissa; low bits dropped when narrowing).

// f16ToF32Bits widens an IEEE binary16 value to binary32 (exact).
func f16ToF32Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	a := uint32(h & 0x7fff)
	switch {
	case a >= 0x0400 && a < 0x7c00: // normal
		return sign | (a<<13 + 112<<23)
	case a == 0:
		return sign
	case a < 0x0400: // subnormal: a * 2^-24, exact in binary32
		return sign | math.Float32bits(float32(a)*(1.0/(1<<24)))
	case a == 0x7c00:
		return sign | 0x7f800000
	default: // NaN
		return sign | 0x7fc00000 | (a&0x3ff)<<13
	}
}

// bf16ToF32Bits widens a bfloat16 value to binary32 (exact).
func bf16ToF32Bits(b uint16) uint32 {
	x := uint32(b) << 16
	return x | isNaN32(x)<<22 // quiet NaN
}

// isNaN32 is 1 when the binary32 bits x are a NaN, 0 otherwise (no branch).
func isNaN32(x uint32) uint32 { return (0x7f800000 - x&0x7fffffff) >> 31 }

// f32ToF16Bits rounds a binary32 value to binary16.
func f32ToF16Bits(b uint32) uint16 {
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a >= 0x38800000 && a < 0x477ff000:
		// Normal result (|x| >= 2^-14 and below the overflow threshold
		// 65520 = max + half an ulp). Rebias the exponent (127 -> 15) and
		// round away the low 13 bits; a carry out of the mantissa bumps
		// the exponent, which is the correct result.
		a -= 112 << 23
		return sign | uint16((a+0x0fff+(a>>13)&1)>>13)
	case a <= 0x33000000:
		// |x| <= 2^-25 (half the smallest subnormal; the tie goes to even
		// zero).
		return sign
	case a < 0x38800000:
		// Subnormal result: |x| = m * 2^(e-150), unit 2^-24.
		e := a >> 23
		m := a&0x7fffff | 0x800000
		shift := 126 - e // 14..24
		// Round away shift bits, to nearest even: add just under half, plus
		// the kept lsb.
		r := (m + (1<<(shift-1) - 1) + (m>>shift)&1) >> shift
		return sign | uint16(r)
	case a <= 0x7f800000: // overflow, or Inf
		return sign | 0x7c00
	default: // NaN
		return sign | 0x7e00 | uint16(a>>13)&0x1ff
	}
}

// f32ToBF16Bits rounds a binary32 value to bfloat16.
func f32ToBF16Bits(b uint32) uint16 {
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040 // quiet NaN, payload truncated
	}
	// Adding 0x7fff plus the kept lsb rounds to nearest even; a carry runs
	// into the exponent, giving the next binade or Inf, both correct.
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// f32ToF64Bits widens binary32 to binary64 (exact).
func f32ToF64Bits(b uint32) uint64 {
	if b&0x7fffffff > 0x7f800000 {
		return uint64(b>>31)<<63 | 0x7ff8000000000000 | uint64(b&0x7fffff)<<29
	}
	return math.Float64bits(float64(math.Float32frombits(b)))
}

// f64ToF32Bits rounds binary64 to binary32. Go's float64 -> float32
// conversion is IEEE round to nearest even; NaN is built by hand so that the
// payload rule does not depend on the CPU.
func f64ToF32Bits(b uint64) uint32 {
	if b&(1<<63-1) > 0x7ff0000000000000 {
		return uint32(b>>63)<<31 | 0x7fc00000 | uint32(b>>29)&0x3fffff
	}
	return math.Float32bits(float32(math.Float64frombits(b)))
}

// f64ToF16Bits rounds binary64 to binary16 directly (no double rounding
// through binary32).
func f64ToF16Bits(b uint64) uint16 { return uint16(f64Round(b, 5, 10)) }

// f64ToBF16Bits rounds binary64 to bfloat16 directly.
func f64ToBF16Bits(b uint64) uint16 { return uint16(f64Round(b, 8, 7)) }

// f64Round rounds the binary64 value with bits b to the IEEE-style binary
// format with ebits exponent bits and mbits stored mantissa bits (ebits <=
// 11, mbits < 52), to nearest even, and returns its bits.
func f64Round(b uint64, ebits, mbits uint) uint64 {
	sign := b >> 63 << (ebits + mbits)
	a := b &^ (1 << 63)
	inf := (uint64(1)<<ebits - 1) << mbits
	if a >= 0x7ff0000000000000 {
		if a == 0x7ff0000000000000 {
			return sign | inf
		}
		return sign | inf | 1<<(mbits-1) | (a&(1<<52-1))>>(52-mbits)
	}
	e := int(a >> 52)
	if e == 0 {
		// Zero or binary64 subnormal (< 2^-1022): far below half the
		// smallest subnormal of any narrower format.
		return sign
	}
	bias := int(uint64(1)<<(ebits-1) - 1)
	m := a&(1<<52-1) | 1<<52 // value = m * 2^(e-1075)
	te := e - 1023 + bias    // biased target exponent if normal
	shift := 52 - int(mbits)
	if te < 1 { // subnormal result: the quantum stays at 2^(1-bias-mbits)
		shift += 1 - te
		if shift > 53 { // below half the smallest subnormal
			return sign
		}
		te = 1
	}
	r := (m + (1<<uint(shift-1) - 1) + (m>>uint(shift))&1) >> uint(shift) // nearest even
	// r carries the implicit bit, so it adds one to the exponent field of
	// a normal result; for a subnormal (te forced to 1) it is the field
	// itself. A carry out of the mantissa moves to the next binade.
	out := uint64(te-1)<<mbits + r
	if out >= inf {
		return sign | inf
	}
	return sign | out
}

// Decoders of the 8- and 4-bit formats to binary32 bits. Every value of
// these formats is exact in binary32.

// e4m3ToF32Bits: F8_E4M3 "fn": bias 7, no Inf, S.1111.111 is NaN, max 448.
func e4m3ToF32Bits(v uint8) uint32 {
	sign := uint32(v&0x80) << 24
	e := uint32(v>>3) & 0xf
	m := uint32(v & 7)
	switch {
	case e == 0xf && m == 7:
		return sign | 0x7fc00000 // no payload: the default quiet NaN
	case e == 0:
		return sign | math.Float32bits(float32(m)*(1.0/512)) // m * 2^-9
	default:
		return sign | (e+120)<<23 | m<<20
	}
}

// e5m2ToF32Bits: F8_E5M2 is the top byte of a binary16.
func e5m2ToF32Bits(v uint8) uint32 { return f16ToF32Bits(uint16(v) << 8) }

// e8m0ToF32Bits: F8_E8M0 is 2^(v-127) with 0xFF NaN, no sign.
func e8m0ToF32Bits(v uint8) uint32 {
	switch v {
	case 0xff:
		return 0x7fc00000
	case 0:
		return 0x00400000 // 2^-127, a binary32 subnormal
	default:
		return uint32(v) << 23
	}
}

// fnuzToF32Bits: the "fnuz" 8-bit floats (F8_E4M3FNUZ: ebits 4, bias 8;
// F8_E5M2FNUZ: ebits 5, bias 16): no Inf and no negative zero, 0x80 the only
// NaN, which has no payload and becomes the positive default quiet NaN (as
// torch converts it); subnormals where the exponent field is 0.
func fnuzToF32Bits(v uint8, ebits, bias uint32) uint32 {
	if v == 0x80 {
		return 0x7fc00000
	}
	mbits := 7 - ebits
	sign := uint32(v&0x80) << 24
	e := uint32(v&0x7f) >> mbits
	m := uint32(v) & (1<<mbits - 1)
	if e == 0 { // m * 2^(1-bias-mbits), exact
		return sign | math.Float32bits(float32(math.Ldexp(float64(m), 1-int(bias)-int(mbits))))
	}
	return sign | (e-bias+127)<<23 | m<<(23-mbits)
}

func e4m3fnuzToF32Bits(v uint8) uint32 { return fnuzToF32Bits(v, 4, 8) }
func e5m2fnuzToF32Bits(v uint8) uint32 { return fnuzToF32Bits(v, 5, 16) }

// e2m1ToF32Bits: F4 (E2M1), one nibble: bias 1, no Inf or NaN, values
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
func e2m1ToF32Bits(v uint8) uint32 {
	sign := uint32(v&8) << 28
	e := uint32(v>>1) & 3
	m := uint32(v & 1)
	if e == 0 {
		return sign | math.Float32bits(float32(m)*0.5)
	}
	return sign | (e+126)<<23 | m<<22
}

// smallTables holds, for each 8-bit source format, its 256 values in every
// target format, and the 16 F4 values likewise. Built on first use.
type smallTables struct {
	f64  [5][256]uint64 // index: 0 E4M3, 1 E5M2, 2 E8M0, 3 E4M3FNUZ, 4 E5M2FNUZ
	f32  [5][256]uint32
	f16  [5][256]uint16
	bf16 [5][256]uint16

	// F4: one byte holds two elements, low nibble first. Pairs are
	// packed into one word, first element in the low half, so one
	// little-endian store writes both.
	f4f16  [256]uint32
	f4bf16 [256]uint32
	f4f32  [256]uint64
	f4f64  [16]uint64
}

var tables = sync.OnceValue(func() *smallTables {
	t := new(smallTables)
	dec := [5]func(uint8) uint32{e4m3ToF32Bits, e5m2ToF32Bits, e8m0ToF32Bits, e4m3fnuzToF32Bits, e5m2fnuzToF32Bits}
	for k, d := range dec {
		for v := range 256 {
			x := d(uint8(v))
			t.f32[k][v] = x
			t.f64[k][v] = f32ToF64Bits(x)
			t.f16[k][v] = f32ToF16Bits(x)
			t.bf16[k][v] = f32ToBF16Bits(x)
		}
	}
	for v := range 256 {
		lo, hi := e2m1ToF32Bits(uint8(v&15)), e2m1ToF32Bits(uint8(v>>4))
		t.f4f16[v] = uint32(f32ToF16Bits(lo)) | uint32(f32ToF16Bits(hi))<<16
		t.f4bf16[v] = uint32(f32ToBF16Bits(lo)) | uint32(f32ToBF16Bits(hi))<<16
		t.f4f32[v] = uint64(lo) | uint64(hi)<<32
	}
	for v := range 16 {
		t.f4f64[v] = f32ToF64Bits(e2m1ToF32Bits(uint8(v)))
	}
	return t
})

// f8Index maps an 8-bit source dtype to its row in smallTables.
func f8Index(d DType) int {
	switch d {
	case F8E4M3:
		return 0
	case F8E5M2:
		return 1
	case F8E8M0:
		return 2
	case F8E4M3FNUZ:
		return 3
	case F8E5M2FNUZ:
		return 4
	}
	return -1
}
