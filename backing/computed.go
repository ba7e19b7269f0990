package backing

import (
	"fmt"
	"io"
)

// Computed is a source whose bytes are computed on each read from other
// sources (a quantized weight's float32 values from its stored parts:
// formats' dequantized members). It holds nothing between reads and has
// nothing to close. Reads are clamped to its size here, so that fill is
// only asked for bytes inside it.
type Computed struct {
	name string
	size int64
	fill func(p []byte, off int64) (int, error)
}

// NewComputed returns the source name of size bytes whose bytes [off,
// off+len(p)) fill writes into p: all of them, or how many it wrote
// and why it stopped (an error that does not name the source: ReadAt
// prefixes it). fill is called only with 0 <= off and off+len(p) <=
// size.
func NewComputed(name string, size int64, fill func(p []byte, off int64) (int, error)) *Computed {
	return &Computed{name: name, size: size, fill: fill}
}

var _ Source = (*Computed)(nil)

func (c *Computed) Name() string { return c.name }
func (c *Computed) Size() int64  { return c.size }
func (c *Computed) Close() error { return nil }

// ReadAt serves bytes [off, off+len(p)): clamped to the size (io.EOF
// past it, as a file's ReadAt), computed by fill.
func (c *Computed) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", c.name, off)
	}
	if off >= c.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), c.size-off))
	if done, err := c.fill(p[:n], off); err != nil {
		return done, fmt.Errorf("%s: %w", c.name, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
