package view

import (
	"errors"
	"fmt"
	"io"

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

// Ranger is implemented by the Readers whose bytes are one contiguous
// range of the backing file: the native view of a tensor stored
// contiguously, little-endian (and of a strided tensor whose strides
// happen to describe a contiguous range). When ok, byte i of the Reader,
// for every i < Size(), is byte off+i of src, so a caller may serve
// [o, o+n) (clamped to Size first) straight from src at off+o, e.g. by
// splicing src's descriptor (backing.FdSource). Readers that do not
// implement Ranger, or say !ok, must be read with ReadAt.
type Ranger interface {
	FileRange() (src backing.Source, off int64, ok bool)
}

// ErrNegativeOffset is the error of a read at an offset below zero.
var ErrNegativeOffset = errors.New("view: negative offset")

// New returns the reader of t in dtype to (dtype.Invalid: the stored dtype,
// little-endian, row-major). It fails when t cannot be converted to to.
// to == t.DType is the native view too.
//
// New checks t against src before returning: the shape, size and dtype
// must agree and every byte the tensor refers to must lie inside src, so
// reads cannot fail for the tensor's sake later (only for the file's, with
// backing.ErrFault).
func New(t *index.Tensor, src backing.Source, to dtype.DType) (Reader, error) {
	p, err := plan(t, src, to)
	if err != nil {
		return nil, err
	}
	return build(t, src, to, p), nil
}

// Size returns the size of the reader New(t, src, to) would return, or
// the error New would fail with, without building the reader: it runs
// the checks New runs (New is Size followed by construction that cannot
// fail) and allocates nothing unless it fails. It lets a caller lay out
// many files up front and build each reader when it is first read.
func Size(t *index.Tensor, src backing.Source, to dtype.DType) (int64, error) {
	p, err := plan(t, src, to)
	return p.size, err
}

// readerPlan is what New's checks found: all it needs to build the reader.
type readerPlan struct {
	elems int64           // elements of t
	conv  dtype.Converter // nil: the native view (or rows)
	rows  *rowConverted   // the conversion of a type with row meta, without its source
	grps  *groupConverted // the conversion of a row-interleaved type, without its source
	size  int64           // bytes of the view
}

// build returns the reader of t in dtype to that plan has accepted.
func build(t *index.Tensor, src backing.Source, to dtype.DType, p readerPlan) Reader {
	raw := buildRaw(t, src, p.elems)
	if p.rows != nil {
		rc := *p.rows
		rc.src = raw
		return &reader{raw: &rc, size: p.size}
	}
	if p.grps != nil {
		gc := *p.grps
		gc.src = raw
		return &reader{raw: &gc, size: p.size}
	}
	if p.conv == nil {
		if c, ok := raw.(*contiguous); ok {
			return &rangeReader{contiguous: c, size: t.Size}
		}
		return &reader{raw: raw, size: t.Size}
	}
	return &reader{raw: buildConverted(raw, t.DType, to, p.conv, p.size), size: p.size}
}

// plan checks t against src and dtype to, as New documents.
func plan(t *index.Tensor, src backing.Source, to dtype.DType) (readerPlan, error) {
	n, err := checkRaw(t, src)
	if err != nil {
		return readerPlan{}, err
	}
	if to == dtype.Invalid || to == t.DType {
		return readerPlan{elems: n, size: t.Size}, nil
	}
	if !to.IsFloatView() {
		return readerPlan{}, fmt.Errorf("view: %s: %s is not a view dtype (want F32, F16, BF16 or F64)", t.Name, to)
	}
	if t.DType.RowMeta() != 0 { // a row's blocks convert with its meta
		conv, ok := dtype.RowConverterFor(t.DType, to)
		if !ok {
			return readerPlan{}, fmt.Errorf("view: %s: %s cannot be converted to %s", t.Name, t.DType, to)
		}
		rc, err := rowConvertedSize(t.Size, dtype.RowLen(t.Shape), t.DType, to)
		if err != nil {
			return readerPlan{}, fmt.Errorf("view: %s: %w", t.Name, err)
		}
		rc.conv = conv
		return readerPlan{elems: n, rows: &rc, size: rc.size}, nil
	}
	if t.DType.RowGroup() != 0 { // a group's blocks hold its G rows
		conv, ok := dtype.GroupConverterFor(t.DType, to)
		if !ok {
			return readerPlan{}, fmt.Errorf("view: %s: %s cannot be converted to %s", t.Name, t.DType, to)
		}
		gc, err := groupConvertedSize(t.Size, dtype.RowLen(t.Shape), t.DType, to)
		if err != nil {
			return readerPlan{}, fmt.Errorf("view: %s: %w", t.Name, err)
		}
		gc.conv = conv
		return readerPlan{elems: n, grps: &gc, size: gc.size}, nil
	}
	conv, ok := dtype.ConverterFor(t.DType, to)
	if !ok {
		return readerPlan{}, fmt.Errorf("view: %s: %s cannot be converted to %s", t.Name, t.DType, to)
	}
	size, err := convertedSize(t.Size, t.DType, to)
	if err != nil {
		return readerPlan{}, fmt.Errorf("view: %s: %w", t.Name, err)
	}
	return readerPlan{elems: n, conv: conv, size: size}, nil
}

// Convertible reports whether t has a converted view in dtype to: to is
// one of F32, F16, BF16, F64, and t is stored in to or in a dtype that
// converts to it (floating point; quantized with a dequantizer).
func Convertible(t *index.Tensor, to dtype.DType) bool {
	if !to.IsFloatView() || !t.DType.Valid() {
		return false
	}
	if t.DType.RowMeta() != 0 {
		_, ok := dtype.RowConverterFor(t.DType, to)
		return t.DType == to || ok
	}
	if t.DType.RowGroup() != 0 {
		_, ok := dtype.GroupConverterFor(t.DType, to)
		return ok
	}
	return t.DType == to || dtype.CanConvert(t.DType, to)
}

// clamp applies io.ReaderAt's rules to a read of plen bytes at off of a
// file of size bytes: n is how many bytes to serve; eof reports a read
// reaching past the end.
func clamp(plen int, off, size int64) (n int, eof bool, err error) {
	if off < 0 {
		return 0, false, ErrNegativeOffset
	}
	if off >= size {
		return 0, true, nil
	}
	if rest := size - off; int64(plen) > rest {
		return int(rest), true, nil
	}
	return plen, false, nil
}

// reader is a Reader over a raw representation: it clamps, then reads.
type reader struct {
	raw  raw
	size int64
}

func (r *reader) Size() int64 { return r.size }

func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	n, eof, err := clamp(len(p), off, r.size)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		if err := r.raw.readRaw(p[:n], off); err != nil {
			return 0, err
		}
	}
	if eof {
		return n, io.EOF
	}
	return n, nil
}

// rangeReader is the Reader of a contiguous native tensor: a window of
// the backing file.
type rangeReader struct {
	*contiguous
	size int64
}

var (
	_ Reader = (*rangeReader)(nil)
	_ Ranger = (*rangeReader)(nil)
	_ Reader = (*reader)(nil)
)

func (r *rangeReader) Size() int64 { return r.size }

func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	n, eof, err := clamp(len(p), off, r.size)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		if err := r.readRaw(p[:n], off); err != nil {
			return 0, err
		}
	}
	if eof {
		return n, io.EOF
	}
	return n, nil
}

// FileRange returns the backing source and the offset of the tensor's
// first byte in it.
func (r *rangeReader) FileRange() (backing.Source, int64, bool) {
	return r.src, r.base, true
}
