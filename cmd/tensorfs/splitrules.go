package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/client"
)

// splitRule gives the tensors whose name matches pattern (a glob: '*'
// any run of characters, '/' and '.' included; '?' one) the dimension
// they are split along.
type splitRule struct {
	pattern string
	re      *regexp.Regexp
	dim     int
}

// splitPresets are rule sets for common architectures (tensor
// parallelism as Megatron-LM and vLLM do it): column-parallel layers
// (q, k, v, gate, up projections, embedding and head, by output rows)
// along dim 0, row-parallel ones (o and down projections, by input
// columns) along dim 1; everything else (norms) replicated.
var splitPresets = map[string]string{
	"llama": "*.q_proj.weight=0,*.k_proj.weight=0,*.v_proj.weight=0,*.q_proj.bias=0,*.k_proj.bias=0,*.v_proj.bias=0," +
		"*.gate_proj.weight=0,*.up_proj.weight=0,*embed_tokens.weight=0,*lm_head.weight=0," +
		"*.o_proj.weight=1,*.down_proj.weight=1",
}

// parseSplitRules parses --split: a preset name, or PATTERN=DIM rules
// separated by commas, the first match winning.
func parseSplitRules(s string) ([]splitRule, error) {
	if p, ok := splitPresets[strings.TrimSpace(s)]; ok {
		s = p
	}
	var rules []splitRule
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		pat, d, ok := strings.Cut(r, "=")
		dim, err := strconv.Atoi(strings.TrimSpace(d))
		if !ok || pat == "" || err != nil || dim < 0 || dim > 63 {
			return nil, fmt.Errorf("%q is not PATTERN=DIM (a name glob and a dimension, 0 the outermost) or a preset (llama)", r)
		}
		var re strings.Builder
		re.WriteString("^")
		for _, c := range pat {
			switch c {
			case '*':
				re.WriteString(".*")
			case '?':
				re.WriteString(".")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		rules = append(rules, splitRule{pattern: pat, re: regexp.MustCompile(re.String()), dim: dim})
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("no rules in %q", s)
	}
	return rules, nil
}

// splitPlan returns the function giving each tensor of ck its part (nil:
// replicated), after checking that every tensor a rule matches has that
// dimension; and how many tensors are split.
func splitPlan(ck *client.Checkpoint, rules []splitRule, parts, part int) (func(client.TensorInfo) *client.Split, int, error) {
	which := map[string]*client.Split{}
	for _, t := range ck.Tensors() {
		for _, r := range rules {
			if !r.re.MatchString(t.Name) {
				continue
			}
			if r.dim >= len(t.Shape) {
				return nil, 0, fmt.Errorf("%s: tensor %q matches --split rule %q but has no dimension %d (shape %v)", ck.Path(), t.Name, r.pattern, r.dim, t.Shape)
			}
			which[t.Name] = &client.Split{Dim: r.dim, Parts: parts, Part: part}
			break
		}
	}
	return func(t client.TensorInfo) *client.Split { return which[t.Name] }, len(which), nil
}
