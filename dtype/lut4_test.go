package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLookup4 checks Lookup4 and Plane4 on both paths against the
// definition, bit for bit (tables of random bit patterns: NaNs, -0 and
// subnormals must come through unchanged).
func TestLookup4(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, accel := range []bool{false, true} {
		t.Run(pathName(accel), func(t *testing.T) {
			setAccel(t, accel)
			for _, gbytes := range []int{1, 3, 4, 8, 12, 16, 32, 64} {
				for _, withIdx := range []bool{false, true} {
					groups := 1 + r.IntN(9)
					tables := make([][16]float32, 1+r.IntN(5)+groups)
					for i := range tables {
						for k := range tables[i] {
							tables[i][k] = math.Float32frombits(r.Uint32())
						}
					}
					var idx []byte
					if withIdx {
						idx = make([]byte, groups)
						for i := range idx {
							idx[i] = byte(r.IntN(len(tables)))
						}
					}
					src := make([]byte, groups*gbytes)
					for i := range src {
						src[i] = byte(r.Uint32())
					}
					for _, hi := range []bool{false, true} {
						dst := make([]float32, 2*len(src)+3)
						if hi {
							Lookup4Hi(dst, src, gbytes, tables, idx)
						} else {
							Lookup4(dst, src, gbytes, tables, idx)
						}
						for i, b := range src {
							j := i / gbytes
							tb := &tables[j]
							if idx != nil {
								tb = &tables[idx[j]]
							}
							pair := []float32{tb[b&15], tb[b>>4]}
							if hi {
								pair[0], pair[1] = pair[1], pair[0]
							}
							for h, want := range pair {
								if got := dst[2*i+h]; math.Float32bits(got) != math.Float32bits(want) {
									t.Fatalf("gbytes %d idx %v: dst[%d] = %#x, want %#x", gbytes, withIdx, 2*i+h, math.Float32bits(got), math.Float32bits(want))
								}
							}
						}
						for _, v := range dst[2*len(src):] {
							if v != 0 {
								t.Fatalf("gbytes %d: wrote past the codes", gbytes)
							}
						}
					}
				}
			}
			for _, nb := range []int{1, 3, 4, 5, 32, 61} {
				tbl := make([]float32, 16*7)
				for k := range tbl {
					tbl[k] = math.Float32frombits(r.Uint32())
				}
				src := make([]byte, nb)
				at := make([]int32, 2*nb)
				for i := range src {
					src[i] = byte(r.Uint32())
					at[2*i], at[2*i+1] = int32(r.IntN(len(tbl)-15)), int32(r.IntN(len(tbl)-15))
				}
				dst := make([]float32, 2*nb+1)
				Lookup4At(dst, src, at, tbl)
				for i := 0; i < 2*nb; i++ {
					want := tbl[at[i]+int32((src[i/2]>>(4*(i&1)))&15)]
					if math.Float32bits(dst[i]) != math.Float32bits(want) {
						t.Fatalf("Lookup4At %d bytes: dst[%d] = %#x, want %#x", nb, i, math.Float32bits(dst[i]), math.Float32bits(want))
					}
				}
				if dst[2*nb] != 0 {
					t.Fatalf("Lookup4At %d bytes: wrote past the codes", nb)
				}
				at[len(at)-1] = int32(len(tbl) - 15)
				if nb >= 4 {
					at[len(at)-1] = 0
					at[(2*nb)&^7-1] = -1 // inside the assembly's part
				}
				func() {
					defer func() {
						if recover() == nil {
							t.Fatalf("Lookup4At: no panic for an offset past the table")
						}
					}()
					Lookup4At(dst, src, at, tbl)
				}()
			}
			for _, n := range []int{1, 7, 8, 9, 64, 101} {
				var tbl [256]float32
				for k := range tbl {
					tbl[k] = math.Float32frombits(r.Uint32())
				}
				tbl[3] = float32(math.NaN())
				src := make([]byte, n)
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				src[0] = 3
				for _, scale := range []float32{1.5, math.Float32frombits(0x7fa00001), math.Float32frombits(1), float32(math.Inf(-1))} {
					dst := make([]float32, n+1)
					Lookup8(dst, src, &tbl, scale)
					for i, b := range src {
						if want := tbl[b] * scale; math.Float32bits(dst[i]) != math.Float32bits(want) {
							t.Fatalf("Lookup8 n %d scale %v: dst[%d] = %#x, want %#x", n, scale, i, math.Float32bits(dst[i]), math.Float32bits(want))
						}
					}
					if dst[n] != 0 {
						t.Fatalf("Lookup8 n %d: wrote past the codes", n)
					}
				}
			}
			for _, n := range []int{1, 7, 8, 9, 64, 101} {
				var tbl [16]float32
				for k := range tbl {
					tbl[k] = math.Float32frombits(r.Uint32())
				}
				src := make([]byte, 4*n)
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				for shift := uint(0); shift < 32; shift += 4 {
					dst := make([]float32, n+1)
					Plane4(dst, src, shift, &tbl)
					for i := 0; i < n; i++ {
						w := uint32(src[4*i]) | uint32(src[4*i+1])<<8 | uint32(src[4*i+2])<<16 | uint32(src[4*i+3])<<24
						if want := tbl[(w>>shift)&15]; math.Float32bits(dst[i]) != math.Float32bits(want) {
							t.Fatalf("Plane4 n %d shift %d: dst[%d] = %#x, want %#x", n, shift, i, math.Float32bits(dst[i]), math.Float32bits(want))
						}
					}
					if dst[n] != 0 {
						t.Fatalf("Plane4 n %d: wrote past the words", n)
					}
				}
			}
		})
	}
}
