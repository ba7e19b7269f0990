package client

// prefetcher is implemented by sources that fetch ahead on request (a
// remote source, backing/remote.Source): Stream tells them the stored
// bytes of each tensor it is about to read.
type prefetcher interface {
	Prefetch(off, n int64)
}

// prefetch tells t's source that Stream is about to read t's stored
// bytes from start to end, when they are one range of a source that
// fetches ahead.
func (c *Checkpoint) prefetch(t TensorInfo) {
	if c.idx == nil || c.files == nil {
		return
	}
	it := &c.idx.Tensors[t.Index]
	if it.Strides != nil {
		return
	}
	if p, ok := c.files[it.Source].(prefetcher); ok {
		p.Prefetch(it.Offset, it.Size)
	}
}
