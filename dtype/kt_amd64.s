//go:build amd64 && !purego

#include "textflag.h"

// The _KT trellis values (quant_iktrellis.go says what they are), eight
// lanes at a time: the group's index broadcast, times the multiplier's
// powers (VPMULLD keeps the low 32 bits, as Go's uint32 product), masked
// to 0x3f3f3f3f, its four bytes summed by a multiplication by 0x01010101
// (no byte carries: each partial sum is < 256) and a shift, − 126,
// converted to float32 (exact), times the group's scale (the one
// rounding, as Go's scale·value).

DATA ktPow8<>+0(SB)/4, $0xcbac1fed
DATA ktPow8<>+4(SB)/4, $0xc8734169
DATA ktPow8<>+8(SB)/4, $0xbd2b4535
DATA ktPow8<>+12(SB)/4, $0xe50c7d11
DATA ktPow8<>+16(SB)/4, $0x1220d7bd
DATA ktPow8<>+20(SB)/4, $0x94839cf9
DATA ktPow8<>+24(SB)/4, $0x58267985
DATA ktPow8<>+28(SB)/4, $0x60b19b21
GLOBL ktPow8<>(SB), RODATA|NOPTR, $32
DATA ktPow4<>+0(SB)/4, $0xcbac1fed
DATA ktPow4<>+4(SB)/4, $0xc8734169
DATA ktPow4<>+8(SB)/4, $0xbd2b4535
DATA ktPow4<>+12(SB)/4, $0xe50c7d11
DATA ktPow4<>+16(SB)/4, $0xcbac1fed
DATA ktPow4<>+20(SB)/4, $0xc8734169
DATA ktPow4<>+24(SB)/4, $0xbd2b4535
DATA ktPow4<>+28(SB)/4, $0xe50c7d11
GLOBL ktPow4<>(SB), RODATA|NOPTR, $32
DATA ktMask<>+0(SB)/4, $0x3f3f3f3f
GLOBL ktMask<>(SB), RODATA|NOPTR, $4
DATA ktOnes<>+0(SB)/4, $0x01010101
GLOBL ktOnes<>(SB), RODATA|NOPTR, $4
DATA kt126<>+0(SB)/4, $126
GLOBL kt126<>(SB), RODATA|NOPTR, $4

// KTCONSTS loads the powers table pow into Y10 and the mask, the byte
// summer and 126 into Y11-Y13.
#define KTCONSTS(pow) \
	VMOVDQU      pow, Y10; \
	VPBROADCASTD ktMask<>(SB), Y11; \
	VPBROADCASTD ktOnes<>(SB), Y12; \
	VPBROADCASTD kt126<>(SB), Y13

// KTSUM turns the indices in Y0 into the lanes' byte sums − 126 (int32).
#define KTSUM \
	VPMULLD Y10, Y0, Y0; \
	VPAND   Y11, Y0, Y0; \
	VPMULLD Y12, Y0, Y0; \
	VPSRLD  $24, Y0, Y0; \
	VPSUBD  Y13, Y0, Y0

// func kt8AVX2(dst *float32, x *uint32, s *float32, n int)
// n ≥ 1 groups of 8: dst[8g+k] = s[g]·(value k of index x[g]).
TEXT ·kt8AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         s+16(FP), DX
	MOVQ         n+24(FP), CX
	KTCONSTS(ktPow8<>(SB))

kt8loop:
	VPBROADCASTD (SI), Y0
	KTSUM
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (DX), Y1
	VMULPS       Y0, Y1, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $4, SI
	ADDQ         $4, DX
	ADDQ         $32, DI
	DECQ         CX
	JNZ          kt8loop
	VZEROUPPER
	RET

// func kt4AVX2(dst *float32, x *uint32, s *float32, n int)
// n ≥ 2 groups of 4, n even: dst[4g+k] = s[g]·(value k of index x[g]),
// two groups a register (one a 128-bit lane).
TEXT ·kt4AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         s+16(FP), DX
	MOVQ         n+24(FP), CX
	KTCONSTS(ktPow4<>(SB))

kt4loop:
	VPBROADCASTD (SI), X0
	VPBROADCASTD 4(SI), X2
	VINSERTI128  $1, X2, Y0, Y0
	KTSUM
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (DX), X1
	VBROADCASTSS 4(DX), X3
	VINSERTF128  $1, X3, Y1, Y1
	VMULPS       Y0, Y1, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $8, SI
	ADDQ         $8, DX
	ADDQ         $32, DI
	SUBQ         $2, CX
	JNZ          kt4loop
	VZEROUPPER
	RET

// func kt8AbsAVX2(dst *float32, x *uint32, s *float32, neg *uint64, n int)
// kt8AVX2 with |value| (IQ3_KT), then the sign bit flipped in element k
// of group g where byte k of neg[g] is 1 (each byte 0 or 1).
TEXT ·kt8AbsAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         s+16(FP), DX
	MOVQ         neg+24(FP), R8
	MOVQ         n+32(FP), CX
	KTCONSTS(ktPow8<>(SB))

kt8aloop:
	VPBROADCASTD (SI), Y0
	KTSUM
	VPABSD       Y0, Y0
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (DX), Y1
	VMULPS       Y0, Y1, Y0
	VPMOVZXBD    (R8), Y2
	VPSLLD       $31, Y2, Y2
	VXORPS       Y2, Y0, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $4, SI
	ADDQ         $4, DX
	ADDQ         $8, R8
	ADDQ         $32, DI
	DECQ         CX
	JNZ          kt8aloop
	VZEROUPPER
	RET
