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
