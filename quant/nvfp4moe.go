package quant

import (
	"fmt"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// ModelOpt NVFP4 fused experts (transformers' fused MoE parameters, as
// NVIDIA's NVFP4 releases of fused-expert models store them; vLLM's
// ModelOptNvFp4FusedMoE loads the same names): P U8 [E, R, C/2]
// (P = ...experts.gate_up_proj, ...experts.down_proj), P_weight_scale
// F8_E4M3 [E, R, C/16], P_weight_scale_2 a global scale per expert, [E]
// or [E, 1], or per fused gate/up, [E, 2]: the first for rows [0, R/2)
// (gate), the second for [R/2, R) (up), the scales the unfused gate_proj
// and up_proj carry, which may differ (TensorRT-LLM PR 18772 and vLLM
// issue 54974 keep or reconcile them for their kernels; dequantization
// applies each to its own half). P_input_scale is hidden. Each expert is
// nvfp4.go's ModelOpt formula with its own global scale: per_block =
// f32(weight_scale) * weight_scale_2[e(, h)], W = LUT4[code] * per_block.
// The logical weight is P [E, R, C] in the stored orientation. Unfused
// experts (experts.E.gate_proj.weight with its own scalar
// weight_scale_2), and compressed-tensors' per-expert weight_global_scale
// (divided by), are the per-module weights nvfp4.go reads already.

type nvfp4MoEKernel struct {
	nvfp4Kernel
	rows   int64 // R, rows per expert
	n      int64 // global scales: E, or 2E with halves
	halves bool
}

func (k *nvfp4MoEKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	gs, err := s.floats(7, 2, k.global, 0, k.n)
	if err != nil {
		return err
	}
	w := c1 - c0
	for r := r0; r < r1; {
		e := r / k.rows
		gi, end := e, (e+1)*k.rows
		if k.halves {
			h := (r % k.rows) / (k.rows / 2)
			gi, end = 2*e+h, e*k.rows+(h+1)*(k.rows/2)
		}
		end = min(end, r1)
		if err := k.rectG(s, r, end, c0, c1, dst[(r-r0)*w:(end-r0)*w], gs[gi]); err != nil {
			return err
		}
		r = end
	}
	return nil
}

// nvfp4Experts plans every P_weight_scale_2 of a fused expert parameter.
func (p *planner) nvfp4Experts() {
	for _, nm := range p.names {
		P, ok := strings.CutSuffix(nm, "_weight_scale_2")
		if !ok || strings.HasSuffix(P, ".") {
			continue
		}
		sn, in := P+"_weight_scale", P+"_input_scale"
		all := []string{P, sn, nm, in}
		pt, st, gt := p.codes(P), p.t(sn), p.t(nm)
		switch {
		case pt == nil:
			p.fail(P, "its packed codes "+short(P)+" are missing (it has a "+short(nm)+")", all...)
			continue
		case st == nil:
			p.fail(P, "its "+short(sn)+" is missing", all...)
			continue
		case pt.DType != dtype.U8 || len(pt.Shape) != 3 || !dimsOK(pt.Shape) || pt.Shape[2]%8 != 0:
			p.fail(P, fmt.Sprintf("%s is %s, not U8 [experts, rows, in/2] or F4 [experts, rows, in] with in a multiple of 16", short(P), p.stored(pt)), all...)
			continue
		}
		E, R, C := pt.Shape[0], pt.Shape[1], 2*pt.Shape[2]
		k := &nvfp4MoEKernel{nvfp4Kernel: nvfp4Kernel{cols: C, global: gt.DType}, rows: R, n: E}
		switch {
		case !isScaleDType(gt.DType):
			p.fail(P, fmt.Sprintf("%s is %s, not a float", short(nm), gt.DType), all...)
			continue
		case shapeIs(gt, E) || shapeIs(gt, E, 1):
		case shapeIs(gt, E, 2) && R%2 == 0:
			k.n, k.halves = 2*E, true
		default:
			p.fail(P, fmt.Sprintf("%s has shape %v, not [%d] (one per expert) or [%d, 2] (gate and up halves of %d rows)", short(nm), gt.Shape, E, E, R), all...)
			continue
		}
		if st.DType != dtype.F8E4M3 || !shapeIs(st, E, R, C/16) {
			p.fail(P, fmt.Sprintf("%s is %s %v, not F8_E4M3 [%d, %d, %d]", short(sn), st.DType, st.Shape, E, R, C/16), all...)
			continue
		}
		p.add(P, "nvfp4", []int64{E, R, C}, []string{P, sn, nm}, k, in)
	}
}
