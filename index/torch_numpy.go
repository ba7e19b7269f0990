package index

import (
	"fmt"

	"github.com/lazyweights/tensorfs/internal/pickle"
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
//   - An array whose bytes are a range of the file (the pickle is the
//     legacy file itself or a stored data.pkl, and rawdata is bytes, a
//     Python 2 str, or a Latin-1 str that is all ASCII, so its UTF-8 is
//     the same bytes) is a tensor under its key, with its dtype, shape,
//     byte order and Fortran order (strides), served from that range.
//   - An array whose bytes are not a range of the file (a Latin-1 str
//     with bytes >= 0x80 is UTF-8 in the pickle; a compressed data.pkl)
//     cannot be served by an index of file ranges: it stays in the
//     metadata as a line that says so and how to re-save it.
//   - An object array's rawdata is a list of Python objects, not bytes:
//     its elements are walked as a list (metadata; tensors among them are
//     served), not refused, so the checkpoint's other tensors stay.
//   - String, record and datetime arrays have no tensor dtype: refused,
//     naming the key, as for .npy.

// ndarray serves a numpy array (see above).
func (w *ptWalker) ndarray(a *pickle.NDArray, depth int) (any, bool, error) {
	where := ptWhere(w.name())
	bad := func(format string, args ...any) (any, bool, error) {
		return nil, false, ErrorAt(w.file, where, "numpy array: "+format, args...)
	}
	if len(a.State) != 1 {
		return bad("%d BUILD states (ndarray.__setstate__ takes one)", len(a.State))
	}
	st, ok := a.State[0].(pickle.Tuple)
	if ok && len(st) == 5 {
		st = st[1:] // drop the version
	}
	if !ok || len(st) != 4 {
		return bad("state %s is not (version, shape, dtype, is_fortran, rawdata)", pickle.Repr(a.State[0], 60))
	}
	items, ok := pickle.Items(st[0])
	if !ok || len(items) > MaxDims {
		return bad("shape %s is not a tuple of at most %d ints", pickle.Repr(st[0], 60), MaxDims)
	}
	shape := make([]int64, len(items))
	for i, x := range items {
		d, ok := pickle.Int(x)
		if !ok || d < 0 {
			return bad("shape %s is not a tuple of sizes", pickle.Repr(st[0], 60))
		}
		shape[i] = d
	}
	descr, order, ok := pickle.NumpyDType(st[1])
	if !ok || descr == "" {
		return bad("dtype is %s, not a numpy.dtype", pickle.Repr(st[1], 60))
	}
	fortran, ok := st[2].(bool)
	if !ok {
		return bad("is_fortran is %s, not a bool", pickle.Repr(st[2], 40))
	}
	data := st[3]
	if descr[0] == 'O' {
		items, ok := pickle.Items(data)
		if !ok {
			return bad("object array data is %s, not a list", pickle.TypeName(data))
		}
		return w.sequence(items, depth)
	}
	dt, big, err := npyDType(string(order) + descr)
	if err != nil {
		return bad("%v", err)
	}
	n, ok := Elements(shape)
	if !ok {
		return bad("shape %v overflows", shape)
	}
	size, ok := dt.ByteSize(n)
	if !ok {
		return bad("shape %v of %s overflows", shape, dt)
	}
	var sp pickle.Span
	has := false
	switch data.(type) {
	case pickle.Bytes, string, pickle.Large:
		if w.m != nil {
			sp, has = w.m.SpanOf(data)
		}
		if !has && size > 0 {
			return bad("its data (%s) has no place in the pickle", pickle.TypeName(data))
		}
	default:
		return bad("data is %s, not bytes", pickle.TypeName(data))
	}
	if has && sp.N != size {
		if sp.Raw {
			return bad("%s%v needs %d bytes, its data has %d", descr, shape, size, sp.N)
		}
	}
	off := w.st.fileOff(sp.Off)
	if size > 0 && (!sp.Raw || off < 0) {
		why := "its bytes are a Latin-1 str, which the pickle holds as UTF-8 (protocol 2, torch.save's default)"
		if sp.Raw {
			why = "the pickle is compressed in the archive"
		}
		s := fmt.Sprintf("numpy.ndarray %s%v not served: %s, not a range of the file; re-save with torch.save(..., pickle_protocol=4)", descr, shape, why)
		return s, true, w.meta(len(s))
	}
	name, err := w.tensorName()
	if err != nil {
		return nil, false, err
	}
	t := Tensor{Name: name, DType: dt, Shape: shape, Offset: off, Size: size, BigEndian: big}
	if off < 0 {
		t.Offset = 0 // an empty array: no bytes to place
	}
	if fortran && size > 0 {
		strides := make([]int64, len(shape))
		s := int64(1)
		for i, d := range shape {
			strides[i] = s
			s *= d
		}
		if !ptRowMajor(shape, strides) {
			t.Strides = strides
		}
	}
	w.tensors = append(w.tensors, t)
	return nil, false, nil
}
