package quant

import (
	"fmt"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// NVFP4: X.weight U8 [out, in/2] holds two E2M1 codes a byte, low nibble
// first; X.weight_scale F8_E4M3 [out, in/16] a scale per 16; a global
// float32 scale.
//   - ModelOpt (NVIDIA/Model-Optimizer qtensor/nvfp4_tensor.py
//     NVFP4QTensor.dequantize): per_block = f32(weight_scale) *
//     weight_scale_2 first, then W = LUT4[code] * per_block. The other
//     order differs in the last bit of hundreds of elements of a small
//     fixture.
//   - compressed-tensors nvfp4-pack-quantized (quantization/lifecycle/
//     forward.py _dequantize with a global scale): scale =
//     f32(weight_scale) / weight_global_scale, then W = LUT4[code] * scale.

type nvfp4Kernel struct {
	cols   int64 // logical in
	div    bool  // divide by the global scale (compressed-tensors)
	global dtype.DType
}

func (k *nvfp4Kernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	g, err := s.scalar(2, k.global)
	if err != nil {
		return err
	}
	return k.rectG(s, r0, r1, c0, c1, dst, g)
}

// rectG is rect with the global scale g (per expert: nvfp4moe.go).
func (k *nvfp4Kernel) rectG(s *scratch, r0, r1, c0, c1 int64, dst []float32, g float32) error {
	rb, sg := k.cols/2, k.cols/16
	b0, b1 := c0/2, (c1-1)/2+1
	j0, j1 := c0/16, (c1-1)/16+1
	codes, err := s.strided(0, 0, rb, r0, r1, b0, b1)
	if err != nil {
		return err
	}
	sc, err := s.strided(1, 1, sg, r0, r1, j0, j1)
	if err != nil {
		return err
	}
	w, bw, jw := c1-c0, b1-b0, j1-j0
	// every (scale byte, code) value at once when the tile is large
	// enough to pay for it: entry [s][n] = LUT4[n] * (f32(s) op g), the
	// same two operations as per group
	var all *[256][16]float32
	if (r1-r0)*w >= 1<<12 {
		all = s.nvTable(g, k.div)
	}
	if useLookup && all != nil && c0%16 == 0 && c1%16 == 0 {
		// whole groups: the codes of a row by the table of each
		// group's scale byte, in one call
		for r := int64(0); r < r1-r0; r++ {
			dtype.Lookup4(dst[r*w:(r+1)*w], codes[r*bw:(r+1)*bw], 8, all[:], sc[r*jw:(r+1)*jw])
		}
		return nil
	}
	var own [16]float32
	for r := int64(0); r < r1-r0; r++ {
		brow := codes[r*bw : (r+1)*bw]
		srow := sc[r*jw : (r+1)*jw]
		out := dst[r*w : (r+1)*w]
		for c := c0; c < c1; {
			e := min((c/16+1)*16, c1)
			sb := srow[c/16-j0]
			blk := &own
			if all != nil {
				blk = &all[sb]
			} else {
				ps := nvScale(e4m3Table[sb], g, k.div)
				for i := range own {
					own[i] = fp4Values[i] * ps
				}
			}
			if c&1 == 0 && e&1 == 0 {
				in := brow[c/2-b0 : e/2-b0]
				o := out[c-c0 : e-c0]
				o = o[:2*len(in)]
				for i, b := range in {
					o[2*i] = blk[b&15]
					o[2*i+1] = blk[b>>4]
				}
			} else {
				for cc := c; cc < e; cc++ {
					b := brow[cc/2-b0]
					if cc&1 == 1 {
						b >>= 4
					}
					out[cc-c0] = blk[b&15]
				}
			}
			c = e
		}
	}
	return nil
}

// nvScale is a group's scale: f32(e4m3 scale) * global (ModelOpt) or
// / global (compressed-tensors).
func nvScale(f, g float32, div bool) float32 {
	if div {
		return f / g
	}
	return f * g
}

// nvTable returns the table of every scale byte's 16 values for global
// scale g, made once per Dequantize call.
func (s *scratch) nvTable(g float32, div bool) *[256][16]float32 {
	if s.nvOK && s.nvG == g && s.nvDiv == div {
		return s.nv
	}
	if s.nv == nil {
		s.nv = new([256][16]float32)
	}
	for b := range s.nv {
		ps := nvScale(e4m3Table[b], g, div)
		for n := range s.nv[b] {
			s.nv[b][n] = fp4Values[n] * ps
		}
	}
	s.nvG, s.nvDiv, s.nvOK = g, div, true
	return s.nv
}

// nvfp4Weight checks and adds one NVFP4 weight: packed, scale, global.
func (p *planner) nvfp4Weight(name, packed, scale, global string, div bool, extra ...string) {
	parts := []string{packed, scale, global}
	all := append(append([]string{}, parts...), extra...)
	pt, st, gt := p.codes(packed), p.t(scale), p.t(global)
	switch {
	case pt == nil:
		p.fail(name, "its "+short(packed)+" is missing", all...)
	case st == nil:
		p.fail(name, "its "+short(scale)+" is missing", all...)
	case gt == nil:
		p.fail(name, "its "+short(global)+" is missing", all...)
	case pt.DType != dtype.U8 || len(pt.Shape) != 2 || !dimsOK(pt.Shape) || pt.Shape[1]%8 != 0:
		p.fail(name, fmt.Sprintf("%s is %s, not U8 [out, in/2] or F4 [out, in] with in a multiple of 16", short(packed), p.stored(pt)), all...)
	case st.DType != dtype.F8E4M3 || !shapeIs(st, pt.Shape[0], pt.Shape[1]/8):
		p.fail(name, fmt.Sprintf("%s is %s %v, not F8_E4M3 [%d, %d]", short(scale), st.DType, st.Shape, pt.Shape[0], pt.Shape[1]/8), all...)
	case !isScaleDType(gt.DType) || !isScalar(gt):
		p.fail(name, fmt.Sprintf("%s is %s %v, not one float", short(global), gt.DType, gt.Shape), all...)
	default:
		p.add(name, "nvfp4", []int64{pt.Shape[0], 2 * pt.Shape[1]}, parts,
			&nvfp4Kernel{cols: 2 * pt.Shape[1], div: div, global: gt.DType}, extra...)
	}
}

// planModelOpt: hf_quant_config.json or quant_method modelopt; quant_algo
// NVFP4 (weight U8 + weight_scale + weight_scale_2) or FP8 (weight F8 +
// weight_scale per tensor).
func planModelOpt(p *planner) {
	params := p.cfg.Params
	algo := str(params, "quant_algo")
	if algo == "" { // config.json's quantization_config may nest hf_quant_config's object
		params = obj(p.cfg.Params, "quantization")
		algo = str(params, "quant_algo")
	}
	switch algo {
	case "nvfp4":
		p.scheme = "nvfp4"
		if gs, ok := num(params, "group_size", 16); !ok || gs != 16 {
			p.refuseAll(fmt.Sprintf("ModelOpt NVFP4 group_size %s (%s) is not 16: no weight is dequantized", paramStr(params["group_size"]), p.cfg.File))
			return
		}
		p.nvfp4Experts() // nvfp4moe.go: fused experts, a global scale per expert
		for _, nm := range p.names {
			if x, ok := strings.CutSuffix(nm, ".weight_scale_2"); ok {
				p.nvfp4Weight(x+".weight", x+".weight", x+".weight_scale", nm, false, x+".input_scale")
			} else if x, ok := strings.CutSuffix(nm, ".weight_scale"); ok && p.t(x+".weight_scale_2") == nil {
				p.fail(x+".weight", "its weight_scale_2 is missing", x+".weight", nm, x+".input_scale")
			}
		}
	case "fp8":
		p.scheme = "fp8-tensor"
		for _, nm := range p.names {
			if x, ok := strings.CutSuffix(nm, ".weight"); ok && p.t(nm).DType == dtype.F8E4M3 {
				p.fp8Weight("fp8-tensor", nm, nm, nm+"_scale", 0, 0, false, x+".input_scale")
			}
		}
	default:
		p.refuseAll(fmt.Sprintf("ModelOpt quant_algo %q (%s) is not supported: no weight is dequantized", algo, p.cfg.File))
	}
}
