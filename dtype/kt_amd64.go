//go:build amd64 && !purego

package dtype

//go:noescape
func kt8AVX2(dst *float32, x *uint32, s *float32, n int)

//go:noescape
func kt4AVX2(dst *float32, x *uint32, s *float32, n int)

//go:noescape
func kt8AbsAVX2(dst *float32, x *uint32, s *float32, neg *uint64, n int)
