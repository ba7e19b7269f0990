package fs

import "testing"

func TestValidNullPath(t *testing.T) {
	for p, want := range map[string]bool{
		"w": true, "a/b/c": true, ".tensorfs/x": true,
		"": false, "/a": false, "a/../b": false, "../a": false, "a//b": false, "a/": false,
	} {
		if got := validNullPath(p); got != want {
			t.Errorf("validNullPath(%q) = %v, want %v", p, got, want)
		}
	}
}
