//go:build amd64 && !purego

package dtype

//go:noescape
func affineBF16AVX2(dst *float32, src *byte, groups, gsize int, zero, scale *float32, shift uint, signed bool)
