package quant

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// compressed-tensors' config_groups (compressed_tensors quantization
// lifecycle apply.py apply_quantization_config, utils match.py
// match_targets): each group's targets name the layers it quantizes (an
// exact module name, "re:" and a regular expression matched at the start
// of the name as re.match does, or a module class: "Linear", every layer
// tensorfs can dequantize being one); `ignore` names layers left
// unquantized. As apply_quantization_config does, a target names the
// last group (in the file's order, Config.GroupOrder) that lists it, and
// a layer that several targets match takes the first of them in
// match_targets' order: the targets that match its name, sorted by ("re:"
// in target, target), then those that match its class, sorted the same
// way. Never an order of Go's map. A layer with quantized parts that no
// group matches, or that `ignore` names, is left out and named.
// Each group's format (or the top-level one) picks the kernel and its
// weights' num_bits, group_size and block_structure its parameters; a
// group whose parameters cannot be used leaves out the layers it matches.

type ctGroup struct {
	name    string
	targets []ctTarget
	format  string
	bits    int64
	gsize   int64
	blocks  [][2]int64
	why     string // a parameter that cannot be used: its layers are left out
}

// ctTarget is one entry of targets or ignore.
type ctTarget struct {
	text string
	kind int            // 0 exact name, 1 regular expression, 2 class
	re   *regexp.Regexp // kind 1; nil when it does not compile (matches nothing)
}

// maxTargets bounds a configuration's targets and ignore entries.
const maxTargets = 1 << 14

func ctTargets(v any) ([]ctTarget, string) {
	if v == nil {
		return nil, ""
	}
	list, ok := v.([]any)
	if !ok {
		if s, isStr := v.(string); isStr {
			list = []any{s}
		} else {
			return nil, fmt.Sprintf("is %s, not a list of names", paramStr(v))
		}
	}
	if len(list) > maxTargets {
		return nil, fmt.Sprintf("has %d entries, over %d", len(list), maxTargets)
	}
	var out []ctTarget
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Sprintf("holds %s, not a name", paramStr(e))
		}
		switch {
		case strings.HasPrefix(s, "re:"):
			re, err := regexp.Compile(`^(?:` + s[3:] + `)`)
			if err != nil {
				return nil, fmt.Sprintf("holds %q, which is no regular expression tensorfs reads (%v)", s, err)
			}
			out = append(out, ctTarget{text: s, kind: 1, re: re})
		case s != "" && s[0] >= 'A' && s[0] <= 'Z' && !strings.Contains(s, "."):
			out = append(out, ctTarget{text: s, kind: 2})
		default:
			out = append(out, ctTarget{text: s, kind: 0})
		}
	}
	return out, ""
}

// match returns the best kind of target in ts that names module x (3: none).
func matchKind(ts []ctTarget, x string) int {
	best := 3
	for _, t := range ts {
		var ok bool
		switch t.kind {
		case 0:
			ok = t.text == x
		case 1:
			ok = t.re.MatchString(x)
		case 2:
			ok = t.text == "Linear"
		}
		if ok && t.kind < best {
			best = t.kind
		}
	}
	return best
}

// ctRule is one target of config_groups and the group it names.
type ctRule struct {
	t     ctTarget
	group int
}

// ctRules are the targets of groups, each naming the last group (in the
// given order) that lists it, sorted as match_targets sorts them.
func ctRules(groups []ctGroup) []ctRule {
	last := map[string]ctRule{}
	for gi, g := range groups {
		for _, t := range g.targets {
			last[t.text] = ctRule{t, gi}
		}
	}
	rules := make([]ctRule, 0, len(last))
	for _, r := range last {
		rules = append(rules, r)
	}
	slices.SortFunc(rules, func(a, b ctRule) int {
		ra, rb := strings.HasPrefix(a.t.text, "re:"), strings.HasPrefix(b.t.text, "re:")
		if ra != rb {
			if rb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.t.text, b.t.text)
	})
	return rules
}

// ctGroupOf returns the index of the group that quantizes layer x, -1
// when none.
func ctGroupOf(rules []ctRule, x string) int {
	for _, r := range rules { // names first
		if (r.t.kind == 0 && r.t.text == x) || (r.t.kind == 1 && r.t.re.MatchString(x)) {
			return r.group
		}
	}
	for _, r := range rules { // then classes
		if r.t.kind == 2 && r.t.text == "Linear" {
			return r.group
		}
	}
	return -1
}

// ctParseGroups reads config_groups, in the file's order (order: their
// names as the file gives them; the others after, by name).
func ctParseGroups(params map[string]any, topFormat string, order []string) ([]ctGroup, string) {
	raw, present := params["config_groups"]
	gm, ok := raw.(map[string]any)
	if present && raw != nil && !ok {
		return nil, fmt.Sprintf("config_groups is %s, not an object", paramStr(raw))
	}
	if len(gm) > maxTargets {
		return nil, fmt.Sprintf("config_groups has %d groups, over %d", len(gm), maxTargets)
	}
	var out []ctGroup
	for name, v := range gm {
		g := ctGroup{name: name, format: topFormat}
		o, ok := v.(map[string]any)
		if !ok {
			g.why = fmt.Sprintf("config group %q is %s, not an object", name, paramStr(v))
			out = append(out, g)
			continue
		}
		var why string
		if g.targets, why = ctTargets(o["targets"]); why != "" {
			// which layers it takes cannot be told, nor so which
			// layers the other groups take
			return nil, fmt.Sprintf("config group %q's targets %s", name, why)
		}
		if f := str(o, "format"); f != "" && (topFormat == "" || topFormat == "mixed-precision") {
			g.format = f
		}
		if g.why == "" {
			g.why = g.weights(o["weights"])
		}
		out = append(out, g)
	}
	rank := func(n string) int {
		if i := slices.Index(order, n); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(out, func(a, b ctGroup) int {
		if ra, rb := rank(a.name), rank(b.name); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.name, b.name)
	})
	return out, ""
}

// weights reads a group's weights arguments; a reason when one cannot be
// used by the group's format.
func (g *ctGroup) weights(v any) string {
	bad := func(key string, val any) string {
		return fmt.Sprintf("config group %q's weights.%s %s cannot be used", g.name, key, paramStr(val))
	}
	w, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprintf("config group %q has no weights object", g.name)
	}
	var okb, okg bool
	if g.bits, okb = num(w, "num_bits", 0); !okb || g.bits < 0 {
		return bad("num_bits", w["num_bits"])
	}
	if g.gsize, okg = num(w, "group_size", 0); !okg || g.gsize > maxDim {
		return bad("group_size", w["group_size"])
	}
	typ := str(w, "type")
	if bs, present := w["block_structure"]; present && bs != nil {
		a, b, ok := blockPair(bs)
		if !ok {
			return bad("block_structure", bs)
		}
		g.blocks = append(g.blocks, [2]int64{a, b})
	}
	strategy := str(w, "strategy")
	switch strategy {
	case "", "tensor", "channel", "tensor_group":
	case "group":
		if g.gsize <= 0 {
			return bad("group_size", w["group_size"])
		}
	case "block":
		if len(g.blocks) == 0 {
			return bad("block_structure", w["block_structure"])
		}
	default:
		return bad("strategy", w["strategy"])
	}
	if strategy == "group" && (g.format == "float-quantized" || g.format == "naive-quantized" || g.format == "int-quantized") {
		g.blocks = append(g.blocks, [2]int64{1, g.gsize}) // a scale (and zero point) per gsize columns
	}
	switch g.format {
	case "float-quantized", "naive-quantized":
		if typ == "int" || (g.bits != 0 && g.bits != 8) {
			return fmt.Sprintf("config group %q: %s with weights of type %q, %d bits is not FP8", g.name, g.format, typ, g.bits)
		}
	case "int-quantized":
		if typ == "float" || (g.bits != 0 && g.bits != 8) {
			return fmt.Sprintf("config group %q: int-quantized with weights of type %q, %d bits is not int8", g.name, typ, g.bits)
		}
	case "pack-quantized":
		if typ == "float" {
			return fmt.Sprintf("config group %q: pack-quantized weights of type float are not read", g.name)
		}
	case "nvfp4-pack-quantized":
		if typ == "int" || (g.bits != 0 && g.bits != 4) {
			return fmt.Sprintf("config group %q: nvfp4-pack-quantized with weights of type %q, %d bits is not FP4", g.name, typ, g.bits)
		}
		if g.gsize != 0 && g.gsize != 16 {
			return bad("group_size", w["group_size"]) // NVFP4's scale is per 16
		}
	default:
		return fmt.Sprintf("compressed-tensors format %q is not supported", g.format)
	}
	return ""
}

// scheme is the Result.Scheme of a checkpoint of this group alone.
func (g *ctGroup) scheme() string {
	switch g.format {
	case "float-quantized", "naive-quantized":
		return "fp8-channel"
	case "int-quantized":
		return "int8-channel"
	case "pack-quantized":
		return fmt.Sprintf("int%d-packed", g.bits)
	}
	return "nvfp4"
}

// ctModuleSuffixes are the stored names of a compressed-tensors layer's
// quantized parts, after the layer's name.
var ctModuleSuffixes = []string{".weight_packed", ".weight_scale", ".weight_global_scale", ".weight_zero_point", ".weight_g_idx", ".weight_shape"}

// planCompressed: quant_method compressed-tensors.
func planCompressed(p *planner) {
	top := str(p.cfg.Params, "format")
	groups, why := ctParseGroups(p.cfg.Params, top, p.cfg.GroupOrder)
	if why != "" {
		p.refuseAll(why + " (" + p.cfg.File + "): no weight is dequantized")
		return
	}
	ignore, why := ctTargets(p.cfg.Params["ignore"])
	if why != "" {
		p.refuseAll("ignore " + why + " (" + p.cfg.File + "): no weight is dequantized")
		return
	}
	if len(groups) == 0 {
		// no groups: the top-level format alone, every layer (older
		// configurations)
		groups = []ctGroup{{name: "(format)", format: top, targets: []ctTarget{{text: "Linear", kind: 2}}}}
		groups[0].why = groups[0].weights(map[string]any{})
	}
	rules := ctRules(groups)
	schemes := map[string]bool{}
	for _, x := range ctModules(p) {
		name := x + ".weight"
		all := []string{name, x + ".input_scale", x + ".input_zero_point", x + ".input_global_scale"}
		for _, s := range ctModuleSuffixes {
			all = append(all, x+s)
		}
		if matchKind(ignore, x) < 3 {
			p.fail(name, "it has quantized parts, but the configuration's ignore names its layer", all...)
			continue
		}
		gi := ctGroupOf(rules, x)
		if gi < 0 {
			p.fail(name, "no config group's targets match its layer", all...)
			continue
		}
		g := &groups[gi]
		if g.why != "" {
			p.fail(name, g.why, all...)
			continue
		}
		n := len(p.weights)
		p.ctLayer(x, g, all)
		if p.weights[name] != nil && len(p.weights) > n {
			schemes[g.scheme()] = true
		}
	}
	switch len(schemes) {
	case 0:
		p.scheme = "compressed"
		if len(groups) > 0 && groups[0].why == "" {
			p.scheme = groups[0].scheme()
		}
	case 1:
		for s := range schemes {
			p.scheme = s
		}
	default:
		p.scheme = "compressed-mixed"
	}
}

// ctModules are the layers: every module with a quantized part, or whose
// weight is stored as codes, sorted.
func ctModules(p *planner) []string {
	seen := map[string]bool{}
	var mods []string
	for _, nm := range p.names {
		x, ok := cutPart(nm, ctModuleSuffixes...)
		if !ok {
			if y, isW := strings.CutSuffix(nm, ".weight"); isW && (isCodeDType(p.t(nm).DType) || p.t(nm).DType == dtype.I8) {
				x, ok = y, true
			}
		}
		if ok && !seen[x] {
			seen[x] = true
			mods = append(mods, x)
		}
	}
	slices.Sort(mods)
	return mods
}

// ctLayer plans layer x by its config group g's format; all are the
// names a failure hides.
func (p *planner) ctLayer(x string, g *ctGroup, all []string) {
	name := x + ".weight"
	switch g.format {
	case "float-quantized", "naive-quantized", "int-quantized":
		kind, code := "fp8", dtype.F8E4M3
		if g.format == "int-quantized" {
			kind, code = "int8", dtype.I8
		}
		if st := p.t(x + ".weight_scale"); st != nil {
			p.ctFP8(x, g.blocks, kind)
		} else if wt := p.t(name); wt != nil && wt.DType == code {
			p.fail(name, "its weight_scale is missing", name, x+".input_scale")
		} else {
			p.fail(name, fmt.Sprintf("config group %q is %s, but the layer is stored another way", g.name, g.format), all...)
		}
	case "pack-quantized":
		if p.t(x+".weight_packed") != nil {
			p.ctPacked(x, g.bits, g.gsize)
		} else {
			p.fail(name, "its weight_packed is missing", all...)
		}
	case "nvfp4-pack-quantized":
		if p.t(x+".weight_packed") != nil {
			p.nvfp4Weight(name, x+".weight_packed", x+".weight_scale", x+".weight_global_scale", true, x+".input_global_scale")
		} else {
			p.fail(name, "its weight_packed is missing", all...)
		}
	}
}
