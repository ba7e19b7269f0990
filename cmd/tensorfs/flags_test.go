package main

import (
	"slices"
	"testing"
)

// TestInterleaved: flags after or between operands are moved before them,
// with their values; "--" ends the flags; "-" alone is an operand.
func TestInterleaved(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"--"}},
		{[]string{"F"}, []string{"--", "F"}},
		{[]string{"F", "--json"}, []string{"--json", "--", "F"}},
		{[]string{"--json", "F"}, []string{"--json", "--", "F"}},
		{[]string{"F", "N", "--dtype", "f32"}, []string{"--dtype", "f32", "--", "F", "N"}},
		{[]string{"F", "--dtype=f32", "N"}, []string{"--dtype=f32", "--", "F", "N"}},
		{[]string{"-dtype", "f32", "F"}, []string{"-dtype", "f32", "--", "F"}},
		{[]string{"--json", "--", "-x", "--json"}, []string{"--json", "--", "-x", "--json"}},
		{[]string{"-", "--json"}, []string{"--json", "--", "-"}},
		{[]string{"F", "--bogus", "G"}, []string{"--bogus", "--", "F", "G"}},
		{[]string{"F", "--dtype"}, []string{"--dtype", "--", "F"}}, // the flag package says the value is missing
	} {
		f := newFlags("t", "", "")
		f.Bool("json", false, "")
		f.String("dtype", "", "")
		if got := f.interleaved(tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("interleaved(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestParseInterleaved: parse gives the flags and operands whatever
// their order.
func TestParseInterleaved(t *testing.T) {
	for _, args := range [][]string{
		{"--json", "--dtype", "f16", "A", "B"},
		{"A", "--json", "B", "--dtype", "f16"},
		{"A", "B", "--dtype=f16", "--json"},
	} {
		f := newFlags("t", "", "")
		js := f.Bool("json", false, "")
		dt := f.String("dtype", "", "")
		if err := f.parse(args, 2, 2); err != nil || !*js || *dt != "f16" || !slices.Equal(f.Args(), []string{"A", "B"}) {
			t.Errorf("parse(%q): %v; json %v, dtype %q, args %q", args, err, *js, *dt, f.Args())
		}
	}
	f := newFlags("t", "", "")
	f.Bool("json", false, "")
	if err := f.parse([]string{"A", "--json", "B"}, 1, 1); err == nil {
		t.Errorf("two operands where one is wanted: no error")
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 tensors", 1: "1 tensor", 2: "2 tensors"} {
		if got := plural(n, "tensor"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestSelfCommand: the command demo --keep prints to unmount runs this
// binary by its absolute path (tensorfs may not be on PATH), or as go run
// where go run built it (its binary is gone once go run exits).
func TestSelfCommand(t *testing.T) {
	for exe, want := range map[string]string{
		"/usr/local/bin/tensorfs":                    "/usr/local/bin/tensorfs",
		"/home/me/src/tensorfs/tensorfs":             "/home/me/src/tensorfs/tensorfs",
		"/tmp/go-build123/b001/exe/tensorfs":         "go run ./cmd/tensorfs",
		"/home/me/my models/tensorfs":                "'/home/me/my models/tensorfs'",
		"/home/me/it's/tensorfs":                     `'/home/me/it'\''s/tensorfs'`,
		"/opt/tensorfs-1.2+dev/bin/tensorfs,v=1@x%y": "/opt/tensorfs-1.2+dev/bin/tensorfs,v=1@x%y",
	} {
		if got := selfCommandFor(exe); got != want {
			t.Errorf("selfCommandFor(%q) = %s, want %s", exe, got, want)
		}
	}
}
