//go:build amd64 && !purego

#include "textflag.h"

// Dequantization kernels for AVX2. Each writes n float32s (n a positive
// multiple of 16) from n one-byte codes, with one scale (and min) per 16
// elements. The Go side (quant_accel.go) unpacks the blocks into codes; the
// arithmetic is ggml's, one float32 rounding per operation, in its order.

DATA signbit<>+0(SB)/4, $0x80000000
GLOBL signbit<>(SB), RODATA|NOPTR, $4
DATA onef<>+0(SB)/4, $0x3f800000
GLOBL onef<>(SB), RODATA|NOPTR, $4

DATA lo4mask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lo4mask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL lo4mask<>(SB), RODATA|NOPTR, $16
DATA three32<>+0(SB)/4, $3
GLOBL three32<>(SB), RODATA|NOPTR, $4
DATA fifteen32<>+0(SB)/4, $15
GLOBL fifteen32<>(SB), RODATA|NOPTR, $4
DATA thirtytwo32<>+0(SB)/4, $32
GLOBL thirtytwo32<>(SB), RODATA|NOPTR, $4

// func quantNibAVX2(dst *float32, q *byte, chunks, chunk, stride int, scale, min *float32, lut *[16]int8)
// For each of the chunks (chunk bytes, a multiple of 8, the next one stride
// bytes further): byte k's low nibble gives dst[k], its high nibble
// dst[chunk+k], each float32(lut[nibble]) * scale - min, with the chunk's
// two scales and mins (low, high) at scale[2c:], min[2c:]. dst advances by
// 2*chunk floats a chunk.
TEXT ·quantNibAVX2(SB), NOSPLIT, $0-64
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         chunks+16(FP), CX
	MOVQ         chunk+24(FP), DX
	MOVQ         scale+40(FP), R8
	MOVQ         min+48(FP), R9
	MOVQ         lut+56(FP), R10
	VMOVDQU      (R10), X15
	VMOVDQU      lo4mask<>(SB), X14
	MOVQ         DX, R12
	SHLQ         $2, R12              // chunk * 4: offset of the high outputs

nibchunk:
	VBROADCASTSS (R8), Y10
	VBROADCASTSS 4(R8), Y11
	VBROADCASTSS (R9), Y12
	VBROADCASTSS 4(R9), Y13
	XORQ         AX, AX

nibloop:
	VMOVQ        (SI)(AX*1), X0
	VPAND        X14, X0, X1
	VPSRLW       $4, X0, X2
	VPAND        X14, X2, X2
	VPSHUFB      X1, X15, X1
	VPSHUFB      X2, X15, X2
	VPMOVSXBD    X1, Y1
	VPMOVSXBD    X2, Y2
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VMULPS       Y10, Y1, Y1
	VMULPS       Y11, Y2, Y2
	VSUBPS       Y12, Y1, Y1
	VSUBPS       Y13, Y2, Y2
	LEAQ         (DI)(AX*4), R11
	VMOVUPS      Y1, (R11)
	VMOVUPS      Y2, (R11)(R12*1)
	ADDQ         $8, AX
	CMPQ         AX, DX
	JB           nibloop

	ADDQ         stride+32(FP), SI
	LEAQ         (DI)(R12*2), DI
	ADDQ         $8, R8
	ADDQ         $8, R9
	DECQ         CX
	JNZ          nibchunk
	VZEROUPPER
	RET

// func quantQ6KAVX2(dst *float32, b *byte, scale *float32)
// One Q6_K block (ql[128], qh[64] at 128): 256 elements
// float32(q - 32) * scale[i/16], q the 6-bit code, as dequantQ6K orders them.
TEXT ·quantQ6KAVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         b+8(FP), SI
	MOVQ         scale+16(FP), R8
	LEAQ         128(SI), R9          // qh
	VPBROADCASTD fifteen32<>(SB), Y13
	VPBROADCASTD three32<>(SB), Y14
	VPBROADCASTD thirtytwo32<>(SB), Y15
	MOVQ         $2, CX

q6half:
	XORQ         AX, AX

q6loop:
	// scales of the four outputs' groups: l/16 + 0, 2, 4, 6
	MOVQ         AX, R10
	SHRQ         $4, R10
	VBROADCASTSS (R8)(R10*4), Y8
	VBROADCASTSS 8(R8)(R10*4), Y9
	VBROADCASTSS 16(R8)(R10*4), Y10
	VBROADCASTSS 24(R8)(R10*4), Y11
	VPMOVZXBD    (SI)(AX*1), Y0       // ql[l]
	VPMOVZXBD    32(SI)(AX*1), Y1     // ql[l+32]
	VPMOVZXBD    (R9)(AX*1), Y2       // qh[l]
	VPAND        Y13, Y0, Y3
	VPAND        Y14, Y2, Y4
	VPSLLD       $4, Y4, Y4
	VPOR         Y4, Y3, Y3           // q1
	VPAND        Y13, Y1, Y4
	VPSRLD       $2, Y2, Y5
	VPAND        Y14, Y5, Y5
	VPSLLD       $4, Y5, Y5
	VPOR         Y5, Y4, Y4           // q2
	VPSRLD       $4, Y0, Y5
	VPSRLD       $4, Y2, Y6
	VPAND        Y14, Y6, Y6
	VPSLLD       $4, Y6, Y6
	VPOR         Y6, Y5, Y5           // q3
	VPSRLD       $4, Y1, Y6
	VPSRLD       $6, Y2, Y7
	VPSLLD       $4, Y7, Y7
	VPOR         Y7, Y6, Y6           // q4
	VPSUBD       Y15, Y3, Y3
	VPSUBD       Y15, Y4, Y4
	VPSUBD       Y15, Y5, Y5
	VPSUBD       Y15, Y6, Y6
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VCVTDQ2PS    Y5, Y5
	VCVTDQ2PS    Y6, Y6
	VMULPS       Y8, Y3, Y3
	VMULPS       Y9, Y4, Y4
	VMULPS       Y10, Y5, Y5
	VMULPS       Y11, Y6, Y6
	LEAQ         (DI)(AX*4), R11
	VMOVUPS      Y3, (R11)
	VMOVUPS      Y4, 128(R11)
	VMOVUPS      Y5, 256(R11)
	VMOVUPS      Y6, 384(R11)
	ADDQ         $8, AX
	CMPQ         AX, $32
	JB           q6loop

	ADDQ         $64, SI              // next half: ql += 64, qh += 32
	ADDQ         $32, R9
	ADDQ         $512, DI
	ADDQ         $32, R8
	DECQ         CX
	JNZ          q6half
	VZEROUPPER
	RET

// func quantSignedAVX2(dst *float32, q, neg *byte, n int, scale *float32)
// dst[i] = float32(q[i]) * scale[i/16] * (neg[i] != 0 ? -1 : 1), neg[i]
// 0x00 or 0xFF: the multiplication by ±1 that ggml does.
TEXT ·quantSignedAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         neg+16(FP), DX
	MOVQ         n+24(FP), CX
	MOVQ         scale+32(FP), R8
	VPBROADCASTD signbit<>(SB), Y6
	VPBROADCASTD onef<>(SB), Y7

sgnloop:
	VBROADCASTSS (R8), Y5
	VPMOVZXBD    (SI), Y0
	VPMOVZXBD    8(SI), Y1
	VPMOVSXBD    (DX), Y2
	VPMOVSXBD    8(DX), Y3
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VPAND        Y6, Y2, Y2
	VPAND        Y6, Y3, Y3
	VPOR         Y7, Y2, Y2
	VPOR         Y7, Y3, Y3
	VMULPS       Y5, Y0, Y0
	VMULPS       Y5, Y1, Y1
	VMULPS       Y2, Y0, Y0
	VMULPS       Y3, Y1, Y1
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	ADDQ         $16, SI
	ADDQ         $16, DX
	ADDQ         $64, DI
	ADDQ         $4, R8
	SUBQ         $16, CX
	JNZ          sgnloop
	VZEROUPPER
	RET

// func quantQ8AVX2(dst *float32, b *byte, blocks, stride, off int)
// Blocks (stride bytes each) of an fp16 scale at their start and 32 int8
// codes at off: 32 outputs float32(int8(q[j])) * scale each. The scale is
// widened by F16C, exactly (NaN quieted), as quantHalf does.
TEXT ·quantQ8AVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         b+8(FP), SI
	MOVQ         blocks+16(FP), CX
	MOVQ         stride+24(FP), DX
	MOVQ         off+32(FP), R9

q8loop:
	MOVWLZX      (SI), AX
	VMOVD        AX, X5
	VCVTPH2PS    X5, X5
	VBROADCASTSS X5, Y5
	LEAQ         (SI)(R9*1), R10
	VPMOVSXBD    (R10), Y0
	VPMOVSXBD    8(R10), Y1
	VPMOVSXBD    16(R10), Y2
	VPMOVSXBD    24(R10), Y3
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VMULPS       Y5, Y0, Y0
	VMULPS       Y5, Y1, Y1
	VMULPS       Y5, Y2, Y2
	VMULPS       Y5, Y3, Y3
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, 64(DI)
	VMOVUPS      Y3, 96(DI)
	ADDQ         DX, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          q8loop
	VZEROUPPER
	RET

DATA one32<>+0(SB)/4, $1
GLOBL one32<>(SB), RODATA|NOPTR, $4

// func quantTQ2AVX2(dst *float32, b *byte, blocks int, scale *float32)
// TQ2_0 blocks (66 bytes: qs[64], then the fp16 scale, computed by the Go
// side into scale[block]): for each 32 bytes of qs and each 2-bit field l,
// 32 outputs float32(int32(q>>2l & 3) - 1) * scale.
TEXT ·quantTQ2AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         b+8(FP), SI
	MOVQ         blocks+16(FP), CX
	MOVQ         scale+24(FP), R8
	VPBROADCASTD three32<>(SB), Y6
	VPBROADCASTD one32<>(SB), Y7

tq2block:
	VBROADCASTSS (R8), Y5
	XORQ         AX, AX               // byte of qs: 8 at a time

tq2loop:
	// outputs: 128*(AX/32) + AX%32, then +32, +64, +96 for l = 1, 2, 3
	MOVQ         AX, R9
	ANDQ         $31, R9
	MOVQ         AX, R10
	SHRQ         $5, R10
	SHLQ         $7, R10
	ADDQ         R10, R9
	LEAQ         (DI)(R9*4), R11
	VPMOVZXBD    (SI)(AX*1), Y0
	VPAND        Y6, Y0, Y1
	VPSRLD       $2, Y0, Y2
	VPAND        Y6, Y2, Y2
	VPSRLD       $4, Y0, Y3
	VPAND        Y6, Y3, Y3
	VPSRLD       $6, Y0, Y4
	VPSUBD       Y7, Y1, Y1
	VPSUBD       Y7, Y2, Y2
	VPSUBD       Y7, Y3, Y3
	VPSUBD       Y7, Y4, Y4
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VMULPS       Y5, Y1, Y1
	VMULPS       Y5, Y2, Y2
	VMULPS       Y5, Y3, Y3
	VMULPS       Y5, Y4, Y4
	VMOVUPS      Y1, (R11)
	VMOVUPS      Y2, 128(R11)
	VMOVUPS      Y3, 256(R11)
	VMOVUPS      Y4, 384(R11)
	ADDQ         $8, AX
	CMPQ         AX, $64
	JB           tq2loop

	ADDQ         $66, SI
	ADDQ         $1024, DI
	ADDQ         $4, R8
	DECQ         CX
	JNZ          tq2block
	VZEROUPPER
	RET
