package dtype

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAffineBits: both paths (assembly and Go) give the definition's
// bits, round(round(q − z)·s) with q = (e >> shift) & mask, for bytes and
// uint32 elements, every HQQ packing's shifts and masks, the three
// compute dtypes, groups the assembly takes and groups it leaves to Go,
// and zeros and scales of random bit patterns (NaN payloads, infinities,
// subnormals and values of the compute dtype among them).
func TestAffineBits(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 3))
	special := []uint32{0x7fc00001, 0xff800000, 0x7f800000, 0x00000001, 0x80000000, 0x3f800000, 0x477fe000, 0x38800000, 0x33800000, 0x7f7fffff}
	value := func(cd DType) float32 {
		b := r.Uint32()
		switch r.IntN(4) {
		case 0:
			b = special[r.IntN(len(special))]
		case 1: // a value of the compute dtype
			b = math.Float32bits(float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-30)))
			if cd == BF16 {
				b &^= 0xffff
			} else if cd == F16 {
				b = f16ToF32Bits(f32ToF16Bits(b))
			}
		}
		return math.Float32frombits(b)
	}
	type pk struct {
		width int
		shift uint
		mask  uint32
	}
	packs := []pk{{1, 0, 255}, {1, 4, 15}, {1, 0, 15}, {1, 6, 3}, {1, 2, 3}, {1, 7, 1}, {1, 0, 1}, {4, 27, 7}, {4, 0, 7}, {4, 12, 7}}
	for _, cd := range []DType{BF16, F16, F32} {
		for _, p := range packs {
			for _, gs := range []int{8, 64, 12, 32} {
				t.Run(fmt.Sprintf("%s/w%d>>%d&%d/g%d", cd, p.width, p.shift, p.mask, gs), func(t *testing.T) {
					n := gs*5 + 3 // a partial last group
					src := make([]byte, p.width*n)
					for i := range src {
						src[i] = byte(r.Uint32())
					}
					G := (n + gs - 1) / gs
					zero, scale := make([]float32, G), make([]float32, G)
					for g := range zero {
						zero[g], scale[g] = value(cd), value(cd)
					}
					want := make([]float32, n)
					round := map[DType]func(float32) float32{BF16: roundBF16, F16: func(v float32) float32 {
						if v != v {
							return v
						}
						return math.Float32frombits(f16ToF32Bits(f32ToF16Bits(math.Float32bits(v))))
					}, F32: func(v float32) float32 { return v }}[cd]
					for i := range want {
						e := uint32(src[i])
						if p.width == 4 {
							e = uint32(src[4*i]) | uint32(src[4*i+1])<<8 | uint32(src[4*i+2])<<16 | uint32(src[4*i+3])<<24
						}
						want[i] = round(round(float32(e>>p.shift&p.mask)-zero[i/gs]) * scale[i/gs])
					}
					for _, accel := range []bool{false, true} {
						setAccel(t, accel)
						got := make([]float32, n)
						AffineBits(got, src, p.width, p.shift, p.mask, gs, zero, scale, cd)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s: [%d] (zero %#x, scale %#x) = %#x, want %#x", pathName(accel && hasAccel), i,
									math.Float32bits(zero[i/gs]), math.Float32bits(scale[i/gs]), math.Float32bits(got[i]), math.Float32bits(want[i]))
							}
						}
					}
				})
			}
		}
	}
}
