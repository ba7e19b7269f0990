package dtype

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// sylvester32 is σ[j, i] = r_j·c_i·(−1)^popcount((A·j ⊕ t) & ρ_i): a
// Sylvester Hadamard matrix with its rows relabelled by the affine map
// j → A·j ⊕ t (A invertible over GF(2), columns a[k]), its columns
// permuted by ρ, and random row and column signs.
func sylvester32(r *rand.Rand, identity bool) *[32][32]int8 {
	var a [5]int
	for {
		for k := range a {
			a[k] = r.IntN(32)
		}
		seen := map[int]bool{}
		for j := 0; j < 32; j++ {
			seen[affine5(a, j, 0)] = true
		}
		if len(seen) == 32 {
			break
		}
	}
	t, rho := r.IntN(32), r.Perm(32)
	var rs, cs [32]int8
	for i := range rs {
		rs[i], cs[i] = int8(1-2*r.IntN(2)), int8(1-2*r.IntN(2))
		if identity {
			rs[i], cs[i], rho[i] = 1, 1, i
		}
	}
	if identity {
		a, t = [5]int{1, 2, 4, 8, 16}, 0
	}
	s := new([32][32]int8)
	for j := 0; j < 32; j++ {
		for i := 0; i < 32; i++ {
			s[j][i] = rs[j] * cs[i] * int8(1-2*(bits.OnesCount(uint(affine5(a, j, t)&rho[i]))&1))
		}
	}
	return s
}

func affine5(a [5]int, j, t int) int {
	v := t
	for k := 0; k < 5; k++ {
		if j>>k&1 == 1 {
			v ^= a[k]
		}
	}
	return v
}

// hadamardDef is the definition: n_j summed in order, then
// float32(n_j)·half·2^(s−127), NaN for s 255.
func hadamardDef(sign *[32][32]int8, half float32, in []byte, s byte) [32]float32 {
	var out [32]float32
	for j := 0; j < 32; j++ {
		n := int32(0)
		for i := 0; i < 32; i++ {
			n += int32(sign[j][i]) * e2m1x2[in[i/2]>>(4*(i%2))&15]
		}
		f := float32(math.Ldexp(1, int(s)-127))
		if s == 255 {
			f = float32(math.NaN())
		}
		out[j] = float32(n) * half * f
	}
	return out
}

// TestHadamard32: for random sign matrices of the accepted form (rows
// relabelled by an affine map, columns permuted, signs flipped; and the
// plain Sylvester matrix), random codes and scales (0, 254 and 255
// included) and magnitudes m from 2^-21 to 2^19, both paths (assembly
// and Go) give the definition's bits, +0 for a zero; FP-Quant's gsr
// matrix is taken; a matrix with its rows permuted at random, or with a
// zero, is refused.
func TestHadamard32(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 32))
	for trial := 0; trial < 200; trial++ {
		sign := sylvester32(r, trial == 0)
		half := float32(math.Ldexp(1+float64(r.IntN(128))/128, r.IntN(41)-21))
		h := NewHadamard32(sign, half)
		if h == nil {
			t.Fatalf("trial %d: a relabelled Sylvester matrix refused", trial)
		}
		const G = 37
		codes := make([]byte, 16*G)
		for i := range codes {
			codes[i] = byte(r.Uint32())
		}
		scales := make([]byte, G)
		for i := range scales {
			scales[i] = byte(r.IntN(256))
		}
		scales[0], scales[1], scales[2] = 0, 254, 255
		if trial%3 == 0 { // all-zero codes and cancellations
			for i := 0; i < 16; i++ {
				codes[16*3+i] = 0x88
				codes[16*4+i] = byte(i%2) * 0x11
			}
		}
		for _, accel := range []bool{false, true} {
			setAccel(t, accel)
			got := make([]float32, 32*G)
			h.MXFP4(got, codes, scales)
			for g := 0; g < G; g++ {
				want := hadamardDef(sign, half, codes[16*g:], scales[g])
				for j := 0; j < 32; j++ {
					if math.Float32bits(got[32*g+j]) != math.Float32bits(want[j]) {
						t.Fatalf("trial %d (%s): group %d (scale %d) [%d] = %v (%#x), want %v (%#x)", trial, pathName(accel && hasAccel),
							g, scales[g], j, got[32*g+j], math.Float32bits(got[32*g+j]), want[j], math.Float32bits(want[j]))
					}
				}
			}
		}
	}
	// FP-Quant's "gsr" matrix (linear.py get_gsr_matrix): the Sylvester
	// matrix's columns sorted by their sign changes down the rows
	syl := sylvester32(r, true)
	changes := make([]int, 32)
	for i := 0; i < 32; i++ {
		for j := 1; j < 32; j++ {
			if syl[j][i] != syl[j-1][i] {
				changes[i]++
			}
		}
	}
	order := make([]int, 32)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return changes[a] - changes[b] })
	var gsr [32][32]int8
	for j := range gsr {
		for i := range gsr[j] {
			gsr[j][i] = syl[j][order[i]]
		}
	}
	if order[1] == 1 || NewHadamard32(&gsr, 1) == nil {
		t.Errorf("the gsr matrix (columns %v) refused", order)
	}
	sign := sylvester32(r, true)
	perm := r.Perm(32)
	var rows [32][32]int8
	for j := range rows {
		rows[j] = sign[perm[j]]
	}
	if NewHadamard32(&rows, 1) != nil {
		t.Errorf("rows permuted at random (%v) accepted", perm)
	}
	sign[5][7] = 0
	if NewHadamard32(sign, 1) != nil {
		t.Errorf("a zero entry accepted")
	}
}
