package quant

import (
	"fmt"
	"strings"
)

// HQQ (mobiusml/hqq; quant_method "hqq", transformers' HqqHfQuantizer) is
// listed and named, not read. Its layout (hqq/core/quantize.py
// Quantizer.dequantize, bitpack.py): X.W_q packed 8/4/2/1 values a U8
// byte or 10 a 32-bit word (3 bits), the rows split into that many
// contiguous blocks ("row halves": pack_4bit_u8 is W[:n/2] << 4 |
// W[n/2:]); X.scale and X.zero per group along meta axis; the weight is
// ((unpack(W_q) − zero) · scale) in meta compute_dtype, each operation
// rounded to it, reshaped to meta shape. The formula is exact, but the
// meta tensors beside W_q (shape, nbits, group_size, axis, packing,
// compute_dtype, view_as_float, unpack_view_dtype, and scale or zero
// themselves quantized with their own meta) are encoded differently by
// hqq's versions (utils.py encode_safetensor_type: an int as I32 in one,
// U8 in another; strings as U8 codes), with no version stored to say
// which; reading them by guess could serve a wrong weight. So every
// module with a W_q is a Problem naming HQQ, and all its tensors but
// its bias are hidden: no code, scale, zero or meta value in the views.

func planHQQ(p *planner) {
	why := fmt.Sprintf("HQQ (quant_method hqq, %s) is not read: its meta encodings differ across hqq versions; no weight is dequantized", p.cfg.File)
	for _, nm := range p.names {
		x, ok := strings.CutSuffix(nm, ".W_q")
		if !ok || x == "" {
			continue
		}
		var parts []string
		for _, other := range p.names {
			if strings.HasPrefix(other, x+".") && other != x+".bias" && !strings.Contains(other[len(x)+1:], ".") {
				parts = append(parts, other)
			}
		}
		p.fail(x+".weight", why, parts...)
	}
	if len(p.probs) == 0 {
		p.refuseAll(why)
	}
}
