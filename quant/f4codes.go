package quant

import (
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// F4 code tensors. Every FP4 scheme stores its E2M1 codes two a byte,
// the even element in the low nibble, and today's writers save them as
// U8 [.., K/2]. A checkpoint whose codes are saved with torch's own
// dtype, torch.float4_e2m1fn_x2, goes through safetensors' torch writer
// (safetensors 0.8, torch 2.14: checked by testdata/torch214/gen_f4.py)
// as dtype F4 with the element shape [.., K]: the same bytes in the same
// order (torch's x2 element holds element 2i in bits 0-3 and 2i+1 in bits
// 4-7, pack_uint4's order). So an FP4 scheme reads an F4 [.., K] code
// tensor as the U8 [.., K/2] it would have been, and serves the same
// weight.

// codes returns the code tensor called name as the U8 bytes the FP4
// schemes read: a U8 tensor as it is; an F4 tensor [.., K] with K even as
// a copy with dtype U8 and shape [.., K/2] (same name, offset and size);
// anything else (an odd K included) as it is, for the caller to name.
func (p *planner) codes(name string) *index.Tensor {
	t := p.t(name)
	if t == nil || t.DType != dtype.F4 || len(t.Shape) == 0 || t.Shape[len(t.Shape)-1]%2 != 0 {
		return t
	}
	u := *t
	u.DType = dtype.U8
	u.Shape = append([]int64{}, t.Shape...)
	u.Shape[len(u.Shape)-1] /= 2
	return &u
}

// stored is tensor t's stored dtype and shape for a message: an F4 code
// tensor's, not the U8 view codes gives it.
func (p *planner) stored(t *index.Tensor) string {
	if o := p.t(t.Name); o != nil {
		t = o
	}
	return fmt.Sprintf("%s %v", t.DType, t.Shape)
}

// looseF4 names every F4 tensor of a quantized checkpoint that no weight
// of its scheme reads (an FP4 weight whose scales are all missing, say):
// read as a plain F4 tensor its codes would be served, unscaled, under
// its name in the converted views. A checkpoint with no quantization
// config (planPairs) keeps its F4 tensors as plain E2M1 values.
func (p *planner) looseF4() {
	for _, nm := range p.names {
		if p.t(nm).DType != dtype.F4 || p.hidden[nm] {
			continue
		}
		if _, ok := p.weights[nm]; ok {
			continue
		}
		if _, ok := p.probs[nm]; ok {
			continue
		}
		p.fail(nm, fmt.Sprintf("F4 (E2M1 codes) that no %s weight reads: its scales are missing", p.scheme), nm)
	}
}
