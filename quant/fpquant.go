package quant

import "fmt"

// FP-Quant / Quartet (quant_method "fp_quant"; IST-DASLab/FP-Quant
// inference_lib fp_quant/module/linear.py FPQuantLinear, read at commit
// d2e3092f; transformers' quantizers/quantizer_fp_quant.py at 03904cb3
// and integrations/fp_quant.py at 05b48160). A quantized module X stores
// one of three forms, as its configuration says:
//
//   - store_master_weights: X.weight in BF16, the full-precision weight,
//     quantized only at run time: a plain tensor, served as stored.
//   - real quantization: X.qweight U8 [out, in/2] (E2M1 codes) and
//     X.scales U8 [out, in/32] (E8M0, forward_dtype mxfp4) or
//     [out, in/16] (E4M3, nvfp4), with X.weight_global_scale.
//   - pseudoquantization: X.dqweight in BF16 [out, in].
//
// beside X.forward_hadamard_matrix and X.backward_hadamard_matrix
// [g, g] (g = hadamard_group_size: a Hadamard, identity or "gsr" matrix
// times g^-1/2) and X.act_global_scale. The codes and dqweight are the
// weight after a rotation: each group of g inputs of W is multiplied by
// H, then quantized; the forward pass rotates the activations by the
// same H and multiplies in that basis, so W ≈ Q·Hᵀ per group. The
// reference never computes W: it exists only as that matmul, a sum of g
// products whose scales differ from block to block (g 64 or 128 spans
// several scale blocks), in an order no reference fixes. So no weight of
// the unrotated model can be computed bit-exact, and serving Q (or
// dqweight) under X.weight would be another matrix under the weight's
// name. Each such module's weight is named and left out, its parts but
// its bias hidden; the master-weight form, and unconverted modules
// (modules_to_not_convert, lm_head), are plain tensors. The rotation
// matrices and global scales of a master-weight module are hidden as
// the KV-cache scales are: not weights of the unquantized model.

// fpQuantCodes are the parts that hold a module's rotated weight.
var fpQuantCodes = []string{".qweight", ".scales", ".dqweight"}

// fpQuantBuffers are the module's other FP-Quant buffers.
var fpQuantBuffers = []string{".weight_global_scale", ".act_global_scale", ".forward_hadamard_matrix", ".backward_hadamard_matrix"}

func planFPQuant(p *planner) {
	p.scheme = "fp-quant"
	why := fmt.Sprintf("FP-Quant (%s): the stored weight is rotated by a Hadamard transform that only dequantization undoes (a matmul in no fixed order): not bit-exact reproducible", p.cfg.File)
	for _, nm := range p.names {
		x, ok := cutPart(nm, fpQuantCodes...)
		if !ok {
			if _, ok := cutPart(nm, fpQuantBuffers...); ok {
				p.hidden[nm] = true
			}
			continue
		}
		var parts []string
		for _, s := range append(append([]string{".weight"}, fpQuantCodes...), fpQuantBuffers...) {
			parts = append(parts, x+s)
		}
		p.fail(x+".weight", why, parts...)
	}
}
