package quant

import (
	"fmt"
	"strings"
)

// scale_fmt "ue8m0" (DeepSeek-V3.1 and V3.2's quantization_config, with
// quant_method fp8 and weight_block_size [128, 128]; deepseek-ai
// DeepSeek-V3 inference/model.py and kernel.py, DeepSeek-V3.2-Exp the
// same): the block scales were made as powers of two. What that changes
// in a stored checkpoint is only how a scale may be stored:
//   - weight_scale_inv F32 (the V3.1 and V3.2 releases): the reference's
//     weight_dequant multiplies by the stored float32 whatever scale_fmt
//     says (scale_fmt only rounds the activations' scales in act_quant),
//     so the stored value is used as it is, power of two or not: V3.1's
//     own self_attn.o_proj scales are not powers of two
//     (deepseek-ai/DeepSeek-V3 issue 961), and refusing them would leave
//     out weights its reference reads;
//   - F8_E8M0 (DeepSeek-V4's X.scale): 2^(e-127), E8M0 255 NaN, as
//     without scale_fmt;
//   - U8: the E8M0 exponent bytes, read as F8_E8M0 (as transformers reads
//     MXFP8's); without scale_fmt ue8m0 a U8 scale is refused (its
//     meaning is not said).
// Any other scale_fmt (not null, not "ue8m0") leaves every weight out,
// named, never read as another format's bytes. Each weight is checked on
// its own, whichever shard holds its parts.

// scaleFmt reads scale_fmt; false when it refused every weight.
func (p *planner) scaleFmt() bool {
	v, ok := p.cfg.Params["scale_fmt"]
	if !ok || v == nil {
		return true
	}
	if f, _ := v.(string); strings.ToLower(f) == "ue8m0" {
		p.u8E8M0 = true
		return true
	}
	p.refuseAll(fmt.Sprintf("scale_fmt %s (%s) is not ue8m0: no weight is dequantized", paramStr(v), p.cfg.File))
	return false
}
