//go:build amd64 && !purego

package dtype

//go:noescape
func affineBitsAVX2(dst *float32, src *byte, groups, gsize int, zero, scale *float32, shift, mask uint, width, mode int)
