package quant

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

type expected struct {
	Cases map[string]struct {
		Logical []struct {
			Name  string   `json:"name"`
			Shape []int64  `json:"shape"`
			F32   string   `json:"sha256_f32"`
			BF16  string   `json:"sha256_bf16"`
			F16   string   `json:"sha256_f16"`
			Parts []string `json:"parts"`
		} `json:"logical"`
		Absent   []string `json:"absent"`
		Negative bool     `json:"negative"`
		Missing  string   `json:"missing"`
	} `json:"cases"`
}

// TestSharedFixtures checks every scheme of ../shared/testdata/quant
// against EXPECTED.json: the sha256 of each logical tensor's float32,
// bfloat16 and float16 values, its parts, the hidden names, the broken
// weights, and reads of sub-ranges.
func TestSharedFixtures(t *testing.T) {
	dir := testenv.Path(t, "quant")
	raw, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		testenv.SkipOrFail(t, "no quant/EXPECTED.json in the shared test data")
	}
	var exp expected
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Cases) < 11 {
		t.Fatalf("EXPECTED.json has %d cases", len(exp.Cases))
	}
	for name, cs := range exp.Cases {
		t.Run(name, func(t *testing.T) {
			c := loadDir(t, filepath.Join(dir, name))
			r := c.plan(t)
			if r.Scheme == "" {
				t.Fatalf("no scheme found")
			}
			var wantHidden []string
			for _, a := range cs.Absent {
				if _, ok := c.data[a]; ok {
					wantHidden = append(wantHidden, a)
				}
			}
			if cs.Negative {
				if weightByName(r, cs.Missing) != nil {
					t.Errorf("broken weight %s is served", cs.Missing)
				}
				if len(r.Problems) != 1 || r.Problems[0].Name != cs.Missing {
					t.Errorf("problems %v, want one for %s", r.Problems, cs.Missing)
				}
				wantHidden = append(wantHidden, cs.Missing)
			} else if len(r.Problems) != 0 {
				t.Errorf("problems %v", r.Problems)
			}
			sort.Strings(wantHidden)
			wantHidden = slices.Compact(wantHidden)
			if !slices.Equal(r.Hidden, wantHidden) {
				t.Errorf("hidden %v, want %v", r.Hidden, wantHidden)
			}
			for n := range c.data {
				if r.IsHidden(n) != slices.Contains(wantHidden, n) {
					t.Errorf("IsHidden(%s) = %v", n, r.IsHidden(n))
				}
			}
			quantized := 0
			for _, l := range cs.Logical {
				w := weightByName(r, l.Name)
				var vals []float32
				if w == nil {
					// a plain tensor: as stored, converted by dtype
					if slices.Contains(r.Hidden, l.Name) {
						t.Errorf("%s is hidden", l.Name)
					}
					tn := c.tensorNamed(l.Name)
					if tn == nil || !slices.Equal(l.Parts, []string{l.Name}) {
						t.Errorf("%s: not planned as a weight (parts %v)", l.Name, l.Parts)
						continue
					}
					conv, ok := dtype.ConverterFor(tn.DType, dtype.F32)
					if !ok {
						t.Fatalf("%s: %s", l.Name, tn.DType)
					}
					vals = make([]float32, tn.NumElements())
					conv(f32Bytes(vals), c.data[l.Name])
				} else {
					quantized++
					if !slices.Equal(w.Shape, l.Shape) {
						t.Errorf("%s: shape %v, want %v", l.Name, w.Shape, l.Shape)
					}
					if !slices.Equal(w.Parts, l.Parts) {
						t.Errorf("%s: parts %v, want %v", l.Name, w.Parts, l.Parts)
					}
					vals = c.whole(t, w)
					checkRanges(t, c, w, vals)
				}
				f, b, h := shas(vals)
				if f != l.F32 {
					t.Errorf("%s: float32 sha256 %s, want %s", l.Name, f, l.F32)
				}
				if b != l.BF16 {
					t.Errorf("%s: bfloat16 sha256 %s, want %s", l.Name, b, l.BF16)
				}
				if h != l.F16 {
					t.Errorf("%s: float16 sha256 %s, want %s", l.Name, h, l.F16)
				}
			}
			if quantized != len(r.Weights) || quantized == 0 {
				t.Errorf("%d quantized weights expected, %d planned", quantized, len(r.Weights))
			}
		})
	}
}

// TestPlainLoops runs the fixture and variant checks with every kernel on
// its per-element loop instead of the table lookups of whole groups, so
// that both paths are held to the same bits.
func TestPlainLoops(t *testing.T) {
	useLookup = false
	defer func() { useLookup = true }()
	t.Run("fixtures", TestSharedFixtures)
	t.Run("variants", TestVariants)
}
