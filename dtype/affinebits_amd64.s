//go:build amd64 && !purego

#include "textflag.h"

// affinebits.go says what this computes: per group, zero and scale
// broadcast; per 8 codes, widened (bytes) or loaded (uint32s) to int32
// lanes, shifted and masked, converted, minus the zero, rounded, times
// the scale, rounded. Rounding to bf16: add 0x7fff plus bit 16, clear the
// low 16 bits; to f16: F16C's conversion there and back (nearest even);
// a NaN lane (unordered with itself) keeps its value in both.

DATA abOne<>+0(SB)/4, $1
GLOBL abOne<>(SB), RODATA|NOPTR, $4
DATA abHalf<>+0(SB)/4, $0x7fff
GLOBL abHalf<>(SB), RODATA|NOPTR, $4
DATA abHigh<>+0(SB)/4, $0xffff0000
GLOBL abHigh<>(SB), RODATA|NOPTR, $4

// Y0 the lanes; Y1-Y3 scratch; Y8 ones, Y9 0x7fff, Y10 the high mask.
#define RNONE

#define RBF16 \
	VCMPPS    $3, Y0, Y0, Y1 \
	VPSRLD    $16, Y0, Y2    \
	VPAND     Y8, Y2, Y2     \
	VPADDD    Y9, Y0, Y3     \
	VPADDD    Y2, Y3, Y3     \
	VPAND     Y10, Y3, Y3    \
	VBLENDVPS Y1, Y0, Y3, Y0

#define RF16 \
	VCMPPS    $3, Y0, Y0, Y1 \
	VCVTPS2PH $0, Y0, X2     \
	VCVTPH2PS X2, Y3         \
	VBLENDVPS Y1, Y0, Y3, Y0

#define LBYTE VPMOVZXBD (SI), Y0
#define LWORD VMOVDQU (SI), Y0

// LOOP(name, inner, load, step, round): every group, 8 codes a step.
#define LOOP(name, inner, load, step, round) \
name:                              \
	VBROADCASTSS (R8), Y14         \
	VBROADCASTSS (R9), Y15         \
	MOVQ         DX, BX            \
inner:                          \
	load                           \
	VPSRLD       X12, Y0, Y0       \
	VPAND        Y11, Y0, Y0       \
	VCVTDQ2PS    Y0, Y0            \
	VSUBPS       Y14, Y0, Y0       \
	round                          \
	VMULPS       Y15, Y0, Y0       \
	round                          \
	VMOVUPS      Y0, (DI)          \
	ADDQ         $step, SI         \
	ADDQ         $32, DI           \
	SUBQ         $8, BX            \
	JNZ          inner             \
	ADDQ         $4, R8            \
	ADDQ         $4, R9            \
	DECQ         CX                \
	JNZ          name              \
	JMP          abdone

// func affineBitsAVX2(dst *float32, src *byte, groups, gsize int, zero, scale *float32, shift, mask uint, width, mode int)
// groups positive, gsize a positive multiple of 8, width 1 or 4, mode 0 (f32), 1 (bf16), 2 (f16).
TEXT ·affineBitsAVX2(SB), NOSPLIT, $0-80
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         groups+16(FP), CX
	MOVQ         gsize+24(FP), DX
	MOVQ         zero+32(FP), R8
	MOVQ         scale+40(FP), R9
	MOVQ         shift+48(FP), X12
	MOVQ         mask+56(FP), X11
	VPBROADCASTD X11, Y11
	MOVQ         width+64(FP), R10
	MOVQ         mode+72(FP), R11
	VPBROADCASTD abOne<>(SB), Y8
	VPBROADCASTD abHalf<>(SB), Y9
	VPBROADCASTD abHigh<>(SB), Y10
	CMPQ         R10, $4
	JEQ          abwide
	CMPQ         R11, $1
	JEQ          ab1
	CMPQ         R11, $2
	JEQ          ab2
	JMP          ab0

abwide:
	CMPQ R11, $1
	JEQ  ab4
	CMPQ R11, $2
	JEQ  ab5
	JMP  ab3

	LOOP(ab0, ab0in, LBYTE, 8, RNONE)
	LOOP(ab1, ab1in, LBYTE, 8, RBF16)
	LOOP(ab2, ab2in, LBYTE, 8, RF16)
	LOOP(ab3, ab3in, LWORD, 32, RNONE)
	LOOP(ab4, ab4in, LWORD, 32, RBF16)
	LOOP(ab5, ab5in, LWORD, 32, RF16)

abdone:
	VZEROUPPER
	RET
