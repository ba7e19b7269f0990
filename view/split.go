package view

import (
	"fmt"
	"io"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// Split is part Part (0-based) of Parts of a tensor along dimension Dim
// (0 = outermost): the elements whose index along Dim lies in the part's
// range, with the bounds of numpy.array_split (the first size%Parts parts
// one longer), row-major.
type Split struct {
	Dim, Parts, Part int
}

func (s Split) String() string { return fmt.Sprintf("%d/%d/%d", s.Dim, s.Parts, s.Part) }

// Bounds returns the range [start, end) of part s.Part of a dimension of
// size n, as numpy.array_split cuts it.
func (s Split) Bounds(n int64) (start, end int64) {
	if s.Parts <= 0 || s.Part < 0 || s.Part >= s.Parts || n < 0 {
		return 0, 0
	}
	parts, k := int64(s.Parts), int64(s.Part)
	q, r := n/parts, n%parts
	start = k*q + min(k, r)
	end = start + q
	if k < r {
		end++
	}
	return start, end
}

// Valid reports whether s can cut a tensor of the given shape: Dim is one
// of its dimensions, Parts ≥ 1 and 0 ≤ Part < Parts.
func (s Split) Valid(shape []int64) bool {
	return s.Dim >= 0 && s.Dim < len(shape) && s.Parts >= 1 && s.Part >= 0 && s.Part < s.Parts
}

// SliceShape returns the shape of part s of a tensor of the given shape
// (a new slice), or nil when s is not Valid for it.
func (s Split) SliceShape(shape []int64) []int64 {
	if !s.Valid(shape) {
		return nil
	}
	out := append([]int64(nil), shape...)
	start, end := s.Bounds(shape[s.Dim])
	out[s.Dim] = end - start
	return out
}

// sliceGeom is where the bytes of a slice lie in the bytes of the whole
// tensor (row-major, in dtype dt): runs of run bytes, the first at
// first, each next one step bytes further on.
type sliceGeom struct {
	runs, run, first, step int64
	start, end             int64 // the part's bounds along the dim
}

// geometry works out s's runs over a tensor of shape in dtype dt, or
// fails when s is not Valid or its bounds do not fall on whole blocks of
// dt (a quantized type cut along its block dimension).
func geometry(name string, shape []int64, dt dtype.DType, s Split) (sliceGeom, error) {
	if !s.Valid(shape) {
		return sliceGeom{}, fmt.Errorf("view: %s: no part %s of shape %v", name, s, shape)
	}
	outer, ok1 := index.Elements(shape[:s.Dim])
	inner, ok2 := index.Elements(shape[s.Dim+1:])
	d := shape[s.Dim]
	start, end := s.Bounds(d)
	if !ok1 || !ok2 {
		return sliceGeom{}, fmt.Errorf("view: %s: shape %v overflows", name, shape)
	}
	g := sliceGeom{runs: outer, start: start, end: end}
	var ok [3]bool
	rowLen := dtype.RowLen(shape) // whole rows, for a type with row meta
	g.run, ok[0] = dt.TensorSize((end-start)*inner, rowLen)
	g.first, ok[1] = dt.TensorSize(start*inner, rowLen)
	g.step, ok[2] = dt.TensorSize(d*inner, rowLen)
	if !ok[0] || !ok[1] || !ok[2] {
		return sliceGeom{}, fmt.Errorf("view: %s: part %s of %s shape %v does not fall on whole blocks of %d elements", name, s, dt, shape, dt.Info().BlockElems)
	}
	if g.run == 0 {
		g.runs = 0
	}
	return g, nil
}

// size returns the bytes of the slice.
func (g sliceGeom) size() int64 { return g.runs * g.run }

// SliceSize returns the size of the reader NewSlice(t, src, to, s) would
// return, or the error it would fail with, without building the reader
// (as Size does for New).
func SliceSize(t *index.Tensor, src backing.Source, to dtype.DType, s Split) (int64, error) {
	g, _, err := planSlice(t, src, to, s)
	return g.size(), err
}

// planSlice runs New's checks for t in to and works out part s of it.
func planSlice(t *index.Tensor, src backing.Source, to dtype.DType, s Split) (sliceGeom, readerPlan, error) {
	p, err := plan(t, src, to)
	if err != nil {
		return sliceGeom{}, readerPlan{}, err
	}
	dt := to
	if dt == dtype.Invalid {
		dt = t.DType
	}
	g, err := geometry(t.Name, t.Shape, dt, s)
	return g, p, err
}

// NewSlice returns the reader of part s of t in dtype to (dtype.Invalid:
// the stored dtype): the bytes numpy.array_split(x, s.Parts,
// axis=s.Dim)[s.Part] would hold for the tensor x that New(t, src, to)
// serves. It fails where New fails, where s is not Valid for t's shape,
// and where the part's bounds do not fall on whole blocks of a quantized
// dtype served as stored (converted views split anywhere).
//
// A tensor of fixed-size elements is sliced as a strided tensor of its
// own (the part's shape, the whole tensor's strides, its first element's
// offset), so the runs along the split are gathered straight from the
// backing file into the caller's buffer: a part of dim 0 of a row-major
// tensor is one range of the file (the Reader is a Ranger), a part of
// another dim one backing read per run. A block dtype, which cannot be
// strided, is cut from the whole tensor's Reader, a read per run.
func NewSlice(t *index.Tensor, src backing.Source, to dtype.DType, s Split) (Reader, error) {
	g, p, err := planSlice(t, src, to, s)
	if err != nil {
		return nil, err
	}
	return buildSlice(t, src, to, s, g, p), nil
}

// buildSlice builds the reader NewSlice describes, which planSlice has
// accepted.
func buildSlice(t *index.Tensor, src backing.Source, to dtype.DType, s Split, g sliceGeom, p readerPlan) Reader {
	if es := t.DType.ElemSize(); es > 0 {
		st := sliced(t, s, g, es)
		sp := p
		sp.elems, _ = index.Elements(st.Shape)
		sp.size = g.size()
		return build(st, src, to, sp)
	}
	return &sliceReader{whole: build(t, src, to, p), g: g}
}

// sliced returns part s of t (elements of es bytes) as a tensor of its
// own: the part's shape, strides (t's, or row-major ones), and the
// offset of its first element.
func sliced(t *index.Tensor, s Split, g sliceGeom, es int64) *index.Tensor {
	st := *t
	st.Shape = s.SliceShape(t.Shape)
	strides := t.Strides
	if strides == nil {
		strides = make([]int64, len(t.Shape))
		acc := int64(1)
		for k := len(t.Shape) - 1; k >= 0; k-- {
			strides[k] = acc
			acc *= max(t.Shape[k], 1)
		}
	}
	st.Strides = strides
	if g.size() > 0 { // else the part has no elements: leave it where t is
		st.Offset = t.Offset + g.start*strides[s.Dim]*es
	}
	n, _ := index.Elements(st.Shape) // no larger than t's
	st.Size = n * es                 // bytes of the part as stored
	return &st
}

// sliceReader is part of a tensor cut from the Reader of the whole: runs
// of g.run bytes, g.step apart, the first at g.first.
type sliceReader struct {
	whole Reader
	g     sliceGeom
}

func (r *sliceReader) Size() int64 { return r.g.size() }

func (r *sliceReader) ReadAt(p []byte, off int64) (int, error) {
	n, eof, err := clamp(len(p), off, r.g.size())
	if err != nil {
		return 0, err
	}
	g := r.g
	for done := 0; done < n; {
		o := off + int64(done)
		run, in := o/g.run, o%g.run
		k := int(min(int64(n-done), g.run-in))
		m, err := r.whole.ReadAt(p[done:done+k], run*g.step+g.first+in)
		if m < k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		done += k
	}
	if eof {
		return n, io.EOF
	}
	return n, nil
}

// FileRange: a part that is one run of a tensor that is one range of its
// file is one range of the file too.
func (r *sliceReader) FileRange() (backing.Source, int64, bool) {
	if r.g.runs > 1 {
		return nil, 0, false
	}
	rg, ok := r.whole.(Ranger)
	if !ok {
		return nil, 0, false
	}
	src, off, ok := rg.FileRange()
	if r.g.runs == 0 {
		return src, off, ok // no bytes
	}
	return src, off + r.g.first, ok
}

// NPYSliceSize returns the size of the reader NewNPYSlice(t, src, s)
// would return, or the error it would fail with, without building it.
func NPYSliceSize(t *index.Tensor, src backing.Source, s Split) (int64, error) {
	to, _, err := planNPY(t, src)
	if err != nil {
		return 0, err
	}
	g, err := geometry(t.Name, t.Shape, to, s)
	if err != nil {
		return 0, err
	}
	var shapeBuf [index.MaxDims]int64
	shape := append(shapeBuf[:0], t.Shape...)
	shape[s.Dim] = g.end - g.start
	var buf [256]byte
	_, total := npyLayout(len(appendNPYDict(buf[:0], to.Info().NumPy, shape)))
	return int64(total) + g.size(), nil
}

// NewNPYSlice returns part s of t as a NumPy .npy file: NewNPY's header
// with the part's shape, then the part's data in the .npy dtype
// (NPYDType), as NewSlice cuts it.
func NewNPYSlice(t *index.Tensor, src backing.Source, s Split) (Reader, error) {
	to, p, err := planNPY(t, src)
	if err != nil {
		return nil, err
	}
	g, err := geometry(t.Name, t.Shape, to, s)
	if err != nil {
		return nil, err
	}
	data := buildSlice(t, src, to, s, g, p)
	header := npyHeader(to.Info().NumPy, s.SliceShape(t.Shape))
	return &npyReader{header: header, data: data, size: int64(len(header)) + data.Size()}, nil
}

var (
	_ Reader = (*sliceReader)(nil)
	_ Ranger = (*sliceReader)(nil)
)

// SliceExtent says where part s of a tensor of the given shape, row-major
// in dtype dt, lies in the tensor's bytes: at byte first, size bytes in
// all, and whether those are one range (a part of dim 0, or of a dim
// with only dims of size 1 outside it). It fails as NewSlice does for a
// part that is not Valid or not on whole blocks.
func SliceExtent(name string, shape []int64, dt dtype.DType, s Split) (first, size int64, oneRange bool, err error) {
	g, err := geometry(name, shape, dt, s)
	if err != nil {
		return 0, 0, false, err
	}
	if g.runs == 0 {
		return 0, 0, true, nil
	}
	return g.first, g.size(), g.runs == 1, nil
}
