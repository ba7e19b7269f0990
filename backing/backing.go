package backing

// STUB: replaced by the backing implementation.

import "io"

// Source is one read-only backing file. Nothing outside this package
// assumes a mapping exists: everything goes through ReadAt (and the
// optional interfaces below, which callers must test for).
type Source interface {
	io.ReaderAt
	Size() int64
	Name() string
	Close() error
}
