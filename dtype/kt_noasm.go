//go:build !amd64 || purego

package dtype

func kt8AVX2(dst *float32, x *uint32, s *float32, n int) {
	panic("dtype: no assembly on this build")
}

func kt4AVX2(dst *float32, x *uint32, s *float32, n int) {
	panic("dtype: no assembly on this build")
}

func kt8AbsAVX2(dst *float32, x *uint32, s *float32, neg *uint64, n int) {
	panic("dtype: no assembly on this build")
}
