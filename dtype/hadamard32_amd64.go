//go:build amd64 && !purego

package dtype

//go:noescape
func hadamard32AVX2(dst *float32, codes, scales *byte, groups int, p *hadamard32Plan, pow2 *[256]float32)
