package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// bothPaths checks w against W bit for bit, with lookups and without,
// whole and in every sub-range.
func bothPaths(t *testing.T, c *ckpt, w *Weight, W []float32) {
	t.Helper()
	for _, plain := range []bool{false, true} {
		useLookup = !plain
		got := c.whole(t, w)
		useLookup = true
		for i := range W {
			if math.Float32bits(got[i]) != math.Float32bits(W[i]) {
				t.Fatalf("%s[%d] = %#x, want %#x (lookup %v)", w.Name, i, math.Float32bits(got[i]), math.Float32bits(W[i]), !plain)
			}
		}
		checkRanges(t, c, w, got)
	}
}

// TestAffineBF16Rows: torchao's affine classes with bf16 scale, output and
// an I8 or BF16 zero point (every block of a row at once through
// dtype.AffineI8BF16) give torch's values bit for bit, with lookups and
// without, whole and in every sub-range, for blocks the assembly takes (a
// multiple of 8) and blocks it leaves to the Go loop, every code.
func TestAffineBF16Rows(t *testing.T) {
	for i, tc := range []struct {
		cls         string
		block, bits int64
		zdt         dtype.DType
	}{
		{"Int8Tensor", 32, 8, dtype.I8},
		{"Int8Tensor", 32, 8, dtype.BF16},
		{"Int8Tensor", 24, 8, dtype.BF16},
		{"Int8Tensor", 12, 8, dtype.I8},
		{"IntxUnpackedToInt8Tensor", 32, 4, dtype.I8},
		{"IntxUnpackedToInt8Tensor", 64, 2, dtype.BF16},
	} {
		t.Run(fmt.Sprintf("%s-%d-%s", tc.cls, tc.block, tc.zdt), func(t *testing.T) {
			c := newAOCase()
			name := "model.layers.0.mlp.up_proj.weight"
			cols := 5 * tc.block
			c.aoAffine(rand.New(rand.NewPCG(44, uint64(i))), name, tc.cls, []int64{12, cols}, []int64{1, tc.block}, int(tc.bits), dtype.BF16, tc.zdt, dtype.BF16)
			ck, r := c.plan(t)
			w := weightByName(r, name)
			if len(r.Problems) != 0 || w == nil {
				t.Fatalf("problems %v", r.Problems)
			}
			bothPaths(t, ck, w, c.want[name])
		})
	}
}

// TestHQQBF16Groups: HQQ 4-bit with a bf16 compute dtype (the whole groups
// of a row block at once through dtype.AffineNibbleBF16) gives hqq's
// values bit for bit, with lookups and without, whole and in every
// sub-range, for groups the assembly takes and groups it leaves to Go.
func TestHQQBF16Groups(t *testing.T) {
	for i, tc := range []struct{ gs, O, I int }{{64, 16, 128}, {32, 6, 96}, {12, 8, 36}, {128, 4, 256}} {
		t.Run(fmt.Sprintf("g%d", tc.gs), func(t *testing.T) {
			b, want := hqqCase(rand.New(rand.NewPCG(44, uint64(i))), 4, tc.gs, tc.O, tc.I, "bfloat16", false, false)
			c := b.build(t)
			r := c.plan(t)
			if len(r.Problems) != 0 || len(r.Weights) != len(want) {
				t.Fatalf("problems %v", r.Problems)
			}
			for name, W := range want {
				bothPaths(t, c, weightByName(r, name), W)
			}
		})
	}
}

// TestFastNatural: fastNatural puts each stored nibble at its column
// (fastInv), for every nibble position and random chunks.
func TestFastNatural(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := range 1000 {
		src := make([]byte, 16)
		if n < 32 {
			src[n/2] = 0xa << (4 * (n % 2)) // one nibble set
		} else {
			for i := range src {
				src[i] = byte(r.Uint32())
			}
		}
		dst := make([]byte, 16)
		fastNatural(dst, src)
		// fastNaturals: the same chunk as the second of row 1's block 2
		row, nat := make([]byte, 3*128), make([]byte, 3*32)
		copy(row[2*128+32+16:], src)
		fastNaturals(nat, row[32:])
		if string(nat[2*32+16:]) != string(dst) {
			t.Fatalf("chunk %x: fastNaturals %x, fastNatural %x", src, nat[2*32+16:], dst)
		}
		for p := range 32 {
			k := fastInv[p]
			if got, want := dst[k/2]>>(4*(k%2))&15, src[p/2]>>(4*(p%2))&15; got != want {
				t.Fatalf("chunk %x: column %d = %x, want stored nibble %d = %x", src, k, got, p, want)
			}
		}
	}
}

// TestAWQGemvFastGroups: GEMV-fast through fastNatural and Lookup4 gives
// AutoAWQ's values bit for bit, with lookups and without, whole and in
// every sub-range (ranges that do not start or end on 32 columns take the
// per-chunk loop), for each group size it packs.
func TestAWQGemvFastGroups(t *testing.T) {
	for i, tc := range []struct{ gs, N, K int }{{32, 8, 128}, {64, 16, 192}, {128, 8, 512}, {-1, 8, 256}} {
		t.Run(fmt.Sprintf("g%d", tc.gs), func(t *testing.T) {
			b, want := awqGemvFastCase(rand.New(rand.NewPCG(44, uint64(i))), tc.gs, tc.N, tc.K)
			c := b.build(t)
			r := c.plan(t)
			if len(r.Problems) != 0 || len(r.Weights) != len(want) {
				t.Fatalf("problems %v", r.Problems)
			}
			for name, W := range want {
				bothPaths(t, c, weightByName(r, name), W)
			}
		})
	}
}

// TestFmaTables: fmaTables gives fmaTable's entries bit for bit for every
// f16 scale, each with random f16 scaled zeros (NaNs, infinities,
// subnormals and sums that are not a float32 among them), on both of
// dtype's conversion paths' results (the converter's own tests hold them
// equal).
func TestFmaTables(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	f16 := func(b uint16) float32 {
		var out [4]byte
		f16ToF32(out[:], []byte{byte(b), byte(b >> 8)})
		return math.Float32frombits(uint32(out[0]) | uint32(out[1])<<8 | uint32(out[2])<<16 | uint32(out[3])<<24)
	}
	var s scratch
	const G = 64
	sc, sz := make([]float32, 2*G), make([]float32, 2*G)
	for base := 0; base < 4<<16; base += G { // each scale 4 times
		for g := range G {
			sc[2*g], sz[2*g] = f16(uint16(base+g)), f16(uint16(r.Uint32()))
			if g%4 == 0 { // near the scale's magnitude: a float32 sum
				sz[2*g] = f16(uint16(base+g) ^ uint16(r.IntN(64)))
			}
		}
		tbls := make([][16]float32, G)
		s.fmaTables(tbls, sc, sz, 2)
		for g := range tbls {
			var want [16]float32
			fmaTable(&want, float64(sc[2*g]), float64(sz[2*g]))
			for v := range want {
				if math.Float32bits(tbls[g][v]) != math.Float32bits(want[v]) {
					t.Fatalf("scale %v, scaled zero %v, code %d: %#x, want %#x", sc[2*g], sz[2*g], v, math.Float32bits(tbls[g][v]), math.Float32bits(want[v]))
				}
			}
		}
	}
}
