//go:build amd64 && !purego

#include "textflag.h"

// hadamard32.go says what this computes. Per group: the 32 nibbles in
// one register (low nibbles in lane 0, high in lane 1), moved to their
// transform index b (two in-lane shuffles and the lanes swapped) with
// their sign bits flipped where c_i is −1, turned into 2·e2m1 as int8,
// the stages of index bits 0-2 on bytes (|x| ≤ 96), widened to words (bit
// 3 then picks the register, bit 4 the lane), the stages of bits 3 and 4
// on words, the output signs, and four blocks of 8 converted to float32,
// times m/2 (exact) and times the scale (the one rounding).

DATA hNib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA hNib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL hNib<>(SB), RODATA|NOPTR, $16
DATA hE2M1<>+0(SB)/8, $0x0c08060403020100
DATA hE2M1<>+8(SB)/8, $0xf4f8fafcfdfeff00
DATA hE2M1<>+16(SB)/8, $0x0c08060403020100
DATA hE2M1<>+24(SB)/8, $0xf4f8fafcfdfeff00
GLOBL hE2M1<>(SB), RODATA|NOPTR, $32
DATA hSwap1<>+0(SB)/8, $0x0607040502030001
DATA hSwap1<>+8(SB)/8, $0x0e0f0c0d0a0b0809
DATA hSwap1<>+16(SB)/8, $0x0607040502030001
DATA hSwap1<>+24(SB)/8, $0x0e0f0c0d0a0b0809
GLOBL hSwap1<>(SB), RODATA|NOPTR, $32
DATA hSwap2<>+0(SB)/8, $0x0504070601000302
DATA hSwap2<>+8(SB)/8, $0x0d0c0f0e09080b0a
DATA hSwap2<>+16(SB)/8, $0x0504070601000302
DATA hSwap2<>+24(SB)/8, $0x0d0c0f0e09080b0a
GLOBL hSwap2<>(SB), RODATA|NOPTR, $32
DATA hS0<>+0(SB)/8, $0xff01ff01ff01ff01
DATA hS0<>+8(SB)/8, $0xff01ff01ff01ff01
DATA hS0<>+16(SB)/8, $0xff01ff01ff01ff01
DATA hS0<>+24(SB)/8, $0xff01ff01ff01ff01
GLOBL hS0<>(SB), RODATA|NOPTR, $32
DATA hS1<>+0(SB)/8, $0xffff0101ffff0101
DATA hS1<>+8(SB)/8, $0xffff0101ffff0101
DATA hS1<>+16(SB)/8, $0xffff0101ffff0101
DATA hS1<>+24(SB)/8, $0xffff0101ffff0101
GLOBL hS1<>(SB), RODATA|NOPTR, $32
DATA hS2<>+0(SB)/8, $0xffffffff01010101
DATA hS2<>+8(SB)/8, $0xffffffff01010101
DATA hS2<>+16(SB)/8, $0xffffffff01010101
DATA hS2<>+24(SB)/8, $0xffffffff01010101
GLOBL hS2<>(SB), RODATA|NOPTR, $32
DATA hS4<>+0(SB)/8, $0x0001000100010001
DATA hS4<>+8(SB)/8, $0x0001000100010001
DATA hS4<>+16(SB)/8, $0xffffffffffffffff
DATA hS4<>+24(SB)/8, $0xffffffffffffffff
GLOBL hS4<>(SB), RODATA|NOPTR, $32

// STAGE does the butterflies of one index bit: Y0 := sign(Y0, S) + Z,
// Z the partner lanes (computed by the caller into Y1).
#define BSTAGE(S) \
	VPSIGNB S, Y0, Y0 \
	VPADDB  Y1, Y0, Y0

// OUT8 converts the 8 words in X2 (int16 sums) and stores them at off(DI).
#define OUT8(off) \
	VPMOVSXWD X2, Y2        \
	VCVTDQ2PS Y2, Y2        \
	VMULPS    160(R8), Y2, Y2 \
	VMULPS    Y4, Y2, Y2    \
	VMOVUPS   Y2, off(DI)

// func hadamard32AVX2(dst *float32, codes, scales *byte, groups int, p *hadamard32Plan, pow2 *[256]float32)
// groups positive.
TEXT ·hadamard32AVX2(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), DI
	MOVQ    codes+8(FP), SI
	MOVQ    scales+16(FP), DX
	MOVQ    groups+24(FP), CX
	MOVQ    p+32(FP), R8
	MOVQ    pow2+40(FP), R9
	VMOVDQU hNib<>(SB), X15
	VMOVDQU hE2M1<>(SB), Y14
	VMOVDQU hSwap1<>(SB), Y13
	VMOVDQU hSwap2<>(SB), Y12
	VMOVDQU hS0<>(SB), Y11
	VMOVDQU hS1<>(SB), Y10
	VMOVDQU hS2<>(SB), Y9
	VMOVDQU hS4<>(SB), Y8
	VMOVDQU 0(R8), Y7
	VMOVDQU 32(R8), Y6
	VMOVDQU 64(R8), Y5

hloop:
	MOVBLZX      (DX), AX
	VMOVDQU      (SI), X0
	VPSRLW       $4, X0, X1
	VPAND        X15, X0, X0
	VPAND        X15, X1, X1
	VINSERTI128  $1, X1, Y0, Y0
	VPERMQ       $0x4e, Y0, Y1
	VPSHUFB      Y7, Y0, Y0
	VPSHUFB      Y6, Y1, Y1
	VPOR         Y1, Y0, Y0
	VPXOR        Y5, Y0, Y0
	VPSHUFB      Y0, Y14, Y0
	VPSHUFB      Y13, Y0, Y1
	BSTAGE(Y11)
	VPSHUFB      Y12, Y0, Y1
	BSTAGE(Y10)
	VPSHUFD      $0xb1, Y0, Y1
	BSTAGE(Y9)
	VPXOR        Y2, Y2, Y2
	VPCMPGTB     Y0, Y2, Y2
	VPUNPCKLBW   Y2, Y0, Y1
	VPUNPCKHBW   Y2, Y0, Y2
	VPADDW       Y2, Y1, Y0
	VPSUBW       Y2, Y1, Y1
	VPERMQ       $0x4e, Y0, Y2
	VPSIGNW      Y8, Y0, Y0
	VPADDW       Y2, Y0, Y0
	VPERMQ       $0x4e, Y1, Y2
	VPSIGNW      Y8, Y1, Y1
	VPADDW       Y2, Y1, Y1
	VPSIGNW      96(R8), Y0, Y0
	VPSIGNW      128(R8), Y1, Y1
	VBROADCASTSS (R9)(AX*4), Y4
	VMOVDQA      X0, X2
	OUT8(0)
	VEXTRACTI128 $1, Y0, X2
	OUT8(64)
	VMOVDQA      X1, X2
	OUT8(32)
	VEXTRACTI128 $1, Y1, X2
	OUT8(96)
	ADDQ         $16, SI
	INCQ         DX
	ADDQ         $128, DI
	DECQ         CX
	JNZ          hloop
	VZEROUPPER
	RET
