package quant

import (
	"strings"
	"testing"
)

// TestHQQNamed: an HQQ checkpoint's modules are named, every HQQ tensor
// of theirs hidden (the scale and zero are floats, which the views would
// otherwise list), and their bias and the unquantized tensors served.
func TestHQQNamed(t *testing.T) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "hqq",
		"quant_config": map[string]any{"weight_quant_params": map[string]any{"nbits": 4, "group_size": 64, "axis": 1}}}})
	X := "model.layers.0.mlp.down_proj"
	b.put(X+".W_q", "U8", []int64{2, 64}, make([]byte, 128))
	b.put(X+".scale", "BF16", []int64{4, 1}, make([]byte, 8))
	b.put(X+".zero", "BF16", []int64{4, 1}, make([]byte, 8))
	b.put(X+".nbits", "I32", []int64{}, make([]byte, 4))
	b.put(X+".bias", "BF16", []int64{64}, make([]byte, 128))
	b.put("model.norm.weight", "BF16", []int64{64}, make([]byte, 128))
	c := b.build(t)
	r := c.plan(t)
	if len(r.Weights) != 0 || len(r.Problems) != 1 || r.Problems[0].Name != X+".weight" || !strings.Contains(r.Problems[0].Why, "HQQ") {
		t.Fatalf("weights %v, problems %v", r.Weights, r.Problems)
	}
	for _, n := range []string{X + ".W_q", X + ".scale", X + ".zero", X + ".nbits"} {
		if !r.IsHidden(n) {
			t.Errorf("%s is not hidden", n)
		}
	}
	for _, n := range []string{X + ".bias", "model.norm.weight"} {
		if r.IsHidden(n) {
			t.Errorf("%s is hidden", n)
		}
	}
}
