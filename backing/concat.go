package backing

import (
	"fmt"
	"io"
	"sort"
)

// ConcatPart is one range of a Concat source: [Off, Off+Size) of Src.
type ConcatPart struct {
	Src       io.ReaderAt
	Off, Size int64
}

// concat is a Source made of ranges of other sources end to end.
type concat struct {
	name   string
	parts  []ConcatPart
	starts []int64 // starts[i]: offset of parts[i] in the whole
	size   int64
}

// Concat returns a Source whose bytes are parts, in order: a tensor a
// writer stored as slices in several places. Reads go to the parts'
// sources; Close does not close them (their owner does).
func Concat(name string, parts []ConcatPart) (Source, error) {
	c := &concat{name: name, parts: parts, starts: make([]int64, len(parts))}
	for i, p := range parts {
		if p.Off < 0 || p.Size < 0 || c.size > (1<<62)-p.Size {
			return nil, fmt.Errorf("%s: part %d [%d, +%d) out of range", name, i, p.Off, p.Size)
		}
		c.starts[i] = c.size
		c.size += p.Size
	}
	return c, nil
}

func (c *concat) Name() string { return c.name }
func (c *concat) Size() int64  { return c.size }
func (c *concat) Close() error { return nil }

func (c *concat) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", c.name, off)
	}
	if off >= c.size {
		return 0, io.EOF
	}
	n := 0
	i := sort.Search(len(c.parts), func(i int) bool { return c.starts[i]+c.parts[i].Size > off }) // first part that ends after off
	for ; n < len(p) && i < len(c.parts); i++ {
		part := c.parts[i]
		in := off + int64(n) - c.starts[i]
		want := min(int64(len(p)-n), part.Size-in)
		if want <= 0 {
			continue
		}
		m, err := part.Src.ReadAt(p[n:n+int(want)], part.Off+in)
		n += m
		if err != nil && !(err == io.EOF && int64(m) == want) {
			return n, err
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
