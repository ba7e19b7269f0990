//go:build !amd64 || purego

package dtype

func scaleE4M3AVX2(dst *float32, src *byte, n int, scale float32) {
	panic("dtype: no assembly on this build")
}
