//go:build amd64 && !purego

#include "textflag.h"

// Conversion kernels for AVX2 + F16C. Each converts n elements, n a
// positive multiple of 32 (accelBlock), from src to dst; the Go side checks
// the lengths and converts the tail. They must give exactly the bytes of
// the pure-Go functions in convert_scalar.go (tests compare both on every
// binary16 and bfloat16 input).

DATA absmask<>+0(SB)/4, $0x7fffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $4
DATA infbits<>+0(SB)/4, $0x7f800000
GLOBL infbits<>(SB), RODATA|NOPTR, $4
DATA quietbit<>+0(SB)/4, $0x00400000
GLOBL quietbit<>(SB), RODATA|NOPTR, $4
DATA round7fff<>+0(SB)/4, $0x00007fff
GLOBL round7fff<>(SB), RODATA|NOPTR, $4
DATA one32<>+0(SB)/4, $0x00000001
GLOBL one32<>(SB), RODATA|NOPTR, $4

// QUIETEN sets the quiet bit of the binary32 NaNs in register R, using T as
// scratch: Y10 = 0x7fffffff, Y11 = 0x7f800000, Y12 = 0x00400000.
#define QUIETEN(R, T) \
	VPAND     Y10, R, T; \
	VPCMPGTD  Y11, T, T; \
	VPAND     Y12, T, T; \
	VPOR      T, R, R

// func bf16ToF32AVX2(dst, src *byte, n int)
// bfloat16 is the top half of a binary32: zero-extend each 16-bit lane to
// 32 bits and shift left by 16; quieten signalling NaNs.
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTD absmask<>(SB), Y10
	VPBROADCASTD infbits<>(SB), Y11
	VPBROADCASTD quietbit<>(SB), Y12

bf16loop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPMOVZXWD 32(SI), Y2
	VPMOVZXWD 48(SI), Y3
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VPSLLD    $16, Y2, Y2
	VPSLLD    $16, Y3, Y3
	QUIETEN(Y0, Y4)
	QUIETEN(Y1, Y5)
	QUIETEN(Y2, Y6)
	QUIETEN(Y3, Y7)
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y1, 32(DI)
	VMOVDQU   Y2, 64(DI)
	VMOVDQU   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	JNZ       bf16loop
	VZEROUPPER
	RET

// func f16ToF32F16C(dst, src *byte, n int)
// VCVTPH2PS is exact and turns signalling NaNs quiet, keeping the payload.
TEXT ·f16ToF32F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

f16loop:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	JNZ       f16loop
	VZEROUPPER
	RET

// func f32ToF16F16C(dst, src *byte, n int)
// VCVTPS2PH with imm8 = 0 rounds to nearest even whatever MXCSR says; NaNs
// come out quiet with the top 9 payload bits, as f32ToF16Bits does.
TEXT ·f32ToF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

f32f16loop:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCVTPS2PH $0, Y0, (DI)
	VCVTPS2PH $0, Y1, 16(DI)
	VCVTPS2PH $0, Y2, 32(DI)
	VCVTPS2PH $0, Y3, 48(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	JNZ       f32f16loop
	VZEROUPPER
	RET

// ROUNDBF16 turns the binary32 lanes of R into bfloat16 values in the low
// 16 bits of each lane: x + 0x7fff + ((x >> 16) & 1), then >> 16; NaNs
// instead become (x | quiet bit) >> 16. T and U are scratch. Y13 = 0x7fff,
// Y14 = 1.
#define ROUNDBF16(R, T, U) \
	VPSRLD    $16, R, T; \
	VPAND     Y14, T, T; \
	VPADDD    Y13, T, T; \
	VPADDD    R, T, T; \
	VPAND     Y10, R, U; \
	VPCMPGTD  Y11, U, U; \
	VPOR      Y12, R, R; \
	VPBLENDVB U, R, T, R; \
	VPSRLD    $16, R, R

// func f32ToBF16AVX2(dst, src *byte, n int)
TEXT ·f32ToBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTD absmask<>(SB), Y10
	VPBROADCASTD infbits<>(SB), Y11
	VPBROADCASTD quietbit<>(SB), Y12
	VPBROADCASTD round7fff<>(SB), Y13
	VPBROADCASTD one32<>(SB), Y14

f32bf16loop:
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	VMOVDQU   64(SI), Y2
	VMOVDQU   96(SI), Y3
	ROUNDBF16(Y0, Y4, Y5)
	ROUNDBF16(Y1, Y6, Y7)
	ROUNDBF16(Y2, Y8, Y9)
	ROUNDBF16(Y3, Y4, Y5)
	// Pack dwords to words (no saturation: every lane is <= 0xffff). The
	// packs work per 128-bit lane, so reorder the quadwords afterwards.
	VPACKUSDW Y1, Y0, Y0
	VPACKUSDW Y3, Y2, Y2
	VPERMQ    $0xd8, Y0, Y0
	VPERMQ    $0xd8, Y2, Y2
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y2, 32(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	JNZ       f32bf16loop
	VZEROUPPER
	RET
