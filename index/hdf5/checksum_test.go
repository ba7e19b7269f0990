package hdf5

import "testing"

// TestLookup3: the values of lookup3.c's own driver (driver5: hashlittle
// of "" and "Four score and seven years ago" with initval 0).
func TestLookup3(t *testing.T) {
	for _, c := range []struct {
		s    string
		want uint32
	}{{"", 0xdeadbeef}, {"Four score and seven years ago", 0x17770551}} {
		if got := lookup3([]byte(c.s)); got != c.want {
			t.Errorf("lookup3(%q) = %08x, want %08x", c.s, got, c.want)
		}
	}
}
