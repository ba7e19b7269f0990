//go:build amd64 && !purego

package dtype

import "golang.org/x/sys/cpu"

// hasAccel reports whether this CPU runs the assembly kernels in
// convert_amd64.s: AVX2 (which x/sys/cpu only sets when the OS saves the
// YMM registers) and F16C.
var hasAccel = cpu.X86.HasAVX2 && cpu.X86.HasF16C

// useAccel switches the assembly kernels on and off; tests flip it (through
// setAccel) to check that both paths give the same bytes.
var useAccel = hasAccel

// accelBlock is the number of elements one iteration of every assembly loop
// converts; the kernels take a multiple of it and Go converts the tail.
const accelBlock = 32

//go:noescape
func bf16ToF32AVX2(dst, src *byte, n int)

//go:noescape
func f16ToF32F16C(dst, src *byte, n int)

//go:noescape
func f32ToF16F16C(dst, src *byte, n int)

//go:noescape
func f32ToBF16AVX2(dst, src *byte, n int)

// accelN returns how many of the elements in src (each size bytes) the
// assembly kernels take: a multiple of accelBlock, or 0.
func accelN(src []byte, size int) int {
	if !useAccel {
		return 0
	}
	return len(src) / size &^ (accelBlock - 1)
}

func accelBF16ToF32(dst, src []byte) int {
	n := accelN(src, 2)
	if n > 0 {
		_ = dst[4*n-1]
		bf16ToF32AVX2(&dst[0], &src[0], n)
	}
	return n
}

func accelF16ToF32(dst, src []byte) int {
	n := accelN(src, 2)
	if n > 0 {
		_ = dst[4*n-1]
		f16ToF32F16C(&dst[0], &src[0], n)
	}
	return n
}

func accelF32ToF16(dst, src []byte) int {
	n := accelN(src, 4)
	if n > 0 {
		_ = dst[2*n-1]
		f32ToF16F16C(&dst[0], &src[0], n)
	}
	return n
}

func accelF32ToBF16(dst, src []byte) int {
	n := accelN(src, 4)
	if n > 0 {
		_ = dst[2*n-1]
		f32ToBF16AVX2(&dst[0], &src[0], n)
	}
	return n
}

// accelChunk is the float32 staging buffer (on the stack) of the two-step
// kernels, in elements.
const accelChunk = 1024

// accelF16ToBF16 and accelBF16ToF16 go through float32 in a stack buffer:
// widening is exact, so the one rounding is the second step's, as in the
// pure-Go path.
func accelF16ToBF16(dst, src []byte) int {
	n := accelN(src, 2)
	if n > 0 {
		_ = dst[2*n-1]
		var buf [4 * accelChunk]byte
		for i := 0; i < n; i += accelChunk {
			k := min(n-i, accelChunk)
			f16ToF32F16C(&buf[0], &src[2*i], k)
			f32ToBF16AVX2(&dst[2*i], &buf[0], k)
		}
	}
	return n
}

func accelBF16ToF16(dst, src []byte) int {
	n := accelN(src, 2)
	if n > 0 {
		_ = dst[2*n-1]
		var buf [4 * accelChunk]byte
		for i := 0; i < n; i += accelChunk {
			k := min(n-i, accelChunk)
			bf16ToF32AVX2(&buf[0], &src[2*i], k)
			f32ToF16F16C(&dst[2*i], &buf[0], k)
		}
	}
	return n
}
