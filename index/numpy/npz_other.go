package numpy

// The members of an .npz that are arrays of no tensor dtype: described in
// the Index's metadata so that one string member never costs the numeric
// arrays beside it.

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// Caps on the string values an .npz puts in its metadata. A longer
// string array is described by dtype, shape and size instead.
const (
	MaxStringMember = 64 << 10 // data bytes of one string array given as values
	MaxStringValues = 16 << 20 // data bytes of all of a file's string arrays given as values
)

// npzOther is a member whose array has no tensor dtype.
type npzOther struct {
	name string
	zf   *zip.File
	a    *npyArray
	off  int64 // the stored member's offset in the file; -1 when deflated
}

// npzDescribe adds each member of others to idx.Metadata under its name
// (a fixed-width string array as its values, anything else as its dtype,
// shape and size) and one line to idx.Notes naming them.
func npzDescribe(f index.File, idx *index.Index, others []npzOther) {
	budget := int64(MaxStringValues)
	names := make([]string, 0, min(len(others), 9))
	for _, o := range others {
		if len(names) < 8 {
			names = append(names, strconv.Quote(o.name)+" ("+o.a.descr+")")
		}
		if o.a.item > 0 && o.a.size <= MaxStringMember && o.a.size <= budget {
			if v, err := npzStrings(f, o); err == nil {
				budget -= o.a.size
				idx.Metadata[o.name] = v
				continue
			}
		}
		shape := make([]any, len(o.a.shape))
		for i, d := range o.a.shape {
			shape[i] = d
		}
		why := strings.TrimPrefix(o.a.notNumeric.(*index.FormatError).Msg, "dtype "+strconv.Quote(o.a.descr)+" ")
		idx.Metadata[o.name] = map[string]any{"dtype": o.a.descr, "shape": shape, "bytes": int64(o.zf.UncompressedSize64), "not_served": why}
	}
	if len(others) > 8 {
		names = append(names, fmt.Sprintf("and %d more", len(others)-8))
	}
	idx.Notes = append(idx.Notes, fmt.Sprintf("%d .npz member(s) of no tensor dtype are not served as tensors, they are in the metadata: %s", len(others), strings.Join(names, ", ")))
}

// npzStrings reads the fixed-width string array o and returns its values
// as numpy gives them (trailing NULs removed): a string for a scalar,
// nested lists otherwise. 'S' bytes that are not UTF-8 are taken as
// Latin-1; a 'U' code point that is not a character becomes U+FFFD.
func npzStrings(f index.File, o npzOther) (any, error) {
	data := make([]byte, o.a.size)
	if o.off >= 0 {
		if _, err := f.ReadAt(data, o.off+o.a.dataOff); err != nil && !(err == io.EOF && len(data) == 0) {
			return nil, err
		}
	} else {
		rc, err := o.zf.Open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		if _, err := io.CopyN(io.Discard, rc, o.a.dataOff); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(rc, data); err != nil {
			return nil, err
		}
	}
	unicode := strings.ContainsRune(o.a.descr, 'U')
	big := strings.HasPrefix(o.a.descr, ">")
	elem := func(b []byte) string {
		if !unicode {
			return pickle.Py2Str([]byte(strings.TrimRight(string(b), "\x00")))
		}
		var sb strings.Builder
		for i := 0; i+4 <= len(b); i += 4 {
			c := binary.LittleEndian.Uint32(b[i:])
			if big {
				c = binary.BigEndian.Uint32(b[i:])
			}
			r := rune(c)
			if c > utf8.MaxRune || !utf8.ValidRune(r) {
				r = utf8.RuneError
			}
			sb.WriteRune(r)
		}
		return strings.TrimRight(sb.String(), "\x00")
	}
	var build func(dim int, at int64) (any, int64)
	build = func(dim int, at int64) (any, int64) {
		if dim == len(o.a.shape) {
			return elem(data[at : at+o.a.item]), at + o.a.item
		}
		out := make([]any, o.a.shape[dim])
		for i := range out {
			out[i], at = build(dim+1, at)
		}
		return out, at
	}
	if o.a.fortran && len(o.a.shape) > 1 {
		// Column-major: give the values in C order, as numpy does.
		n := o.a.size / max(o.a.item, 1)
		c := make([]byte, len(data))
		for k := int64(0); k < n; k++ {
			// k is the C-order index; find its Fortran-order position.
			rem, pos, stride := k, int64(0), int64(1)
			idx := make([]int64, len(o.a.shape))
			for d := len(o.a.shape) - 1; d >= 0; d-- {
				idx[d] = rem % o.a.shape[d]
				rem /= o.a.shape[d]
			}
			for d := range o.a.shape {
				pos += idx[d] * stride
				stride *= o.a.shape[d]
			}
			copy(c[k*o.a.item:], data[pos*o.a.item:(pos+1)*o.a.item])
		}
		data = c
	}
	v, _ := build(0, 0)
	return v, nil
}

// npyStringItem is the element size of a fixed-width string descr ("|S3":
// 3, "<U5": 20), or 0 for any other descr.
func npyStringItem(descr string) int64 {
	s := strings.TrimLeft(descr, "<>|=")
	if len(s) < 2 || (s[0] != 'S' && s[0] != 'U' && s[0] != 'a') {
		return 0
	}
	n, err := strconv.ParseInt(s[1:], 10, 64)
	if err != nil || n <= 0 || n > 1<<30 {
		return 0
	}
	if s[0] == 'U' {
		return 4 * n
	}
	return n
}
