//go:build !amd64 || purego

package dtype

func affineBitsAVX2(dst *float32, src *byte, groups, gsize int, zero, scale *float32, shift, mask uint, width, mode int) {
	panic("dtype: no assembly on this build")
}
