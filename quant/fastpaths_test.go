package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

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
			W := c.want[name]
			for _, plain := range []bool{false, true} {
				useLookup = !plain
				got := ck.whole(t, w)
				useLookup = true
				for i := range W {
					if math.Float32bits(got[i]) != math.Float32bits(W[i]) {
						t.Fatalf("[%d] = %#x, want %#x (lookup %v)", i, math.Float32bits(got[i]), math.Float32bits(W[i]), !plain)
					}
				}
				checkRanges(t, ck, w, got)
			}
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
				w := weightByName(r, name)
				for _, plain := range []bool{false, true} {
					useLookup = !plain
					got := c.whole(t, w)
					useLookup = true
					for i := range W {
						if math.Float32bits(got[i]) != math.Float32bits(W[i]) {
							t.Fatalf("%s[%d] = %#x, want %#x (lookup %v)", name, i, math.Float32bits(got[i]), math.Float32bits(W[i]), !plain)
						}
					}
					checkRanges(t, c, w, got)
				}
			}
		})
	}
}
