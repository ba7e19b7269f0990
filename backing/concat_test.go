package backing

import (
	"bytes"
	"io"
	"testing"
)

// TestConcat reads a concatenation of ranges at every offset and length,
// across part boundaries and past the end, against the bytes joined by
// hand.
func TestConcat(t *testing.T) {
	a := bytes.NewReader([]byte("0123456789"))
	b := bytes.NewReader([]byte("abcdefghij"))
	parts := []ConcatPart{{a, 2, 3}, {b, 0, 0}, {b, 5, 4}, {a, 0, 1}}
	want := []byte("234fghi0")
	c, err := Concat("c", parts)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size() != int64(len(want)) {
		t.Fatalf("size %d, want %d", c.Size(), len(want))
	}
	for off := 0; off <= len(want)+1; off++ {
		for n := 0; n <= len(want)+2; n++ {
			p := make([]byte, n)
			got, err := c.ReadAt(p, int64(off))
			end := min(off+n, len(want))
			if off >= len(want) {
				end = off
			}
			wantN := max(end-off, 0)
			if got != wantN || !bytes.Equal(p[:got], want[min(off, len(want)):min(off, len(want))+wantN]) {
				t.Fatalf("ReadAt(%d bytes at %d) = %d %q, want %d %q", n, off, got, p[:got], wantN, want[min(off, len(want)):min(off, len(want))+wantN])
			}
			if (got < n && err != io.EOF) || (got == n && n > 0 && err != nil) {
				t.Fatalf("ReadAt(%d bytes at %d): %d, %v", n, off, got, err)
			}
		}
	}
	if _, err := Concat("bad", []ConcatPart{{a, -1, 2}}); err == nil {
		t.Error("negative offset accepted")
	}
	if _, err := c.ReadAt(make([]byte, 1), -1); err == nil {
		t.Error("negative read offset accepted")
	}
}
