package main

import (
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// globOracle is the --split glob as a regexp ('*' any run, newlines
// included; '?' one character): what splitrules matched with before it
// had its own matcher.
func globOracle(pat string) *regexp.Regexp {
	var re strings.Builder
	re.WriteString("(?s)^")
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
	return regexp.MustCompile(re.String())
}

func TestGlobMatch(t *testing.T) {
	pats := []string{"*", "?", "", "a", "a*", "*a", "*a*", "a?c", "*.q_proj.weight", "model.*.weight", "*é?", "a*b*c", "**", "*?*", "x.y", "?*?"}
	names := []string{"", "a", "ab", "abc", "aXbYc", "é", "éé", "xé", "model.layers.0.q_proj.weight", "model.weight", "a\nb", "x.y", "xzy", "acb", "a.c"}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		var p, n strings.Builder
		for j := rng.Intn(6); j > 0; j-- {
			p.WriteByte("ab*?."[rng.Intn(5)])
		}
		for j := rng.Intn(8); j > 0; j-- {
			n.WriteByte("ab."[rng.Intn(3)])
		}
		pats, names = append(pats, p.String()), append(names, n.String())
	}
	for i, p := range pats {
		re := globOracle(p)
		for j, n := range names {
			if i > 16 && j > 15 && i != j { // random pairs only against each other
				continue
			}
			if got, want := globMatch(p, n), re.MatchString(n); got != want {
				t.Errorf("globMatch(%q, %q) = %v, want %v", p, n, got, want)
			}
		}
	}
}

// The first matching rule wins, exact or glob, and a name is globbed
// only against the rules that end as it does: 10,000 rules on 10,000
// tensors (issue 28: 55 s with a regexp per rule per tensor) try about
// one glob per tensor.
func TestRuleMatcher(t *testing.T) {
	rules, err := parseSplitRules("*.weight=1,a.b.weight=0,a.*=0,*.b.weight=0,x?=0,exact=0,?*b*?=0,*=1")
	if err != nil {
		t.Fatal(err)
	}
	m := newRuleMatcher(rules)
	for name, want := range map[string]int{"a.b.weight": 0, "a.bias": 2, "x.b.weight": 0, "xy": 4, "exact": 5, "abc": 6, "other": 7, "": 7} {
		if got := m.match(name); got != want {
			t.Errorf("match(%q) = %d, want %d", name, got, want)
		}
		for i, r := range rules { // against the first rule the oracle matches
			if globOracle(r.pattern).MatchString(name) {
				if i != want {
					t.Errorf("%q: oracle says rule %d", name, i)
				}
				break
			}
		}
	}
	const n = 10000
	var spec []string
	for i := 0; i < n; i++ {
		spec = append(spec, fmt.Sprintf("*.%d.w*=%d", i, i%2), fmt.Sprintf("model.layers.%d.bias=0", i))
	}
	rules, err = parseSplitRules(strings.Join(spec, ","))
	if err != nil {
		t.Fatal(err)
	}
	m = newRuleMatcher(rules)
	for i := 0; i < n; i++ {
		for _, name := range []string{fmt.Sprintf("model.layers.%d.weight", i), fmt.Sprintf("model.layers.%d.bias", i), fmt.Sprintf("model.layers.%d.norm", i)} {
			got := m.match(name)
			want := -1
			if strings.HasSuffix(name, ".weight") {
				want = 2 * i
			} else if strings.HasSuffix(name, ".bias") {
				want = 2*i + 1
			}
			if got != want {
				t.Fatalf("match(%q) = %d, want %d", name, got, want)
			}
		}
	}
	if m.globs > 2*n {
		t.Errorf("%d glob matches for %d names and %d rules: want at most %d", m.globs, 3*n, len(rules), 2*n)
	}
}

// TestSplitPlanKeys: a --split rule matches a distributed checkpoint's
// dotted key of a tensor (model.blocks.0.attn.qkv.weight for the name
// model/blocks.0.attn.qkv.weight), as it matches a name.
func TestSplitPlanKeys(t *testing.T) {
	ck, err := client.Open(testenv.Path(t, "formats2/dcp_single"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	rules, err := parseSplitRules("model.blocks.*.attn.qkv.weight=0")
	if err != nil {
		t.Fatal(err)
	}
	which, n, err := splitPlan(ck, rules, 2, 0)
	if err != nil || n != 1 {
		t.Fatalf("splitPlan: %d tensors split, %v; want 1", n, err)
	}
	ti, _ := ck.Tensor("model/blocks.0.attn.qkv.weight")
	if which(ti) == nil {
		t.Error("model/blocks.0.attn.qkv.weight not split")
	}
}
