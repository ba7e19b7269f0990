//go:build amd64 && !purego

#include "textflag.h"

// ScaleE4M3's kernel (AVX2 + F16C). An F8_E4M3 code s.eeee.mmm, moved to
// s.0eeee.mmm0000000 in 16 bits, is the binary16 of its value times 2^-8
// (bias 15 against 7, and the subnormals line up): VCVTPH2PS widens it
// exactly and one multiply by 2^8 is exact too. The NaN codes (s.1111.111)
// become the default quiet NaN with their sign, as e4m3ToF32Bits has them.

DATA e4m3mag<>+0(SB)/2, $0x3f80
GLOBL e4m3mag<>(SB), RODATA|NOPTR, $2
DATA e4m3sign<>+0(SB)/2, $0x8000
GLOBL e4m3sign<>(SB), RODATA|NOPTR, $2
DATA e4m3two8<>+0(SB)/4, $0x43800000
GLOBL e4m3two8<>(SB), RODATA|NOPTR, $4
DATA e4m3qnan<>+0(SB)/4, $0x7fc00000
GLOBL e4m3qnan<>(SB), RODATA|NOPTR, $4
DATA e4m3sign32<>+0(SB)/4, $0x80000000
GLOBL e4m3sign32<>(SB), RODATA|NOPTR, $4

// E4M3HALF widens 8 binary16 lanes (X) to binary32 (D), multiplies them
// by 2^8, replaces the lanes whose 16-bit mask in M is set with a quiet
// NaN of their sign, then multiplies by the scale (the value the first
// operand). T and U are scratch.
#define E4M3HALF(X, M, D, T, U) \
	VCVTPH2PS    X, D; \
	VMULPS       Y12, D, D; \
	VPMOVSXWD    M, T; \
	VANDPS       Y10, D, U; \
	VORPS        Y11, U, U; \
	VBLENDVPS    T, U, D, D; \
	VMULPS       Y15, D, D

// func scaleE4M3AVX2(dst *float32, src *byte, n int, scale float32)
TEXT ·scaleE4M3AVX2(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS scale+24(FP), Y15
	VPBROADCASTW e4m3mag<>(SB), Y14
	VPBROADCASTW e4m3sign<>(SB), Y13
	VPBROADCASTD e4m3two8<>(SB), Y12
	VPBROADCASTD e4m3qnan<>(SB), Y11
	VPBROADCASTD e4m3sign32<>(SB), Y10

e4m3loop:
	VPMOVZXBW    (SI), Y0
	VPSLLW       $7, Y0, Y1
	VPAND        Y14, Y1, Y1 // (code & 0x7f) << 7
	VPSLLW       $8, Y0, Y2
	VPAND        Y13, Y2, Y2 // sign << 15
	VPCMPEQW     Y14, Y1, Y3 // the NaN codes
	VPOR         Y2, Y1, Y1
	VEXTRACTI128 $1, Y1, X4
	VEXTRACTI128 $1, Y3, X5
	E4M3HALF(X1, X3, Y6, Y7, Y8)
	E4M3HALF(X4, X5, Y9, Y7, Y8)
	VMOVUPS      Y6, (DI)
	VMOVUPS      Y9, 32(DI)
	ADDQ         $16, SI
	ADDQ         $64, DI
	SUBQ         $16, CX
	JNZ          e4m3loop
	VZEROUPPER
	RET
