//go:build !amd64 || purego

package dtype

func hadamard32AVX2(dst *float32, codes, scales *byte, groups int, p *hadamard32Plan, pow2 *[256]float32) {
	panic("dtype: no assembly on this build")
}
