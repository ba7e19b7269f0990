package client

import "github.com/lazyweights/tensorfs/index"

// checked returns the index tensor of t when a whole read of it must
// verify a CRC-32 (a stored .npz member), else nil.
func (c *Checkpoint) checked(t TensorInfo) *index.Tensor {
	if c.idx == nil || t.Index < 0 || t.Index >= len(c.idx.Tensors) {
		return nil
	}
	it := &c.idx.Tensors[t.Index]
	if it.Check == nil || it.Name != t.Name || it.Source < 0 || it.Source >= len(c.files) {
		return nil
	}
	return it
}

// verify reads t's stored member again and checks its CRC-32.
func (c *Checkpoint) verify(t TensorInfo) error {
	it := c.checked(t)
	if it == nil {
		return nil
	}
	if err := it.Verify(c.files[it.Source]); err != nil {
		return &TensorError{Source: c.path, Name: t.Name, Op: "check", Off: -1, Err: err}
	}
	return nil
}

// verifyAll checks every stored member's CRC-32 (a whole export).
func (c *Checkpoint) verifyAll() error {
	for _, t := range c.tensors {
		if err := c.verify(t); err != nil {
			return err
		}
	}
	return nil
}

// checkSink hashes the native bytes of a whole tensor as Stream delivers
// them, in order, so that its stored member's CRC-32 is verified without
// reading it twice.
type checkSink struct {
	TensorSink
	cs *index.CheckStream
}

func (s checkSink) Write(chunk []byte, off int64) error {
	s.cs.Write(chunk, off)
	return s.TensorSink.Write(chunk, off)
}
