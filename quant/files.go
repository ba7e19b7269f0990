package quant

import "github.com/lazyweights/tensorfs/index"

// What quant knows of the files beside a checkpoint and of its names,
// so that the loader and the mount need not name a scheme.

// ConfigFiles are the files beside a checkpoint that can name its
// quantization (Find reads them, in this order of precedence but for
// MLX's entry of config.json).
var ConfigFiles = []string{"config.json", "hf_quant_config.json", "quantize_config.json"}

// SchemeOnly reports whether the file called name, beside a checkpoint,
// does nothing but name its quantization (hf_quant_config.json,
// quantize_config.json): a tree of the logical weights (a converted
// view, its export) leaves it out, so that a loader does not dequantize
// them again.
func SchemeOnly(name string) bool {
	return name == "hf_quant_config.json" || name == "quantize_config.json"
}

// ConfigKeys are the top-level keys of config.json that name a
// quantization of scheme (Result.Scheme): what a tree of the logical
// weights removes from its config.json, every other byte as it is.
// MLX's "quantization" counts only for an MLX checkpoint: another
// model's config.json may hold a key of that name for something else.
func ConfigKeys(scheme string) []string {
	if scheme == mlxScheme {
		return []string{"quantization_config", "quantization"}
	}
	return []string{"quantization_config"}
}

// pairSuffixes end the names of the tensors a checkpoint without a
// configuration can pair (planPairs): block FP8's X.weight_scale_inv,
// MXFP4's P_blocks and P_scales.
var pairSuffixes = []string{"_scale_inv", "_blocks", "_scales"}

// MayPair reports whether Plan without a configuration can find
// anything in tensors: whether some name ends as one half of a pair
// does. Without one, a loader need not prepare Plan at all (no cost for
// the checkpoints that are not quantized).
func MayPair(tensors []index.Tensor) bool {
	for i := range tensors {
		n := tensors[i].Name
		for _, s := range pairSuffixes {
			if len(n) >= len(s) && n[len(n)-len(s):] == s {
				return true
			}
		}
	}
	return false
}
