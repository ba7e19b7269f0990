//go:build amd64 && !purego

package dtype

// scaleE4M3AVX2 is ScaleE4M3 for n, a positive multiple of 16, codes.
//
//go:noescape
func scaleE4M3AVX2(dst *float32, src *byte, n int, scale float32)
