//go:build !amd64 || purego

package dtype

func lookup4AVX2(dst *float32, src *byte, groups, gbytes int, tables *[16]float32, idx *byte) {
	panic("dtype: no assembly on this build")
}

func plane4AVX2(dst *float32, src *byte, n int, shift uint, tbl *[16]float32) {
	panic("dtype: no assembly on this build")
}
