package index

import (
	"slices"
	"testing"
)

// TestUniqueNames: the later of names that coincide gets the first free
// #N, skipping a #N a checkpoint already used as a name.
func TestUniqueNames(t *testing.T) {
	var u UniqueNames
	var got []string
	for _, n := range []string{"a/b", "a/b", "a/b#2", "a/b", "c", "a/b"} {
		got = append(got, u.Take(n))
	}
	want := []string{"a/b", "a/b#1", "a/b#2", "a/b#3", "c", "a/b#4"}
	if !slices.Equal(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}
