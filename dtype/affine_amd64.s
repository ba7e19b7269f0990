//go:build amd64 && !purego

#include "textflag.h"

// affine.go says what these compute. Rounding a float32 lane to bf16 to
// nearest even: add 0x7fff plus bit 16, clear the low 16 bits; a NaN lane
// (unordered with itself) keeps its value.

DATA affOne<>+0(SB)/4, $1
GLOBL affOne<>(SB), RODATA|NOPTR, $4
DATA affHalf<>+0(SB)/4, $0x7fff
GLOBL affHalf<>(SB), RODATA|NOPTR, $4
DATA affHigh<>+0(SB)/4, $0xffff0000
GLOBL affHigh<>(SB), RODATA|NOPTR, $4
DATA affNib<>+0(SB)/4, $15
GLOBL affNib<>(SB), RODATA|NOPTR, $4

// ROUNDBF16 rounds Y0 in place; Y1-Y3 scratch; Y8 ones, Y9 0x7fff, Y10 the high mask.
#define ROUNDBF16 \
	VCMPPS    $3, Y0, Y0, Y1 \
	VPSRLD    $16, Y0, Y2    \
	VPAND     Y8, Y2, Y2     \
	VPADDD    Y9, Y0, Y3     \
	VPADDD    Y2, Y3, Y3     \
	VPAND     Y10, Y3, Y3    \
	VBLENDVPS Y1, Y0, Y3, Y0

// AFFINE8 takes the 8 codes in Y0 (int32) to their values, stores them at
// DI and steps SI, DI and the count BX (its flags for the caller's JNZ).
#define AFFINE8 \
	VCVTDQ2PS Y0, Y0      \
	VSUBPS    Y14, Y0, Y0 \
	ROUNDBF16             \
	VMULPS    Y15, Y0, Y0 \
	ROUNDBF16             \
	VMOVUPS   Y0, (DI)    \
	ADDQ      $8, SI      \
	ADDQ      $32, DI     \
	SUBQ      $8, BX

// func affineBF16AVX2(dst *float32, src *byte, groups, gsize int, zero, scale *float32, shift uint, signed bool)
// groups positive, gsize a positive multiple of 8.
TEXT ·affineBF16AVX2(SB), NOSPLIT, $0-57
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         groups+16(FP), CX
	MOVQ         gsize+24(FP), DX
	MOVQ         zero+32(FP), R8
	MOVQ         scale+40(FP), R9
	MOVQ         shift+48(FP), X12
	MOVBLZX      signed+56(FP), R10
	VPBROADCASTD affOne<>(SB), Y8
	VPBROADCASTD affHalf<>(SB), Y9
	VPBROADCASTD affHigh<>(SB), Y10
	VPBROADCASTD affNib<>(SB), Y11

agroup:
	VBROADCASTSS (R8), Y14
	VBROADCASTSS (R9), Y15
	MOVQ         DX, BX
	TESTQ        R10, R10
	JZ           anib

ai8:
	VPMOVSXBD (SI), Y0
	AFFINE8
	JNZ       ai8
	JMP       anext

anib:
	VPMOVZXBD (SI), Y0
	VPSRLD    X12, Y0, Y0
	VPAND     Y11, Y0, Y0
	AFFINE8
	JNZ       anib

anext:
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ  agroup
	VZEROUPPER
	RET
