//go:build amd64 && !purego

package dtype

//go:noescape
func lookup4AVX2(dst *float32, src *byte, groups, gbytes int, tables *[16]float32, idx *byte)

//go:noescape
func plane4AVX2(dst *float32, src *byte, n int, shift uint, tbl *[16]float32)

//go:noescape
func lookup4AtAVX2(dst *float32, src *byte, n int, at *int32, tbl *float32)

// maxU32AVX2 returns the largest of the n (a positive multiple of 8) values
// at p, as uint32s (a negative int32 is larger than any offset).
//
//go:noescape
func maxU32AVX2(p *int32, n int) uint32

//go:noescape
func lookup8AVX2(dst *float32, src *byte, n int, tbl *[256]float32, scale float32)

//go:noescape
func lookup4HiAVX2(dst *float32, src *byte, groups, gbytes int, tables *[16]float32, idx *byte)
