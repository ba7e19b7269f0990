package hf

import (
	"slices"
	"testing"
)

// TestCacheNames: only a relative path of plain names can name a file
// under snapshots/SHA/, and only a lowercase hex sha1 or sha256 a blob:
// what a hostile Hub lists (.., absolute, backslashes, a NUL, an ETag
// with a slash) is never written.
func TestCacheNames(t *testing.T) {
	for key, ok := range map[string]bool{
		"model.safetensors": true, "a/b/c.bin": true, "": false, "/etc/passwd": false, "../x": false,
		"a/../../x": false, "a//b": false, "./a": false, `a\..\b`: false, "a\x00b": false, "a/": false,
	} {
		if safeKey(key) != ok {
			t.Errorf("safeKey(%q) = %v", key, !ok)
		}
	}
	for etag, ok := range map[string]bool{
		"0123456789abcdef0123456789abcdef01234567":                         true,
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": true,
		"0123456789ABCDEF0123456789abcdef01234567":                         false,
		"../../../../../../tmp/x/0123456789abcdef0123456789abcd":           false,
		"0123456789abcdef0123456789abcdef0123456":                          false,
		"": false,
	} {
		if safeETag(etag) != ok {
			t.Errorf("safeETag(%q) = %v", etag, !ok)
		}
	}
}

// TestAddSpan: the bytes written are counted once however the GETs
// overlap, adjoin or come out of order.
func TestAddSpan(t *testing.T) {
	var s []span
	var n int64
	for _, c := range []struct {
		from, to int64
		want     int64
	}{{10, 20, 10}, {30, 40, 20}, {15, 35, 30}, {0, 5, 35}, {5, 10, 40}, {0, 40, 40}, {50, 60, 50}, {40, 50, 60}} {
		s, n = addSpan(s, c.from, c.to)
		if n != c.want {
			t.Fatalf("after [%d, %d): %d bytes, want %d (%v)", c.from, c.to, n, c.want, s)
		}
	}
	if !slices.Equal(s, []span{{0, 60}}) {
		t.Errorf("spans %v, want one", s)
	}
}
