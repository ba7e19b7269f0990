package dtype

import (
	"math"
	"math/bits"
)

// Hadamard32 dequantizes MXFP4 groups of 32 rotated by a 32×32 matrix H
// whose signs are a Sylvester Hadamard matrix up to signs and index
// relabellings (FP-Quant's forward_hadamard_matrix: quant/fpquant.go):
//
//	out[j] = 2^(s−127) · (m/2) · n_j,  n_j = Σ_i 2·e2m1(q_i)·σ[j, i]
//
// for a group's 32 E2M1 codes q (code i in the low nibble of byte i/2
// when i is even, the high one when odd), its E8M0 scale s (255: NaN)
// and σ[j, i] = sign(H[j, i]) of H's entries ±m. n_j is an exact integer
// (|n_j| ≤ 384) whatever the order of its sum, so it is computed by a
// fast Walsh–Hadamard transform: σ[j, i] = r_j·c_i·(−1)^popcount(j&β_i)
// (signs r and c, β a permutation of 0..31, found by NewHadamard32), so
// n_j = r_j·y_j with y the transform of x[β_i] = c_i·2·e2m1(q_i). n_j·m/2
// is exact in float32 (17 significant bits), and the product by the scale
// its one rounding; a zero is +0.
type Hadamard32 struct {
	p    hadamard32Plan
	beta [32]uint8 // input i → transform index
	c    [32]int8  // input signs
	r    [32]int8  // output signs
	half float32
}

// hadamard32Plan is the assembly's view (hadamard32_amd64.s reads it by
// offset): transform index b's code comes from byte position pos (lane
// b>>4 of the nibbles, low nibbles in lane 0 and high ones in lane 1):
// idxA[b] = pos&15 when pos is in b's lane, else 0x80 (VPSHUFB's zero),
// idxB[b] the other way round; xor[b] = 8 where the input's sign flips
// (E2M1's sign bit); rsw the output signs in the order the kernel holds
// the 32 sums (j 0–7, 16–23, 8–15, 24–31); half = m/2 eight times.
type hadamard32Plan struct {
	idxA, idxB, xor [32]byte
	rsw             [32]int16
	half            [8]float32
}

// NewHadamard32 returns the transform for the sign matrix sign (entries
// ±1; sign[j][i] is the sign of H[j, i]) and half = m/2, or nil when the
// signs are not of the form r_j·c_i·(−1)^popcount(j&β_i): a Sylvester
// Hadamard matrix with its columns permuted, its rows permuted by an
// affine map of their index bits (as sequency order does), and any
// rows' and columns' signs flipped.
func NewHadamard32(sign *[32][32]int8, half float32) *Hadamard32 {
	h := &Hadamard32{half: half}
	var seen uint32
	for i := 0; i < 32; i++ {
		h.c[i] = sign[0][i]
		for k := 0; k < 5; k++ {
			if sign[1<<k][i]*h.c[i] < 0 {
				h.beta[i] |= 1 << k
			}
		}
		seen |= 1 << h.beta[i]
	}
	if seen != math.MaxUint32 {
		return nil
	}
	chi := func(j int, b uint8) int8 { return int8(1 - 2*(bits.OnesCount(uint(j)&uint(b))&1)) }
	for j := 0; j < 32; j++ {
		h.r[j] = sign[j][0] * h.c[0] * chi(j, h.beta[0])
		for i := 0; i < 32; i++ {
			if s := sign[j][i]; (s != 1 && s != -1) || s != h.r[j]*h.c[i]*chi(j, h.beta[i]) {
				return nil
			}
		}
	}
	for i := 0; i < 32; i++ {
		b, pos := int(h.beta[i]), i/2+16*(i%2)
		if pos>>4 == b>>4 {
			h.p.idxA[b], h.p.idxB[b] = byte(pos&15), 0x80
		} else {
			h.p.idxA[b], h.p.idxB[b] = 0x80, byte(pos&15)
		}
		if h.c[i] < 0 {
			h.p.xor[b] = 8
		}
	}
	for x := 0; x < 32; x++ {
		j := []int{0, 16, 8, 24}[x/8] + x%8
		h.p.rsw[x] = int16(h.r[j])
	}
	for x := range h.p.half {
		h.p.half[x] = half
	}
	return h
}

// e2m1x2 is 2·e2m1(code), code 8 (−0) 0.
var e2m1x2 = [16]int32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// pow2E8M0 is 2^(e−127), e 255 NaN.
var pow2E8M0 = func() (t [256]float32) {
	for e := range t {
		t[e] = float32(math.Ldexp(1, e-127))
	}
	t[255] = float32(math.NaN())
	return t
}()

// MXFP4 writes len(scales) groups: dst[32g : 32g+32] from codes[16g :
// 16g+16] and scales[g].
func (h *Hadamard32) MXFP4(dst []float32, codes, scales []byte) {
	n := len(scales)
	if n == 0 {
		return
	}
	_, _ = dst[32*n-1], codes[16*n-1]
	if useAccel {
		hadamard32AVX2(&dst[0], &codes[0], &scales[0], n, &h.p, &pow2E8M0)
		return
	}
	for g := 0; g < n; g++ {
		h.group((*[32]float32)(dst[32*g:]), (*[16]byte)(codes[16*g:]), scales[g])
	}
}

// group is one group in Go: the transform's five butterfly stages.
func (h *Hadamard32) group(out *[32]float32, in *[16]byte, s byte) {
	var x [32]int32
	for i := 0; i < 32; i++ {
		x[h.beta[i]] = int32(h.c[i]) * e2m1x2[in[i/2]>>(4*(i%2))&15]
	}
	for d := 1; d < 32; d *= 2 {
		for b := 0; b < 32; b++ {
			if b&d == 0 {
				x[b], x[b|d] = x[b]+x[b|d], x[b]-x[b|d]
			}
		}
	}
	f := pow2E8M0[s]
	for j := 0; j < 32; j++ {
		out[j] = float32(int32(h.r[j])*x[j]) * h.half * f
	}
}
