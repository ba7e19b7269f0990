package client

import (
	"context"

	"github.com/lazyweights/tensorfs/source"
)

// openRemote opens a remote checkpoint (s3://, http://, https://): it is
// parsed and validated through ranged GETs, and its tensors are then read
// through the remote sources' part cache (see backing/remote).
func openRemote(path string, opts Options) (*Checkpoint, error) {
	var ro source.RemoteOptions
	if opts.Remote != nil {
		ro = *opts.Remote
	}
	ck, err := source.Load(context.Background(), path, source.Options{Remote: ro})
	if err != nil {
		return nil, err
	}
	c, err := FromIndex(path, ck.Index, ck.Sources)
	if err != nil {
		return nil, err
	}
	c.remote = true
	return c, nil
}

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
