package view

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// npyAlign is where the data of a .npy file starts: the header is padded
// so that its total length is a multiple of it (NumPy's ARRAY_ALIGN).
const npyAlign = 64

// NPYDType returns the dtype of t's .npy view: the stored dtype where NumPy
// has it, else F32; ok is false when t has no .npy view (NumPy lacks the
// dtype and it does not convert to F32).
func NPYDType(t *index.Tensor) (dtype.DType, bool) {
	if t.DType.Info().NumPy != "" {
		return t.DType, true
	}
	if Convertible(t, dtype.F32) {
		return dtype.F32, true
	}
	return dtype.Invalid, false
}

// NewNPY returns the reader of t as a NumPy .npy file: a format 1.0 header
// (2.0 only if the header would exceed 65535 bytes) padded so the data
// starts at a multiple of 64 bytes, then the data: t in its own dtype where
// NumPy has one, else converted to float32 (see NPYDType).
func NewNPY(t *index.Tensor, src backing.Source) (Reader, error) {
	to, p, err := planNPY(t, src)
	if err != nil {
		return nil, err
	}
	data := build(t, src, to, p)
	header := npyHeader(to.Info().NumPy, t.Shape)
	return &npyReader{header: header, data: data, size: int64(len(header)) + data.Size()}, nil
}

// NPYSize returns the size of the reader NewNPY(t, src) would return, or
// the error NewNPY would fail with, without building the reader (see
// Size): the same checks, and the header's length without the header.
func NPYSize(t *index.Tensor, src backing.Source) (int64, error) {
	to, p, err := planNPY(t, src)
	if err != nil {
		return 0, err
	}
	var buf [256]byte // enough for the dict of most shapes; longer ones allocate
	_, total := npyLayout(len(appendNPYDict(buf[:0], to.Info().NumPy, t.Shape)))
	return int64(total) + p.size, nil
}

// planNPY checks t against src for its .npy view and returns the dtype of
// its data and the plan of the data's reader.
func planNPY(t *index.Tensor, src backing.Source) (dtype.DType, readerPlan, error) {
	if t == nil {
		return dtype.Invalid, readerPlan{}, fmt.Errorf("view: nil tensor")
	}
	to, ok := NPYDType(t)
	if !ok {
		return dtype.Invalid, readerPlan{}, fmt.Errorf("view: %s: no .npy view: NumPy has no %s and it does not convert to float32", t.Name, t.DType)
	}
	p, err := plan(t, src, to)
	if err != nil {
		return dtype.Invalid, readerPlan{}, err
	}
	return to, p, nil
}

// npyHeader returns the whole header of a C-order .npy file.
func npyHeader(descr string, shape []int64) []byte {
	dict := appendNPYDict(nil, descr, shape)
	prefix, total := npyLayout(len(dict))
	hlen := total - prefix
	h := make([]byte, 0, total)
	h = append(h, "\x93NUMPY"...)
	if prefix == 10 {
		h = append(h, 1, 0)
		h = binary.LittleEndian.AppendUint16(h, uint16(hlen))
	} else {
		h = append(h, 2, 0)
		h = binary.LittleEndian.AppendUint32(h, uint32(hlen))
	}
	h = append(h, dict...)
	for len(h) < total-1 {
		h = append(h, ' ')
	}
	return append(h, '\n')
}

// appendNPYDict appends the header's dict (descr, C order, shape) to dst.
func appendNPYDict(dst []byte, descr string, shape []int64) []byte {
	dst = append(dst, "{'descr': '"...)
	dst = append(dst, descr...)
	dst = append(dst, "', 'fortran_order': False, 'shape': ("...)
	for i, n := range shape {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = strconv.AppendInt(dst, n, 10)
	}
	if len(shape) == 1 {
		dst = append(dst, ',')
	}
	return append(dst, "), }"...)
}

// npyLayout returns the length of the header's prefix (magic(6) +
// version(2) + length(2, or 4 in version 2.0)) and of the whole header
// (prefix + dict + spaces + '\n', a multiple of npyAlign) for a dict of
// dictLen bytes.
func npyLayout(dictLen int) (prefix, total int) {
	prefix = 10
	total = (prefix + dictLen + 1 + npyAlign - 1) / npyAlign * npyAlign
	if total-prefix > 65535 {
		prefix = 12
		total = (prefix + dictLen + 1 + npyAlign - 1) / npyAlign * npyAlign
	}
	return prefix, total
}

// npyReader is a .npy file: a header in memory, then the data view.
type npyReader struct {
	header []byte
	data   Reader
	size   int64
}

func (r *npyReader) Size() int64 { return r.size }

func (r *npyReader) ReadAt(p []byte, off int64) (int, error) {
	n, eof, err := clamp(len(p), off, r.size)
	if err != nil {
		return 0, err
	}
	p = p[:n]
	hl := int64(len(r.header))
	if off < hl {
		c := copy(p, r.header[off:])
		p = p[c:]
		off += int64(c)
	}
	if len(p) > 0 {
		m, err := r.data.ReadAt(p, off-hl)
		if m < len(p) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	if eof {
		return n, io.EOF
	}
	return n, nil
}
