package quant

import (
	"strings"
	"testing"
)

// TestFPQuantForms: an FP-Quant checkpoint (quant_method fp_quant) with a
// module in each stored form. The master weight (store_master_weights:
// X.weight BF16) is served as stored; the real-quantized module (qweight,
// scales) is named in one line and left out, its bias served; lm_head
// (modules_to_not_convert) is a plain tensor; every rotation matrix and
// global scale is out of the views, and nothing is a Problem of the
// checkpoint as a whole.
func TestFPQuantForms(t *testing.T) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fp_quant", "forward_dtype": "mxfp4",
		"forward_method": "quest", "backward_dtype": "bf16", "hadamard_group_size": 32, "store_master_weights": true,
		"pseudoquantization": false, "transform_init": "hadamard", "modules_to_not_convert": []any{"lm_head"}}})
	buffers := func(x string) []string {
		var n []string
		for _, s := range fpQuantBuffers {
			n = append(n, x+s)
		}
		return n
	}
	master, quant := "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"
	b.put(master+".weight", "BF16", []int64{4, 64}, make([]byte, 512))
	b.put(quant+".qweight", "U8", []int64{4, 32}, make([]byte, 128))
	b.put(quant+".scales", "U8", []int64{4, 2}, make([]byte, 8))
	b.put(quant+".bias", "BF16", []int64{4}, make([]byte, 8))
	for _, x := range []string{master, quant} {
		for _, n := range buffers(x) {
			shape := []int64{32, 32}
			if strings.HasSuffix(n, "_global_scale") {
				shape = []int64{1}
			}
			b.put(n, "BF16", shape, make([]byte, 2*shape[0]*shape[len(shape)-1]))
		}
	}
	b.put("lm_head.weight", "BF16", []int64{8, 64}, make([]byte, 1024))
	r := b.build(t).plan(t)
	if len(r.Weights) != 0 || len(r.Problems) != 1 || r.Scheme != "fp-quant" {
		t.Fatalf("scheme %q, weights %v, problems %v", r.Scheme, r.Weights, r.Problems)
	}
	p := r.Problems[0]
	if p.Name != quant+".weight" || !strings.Contains(p.Why, "Hadamard") || !strings.Contains(p.Why, "config.json") || strings.Contains(p.Why, "\n") {
		t.Errorf("problem %v", p)
	}
	for _, n := range []string{master + ".weight", quant + ".bias", "lm_head.weight"} {
		if r.IsHidden(n) {
			t.Errorf("the plain %s is hidden", n)
		}
	}
	for _, n := range append(append(buffers(master), buffers(quant)...), quant+".qweight", quant+".scales") {
		if !r.IsHidden(n) {
			t.Errorf("%s is in the converted views", n)
		}
	}
}
