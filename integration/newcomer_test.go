package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// The newcomer's list of issue 13: what a new user tripped over, each
// checked against the built binary.

// TestFlagsAfterArguments: flags may follow the operands (tensorfs ls
// FILE --json), as with rclone and restic; "--" ends the flags.
func TestFlagsAfterArguments(t *testing.T) {
	src, _ := cliFixture(t)
	first := runTensorfs(t, "ls", "--json", src)
	if first.code != 0 {
		t.Fatalf("ls --json: exit %d: %s", first.code, first.stderr)
	}
	if r := runTensorfs(t, "ls", src, "--json"); r.code != 0 || r.stdout != first.stdout {
		t.Errorf("ls FILE --json: exit %d, stderr %q; want the output of ls --json FILE", r.code, r.stderr)
	}
	// A flag with a value after the operands, and between them.
	want := runTensorfs(t, "cat", "--dtype", "f64", src, "model/layers.0/w")
	for _, args := range [][]string{
		{"cat", src, "model/layers.0/w", "--dtype", "f64"},
		{"cat", src, "--dtype=f64", "model/layers.0/w"},
	} {
		if r := runTensorfs(t, args...); r.code != 0 || r.stdout != want.stdout {
			t.Errorf("%q: exit %d, stderr %q; want the bytes of cat --dtype f64", args, r.code, r.stderr)
		}
	}
	// "--" ends the flags: an operand may then start with "-".
	dash := filepath.Join(t.TempDir(), "-m.safetensors")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dash, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rel := filepath.Base(dash)
	if r := runTensorfsIn(t, filepath.Dir(dash), "ls", "--json", "--", rel); r.code != 0 {
		t.Errorf("ls --json -- -m.safetensors: exit %d: %s", r.code, r.stderr)
	}
	checkOneLineError(t, runTensorfsIn(t, filepath.Dir(dash), "ls", rel), 2, "-m.safetensors")
	checkOneLineError(t, runTensorfs(t, "ls", src, "--nope"), 2, "nope", "usage")
	checkOneLineError(t, runTensorfs(t, "ls", src, src), 2, "wrong number of arguments")
}
