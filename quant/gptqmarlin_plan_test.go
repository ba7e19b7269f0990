package quant

import (
	"strings"
	"testing"
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
