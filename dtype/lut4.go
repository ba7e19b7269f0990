package dtype

// Table lookups of 4-bit codes, the inner loop of the quantized-checkpoint
// kernels (package quant): the caller builds each group's 16 float32 values
// (by its scheme's own operations, so the result is bit-exact whatever does
// the lookup) and these write one value per code. Assembly on amd64 with
// AVX2 (lut4_amd64.s), the loops below elsewhere.

// Lookup4 decodes the 4-bit codes of src, low nibble first: with src cut
// into groups of gbytes bytes, byte k of group j writes dst[2k] and
// dst[2k+1] (indexes within the group's 2*gbytes outputs) as t[b&15] and
// t[b>>4], t being tables[idx[j]] when idx is not nil and tables[j]
// otherwise. len(src) must be a multiple of gbytes and dst at least twice
// as long; it panics (an index out of range) when a table is missing.
func Lookup4(dst []float32, src []byte, gbytes int, tables [][16]float32, idx []byte) {
	lookup4(dst, src, gbytes, tables, idx, false)
}

// Lookup4Hi is Lookup4 with the high nibble of each byte first (dst[2k] =
// t[b>>4], dst[2k+1] = t[b&15]), as bitsandbytes packs its codes.
func Lookup4Hi(dst []float32, src []byte, gbytes int, tables [][16]float32, idx []byte) {
	lookup4(dst, src, gbytes, tables, idx, true)
}

func lookup4(dst []float32, src []byte, gbytes int, tables [][16]float32, idx []byte, hi bool) {
	if len(src) == 0 {
		return
	}
	if gbytes <= 0 || len(src)%gbytes != 0 {
		panic("dtype.Lookup4: source is not whole groups")
	}
	groups := len(src) / gbytes
	_ = dst[2*len(src)-1]
	if idx != nil {
		_ = idx[groups-1]
		for _, x := range idx[:groups] {
			_ = tables[x]
		}
	} else {
		_ = tables[groups-1]
	}
	if useAccel && gbytes%4 == 0 {
		var ip *byte
		if idx != nil {
			ip = &idx[0]
		}
		if hi {
			lookup4HiAVX2(&dst[0], &src[0], groups, gbytes, &tables[0], ip)
		} else {
			lookup4AVX2(&dst[0], &src[0], groups, gbytes, &tables[0], ip)
		}
		return
	}
	lookup4Go(dst, src, gbytes, tables, idx, hi)
}

func lookup4Go(dst []float32, src []byte, gbytes int, tables [][16]float32, idx []byte, hi bool) {
	sh := uint(0)
	if hi {
		sh = 4
	}
	for j := 0; j*gbytes < len(src); j++ {
		t := &tables[j]
		if idx != nil {
			t = &tables[idx[j]]
		}
		in := src[j*gbytes : (j+1)*gbytes]
		out := dst[2*j*gbytes : 2*(j+1)*gbytes]
		for k, b := range in {
			out[2*k] = t[(b>>sh)&15]
			out[2*k+1] = t[(b>>(4-sh))&15]
		}
	}
}

// Plane4 sets dst[i] = tbl[(w>>shift)&15] for each little-endian 32-bit
// word w of src (word i), shift below 32: one 4-bit code out of each word,
// as AWQ's eight output rows are each one nibble of a column of words.
// dst must hold len(src)/4 values.
func Plane4(dst []float32, src []byte, shift uint, tbl *[16]float32) {
	n := len(src) / 4
	if n == 0 {
		return
	}
	if shift >= 32 {
		panic("dtype.Plane4: shift over 31")
	}
	_ = dst[n-1]
	i := 0
	if useAccel && n >= 8 {
		i = n &^ 7
		plane4AVX2(&dst[0], &src[0], i, shift, tbl)
	}
	for ; i < n; i++ {
		w := uint32(src[4*i]) | uint32(src[4*i+1])<<8 | uint32(src[4*i+2])<<16 | uint32(src[4*i+3])<<24
		dst[i] = tbl[(w>>shift)&15]
	}
}

// Lookup4At decodes the 4-bit codes of src, low nibble first, each by its
// own offset into one table: dst[i] = tbl[at[i]+code i] (code 2k the low
// nibble of src[k], 2k+1 its high one), as a 4-bit GPTQ weight with a
// permuted g_idx reads each element in its group's 16 values. len(at) must
// be 2*len(src) and dst as long; it panics when an offset is below 0 or
// leaves fewer than 16 values of tbl.
func Lookup4At(dst []float32, src []byte, at []int32, tbl []float32) {
	n := 2 * len(src)
	if len(at) != n {
		panic("dtype.Lookup4At: not one offset per code")
	}
	if n == 0 {
		return
	}
	_ = dst[n-1]
	lim := uint32(len(tbl) - 16)
	if len(tbl) < 16 {
		panic("dtype.Lookup4At: table under 16 values")
	}
	i := 0
	if useAccel && n >= 8 {
		i = n &^ 7
		if maxU32AVX2(&at[0], i) > lim {
			panic("dtype.Lookup4At: offset outside the table")
		}
		lookup4AtAVX2(&dst[0], &src[0], i, &at[0], &tbl[0])
	}
	for _, a := range at[i:] {
		if uint32(a) > lim {
			panic("dtype.Lookup4At: offset outside the table")
		}
	}
	for ; i < n; i++ {
		dst[i] = tbl[at[i]+int32((src[i/2]>>(4*(i&1)))&15)]
	}
}

// Lookup8 sets dst[i] = tbl[src[i]] * scale, one float32 multiplication
// each (the table value the first operand, as Go's own loop computes it,
// so even a NaN's payload is the same), as an FP8 or int8 weight is its
// code's value times its block's scale. dst must be as long as src.
func Lookup8(dst []float32, src []byte, tbl *[256]float32, scale float32) {
	n := len(src)
	if n == 0 {
		return
	}
	_ = dst[n-1]
	i := 0
	if useAccel && n >= 8 {
		i = n &^ 7
		lookup8AVX2(&dst[0], &src[0], i, tbl, scale)
	}
	for ; i < n; i++ {
		dst[i] = tbl[src[i]] * scale
	}
}
