package backing

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestComputed: a computed source is read as a file of its size: reads
// are clamped (fill is asked only for bytes inside it), short at the end
// with io.EOF, refused at a negative offset, and a failing fill's error
// names the source and keeps the bytes it wrote.
func TestComputed(t *testing.T) {
	const size = 10
	var asked [][2]int64
	fill := func(p []byte, off int64) (int, error) {
		asked = append(asked, [2]int64{off, int64(len(p))})
		if off < 0 || off+int64(len(p)) > size {
			t.Fatalf("fill asked for [%d, +%d) of %d bytes", off, len(p), size)
		}
		for i := range p {
			p[i] = byte(off) + byte(i)
		}
		return len(p), nil
	}
	c := NewComputed("w", size, fill)
	if c.Name() != "w" || c.Size() != size || c.Close() != nil {
		t.Fatalf("Name %q Size %d", c.Name(), c.Size())
	}
	p := make([]byte, 4)
	if n, err := c.ReadAt(p, 8); n != 2 || err != io.EOF || !bytes.Equal(p[:2], []byte{8, 9}) {
		t.Errorf("ReadAt at 8: %d %v %v", n, err, p[:n])
	}
	if n, err := c.ReadAt(p, 3); n != 4 || err != nil || !bytes.Equal(p, []byte{3, 4, 5, 6}) {
		t.Errorf("ReadAt at 3: %d %v %v", n, err, p)
	}
	if n, err := c.ReadAt(p, size); n != 0 || err != io.EOF {
		t.Errorf("ReadAt at the end: %d %v", n, err)
	}
	if n, err := c.ReadAt(nil, size); n != 0 || err != nil {
		t.Errorf("empty ReadAt at the end: %d %v", n, err)
	}
	if _, err := c.ReadAt(p, -1); err == nil || err.Error() != "w: negative offset -1" {
		t.Errorf("ReadAt at -1: %v", err)
	}
	if len(asked) != 2 {
		t.Errorf("fill called %d times, want 2 (%v)", len(asked), asked)
	}
	boom := errors.New("boom")
	bad := NewComputed("w", size, func(p []byte, off int64) (int, error) { return 1, boom })
	if n, err := bad.ReadAt(p, 0); n != 1 || !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "w: ") {
		t.Errorf("failing fill: %d %v", n, err)
	}
}
