package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/client"
)

// TestUnservedLines: what is not served is one line per kind (the same
// type and reason) with its count, counting the entries a bounded list
// left out (issue 41: 300,000 nameless ONNX initializers were 300,000
// lines); a lone entry is the line it was.
func TestUnservedLines(t *testing.T) {
	var us []client.Unserved
	for i := 0; i < 1000; i++ {
		us = append(us, client.Unserved{Type: "FLOAT", Why: `an initializer without a name (in graph "g")`})
	}
	us[999].More = 299_000
	for i := 0; i < 3; i++ {
		us = append(us, client.Unserved{Name: fmt.Sprintf("w%d", i), Type: "FLOAT", Why: "another initializer has this name"})
	}
	us = append(us, client.Unserved{Name: strings.Repeat("x", 64<<10), Type: "ggml type 43", Why: "a type tensorfs does not know"})
	got := unservedLines("m.onnx", us)
	want := `tensorfs: m.onnx: 300000 tensors (FLOAT) are not served: an initializer without a name (in graph "g") (none has a name)
tensorfs: m.onnx: 3 tensors (FLOAT) are not served: another initializer has this name: "w0", "w1", "w2"
tensorfs: m.onnx: tensor "` + strings.Repeat("x", 64<<10) + `" (ggml type 43) is not served: a type tensorfs does not know
`
	if got != want {
		t.Fatalf("got\n%.2000s\nwant\n%.2000s", got, want)
	}
	if s := unservedNames(us); !strings.HasSuffix(s, " and 300000 more") {
		t.Fatalf("unservedNames: %s", s)
	}
}
