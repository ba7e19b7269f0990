package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// affineWant is the definition of AffineI8BF16 / AffineNibbleBF16 for one
// element, written out separately from the kernel's loop.
func affineWant(b byte, signed bool, shift uint, z, s float32) float32 {
	q := float32(b >> shift & 15)
	if signed {
		q = float32(int8(b))
	}
	d := q - z
	if bits := math.Float32bits(d); bits&0x7fffffff <= 0x7f800000 {
		d = math.Float32frombits((bits + 0x7fff + bits>>16&1) &^ 0xffff)
	}
	p := d * s
	if bits := math.Float32bits(p); bits&0x7fffffff <= 0x7f800000 {
		p = math.Float32frombits((bits + 0x7fff + bits>>16&1) &^ 0xffff)
	}
	return p
}

// TestAffineBF16 checks both paths bit for bit against the definition:
// every code byte under zeros and scales of random bit patterns (NaNs with
// payloads, infinities, subnormals, ±0) and of bf16 values, group sizes
// with and without a tail.
func TestAffineBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	special := []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00001, 0xffa00000, 0x00000001, 0x00800000, 0x7f7fffff, 0x3f800000, 0xbf7f8000}
	val := func() float32 {
		switch r.IntN(3) {
		case 0:
			return math.Float32frombits(special[r.IntN(len(special))])
		case 1:
			return math.Float32frombits(r.Uint32())
		}
		return math.Float32frombits(r.Uint32() &^ 0xffff) // a bf16 value
	}
	for _, accel := range []bool{false, true} {
		t.Run(pathName(accel), func(t *testing.T) {
			setAccel(t, accel)
			for _, gsize := range []int{8, 16, 32, 64, 128, 3, 24, 256} {
				for _, n := range []int{gsize, 4 * gsize, 4*gsize + 5, 512} {
					src := make([]byte, n)
					for i := range src {
						src[i] = byte(i) // every code
					}
					r.Shuffle(n, func(i, j int) { src[i], src[j] = src[j], src[i] })
					groups := (n + gsize - 1) / gsize
					zero, scale := make([]float32, groups), make([]float32, groups)
					for j := range zero {
						zero[j], scale[j] = val(), val()
						if r.IntN(2) == 0 {
							zero[j] = float32(r.IntN(256) - 128)
						}
					}
					for _, mode := range []struct {
						signed bool
						shift  uint
					}{{true, 0}, {false, 0}, {false, 4}, {false, 2}} {
						dst := make([]float32, n+1)
						if mode.signed {
							AffineI8BF16(dst[:n], src, gsize, zero, scale)
						} else {
							AffineNibbleBF16(dst[:n], src, mode.shift, gsize, zero, scale)
						}
						for i, b := range src {
							want := affineWant(b, mode.signed, mode.shift, zero[i/gsize], scale[i/gsize])
							if got := dst[i]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("gsize %d n %d %+v: dst[%d] = %#x, want %#x (code %#x, zero %#x, scale %#x)", gsize, n, mode, i, math.Float32bits(got), math.Float32bits(want), b, math.Float32bits(zero[i/gsize]), math.Float32bits(scale[i/gsize]))
							}
						}
						if dst[n] != 0 {
							t.Fatalf("gsize %d n %d: wrote past the end", gsize, n)
						}
					}
				}
			}
		})
	}
}
