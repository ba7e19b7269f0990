//go:build !amd64 || purego

package dtype

func lookup4AVX2(dst *float32, src *byte, groups, gbytes int, tables *[16]float32, idx *byte) {
	panic("dtype: no assembly on this build")
}

func plane4AVX2(dst *float32, src *byte, n int, shift uint, tbl *[16]float32) {
	panic("dtype: no assembly on this build")
}

func lookup4AtAVX2(dst *float32, src *byte, n int, at *int32, tbl *float32) {
	panic("dtype: no assembly on this build")
}

func maxU32AVX2(p *int32, n int) uint32 { panic("dtype: no assembly on this build") }

func lookup8AVX2(dst *float32, src *byte, n int, tbl *[256]float32, scale float32) {
	panic("dtype: no assembly on this build")
}

func lookup4HiAVX2(dst *float32, src *byte, groups, gbytes int, tables *[16]float32, idx *byte) {
	panic("dtype: no assembly on this build")
}
