package dtype

import "encoding/binary"

// Kernels: each converts every whole source element of src into dst, which
// the caller (the Converter wrapper in convert.go) has already checked and
// cut to exactly the output size. The accelerated kernels (accel*, see
// convert_amd64.go) convert a prefix and report how many elements they did;
// the pure-Go loop finishes the rest, so both paths must agree bit for bit.

var le = binary.LittleEndian

// 16-bit sources.

func bf16ToF32(dst, src []byte) {
	n := accelBF16ToF32(dst, src)
	dst, src = dst[4*n:], src[2*n:]
	for len(src) >= 8 && len(dst) >= 16 {
		s, d := src[:8:8], dst[:16:16]
		le.PutUint32(d[0:], bf16ToF32Bits(le.Uint16(s[0:])))
		le.PutUint32(d[4:], bf16ToF32Bits(le.Uint16(s[2:])))
		le.PutUint32(d[8:], bf16ToF32Bits(le.Uint16(s[4:])))
		le.PutUint32(d[12:], bf16ToF32Bits(le.Uint16(s[6:])))
		src, dst = src[8:], dst[16:]
	}
	for len(src) >= 2 && len(dst) >= 4 {
		le.PutUint32(dst, bf16ToF32Bits(le.Uint16(src)))
		src, dst = src[2:], dst[4:]
	}
}

func f16ToF32(dst, src []byte) {
	n := accelF16ToF32(dst, src)
	dst, src = dst[4*n:], src[2*n:]
	for len(src) >= 8 && len(dst) >= 16 {
		s, d := src[:8:8], dst[:16:16]
		le.PutUint32(d[0:], f16ToF32Bits(le.Uint16(s[0:])))
		le.PutUint32(d[4:], f16ToF32Bits(le.Uint16(s[2:])))
		le.PutUint32(d[8:], f16ToF32Bits(le.Uint16(s[4:])))
		le.PutUint32(d[12:], f16ToF32Bits(le.Uint16(s[6:])))
		src, dst = src[8:], dst[16:]
	}
	for len(src) >= 2 && len(dst) >= 4 {
		le.PutUint32(dst, f16ToF32Bits(le.Uint16(src)))
		src, dst = src[2:], dst[4:]
	}
}

func bf16ToF64(dst, src []byte) {
	for j := range len(src) / 2 {
		le.PutUint64(dst[8*j:], f32ToF64Bits(bf16ToF32Bits(le.Uint16(src[2*j:]))))
	}
}

func f16ToF64(dst, src []byte) {
	for j := range len(src) / 2 {
		le.PutUint64(dst[8*j:], f32ToF64Bits(f16ToF32Bits(le.Uint16(src[2*j:]))))
	}
}

func bf16ToF16(dst, src []byte) {
	n := accelBF16ToF16(dst, src)
	dst, src = dst[2*n:], src[2*n:]
	for j := range len(src) / 2 {
		le.PutUint16(dst[2*j:], f32ToF16Bits(bf16ToF32Bits(le.Uint16(src[2*j:]))))
	}
}

func f16ToBF16(dst, src []byte) {
	n := accelF16ToBF16(dst, src)
	dst, src = dst[2*n:], src[2*n:]
	for j := range len(src) / 2 {
		le.PutUint16(dst[2*j:], f32ToBF16Bits(f16ToF32Bits(le.Uint16(src[2*j:]))))
	}
}

// 32-bit source.

func f32ToF16(dst, src []byte) {
	n := accelF32ToF16(dst, src)
	dst, src = dst[2*n:], src[4*n:]
	for len(src) >= 16 && len(dst) >= 8 {
		s, d := src[:16:16], dst[:8:8]
		le.PutUint16(d[0:], f32ToF16Bits(le.Uint32(s[0:])))
		le.PutUint16(d[2:], f32ToF16Bits(le.Uint32(s[4:])))
		le.PutUint16(d[4:], f32ToF16Bits(le.Uint32(s[8:])))
		le.PutUint16(d[6:], f32ToF16Bits(le.Uint32(s[12:])))
		src, dst = src[16:], dst[8:]
	}
	for len(src) >= 4 && len(dst) >= 2 {
		le.PutUint16(dst, f32ToF16Bits(le.Uint32(src)))
		src, dst = src[4:], dst[2:]
	}
}

func f32ToBF16(dst, src []byte) {
	n := accelF32ToBF16(dst, src)
	dst, src = dst[2*n:], src[4*n:]
	for len(src) >= 16 && len(dst) >= 8 {
		s, d := src[:16:16], dst[:8:8]
		le.PutUint16(d[0:], f32ToBF16Bits(le.Uint32(s[0:])))
		le.PutUint16(d[2:], f32ToBF16Bits(le.Uint32(s[4:])))
		le.PutUint16(d[4:], f32ToBF16Bits(le.Uint32(s[8:])))
		le.PutUint16(d[6:], f32ToBF16Bits(le.Uint32(s[12:])))
		src, dst = src[16:], dst[8:]
	}
	for len(src) >= 4 && len(dst) >= 2 {
		le.PutUint16(dst, f32ToBF16Bits(le.Uint32(src)))
		src, dst = src[4:], dst[2:]
	}
}

func f32ToF64(dst, src []byte) {
	for j := range len(src) / 4 {
		le.PutUint64(dst[8*j:], f32ToF64Bits(le.Uint32(src[4*j:])))
	}
}

// 64-bit source.

func f64ToF32(dst, src []byte) {
	for j := range len(src) / 8 {
		le.PutUint32(dst[4*j:], f64ToF32Bits(le.Uint64(src[8*j:])))
	}
}

func f64ToF16(dst, src []byte) {
	for j := range len(src) / 8 {
		le.PutUint16(dst[2*j:], f64ToF16Bits(le.Uint64(src[8*j:])))
	}
}

func f64ToBF16(dst, src []byte) {
	for j := range len(src) / 8 {
		le.PutUint16(dst[2*j:], f64ToBF16Bits(le.Uint64(src[8*j:])))
	}
}

// 8-bit sources: table lookups (see smallTables).

func lut8To16(t *[256]uint16) func(dst, src []byte) {
	return func(dst, src []byte) {
		for i, v := range src {
			le.PutUint16(dst[2*i:], t[v])
		}
	}
}

func lut8To32(t *[256]uint32) func(dst, src []byte) {
	return func(dst, src []byte) {
		for i, v := range src {
			le.PutUint32(dst[4*i:], t[v])
		}
	}
}

func lut8To64(t *[256]uint64) func(dst, src []byte) {
	return func(dst, src []byte) {
		for i, v := range src {
			le.PutUint64(dst[8*i:], t[v])
		}
	}
}

// F4: two elements per byte, low nibble first. The 16- and 32-bit targets
// use pair tables (both elements of a byte in one word).

func f4ToF64(t *[16]uint64) func(dst, src []byte) {
	return func(dst, src []byte) {
		for i, v := range src {
			le.PutUint64(dst[16*i:], t[v&15])
			le.PutUint64(dst[16*i+8:], t[v>>4])
		}
	}
}
