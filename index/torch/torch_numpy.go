package torch

import (
	"fmt"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/numpy"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// NumPy arrays inside a torch pickle (torch.save of a dict holding an
// ndarray): numpy.core.multiarray._reconstruct (numpy._core in numpy 2)
// and BUILD with ndarray.__setstate__'s state (version, shape, dtype,
// is_fortran, rawdata), the dtype a numpy.dtype whose BUILD state gives
// its byte order. rawdata is inline in the pickle: bytes (protocol 3 and
// up), a Python 2 str, or _codecs.encode(str, "latin1") (protocol 2 from
// Python 3, torch.save's default).
//
// Decisions:
//   - Every array is a tensor under its key, with its dtype, shape, byte
//     order and Fortran order (strides). Where its bytes are a range of
//     the pickle (bytes, a Python 2 str, or a Latin-1 str that is all
//     ASCII, so its UTF-8 is the same bytes), it is served from that
//     range: of the file when the pickle is the legacy file itself or a
//     stored data.pkl, of the inflated data.pkl (a Member, Deflated)
//     when that is deflated.
//   - A Latin-1 str with bytes >= 0x80 is UTF-8 in the pickle (protocol
//     2, torch.save's default): the array is a Member of its own
//     (index.Latin1) over the str's range, decoded on first read. Its
//     code points are checked here, while the pickle is read: one that
//     is not below 256 (or invalid UTF-8, or a character cut off)
//     refuses the file naming the key and the byte, as Python's
//     unpickler fails there too; so does a decoded length other than the
//     array's byte size. Nothing of it is held in the index.
//   - An object array's rawdata is a list of Python objects, not bytes:
//     its elements are walked as a list (metadata; tensors among them are
//     served), not refused, so the checkpoint's other tensors stay.
//   - String, record and datetime arrays have no tensor dtype: refused,
//     naming the key, as for .npy.

// ndarrayState reads a numpy array's BUILD state (version, shape, dtype,
// is_fortran, rawdata); why says what is wrong with it.
func ndarrayState(a *pickle.NDArray) (shape []int64, descr string, order byte, fortran bool, data any, why string) {
	if len(a.State) != 1 {
		why = fmt.Sprintf("%d BUILD states (ndarray.__setstate__ takes one)", len(a.State))
		return
	}
	st, ok := a.State[0].(pickle.Tuple)
	if ok && len(st) == 5 {
		st = st[1:] // drop the version
	}
	if !ok || len(st) != 4 {
		why = fmt.Sprintf("state %s is not (version, shape, dtype, is_fortran, rawdata)", pickle.Repr(a.State[0], 60))
		return
	}
	items, ok := pickle.Items(st[0])
	if !ok || len(items) > index.MaxDims {
		why = fmt.Sprintf("shape %s is not a tuple of at most %d ints", pickle.Repr(st[0], 60), index.MaxDims)
		return
	}
	shape = make([]int64, len(items))
	for i, x := range items {
		d, ok := pickle.Int(x)
		if !ok || d < 0 {
			why = fmt.Sprintf("shape %s is not a tuple of sizes", pickle.Repr(st[0], 60))
			return
		}
		shape[i] = d
	}
	descr, order, ok = pickle.NumpyDType(st[1])
	if !ok || descr == "" {
		why = fmt.Sprintf("dtype is %s, not a numpy.dtype", pickle.Repr(st[1], 60))
		return
	}
	fortran, ok = st[2].(bool)
	if !ok {
		why = fmt.Sprintf("is_fortran is %s, not a bool", pickle.Repr(st[2], 40))
		return
	}
	return shape, descr, order, fortran, st[3], ""
}

// ndarraySpan is where a numpy array's data of size bytes lies in the
// pickle stream, checked against the size its dtype and shape need.
func (w *ptWalker) ndarraySpan(data any, descr string, shape []int64, size int64) (sp pickle.Span, err error) {
	where := index.TensorWhere(w.name())
	bad := func(format string, args ...any) error {
		return index.ErrorAt(w.file, where, "numpy array: "+format, args...)
	}
	has := false
	switch x := data.(type) {
	case pickle.Bytes, string, pickle.Large:
		if w.m != nil {
			sp, has = w.m.SpanOf(data)
		}
		if !has && size > 0 {
			return sp, bad("its data (%s) has no place in the pickle", pickle.TypeName(data))
		}
	case *pickle.Invalid:
		return sp, w.errAtStream(x.Off, "numpy array: "+x.Msg)
	default:
		return sp, bad("data is %s, not bytes", pickle.TypeName(data))
	}
	if has && !sp.Raw && sp.Latin1 < 0 {
		// A str given to ndarray.__setstate__ as it is: numpy encodes it
		// as Latin-1, and fails as _codecs.encode does.
		return sp, w.errAtStream(sp.BadAt, "numpy array: its data is a str that is not Latin-1 as UTF-8 (Python's unpickler fails on it too)")
	}
	if has {
		n := sp.N
		if !sp.Raw {
			n = sp.Latin1
		}
		if n != size {
			return sp, bad("%s%v needs %d bytes, its data has %d", descr, shape, size, n)
		}
	}
	return sp, nil
}

// ndarray serves a numpy array (see above).
func (w *ptWalker) ndarray(a *pickle.NDArray, depth int) (any, bool, error) {
	where := index.TensorWhere(w.name())
	bad := func(format string, args ...any) (any, bool, error) {
		return nil, false, index.ErrorAt(w.file, where, "numpy array: "+format, args...)
	}
	shape, descr, order, fortran, data, why := ndarrayState(a)
	if why != "" {
		return bad("%s", why)
	}
	if descr[0] == 'O' {
		items, ok := pickle.Items(data)
		if !ok {
			return bad("object array data is %s, not a list", pickle.TypeName(data))
		}
		return w.sequence(items, depth)
	}
	dt, big, err := numpy.DType(string(order) + descr)
	if err != nil {
		return bad("%v", err)
	}
	n, ok := index.Elements(shape)
	if !ok {
		return bad("shape %v overflows", shape)
	}
	size, ok := dt.ByteSize(n)
	if !ok {
		return bad("shape %v of %s overflows", shape, dt)
	}
	sp, err := w.ndarraySpan(data, descr, shape, size)
	if err != nil {
		return nil, false, err
	}
	name, err := w.tensorName()
	if err != nil {
		return nil, false, err
	}
	t := index.Tensor{Name: name, DType: dt, Shape: shape, Size: size, BigEndian: big}
	if size > 0 { // an empty array has no bytes to place: Source 0, Offset 0
		src, off, err := w.streamSource(sp.Off)
		if err != nil {
			return nil, false, err
		}
		t.Source, t.Offset = src, off
		if !sp.Raw {
			// UTF-8 in the pickle: its own source, decoded on first read.
			w.members = append(w.members, index.Member{Source: 1 + len(w.members), File: src, Name: name,
				Size: size, Kind: &index.Latin1{Offset: off, Len: sp.N}})
			t.Source, t.Offset = len(w.members), 0
		}
	}
	if fortran && size > 0 {
		strides := make([]int64, len(shape))
		s := int64(1)
		for i, d := range shape {
			strides[i] = s
			s *= d
		}
		if !index.RowMajor(shape, strides) {
			t.Strides = strides
		}
	}
	w.tensors = append(w.tensors, t)
	return nil, false, nil
}
