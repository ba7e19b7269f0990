package view

// STUB: replaced by the view implementation.

import (
	"errors"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// Reader serves one tensor in one representation as a file of Size bytes.
// ReadAt has io.ReaderAt semantics: a read at or past Size returns 0,
// io.EOF; a short read at the end returns io.EOF with the bytes. Reads at
// any offset and length return exactly the bytes of the whole file at that
// range. Safe for concurrent use.
type Reader interface {
	Size() int64
	ReadAt(p []byte, off int64) (int, error)
}

// New returns the reader of t in dtype to (dtype.Invalid: the stored dtype,
// little-endian, row-major). It fails when t cannot be converted to to.
func New(t *index.Tensor, src backing.Source, to dtype.DType) (Reader, error) {
	return nil, errors.New("view: not implemented yet")
}

// NewNPY returns the reader of t as a NumPy .npy file.
func NewNPY(t *index.Tensor, src backing.Source) (Reader, error) {
	return nil, errors.New("view: not implemented yet")
}

// Convertible reports whether t has a converted view in dtype to.
func Convertible(t *index.Tensor, to dtype.DType) bool { return false }
