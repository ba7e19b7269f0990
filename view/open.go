package view

import (
	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// Form says which view of a tensor a reader serves: the tensor as stored
// or converted, whole or one part of a split, as raw elements or as a
// .npy file. The zero Form is the whole tensor as stored.
type Form struct {
	// To is the dtype of the elements: dtype.Invalid (or the stored
	// dtype) for the stored elements, little-endian and row-major; a
	// view dtype (F32, F16, BF16, F64) to convert to. Ignored when NPY
	// is set: a .npy file's dtype is NPYDType's.
	To dtype.DType
	// NPY serves a NumPy .npy file: a header, then the data.
	NPY bool
	// Split, when non-nil, serves one part of the tensor (see Split).
	Split *Split
}

// Open returns the reader of t in form f, read from src: the one entry
// point for every view (the mount's files, cat, the client), which
// checks t against src before returning (see New).
func Open(t *index.Tensor, src backing.Source, f Form) (Reader, error) {
	switch {
	case f.NPY && f.Split != nil:
		return NewNPYSlice(t, src, *f.Split)
	case f.NPY:
		return NewNPY(t, src)
	case f.Split != nil:
		return NewSlice(t, src, f.To, *f.Split)
	}
	return New(t, src, f.To)
}

// Sizeof returns the size of the reader Open(t, src, f) would return, or
// the error Open would fail with, without building the reader.
func Sizeof(t *index.Tensor, src backing.Source, f Form) (int64, error) {
	switch {
	case f.NPY && f.Split != nil:
		return NPYSliceSize(t, src, *f.Split)
	case f.NPY:
		return NPYSize(t, src)
	case f.Split != nil:
		return SliceSize(t, src, f.To, *f.Split)
	}
	return Size(t, src, f.To)
}
