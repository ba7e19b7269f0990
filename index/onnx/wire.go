package onnx

import (
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lazyweights/tensorfs/index"
)

// walker reads protobuf fields of a file by offset, through a window of
// its bytes: a message's payloads (raw_data) are skipped by their
// length, never read, so a 2 GB model.onnx costs what its structure
// costs. The wire format itself (tags, varints) is decoded by protowire.
type walker struct {
	f      index.File
	size   int64
	win    []byte // bytes [winOff, winOff+len(win)) of f
	winOff int64
	fields int // fields walked, against MaxFields
}

// windowSize is how much the walker reads at a time.
const windowSize = 64 << 10

// bytesAt returns up to n bytes at off (fewer at the end of the file);
// the slice is valid until the next call.
func (w *walker) bytesAt(off int64, n int) ([]byte, error) {
	if off < 0 || off > w.size {
		return nil, fmt.Errorf("offset %d outside the file", off)
	}
	if rest := w.size - off; int64(n) > rest {
		n = int(rest)
	}
	if off >= w.winOff && off+int64(n) <= w.winOff+int64(len(w.win)) {
		return w.win[off-w.winOff : off-w.winOff+int64(n)], nil
	}
	size := max(n, windowSize)
	if rest := w.size - off; int64(size) > rest {
		size = int(rest)
	}
	if cap(w.win) < size {
		w.win = make([]byte, size)
	}
	w.win = w.win[:size]
	k, err := w.f.ReadAt(w.win, off)
	if k < size {
		w.win = w.win[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("cannot read %d bytes at byte %d: %v", size, off, err)
	}
	w.winOff = off
	return w.win[:n], nil
}

// field is one protobuf field of a message in the file.
type field struct {
	num protowire.Number
	typ protowire.Type
	at  int64  // offset of its tag
	val uint64 // a varint's value, or a fixed32/fixed64's bits
	off int64  // a BytesType field's payload offset
	n   int64  // a BytesType field's payload length
}

// next reads the field at pos of a message ending at end; it returns the
// field and where the next one starts.
func (w *walker) next(pos, end int64) (field, int64, error) {
	w.fields++
	if w.fields > MaxFields {
		return field{}, 0, fmt.Errorf("more than %d protobuf fields", MaxFields)
	}
	b, err := w.bytesAt(pos, int(min(end-pos, 2*binaryMaxVarint)))
	if err != nil {
		return field{}, 0, err
	}
	num, typ, k := protowire.ConsumeTag(b)
	if k < 0 {
		return field{}, 0, fmt.Errorf("bad field tag at byte %d: %v", pos, protowire.ParseError(k))
	}
	fd := field{num: num, typ: typ, at: pos}
	b = b[k:]
	p := pos + int64(k)
	switch typ {
	case protowire.VarintType:
		v, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return field{}, 0, fmt.Errorf("bad varint of field %d at byte %d: %v", num, p, protowire.ParseError(m))
		}
		fd.val = v
		return fd, p + int64(m), nil
	case protowire.Fixed32Type:
		v, m := protowire.ConsumeFixed32(b)
		if m < 0 {
			return field{}, 0, fmt.Errorf("field %d at byte %d is cut off by the end of its message", num, pos)
		}
		fd.val = uint64(v)
		return fd, p + 4, nil
	case protowire.Fixed64Type:
		v, m := protowire.ConsumeFixed64(b)
		if m < 0 {
			return field{}, 0, fmt.Errorf("field %d at byte %d is cut off by the end of its message", num, pos)
		}
		fd.val = v
		return fd, p + 8, nil
	case protowire.BytesType:
		v, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return field{}, 0, fmt.Errorf("bad length of field %d at byte %d: %v", num, p, protowire.ParseError(m))
		}
		p += int64(m)
		if v > uint64(end-p) {
			return field{}, 0, fmt.Errorf("field %d at byte %d claims %d bytes, past the end of its message (byte %d)", num, pos, v, end)
		}
		fd.off, fd.n = p, int64(v)
		return fd, p + int64(v), nil
	}
	return field{}, 0, fmt.Errorf("field %d at byte %d has wire type %d, which ONNX does not use", num, pos, typ)
}

// binaryMaxVarint is the longest varint.
const binaryMaxVarint = 10

// str reads a BytesType field as a string of at most MaxString bytes.
func (w *walker) str(fd field, what string) (string, error) {
	if fd.typ != protowire.BytesType {
		return "", fmt.Errorf("%s at byte %d is not a string (wire type %d)", what, fd.at, fd.typ)
	}
	if fd.n > MaxString {
		return "", fmt.Errorf("%s at byte %d is %d bytes, over the limit of %d", what, fd.at, fd.n, MaxString)
	}
	b, err := w.bytesAt(fd.off, int(fd.n))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// message checks that fd is a submessage (BytesType).
func message(fd field, what string) error {
	if fd.typ != protowire.BytesType {
		return fmt.Errorf("%s at byte %d is not a message (wire type %d)", what, fd.at, fd.typ)
	}
	return nil
}

// int64s appends the int64 values of a repeated int64 field (packed or
// one value), at most max of them.
func (w *walker) int64s(dst []int64, fd field, max int, what string) ([]int64, error) {
	switch fd.typ {
	case protowire.VarintType:
		if len(dst) >= max {
			return nil, fmt.Errorf("%s at byte %d: more than %d values", what, fd.at, max)
		}
		return append(dst, int64(fd.val)), nil
	case protowire.BytesType:
		if fd.n > int64(max)*binaryMaxVarint {
			return nil, fmt.Errorf("%s at byte %d: more than %d values", what, fd.at, max)
		}
		b, err := w.bytesAt(fd.off, int(fd.n))
		if err != nil {
			return nil, err
		}
		for len(b) > 0 {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return nil, fmt.Errorf("%s at byte %d: bad packed varint", what, fd.at)
			}
			if len(dst) >= max {
				return nil, fmt.Errorf("%s at byte %d: more than %d values", what, fd.at, max)
			}
			dst = append(dst, int64(v))
			b = b[m:]
		}
		return dst, nil
	}
	return nil, fmt.Errorf("%s at byte %d has wire type %d", what, fd.at, fd.typ)
}
