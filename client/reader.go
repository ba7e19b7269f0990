package client

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/lazyweights/tensorfs/dtype"
)

// TensorReader reads one tensor in one representation (native or
// converted) as a file of Size bytes. ReadAt has io.ReaderAt semantics and
// is safe for concurrent use; Read and Seek share one offset and are not.
// Errors other than io.EOF are *TensorError values naming the tensor.
type TensorReader struct {
	ck     *Checkpoint
	info   TensorInfo
	dtype  dtype.DType
	size   int64
	ra     io.ReaderAt
	closer io.Closer
	// part: the part of the tensor read, nil for all of it; skip: where
	// a part that is a plain range of the native bytes starts in them
	// (split.go).
	part   *Split
	skip   int64
	ranged bool // a part that is a plain range of the native bytes

	mu  sync.Mutex // guards pos
	pos int64
}

// Compile-time checks of what a TensorReader is.
var (
	_ io.ReaderAt   = (*TensorReader)(nil)
	_ io.ReadSeeker = (*TensorReader)(nil)
	_ io.Closer     = (*TensorReader)(nil)
)

// Info returns the tensor as stored.
func (r *TensorReader) Info() TensorInfo { return r.info }

// DType returns the dtype of the bytes the reader serves.
func (r *TensorReader) DType() dtype.DType { return r.dtype }

// Size returns the number of bytes the reader serves.
func (r *TensorReader) Size() int64 { return r.size }

// ReadAt reads len(p) bytes at off. A read at or past Size returns 0,
// io.EOF; a read that reaches Size returns the bytes and io.EOF.
func (r *TensorReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &TensorError{Source: r.ck.path, Name: r.info.Name, Op: "read", Off: off, Err: errors.New("negative offset")}
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := len(p)
	if rem := r.size - off; int64(want) > rem {
		p = p[:rem]
	}
	n, err := r.ra.ReadAt(p, off)
	if n == len(p) {
		err = nil
	} else if err == nil || err == io.EOF {
		// The tensor's bytes end before its size: the backing file
		// shrank, or a view served less than it announced.
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return n, &TensorError{Source: r.ck.path, Name: r.info.Name, Op: "read", Off: off + int64(n), Err: err}
	}
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

// Read reads from the current offset.
func (r *TensorReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek sets the offset for the next Read (io.Seeker semantics).
func (r *TensorReader) Seek(offset int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return r.pos, &TensorError{Source: r.ck.path, Name: r.info.Name, Op: "seek", Off: -1, Err: fmt.Errorf("invalid whence %d", whence)}
	}
	if offset < 0 {
		return r.pos, &TensorError{Source: r.ck.path, Name: r.info.Name, Op: "seek", Off: -1, Err: errors.New("negative position")}
	}
	r.pos = offset
	return offset, nil
}

// Close releases what the reader holds (a mount's open file).
func (r *TensorReader) Close() error {
	if r.closer == nil {
		return nil
	}
	c := r.closer
	r.closer = nil
	return c.Close()
}
