//go:build amd64 && !purego

package dtype

//go:noescape
func lookup4AVX2(dst *float32, src *byte, groups, gbytes int, tables *[16]float32, idx *byte)

//go:noescape
func plane4AVX2(dst *float32, src *byte, n int, shift uint, tbl *[16]float32)
