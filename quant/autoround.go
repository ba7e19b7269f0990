package quant

import (
	"fmt"
	"maps"
	"slices"
)

// AutoRound (intel/auto-round; quant_method "auto-round", older
// "intel/auto-round"): the codes are stored in another tool's packing,
// named by packing_format, and read by that scheme (auto_round/inference
// convert_model.py normalises "auto" and "auto_round:gptq" to
// "auto_round:auto_gptq", "auto_round:awq" to "auto_round:auto_awq", and
// takes "auto_round:auto_gptq" when packing_format is absent; backend.py
// serves auto_gptq with the AutoGPTQ kernels, whose packing is
// "triton_zp+-1": zeros stored minus one):
//   - auto_round:auto_gptq → gptq (v1: AutoGPTQ's layout, g_idx
//     optional; 2, 3, 4 or 8 bits);
//   - auto_round (what an asymmetric model's default export writes; a
//     symmetric one is written auto_round:auto_gptq) and
//     auto_round:gptqmodel → gptq-v2: the same layout with the zeros
//     stored as they are (backend.py GPTQ_FORMAT_NO_ZP;
//     auto_round_extension/torch/qlinear_torch.py packs them without the
//     minus one and dequantizes scales * (weight - zeros));
//   - auto_round:auto_awq → awq (AWQ GEMM).
// Every other packing_format (the fp8, mxfp4, nvfp4 and llm_compressor
// exports, ...) is named and its weights left out. The
// integer data_type only ("int"); extra_config may leave layers
// unquantized (bits 16) but not give a layer its own bits, group_size or
// data_type (per-layer schemes are not read): either is named and every
// weight left out.

func planAutoRound(p *planner) {
	if v, ok := p.cfg.Params["data_type"]; ok && v != nil {
		if dt, _ := v.(string); dt != "int" {
			p.refuseAll(fmt.Sprintf("AutoRound data_type %s (%s) is not int: no weight is dequantized", paramStr(v), p.cfg.File))
			return
		}
	}
	if why := autoRoundExtra(p.cfg.Params); why != "" {
		p.refuseAll(fmt.Sprintf("AutoRound %s (%s): no weight is dequantized", why, p.cfg.File))
		return
	}
	params := maps.Clone(p.cfg.Params)
	plan := planGPTQ
	pf := p.cfg.Params["packing_format"]
	switch s, isStr := pf.(string); {
	case pf == nil, isStr && slices.Contains([]string{"auto", "auto_round:auto_gptq", "auto_round:gptq"}, s):
		params["checkpoint_format"] = "gptq"
		delete(params, "format")
	case isStr && (s == "auto_round" || s == "auto_round:gptqmodel"):
		params["checkpoint_format"] = "gptq_v2"
		delete(params, "format")
	case isStr && (s == "auto_round:auto_awq" || s == "auto_round:awq"):
		params["version"] = "gemm"
		plan = planAWQ
		p.scheme = "awq"
	default:
		p.refuseAll(fmt.Sprintf("AutoRound packing_format %s (%s) is not read (auto_round, auto_round:auto_gptq, auto_round:gptqmodel and auto_round:auto_awq are): no weight is dequantized", paramStr(pf), p.cfg.File))
		return
	}
	cfg := p.cfg
	p.cfg = &Config{File: cfg.File, Method: cfg.Method, Params: params}
	defer func() { p.cfg = cfg }()
	plan(p)
}

// autoRoundExtra is why extra_config cannot be applied ("" when it can).
func autoRoundExtra(params map[string]any) string {
	v, ok := params["extra_config"]
	if !ok || v == nil {
		return ""
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return fmt.Sprintf("extra_config %s is not an object", paramStr(v))
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		layer, isMap := m[name].(map[string]any)
		if !isMap {
			return fmt.Sprintf("extra_config[%q] is %s, not an object", name, paramStr(m[name]))
		}
		if b, isNum := layer["bits"].(float64); isNum && b >= 16 {
			continue // left unquantized
		}
		for _, k := range []string{"bits", "group_size", "data_type"} {
			lv, has := layer[k]
			if !has || lv == nil {
				continue
			}
			gv := params[k]
			if k == "data_type" && gv == nil {
				gv = "int"
			}
			if paramStr(lv) != paramStr(gv) {
				return fmt.Sprintf("extra_config gives %q its own %s %s (per-layer schemes are not read)", name, k, paramStr(lv))
			}
		}
	}
	return ""
}
