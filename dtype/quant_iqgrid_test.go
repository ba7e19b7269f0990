package dtype

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strings"
	"testing"
)

// TestQuantIQGrids checks the generated tables against ggml-common.h's
// values (the sha256 of each table as the header prints it, recorded by the
// generator) and against what the formats define: the sign table is 7 bits
// plus their parity, every grid entry is distinct and its bytes are the
// format's few magnitudes (IQ2: 8, 25, 43; IQ3_XXS: 4..52 by 8 and 62;
// IQ3_S: odd 1..15; IQ1: -1, 0, +1).
func TestQuantIQGrids(t *testing.T) {
	hexes := func(n int, f func(i int) string) string {
		s := make([]string, n)
		for i := range s {
			s[i] = f(i)
		}
		return strings.Join(s, ",")
	}
	printed := map[string]string{
		"ksignsIQ2XS": hexes(len(ksignsIQ2XS), func(i int) string { return fmt.Sprint(ksignsIQ2XS[i]) }),
		"ksigns64":    hexes(len(ksigns64), func(i int) string { return fmt.Sprintf("%#016x", ksigns64[i]) }),
		"iq2xxsGrid":  hexes(len(iq2xxsGrid), func(i int) string { return fmt.Sprintf("%#016x", iq2xxsGrid[i]) }),
		"iq2xsGrid":   hexes(len(iq2xsGrid), func(i int) string { return fmt.Sprintf("%#016x", iq2xsGrid[i]) }),
		"iq2sGrid":    hexes(len(iq2sGrid), func(i int) string { return fmt.Sprintf("%#016x", iq2sGrid[i]) }),
		"iq3xxsGrid":  hexes(len(iq3xxsGrid), func(i int) string { return fmt.Sprintf("%#08x", iq3xxsGrid[i]) }),
		"iq3sGrid":    hexes(len(iq3sGrid), func(i int) string { return fmt.Sprintf("%#08x", iq3sGrid[i]) }),
		"iq1sGrid":    hexes(len(iq1sGrid), func(i int) string { return fmt.Sprintf("%#016x", iq1sGrid[i]) }),
	}
	if len(printed) != len(iqGridSums) {
		t.Fatalf("%d tables, %d sums", len(printed), len(iqGridSums))
	}
	for name, s := range printed {
		h := sha256.Sum256([]byte(s))
		if hex.EncodeToString(h[:]) != iqGridSums[name] {
			t.Errorf("%s: values differ from ggml-common.h's", name)
		}
	}
	for i, v := range ksignsIQ2XS {
		if want := uint8(i) | uint8(bits.OnesCount8(uint8(i))&1)<<7; v != want {
			t.Errorf("ksignsIQ2XS[%d] = %d, want %d", i, v, want)
		}
		if m := quantSignMask(v); ksigns64[i] != m {
			t.Errorf("ksigns64[%d] = %#x, the sign mask of %#x is %#x", i, ksigns64[i], v, m)
		}
	}
	grid64 := func(name string, g []uint64, allowed ...uint8) {
		seen := map[uint64]bool{}
		for i, e := range g {
			if seen[e] {
				t.Errorf("%s[%d]: repeated", name, i)
			}
			seen[e] = true
			for j := 0; j < 8; j++ {
				if b := uint8(e >> (8 * j)); strings.IndexByte(string(allowed), b) < 0 {
					t.Errorf("%s[%d] byte %d: %#x", name, i, j, b)
				}
			}
		}
	}
	grid64("iq2xxsGrid", iq2xxsGrid[:], 0x08, 0x19, 0x2b)
	grid64("iq2xsGrid", iq2xsGrid[:], 0x08, 0x19, 0x2b)
	grid64("iq2sGrid", iq2sGrid[:], 0x08, 0x19, 0x2b)
	grid64("iq1sGrid", iq1sGrid[:], 0xff, 0x00, 0x01)
	for name, g := range map[string][]uint32{"iq3xxsGrid": iq3xxsGrid[:], "iq3sGrid": iq3sGrid[:]} {
		seen := map[uint32]bool{}
		for i, e := range g {
			if seen[e] {
				t.Errorf("%s[%d]: repeated", name, i)
			}
			seen[e] = true
			for j := 0; j < 4; j++ {
				if b := uint8(e >> (8 * j)); name == "iq3sGrid" && (b%2 != 1 || b > 15) ||
					name == "iq3xxsGrid" && strings.IndexByte("\x04\x0c\x14\x1c\x24\x2c\x34\x3e", b) < 0 {
					t.Errorf("%s[%d] byte %d: %#x", name, i, j, b)
				}
			}
		}
	}
}
