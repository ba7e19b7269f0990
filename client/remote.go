package client

import (
	"context"

	"github.com/lazyweights/tensorfs/backing/remote/dial"
)

// openRemote opens a remote checkpoint (s3://, http://, https://): it is
// parsed and validated through ranged GETs, and its tensors are then read
// through the remote sources' part cache (see backing/remote).
func openRemote(path string, opts Options) (*Checkpoint, error) {
	var ro dial.Options
	if opts.Remote != nil {
		ro = *opts.Remote
	}
	idx, srcs, _, err := dial.Load(context.Background(), path, ro)
	if err != nil {
		return nil, err
	}
	return FromIndex(path, idx, srcs)
}
