package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestPrintCounts: the header's counts agree with their nouns ("1
// tensor", "1 non-contiguous tensor left out").
func TestPrintCounts(t *testing.T) {
	for _, tt := range []struct {
		tensors, skipped int
		want             []string
	}{
		{1, 1, []string{": 1 tensor,", "; 1 non-contiguous tensor left out"}},
		{2, 3, []string{": 2 tensors,", "; 3 non-contiguous tensors left out"}},
	} {
		rep := &Report{Source: "x.safetensors", Tensors: tt.tensors, Skipped: tt.skipped}
		var b bytes.Buffer
		rep.Print(&b)
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("header %q lacks %q", strings.SplitN(b.String(), "\n", 2)[0], w)
			}
		}
	}
}

// TestPrintTargetMet: a row with a target says whether it was met
// (bench printed ">=0.80" and left the reader to compare).
func TestPrintTargetMet(t *testing.T) {
	rep := &Report{Source: "x", Runs: []RunResult{{
		Rows: []Row{
			{Label: "first read", Baseline: "direct", Ratio: 0.9, Target: 0.8},
			{Label: "repeat read", Baseline: "direct", Ratio: 0.5, Target: 0.8},
			{Label: "no target", Baseline: "direct", Ratio: 0.5},
		},
		Cache: []CacheRow{
			{Label: "read(2)", PerByte: 1.01, Target: 1.15},
			{Label: "mmap", PerByte: 2, Target: 1.15},
		},
	}}}
	var b bytes.Buffer
	rep.Print(&b)
	want := map[string]string{"first read": ">=0.80 met", "repeat read": ">=0.80 MISSED", "read(2)": "<=1.15 met", "mmap": "<=1.15 MISSED"}
	for _, line := range strings.Split(b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if w, ok := want[strings.SplitN(strings.TrimSpace(line), "  ", 2)[0]]; ok {
			if !strings.Contains(line, w) {
				t.Errorf("%q lacks %q", line, w)
			}
			delete(want, strings.SplitN(strings.TrimSpace(line), "  ", 2)[0])
		}
		if strings.HasPrefix(strings.TrimSpace(line), "no target") && (strings.Contains(line, "met") || strings.Contains(line, "MISSED")) {
			t.Errorf("%q: no target, yet met or missed", line)
		}
	}
	if len(want) != 0 {
		t.Errorf("rows not found: %v in\n%s", want, b.String())
	}
}
