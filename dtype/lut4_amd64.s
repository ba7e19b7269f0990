//go:build amd64 && !purego

#include "textflag.h"

// 16-entry float32 table lookups for AVX2 (lut4.go says what they compute):
// VPERMPS looks up 8 entries, so each lookup is done in both halves of the
// table and VBLENDVPS picks by the code's bit 3 (moved to the sign bit).

DATA nib4mask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib4mask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nib4mask<>(SB), RODATA|NOPTR, $16
DATA nib4fifteen<>+0(SB)/4, $15
GLOBL nib4fifteen<>(SB), RODATA|NOPTR, $4

// func lookup4AVX2(dst *float32, src *byte, groups, gbytes int, tables *[16]float32, idx *byte)
// gbytes a positive multiple of 4; idx nil: group j uses tables[j].
TEXT ·lookup4AVX2(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    groups+16(FP), CX
	MOVQ    gbytes+24(FP), DX
	MOVQ    tables+32(FP), R8
	MOVQ    idx+40(FP), R9
	VMOVDQU nib4mask<>(SB), X13
	MOVQ    R8, R10              // the table of group 0 when idx is nil

l4group:
	TESTQ   R9, R9
	JZ      l4seq
	MOVBQZX (R9), AX
	INCQ    R9
	SHLQ    $6, AX
	LEAQ    (R8)(AX*1), R10

l4seq:
	VMOVUPS (R10), Y14           // entries 0-7
	VMOVUPS 32(R10), Y15         // entries 8-15
	XORQ    AX, AX

l4loop:
	VMOVD      (SI)(AX*1), X0
	VPSRLW     $4, X0, X1
	VPUNPCKLBW X1, X0, X0        // b0, b0>>4, b1, b1>>4, ... (high bits masked next)
	VPAND      X13, X0, X0
	VPMOVZXBD  X0, Y0
	VPERMPS    Y14, Y0, Y1
	VPERMPS    Y15, Y0, Y2
	VPSLLD     $28, Y0, Y3
	VBLENDVPS  Y3, Y2, Y1, Y1
	VMOVUPS    Y1, (DI)
	ADDQ       $32, DI
	ADDQ       $4, AX
	CMPQ       AX, DX
	JB         l4loop

	ADDQ    DX, SI
	ADDQ    $64, R10             // the next table when idx is nil
	DECQ    CX
	JNZ     l4group
	VZEROUPPER
	RET

// func lookup4HiAVX2(dst *float32, src *byte, groups, gbytes int, tables *[16]float32, idx *byte)
// lookup4AVX2 with the high nibble of each byte first.
TEXT ·lookup4HiAVX2(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    groups+16(FP), CX
	MOVQ    gbytes+24(FP), DX
	MOVQ    tables+32(FP), R8
	MOVQ    idx+40(FP), R9
	VMOVDQU nib4mask<>(SB), X13
	MOVQ    R8, R10              // the table of group 0 when idx is nil

h4group:
	TESTQ   R9, R9
	JZ      h4seq
	MOVBQZX (R9), AX
	INCQ    R9
	SHLQ    $6, AX
	LEAQ    (R8)(AX*1), R10

h4seq:
	VMOVUPS (R10), Y14           // entries 0-7
	VMOVUPS 32(R10), Y15         // entries 8-15
	XORQ    AX, AX

h4loop:
	VMOVD      (SI)(AX*1), X0
	VPSRLW     $4, X0, X1
	VPUNPCKLBW X0, X1, X0        // b0>>4, b0, b1>>4, b1, ... (high bits masked next)
	VPAND      X13, X0, X0
	VPMOVZXBD  X0, Y0
	VPERMPS    Y14, Y0, Y1
	VPERMPS    Y15, Y0, Y2
	VPSLLD     $28, Y0, Y3
	VBLENDVPS  Y3, Y2, Y1, Y1
	VMOVUPS    Y1, (DI)
	ADDQ       $32, DI
	ADDQ       $4, AX
	CMPQ       AX, DX
	JB         h4loop

	ADDQ    DX, SI
	ADDQ    $64, R10             // the next table when idx is nil
	DECQ    CX
	JNZ     h4group
	VZEROUPPER
	RET

// func plane4AVX2(dst *float32, src *byte, n int, shift uint, tbl *[16]float32)
// n a positive multiple of 8.
TEXT ·plane4AVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVQ         shift+24(FP), X12
	MOVQ         tbl+32(FP), R8
	VMOVUPS      (R8), Y14
	VMOVUPS      32(R8), Y15
	VPBROADCASTD nib4fifteen<>(SB), Y13
	XORQ         AX, AX

p4loop:
	VMOVDQU   (SI)(AX*4), Y0
	VPSRLD    X12, Y0, Y0
	VPAND     Y13, Y0, Y0
	VPERMPS   Y14, Y0, Y1
	VPERMPS   Y15, Y0, Y2
	VPSLLD    $28, Y0, Y3
	VBLENDVPS Y3, Y2, Y1, Y1
	VMOVUPS   Y1, (DI)(AX*4)
	ADDQ      $8, AX
	CMPQ      AX, CX
	JB        p4loop
	VZEROUPPER
	RET

// func lookup4AtAVX2(dst *float32, src *byte, n int, at *int32, tbl *float32)
// n a positive multiple of 8; every at[i]+15 inside tbl (checked by the caller).
TEXT ·lookup4AtAVX2(SB), NOSPLIT, $0-40
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    n+16(FP), CX
	MOVQ    at+24(FP), R9
	MOVQ    tbl+32(FP), R8
	VMOVDQU nib4mask<>(SB), X13

l4aloop:
	VMOVD      (SI), X0
	VPSRLW     $4, X0, X1
	VPUNPCKLBW X1, X0, X0
	VPAND      X13, X0, X0
	VPMOVZXBD  X0, Y0
	VPADDD     (R9), Y0, Y0
	VPCMPEQD   Y2, Y2, Y2
	VGATHERDPS Y2, (R8)(Y0*4), Y1
	VMOVUPS    Y1, (DI)
	ADDQ       $4, SI
	ADDQ       $32, R9
	ADDQ       $32, DI
	SUBQ       $8, CX
	JNZ        l4aloop
	VZEROUPPER
	RET

// func maxU32AVX2(p *int32, n int) uint32
TEXT ·maxU32AVX2(SB), NOSPLIT, $0-20
	MOVQ    p+0(FP), SI
	MOVQ    n+8(FP), CX
	VPXOR   Y0, Y0, Y0

mxloop:
	VPMAXUD (SI), Y0, Y0
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNZ     mxloop
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPMAXUD X1, X0, X0
	VMOVD   X0, AX
	MOVL    AX, ret+16(FP)
	VZEROUPPER
	RET

// func lookup8AVX2(dst *float32, src *byte, n int, tbl *[256]float32, scale float32)
// n a positive multiple of 8.
TEXT ·lookup8AVX2(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVQ         tbl+24(FP), R8
	VBROADCASTSS scale+32(FP), Y15

l8loop:
	VPMOVZXBD  (SI), Y0
	VPCMPEQD   Y2, Y2, Y2
	VGATHERDPS Y2, (R8)(Y0*4), Y1
	VMULPS     Y15, Y1, Y1
	VMOVUPS    Y1, (DI)
	ADDQ       $8, SI
	ADDQ       $32, DI
	SUBQ       $8, CX
	JNZ        l8loop
	VZEROUPPER
	RET
