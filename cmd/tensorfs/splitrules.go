package main

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/client"
)

// splitRule gives the tensors whose name matches pattern (a glob: '*'
// any run of characters, '/' and '.' included; '?' one) the dimension
// they are split along.
type splitRule struct {
	pattern string
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
		rules = append(rules, splitRule{pattern: pat, dim: dim})
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("no rules in %q", s)
	}
	return rules, nil
}

// splitPlan returns the function giving each tensor of ck its part (nil:
// replicated), after checking that every tensor a rule matches has that
// dimension; and how many tensors are split. A rule matches a tensor's
// name, or else the checkpoint's own key of it (client.Checkpoint.Key:
// a DCP's dotted keys, which the llama preset's patterns are written in).
func splitPlan(ck *client.Checkpoint, rules []splitRule, parts, part int) (func(client.TensorInfo) *client.Split, int, error) {
	which := map[string]*client.Split{}
	m := newRuleMatcher(rules)
	for _, t := range ck.Tensors() {
		i := m.match(t.Name)
		if k, ok := ck.Key(t.Name); i < 0 && ok {
			i = m.match(k)
		}
		if i >= 0 {
			r := rules[i]
			if r.dim >= len(t.Shape) {
				return nil, 0, fmt.Errorf("%s: tensor %q matches --split rule %q but has no dimension %d (shape %v)", ck.Path(), t.Name, r.pattern, r.dim, t.Shape)
			}
			which[t.Name] = &client.Split{Dim: r.dim, Parts: parts, Part: part}
		}
	}
	return func(t client.TensorInfo) *client.Split { return which[t.Name] }, len(which), nil
}

// ruleMatcher finds the first rule matching a name without trying every
// rule (10,000 rules on 10,000 tensors took 55 s with a regexp per rule
// per tensor): a rule without wildcards is a map entry; one with
// wildcards is filed under its longest literal run, which every name it
// matches contains, and a name is globbed only against the rules whose
// run it contains (its substrings of those runs' lengths, looked up).
// Rules of wildcards only are tried for every name.
type ruleMatcher struct {
	rules   []splitRule
	exact   map[string]int   // name -> first rule
	byRun   map[string][]int // literal run -> rules, in order
	runLens []int            // the distinct run lengths, ascending
	anyName []int            // rules without a literal run
	globs   int              // full glob matches tried (for tests)
}

func newRuleMatcher(rules []splitRule) *ruleMatcher {
	m := &ruleMatcher{rules: rules, exact: map[string]int{}, byRun: map[string][]int{}}
	lens := map[int]bool{}
	for i, r := range rules {
		if !strings.ContainsAny(r.pattern, "*?") {
			if _, dup := m.exact[r.pattern]; !dup {
				m.exact[r.pattern] = i
			}
			continue
		}
		run := ""
		for _, s := range strings.FieldsFunc(r.pattern, func(c rune) bool { return c == '*' || c == '?' }) {
			if len(s) > len(run) {
				run = s
			}
		}
		if run == "" {
			m.anyName = append(m.anyName, i)
			continue
		}
		m.byRun[run] = append(m.byRun[run], i)
		lens[len(run)] = true
	}
	for n := range lens {
		m.runLens = append(m.runLens, n)
	}
	sort.Ints(m.runLens)
	return m
}

// match returns the index of the first rule matching name, or -1.
func (m *ruleMatcher) match(name string) int {
	best := -1
	if i, ok := m.exact[name]; ok {
		best = i
	}
	try := func(rules []int) {
		for _, i := range rules {
			if best >= 0 && i >= best {
				return
			}
			m.globs++
			if globMatch(m.rules[i].pattern, name) {
				best = i
				return
			}
		}
	}
	try(m.anyName)
	var tried []string // runs whose rules were tried for this name
	for _, n := range m.runLens {
		for a := 0; a+n <= len(name); a++ {
			run := name[a : a+n]
			if rules, ok := m.byRun[run]; ok && !slices.Contains(tried, run) {
				tried = append(tried, run)
				try(rules)
			}
		}
	}
	return best
}

// globMatch reports whether name matches pattern: '*' any run of
// characters, '?' one character (rune), anything else itself. It
// backtracks only to the last '*', so it takes at most
// len(pattern)*len(name) steps.
func globMatch(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				star, mark = p, n
				p++
				continue
			case '?':
				_, size := utf8.DecodeRuneInString(name[n:])
				p, n = p+1, n+size
				continue
			default:
				if c == name[n] {
					p, n = p+1, n+1
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		p = star + 1
		_, size := utf8.DecodeRuneInString(name[mark:])
		mark += size
		n = mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
