//go:build !amd64 || purego

package dtype

func affineBF16AVX2(dst *float32, src *byte, groups, gsize int, zero, scale *float32, shift uint, signed bool) {
	panic("dtype: no assembly on this build")
}
