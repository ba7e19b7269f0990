package dtype

import (
	"math"
	"math/rand"
	"testing"
)

// TestScaleE4M3 holds ScaleE4M3 (assembly and Go) to the scalar reference,
// the code's value from e4m3ToF32Bits times the scale, and to Lookup8 with
// the E4M3 table, bit for bit: every code (both NaNs, ±0, the
// subnormals) at every position of a 16-code step, times scales that are
// zero, subnormal, tiny enough to make subnormal products, large enough
// to overflow, infinite and NaN (quiet and signalling), at lengths that
// leave a tail to the Go loop and at offsets that misalign the codes.
func TestScaleE4M3(t *testing.T) {
	var tbl [256]float32
	for c := range tbl {
		tbl[c] = math.Float32frombits(e4m3ToF32Bits(uint8(c)))
	}
	scales := []float32{1, 1.5, -1.25, 0, float32(math.Copysign(0, -1)),
		1.0 / 4096, 1.0 / 64, 3.0e38, -1e30, 1e-38, math.Float32frombits(1), math.Float32frombits(0x80000003), 1e-40, 0x1p-140,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc12345)}
	r := rand.New(rand.NewSource(44))
	for range 20 {
		scales = append(scales, math.Float32frombits(r.Uint32()))
	}
	all := make([]byte, 256+37)
	for i := range all {
		all[i] = byte(i*167 + 3) // every code, in an order that moves them across lanes
	}
	for _, accel := range []bool{true, false} {
		if accel && !hasAccel {
			continue
		}
		old := useAccel
		useAccel = accel
		for _, scale := range scales {
			for _, span := range [][2]int{{0, 256}, {0, 293}, {1, 258}, {7, 7 + 16}, {3, 3 + 15}, {5, 6}, {13, 13 + 47}} {
				src := all[span[0]:span[1]]
				dst := make([]float32, len(src)+1)
				look := make([]float32, len(src))
				ScaleE4M3(dst[:len(src)], src, scale)
				Lookup8(look, src, &tbl, scale)
				for i, c := range src {
					want := math.Float32frombits(e4m3ToF32Bits(c)) * scale
					if math.Float32bits(dst[i]) != math.Float32bits(want) || math.Float32bits(look[i]) != math.Float32bits(want) {
						t.Fatalf("accel %v, code %#02x times %#x: ScaleE4M3 %#x, Lookup8 %#x, want %#x", accel, c, math.Float32bits(scale), math.Float32bits(dst[i]), math.Float32bits(look[i]), math.Float32bits(want))
					}
				}
				if dst[len(src)] != 0 {
					t.Fatalf("accel %v, %d codes: wrote past them", accel, len(src))
				}
			}
		}
		useAccel = old
	}
}
