package quant

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestGPTQMarlinRefused: what the Marlin layout cannot hold (another
// width, asymmetric or act-order, another group size, B or s of another
// shape or dtype, a missing part) is one line naming the weight, its
// parts hidden, never served as codes; the bias stays.
func TestGPTQMarlinRefused(t *testing.T) {
	X := "model.layers.0.mlp.down_proj"
	for _, tc := range []struct {
		name, why string
		params    map[string]any
		edit      func(b map[string]tensorSpec)
	}{
		{"bits 8", "bits 8 is not 4", map[string]any{"bits": 8}, nil},
		{"sym false", "sym false", map[string]any{"sym": false}, nil},
		{"desc_act", "desc_act true", map[string]any{"desc_act": true}, nil},
		{"group 64", "group_size 64 is not 128", map[string]any{"group_size": 64}, nil},
		{"B out not 256", "B is I32 [16 256]", nil, func(b map[string]tensorSpec) { b[X+".B"] = tensorSpec{"I32", []int64{16, 256}} }},
		{"B in not 128", "B is I32 [4 512]", nil, func(b map[string]tensorSpec) { b[X+".B"] = tensorSpec{"I32", []int64{4, 512}} }},
		{"B not I32", "B is U8", nil, func(b map[string]tensorSpec) { b[X+".B"] = tensorSpec{"U8", []int64{16, 512}} }},
		{"s bf16", "s is BF16 [2 256], not F16 [2, 256]", nil, func(b map[string]tensorSpec) { b[X+".s"] = tensorSpec{"BF16", []int64{2, 256}} }},
		{"s rows", "s is F16 [1 256], not F16 [2, 256]", nil, func(b map[string]tensorSpec) { b[X+".s"] = tensorSpec{"F16", []int64{1, 256}} }},
		{"s missing", "its B or s is missing", nil, func(b map[string]tensorSpec) { delete(b, X+".s") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qc := map[string]any{"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false, "sym": true, "checkpoint_format": "marlin"}
			for k, v := range tc.params {
				qc[k] = v
			}
			specs := map[string]tensorSpec{X + ".B": {"I32", []int64{16, 512}}, X + ".s": {"F16", []int64{2, 256}},
				X + ".workspace": {"I32", []int64{32}}, X + ".bias": {"F16", []int64{256}}}
			if tc.edit != nil {
				tc.edit(specs)
			}
			b := newBuilder(map[string]any{"quantization_config": qc})
			for n, sp := range specs {
				size := sp.dt2size() * sp.shape[0]
				if len(sp.shape) > 1 {
					size *= sp.shape[1]
				}
				b.put(n, sp.dt, sp.shape, make([]byte, size))
			}
			r := b.build(t).plan(t)
			if len(r.Weights) != 0 || len(r.Problems) != 1 || r.Problems[0].Name != X+".weight" || !strings.Contains(r.Problems[0].Why, tc.why) {
				t.Fatalf("weights %v, problems %v, want one naming %s.weight: %q", r.Weights, r.Problems, X, tc.why)
			}
			for n := range specs {
				if r.IsHidden(n) == (n == X+".bias") {
					t.Errorf("%s hidden: %v", n, r.IsHidden(n))
				}
			}
		})
	}
}

type tensorSpec struct {
	dt    string
	shape []int64
}

func (s tensorSpec) dt2size() int64 {
	switch s.dt {
	case "I32":
		return 4
	case "F16", "BF16":
		return 2
	}
	return 1
}

// BenchmarkGPTQMarlin: go test ./quant -run '^$' -bench GPTQMarlin -cpu 1
// (a [4096, 2048] weight in groups of 128, read 1 Mi elements at a time).
func BenchmarkGPTQMarlin(b *testing.B) {
	const K, N = 2048, 4096
	r := rand.New(rand.NewPCG(1, 2))
	bb := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": true, "checkpoint_format": "marlin"}})
	words := make([]uint32, K/16*2*N)
	for i := range words {
		words[i] = r.Uint32()
	}
	bb.put("m.B", "I32", []int64{K / 16, 2 * N}, u32s(words))
	sb, _ := half(dtype.F16, scales(r, K/128*N, -9, -4))
	bb.put("m.s", "F16", []int64{K / 128, N}, sb)
	c := bb.build(b)
	res := c.plan(b)
	if len(res.Weights) != 1 || len(res.Problems) != 0 {
		b.Fatalf("%+v", res)
	}
	benchDequantize(b, c, &res.Weights[0], true)
}

// TestMarlinWords: the word pattern tiles relies on holds for every word
// of _get_perms' perm (marlinFwd, built as the reference builds it): its 8
// codes lie in one tile at its first code's (kk, nn) plus these offsets.
func TestMarlinWords(t *testing.T) {
	d := [8]int32{0, 128, 8, 136, 16, 144, 24, 152}
	seen := map[int32]bool{}
	for w := 0; w < 128; w++ {
		x0 := marlinFwd[8*w]
		if x0%256/16%2 != 0 || x0%256/16 > 6 || x0%16 >= 8 {
			t.Fatalf("word %d starts at %d", w, x0)
		}
		for b := range d {
			if marlinFwd[8*w+b] != x0+d[b] {
				t.Fatalf("word %d code %d is %d, want %d", w, b, marlinFwd[8*w+b], x0+d[b])
			}
			seen[x0+d[b]] = true
		}
	}
	if len(seen) != 1024 {
		t.Fatalf("perm covers %d of 1024", len(seen))
	}
}

// TestGPTQMarlinPaths: over testdata/gptq_marlin's weights, the tile path
// (whole 16-row tiles, runs of 64 columns whole or cut) and the
// per-element loop give the same values, whole and over odd ranges.
func TestGPTQMarlinPaths(t *testing.T) {
	for _, dir := range []string{"group128", "group_all"} {
		c := loadDir(t, filepath.Join("testdata", "gptq_marlin", dir))
		r := c.plan(t)
		if len(r.Weights) < 2 || len(r.Problems) != 0 {
			t.Fatalf("%s: %+v", dir, r)
		}
		for i := range r.Weights {
			w := &r.Weights[i]
			whole := c.whole(t, w)
			useLookup = false
			plain := c.whole(t, w)
			checkRanges(t, c, w, whole)
			useLookup = true
			checkRanges(t, c, w, whole)
			for j := range whole {
				if f32bits(plain[j]) != f32bits(whole[j]) {
					t.Fatalf("%s %s[%d]: loop %v, tiles %v", dir, w.Name, j, plain[j], whole[j])
				}
			}
			// rows [o0, o1) cut inside runs of 64 columns, through the tiles
			for _, rr := range [][2]int64{{3, 70}, {17, 33}, {60, 130}} {
				o0, o1 := rr[0], min(rr[1], w.Shape[0])
				got := make([]float32, (o1-o0)*w.cols)
				if err := w.Dequantize(c.reader(t, w), o0*w.cols, got); err != nil {
					t.Fatal(err)
				}
				for j := range got {
					if f32bits(got[j]) != f32bits(whole[o0*w.cols+int64(j)]) {
						t.Fatalf("%s %s rows [%d, %d) element %d differs", dir, w.Name, o0, o1, j)
					}
				}
			}
		}
	}
}
