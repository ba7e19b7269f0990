package quant_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestGPTQMarlin: GPTQ checkpoint_format "marlin" checkpoints written by
// testdata/gptq_marlin/gen.py (AutoGPTQ's QuantLinear.pack, 9f7d3707,
// written again with torch: the tile transpose, _get_perms' permutations
// and the nibble packing of B, the scale permutations of s) for groups of
// 128, a layer whose one group is its whole input, and group_size -1: each
// weight is s·(q − 8) of the codes and scales before packing, bit for bit
// in float32, and its float16 the kernel's half product; B, s and
// workspace are in no converted view, the bias and norm are as stored.
func TestGPTQMarlin(t *testing.T) {
	dir := filepath.Join("testdata", "gptq_marlin")
	raw, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Reference string `json:"reference"`
		Cases     map[string]struct {
			Logical []xLogical `json:"logical"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Cases) != 2 {
		t.Fatalf("EXPECTED.json: %d cases", len(exp.Cases))
	}
	for name, cs := range exp.Cases {
		t.Run(name, func(t *testing.T) {
			checkLogical(t, filepath.Join(dir, name), "gptq-marlin", cs.Logical, exp.Reference)
		})
	}
}
