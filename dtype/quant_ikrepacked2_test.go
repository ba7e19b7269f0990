package dtype

import (
	"math"
	"testing"
)

// TestSigned4: putting the sign on the grid magnitude (dl·(−g)) gives the
// bits the C's two products give ((dl·g)·−1), for every magnitude of both
// grids and scales that are zero, negative, subnormal, huge, infinite or
// NaN (with a payload).
func TestSigned4(t *testing.T) {
	scales := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.0123, -3.5e-3, 1e-40, -1e-42, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0x7fc01234), math.Float32frombits(0xffc00042)}
	var grids [][4]uint32
	for _, t := range [][][8]uint32{iq2xxsBits[:], iq2xsBits[:], iq2sBits[:]} {
		for _, g := range t {
			grids = append(grids, [4]uint32(g[:4]), [4]uint32(g[4:]))
		}
	}
	grids = append(grids, iq3xxsBits[:]...)
	grids = append(grids, iq3sBits[:]...)
	for _, dl := range scales {
		for _, g := range grids {
			for sg := uint32(0); sg < 16; sg++ {
				var y [4]float32
				signed4(&y, dl, &g, sg)
				for m := 0; m < 4; m++ {
					want := float32(dl*math.Float32frombits(g[m])) * quantSign[sg>>m&1]
					if math.Float32bits(y[m]) != math.Float32bits(want) {
						t.Fatalf("dl %v (%#x), magnitude %v, sign %d: %#x, want %#x", dl, math.Float32bits(dl), math.Float32frombits(g[m]), sg>>m&1, math.Float32bits(y[m]), math.Float32bits(want))
					}
				}
			}
		}
	}
}
