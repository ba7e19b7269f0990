package numpy

// NumPy .npy (format 1.0, 2.0, 3.0) and .npz files.
//
// A .npy holds one unnamed array: its tensor is named after the file's base
// name without extension. Its header is a Python dict literal parsed by a
// small literal-only parser (numpy_header.go): keys 'descr', 'fortran_order'
// and 'shape', nothing else, nothing that is not a literal.
//
// Decisions:
//   - dtypes: booleans, integers (1..8 bytes), floats (2, 4, 8 bytes) and
//     complex (8, 16 bytes), in any byte order: '>' sets Tensor.BigEndian,
//     '<', '|' and '=' (native, taken as little-endian) do not. Object
//     ('O'), string ('S', 'U'), void/structured, datetime and long double
//     arrays are refused: they have no tensor dtype.
//   - Fortran-order arrays keep column-major Strides (the view layer
//     gathers); C-order arrays are one contiguous range.
//   - .npz: a zip of .npy members; each member is a tensor named after the
//     member without ".npy". A member without ".npy" is a tensor under its
//     whole name when it starts with the .npy magic (numpy.load reads it
//     as an array too); other members are ignored (numpy gives them as
//     bytes). A member of no tensor dtype (string, bytes, record, object,
//     datetime: scipy.sparse.save_npz writes its format as |S3, test
//     goldens keep class names as <U) never costs the file: the numeric
//     members are served, each other member is a Metadata entry under
//     its name (npz_other.go: a fixed-width string array as its values,
//     anything else as its dtype, shape and size) and Index.Notes says
//     which, in one line. An .npz with no numeric member is refused, the
//     message naming the first member and its dtype.
//   - Stored members (np.savez) are ranges of the file. A deflated member
//     (np.savez_compressed) is a source of its own (Index.Members): its
//     .npy header is inflated here to be parsed, its data is inflated by
//     the backing layer on first read. Declared sizes are checked against
//     what deflate can produce (at most DeflateMaxRatio bytes per
//     compressed byte, so a zip bomb cannot declare more), the compressed
//     range against the file; other methods and encrypted members are
//     refused.
//   - As Python's zipfile, every member's local header must name it as
//     the central directory does, and no two members may share bytes
//     (index.ZipSpans): many entries pointing at one deflate stream
//     would inflate it many times. With each member's bound, the deflate
//     bound then holds for the file as a whole: the members' compressed
//     bytes are distinct bytes of it.
//   - A header of more than 10,000 characters is refused, as numpy.load
//     refuses it (it could only hold a structured dtype, refused anyway).
//   - Index.Format is "numpy" for both.

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

const (
	npyMagic = "\x93NUMPY"
	// npyMaxHeader caps the header text at numpy's own limit
	// (numpy.lib.format._MAX_HEADER_SIZE, since 1.24: numpy.load refuses
	// a longer header unless told to trust the file), counted as numpy
	// counts it: in characters after decoding (Latin-1 in versions 1 and
	// 2, UTF-8 in 3.0, so at most 4 bytes each).
	npyMaxHeader = 10000
)

func SniffNPY(head []byte) bool { return bytes.HasPrefix(head, []byte(npyMagic)) }

func SniffNPZ(head []byte) bool {
	name, complete, ok := index.ZipFirstName(head)
	if !ok {
		return false
	}
	if complete {
		return strings.HasSuffix(name, ".npy")
	}
	return !index.TorchMember(name) && !strings.Contains(name, "/")
}

// npyArray is a parsed .npy header.
type npyArray struct {
	dt        dtype.DType
	bigEndian bool
	fortran   bool
	shape     []int64
	dataOff   int64 // from the start of the .npy
	size      int64 // bytes of data
	// notNumeric is set (the message a plain .npy is refused with) when
	// the array has no tensor dtype: strings, records, objects,
	// datetimes. Then dt is Invalid, descr is the dtype as the header
	// writes it, and size is the data's bytes only for a fixed-width
	// string (item > 0), else -1.
	notNumeric error
	descr      string
	item       int64 // bytes per element of a fixed-width string ('S': n, 'U': 4n)
}

// npyReadHeader parses the .npy at [base, base+avail) of f. where names
// the array in messages ("" for a plain .npy, "member x.npy" in an npz).
func npyReadHeader(f index.File, base, avail int64, where string) (*npyArray, error) {
	file := f.Name()
	fail := func(off int64, format string, args ...any) error {
		if where == "" {
			return index.Errorf(file, base+off, format, args...)
		}
		return &index.FormatError{File: file, Offset: base + off, Where: where, Msg: fmt.Sprintf(format, args...)}
	}
	text, hstart, hlen, err := npyHeaderText(f, base, avail, fail)
	if err != nil {
		return nil, err
	}
	lit, err := npyParseLiteral(text)
	if err != nil {
		return nil, fail(hstart, ".npy header is not a Python literal: %v", err)
	}
	d, ok := lit.(*npyDict)
	if !ok {
		return nil, fail(hstart, ".npy header is not a dict")
	}
	a := &npyArray{dataOff: hstart + hlen}
	if err := a.fields(d, hstart, fail); err != nil {
		return nil, err
	}
	n64, ok := index.Elements(a.shape)
	if !ok {
		return nil, fail(hstart, "shape %v overflows", a.shape)
	}
	if a.notNumeric != nil {
		a.size = -1
		if a.item = npyStringItem(a.descr); a.item > 0 {
			if n64 > (avail-a.dataOff)/a.item {
				return nil, fail(a.dataOff, "string array data of %d %s elements runs past the end (%d bytes left)", n64, a.descr, avail-a.dataOff)
			}
			a.size = n64 * a.item
		}
		return a, nil
	}
	if a.size, ok = a.dt.ByteSize(n64); !ok {
		return nil, fail(hstart, "shape %v of %s overflows", a.shape, a.dt)
	}
	if a.size > avail-a.dataOff {
		return nil, fail(a.dataOff, "array data of %d bytes runs past the end (%d bytes left)", a.size, avail-a.dataOff)
	}
	return a, nil
}

// npyFail makes the error of a problem at offset off of a .npy.
type npyFail func(off int64, format string, args ...any) error

// npyHeaderText reads the preamble (magic, version, header length) of the
// .npy at [base, base+avail) of f and its header's text; the header
// starts at hstart and is hlen bytes.
func npyHeaderText(f index.File, base, avail int64, fail npyFail) (text string, hstart, hlen int64, err error) {
	var pre [12]byte
	if avail < 10 {
		return "", 0, 0, fail(0, "too short for a .npy header (%d bytes)", avail)
	}
	n := 12
	if avail < 12 {
		n = int(avail)
	}
	if _, err := f.ReadAt(pre[:n], base); err != nil && err != io.EOF {
		return "", 0, 0, fail(0, "cannot read: %v", err)
	}
	if string(pre[:6]) != npyMagic {
		return "", 0, 0, fail(0, "not a .npy file (no \\x93NUMPY magic)")
	}
	major, minor := pre[6], pre[7]
	switch major {
	case 1:
		hlen, hstart = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		if avail < 12 {
			return "", 0, 0, fail(0, "too short for a .npy %d.%d header", major, minor)
		}
		hlen, hstart = int64(binary.LittleEndian.Uint32(pre[8:12])), 12
	default:
		return "", 0, 0, fail(6, ".npy format version %d.%d is not supported (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if minor != 0 {
		return "", 0, 0, fail(7, ".npy format version %d.%d is not supported (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if hlen > avail-hstart {
		return "", 0, 0, fail(8, ".npy header of %d bytes runs past the end of the data (%d bytes left)", hlen, avail-hstart)
	}
	if hlen > npyMaxHeader && (major < 3 || hlen > 4*npyMaxHeader) {
		return "", 0, 0, fail(8, ".npy header of %d bytes (numpy reads at most %d characters)", hlen, npyMaxHeader)
	}
	hdr := make([]byte, hlen)
	if _, err := f.ReadAt(hdr, base+hstart); err != nil && !(err == io.EOF && len(hdr) == 0) {
		return "", 0, 0, fail(hstart, "cannot read the header: %v", err)
	}
	text = string(hdr)
	if major < 3 {
		// Latin-1 in versions 1 and 2.
		if !utf8.ValidString(text) {
			text = pickle.Py2Str(hdr)
		}
	} else if !utf8.ValidString(text) {
		return "", 0, 0, fail(hstart, ".npy 3.0 header is not valid UTF-8")
	} else if n := utf8.RuneCountInString(text); n > npyMaxHeader {
		return "", 0, 0, fail(8, ".npy header of %d characters (numpy reads at most %d characters)", n, npyMaxHeader)
	}
	return text, hstart, hlen, nil
}

// fields sets a's descr, fortran_order and shape from the header dict d
// (at hstart), refusing any other key and a missing one.
func (a *npyArray) fields(d *npyDict, hstart int64, fail npyFail) error {
	var err error
	var seen [3]bool
	for i, k := range d.keys {
		v := d.vals[i]
		switch k {
		case "descr":
			seen[0] = true
			s, ok := v.(string)
			if !ok {
				a.descr = npyShort(v)
				a.notNumeric = fail(hstart, "structured dtype %s is not supported (no tensor dtype for records)", a.descr)
				continue
			}
			a.descr = s
			if a.dt, a.bigEndian, err = DType(s); err != nil {
				a.notNumeric = fail(hstart, "%v", err)
			}
		case "fortran_order":
			seen[1] = true
			b, ok := v.(bool)
			if !ok {
				return fail(hstart, "fortran_order is %s, not True or False", npyShort(v))
			}
			a.fortran = b
		case "shape":
			seen[2] = true
			t, ok := v.(npyTuple)
			if !ok {
				return fail(hstart, "shape is %s, not a tuple", npyShort(v))
			}
			if len(t) > index.MaxDims {
				return fail(hstart, "shape has %d dimensions (at most %d)", len(t), index.MaxDims)
			}
			a.shape = make([]int64, len(t))
			for j, x := range t {
				n, ok := x.(int64)
				if !ok || n < 0 {
					return fail(hstart, "shape %s has a dimension that is not a non-negative integer", npyShort(v))
				}
				a.shape[j] = n
			}
		default:
			return fail(hstart, ".npy header has an unexpected key %q", pickle.Clip(k))
		}
	}
	for i, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[i] {
			return fail(hstart, ".npy header has no %q", k)
		}
	}
	return nil
}

// npyShort is a header value in Python syntax, shortened for a message.
func npyShort(v any) string {
	var b strings.Builder
	npyRepr(&b, v)
	return pickle.Clip(b.String())
}

func npyRepr(b *strings.Builder, v any) {
	if b.Len() > 100 {
		return
	}
	seq := func(open, close string, items []any) {
		b.WriteString(open)
		for i, x := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			npyRepr(b, x)
		}
		if open == "(" && len(items) == 1 {
			b.WriteString(",")
		}
		b.WriteString(close)
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		b.WriteString("'" + strings.ReplaceAll(x, "'", "\\'") + "'")
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case *big.Int:
		b.WriteString(x.String())
	case npyTuple:
		seq("(", ")", x)
	case []any:
		seq("[", "]", x)
	case *npyDict:
		b.WriteString("{...}")
	default:
		fmt.Fprint(b, x)
	}
}

// DType maps a simple numpy descr ("<f4", "|b1", ">i8") to a dtype.
func DType(descr string) (dtype.DType, bool, error) {
	s := descr
	order := byte('=')
	if s != "" && strings.IndexByte("<>|=", s[0]) >= 0 {
		order, s = s[0], s[1:]
	}
	if s == "" {
		return dtype.Invalid, false, fmt.Errorf("dtype %q is empty", descr)
	}
	kind, sz := s[0], s[1:]
	size, err := strconv.Atoi(sz)
	if sz == "" {
		size, err = 1, nil
		if kind != 'b' && kind != '?' {
			err = fmt.Errorf("no size")
		}
	}
	if kind == '?' && sz == "" {
		kind = 'b'
	}
	var dt dtype.DType
	if err == nil {
		switch kind {
		case 'b':
			if size == 1 {
				dt = dtype.Bool
			}
		case 'i':
			dt = map[int]dtype.DType{1: dtype.I8, 2: dtype.I16, 4: dtype.I32, 8: dtype.I64}[size]
		case 'u':
			dt = map[int]dtype.DType{1: dtype.U8, 2: dtype.U16, 4: dtype.U32, 8: dtype.U64}[size]
		case 'f':
			dt = map[int]dtype.DType{2: dtype.F16, 4: dtype.F32, 8: dtype.F64}[size]
		case 'c':
			dt = map[int]dtype.DType{8: dtype.C64, 16: dtype.C128}[size]
		}
	}
	if dt == dtype.Invalid {
		what := "is not supported"
		switch kind {
		case 'O':
			what = "is an object array (pickled Python objects); tensorfs never unpickles array data"
		case 'S', 'a', 'U':
			what = "is a string array; it has no tensor dtype"
		case 'V':
			what = "is a void/record array; it has no tensor dtype"
		case 'M', 'm':
			what = "is a datetime array; it has no tensor dtype"
		}
		return dtype.Invalid, false, fmt.Errorf("dtype %q %s", pickle.Clip(descr), what)
	}
	return dt, order == '>' && dt.Info().Unit > 1, nil
}

// npyTensor makes the tensor of an array whose .npy starts at base.
func npyTensor(name string, a *npyArray, base int64) index.Tensor {
	t := index.Tensor{Name: name, DType: a.dt, Shape: a.shape, Offset: base + a.dataOff, Size: a.size, BigEndian: a.bigEndian}
	if a.fortran && a.size > 0 {
		st := make([]int64, len(a.shape))
		s := int64(1)
		for i, d := range a.shape {
			st[i] = s
			s *= d
		}
		if !index.RowMajor(a.shape, st) {
			t.Strides = st
		}
	}
	return t
}

func ParseNPY(f index.File) (*index.Index, error) {
	a, err := npyReadHeader(f, 0, f.Size(), "")
	if err != nil {
		return nil, err
	}
	if a.notNumeric != nil {
		return nil, a.notNumeric
	}
	return &index.Index{Format: "numpy", Sources: []string{f.Name()}, Metadata: map[string]any{},
		Tensors: []index.Tensor{npyTensor(index.BaseName(f.Name()), a, 0)}}, nil
}

// npzMemberIsNPY reports whether a member starts with the .npy magic. It
// reads (inflates, for a compressed member) only those 6 bytes.
func npzMemberIsNPY(zf *zip.File) bool {
	if zf.UncompressedSize64 < uint64(len(npyMagic)) {
		return false
	}
	r, err := zf.Open()
	if err != nil {
		return false
	}
	defer r.Close()
	var head [len(npyMagic)]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return false
	}
	return string(head[:]) == npyMagic
}

// ErrTorchZip is what ParseNPZ returns for a zip archive that has no
// arrays but a data.pkl: a torch.save archive, which the caller parses
// with torch.ParseZip instead (torch imports numpy, not the other way).
var ErrTorchZip = errors.New("a torch.save zip archive, not an .npz file")

func ParseNPZ(f index.File) (*index.Index, error) {
	zr, spans, err := index.OpenZip(f)
	if err != nil {
		return nil, err
	}
	return ParseNPZOpened(f, zr, spans)
}

// ParseNPZOpened is ParseNPZ of the archive zr of f, opened and checked
// by index.OpenZip (spans), read once by whoever looked into it first.
func ParseNPZOpened(f index.File, zr *zip.Reader, spans []index.ZipSpan) (*index.Index, error) {
	file := f.Name()
	// The members' .npy headers (and small string arrays) are read in
	// file order: a block read serves many.
	f = index.ReadAhead(f)
	var ts []index.Tensor
	var others []npzOther // members that are arrays of no tensor dtype
	idx := &index.Index{Format: "numpy", Sources: []string{file}, Metadata: map[string]any{}}
	seen := map[string]bool{}
	hasPkl := false
	for i, zf := range zr.File {
		if zf.Name == "data.pkl" || strings.HasSuffix(zf.Name, "/data.pkl") {
			hasPkl = true
		}
		name, ok := strings.CutSuffix(zf.Name, ".npy")
		if !ok {
			// numpy.load serves a member without ".npy" as an array when
			// it is one (it starts with the .npy magic), under its whole
			// name; other members (bytes to numpy) are not tensors.
			if !npzMemberIsNPY(zf) {
				continue
			}
			name = zf.Name
		}
		where := "member " + zf.Name
		if seen[name] {
			return nil, index.ErrorAt(file, where, "another member is also array %s (a member appears twice, or as both %s and %s.npy)", strconv.Quote(name), name, name)
		}
		seen[name] = true
		if len(ts) >= index.MaxTensors {
			return nil, index.ErrorAt(file, where, "more than %d arrays", index.MaxTensors)
		}
		if zf.Method != zip.Store {
			m, a, err := npzDeflated(f, zf, spans[i].Data, len(idx.Sources))
			if err != nil {
				return nil, err
			}
			if a.notNumeric != nil {
				others = append(others, npzOther{name: name, zf: zf, a: a, off: -1})
				continue
			}
			idx.Sources = append(idx.Sources, "") // SourceName joins file and name
			idx.Members = append(idx.Members, *m)
			t := npyTensor(name, a, 0)
			t.Source = m.Source
			ts = append(ts, t)
			continue
		}
		if zf.CompressedSize64 != zf.UncompressedSize64 || zf.UncompressedSize64 > math.MaxInt64 {
			return nil, index.ErrorAt(file, where, "stored member has inconsistent sizes")
		}
		off := spans[i].Data
		n := int64(zf.UncompressedSize64)
		if off < 0 || off > f.Size() || n > f.Size()-off {
			return nil, index.Errorf(file, off, "member %s runs past the end of the file", zf.Name)
		}
		a, err := npyReadHeader(f, off, n, where)
		if err != nil {
			return nil, err
		}
		if a.notNumeric != nil {
			others = append(others, npzOther{name: name, zf: zf, a: a, off: off})
			continue
		}
		t := npyTensor(name, a, off)
		t.Check = &index.Check{Member: zf.Name, Offset: off, Size: n, CRC32: zf.CRC32}
		ts = append(ts, t)
	}
	if len(ts) == 0 && hasPkl {
		return nil, ErrTorchZip
	}
	if len(ts) == 0 && len(others) > 0 {
		return nil, others[0].a.notNumeric // nothing to serve: one line, naming the first
	}
	if len(others) > 0 {
		npzDescribe(f, idx, others)
	}
	if len(ts) == 0 {
		return nil, index.ErrorAt(file, "", "zip archive has no .npy members: not an .npz file")
	}
	if name, dup := index.SortTensors(ts); dup {
		return nil, index.ErrorAt(file, index.TensorWhere(name), "two members have this name")
	}
	idx.Tensors = ts
	return idx, nil
}

// DeflateMaxRatio bounds what a deflate stream can inflate to: a
// 258-byte match costs at least two bits (a 1-bit length code and a
// 1-bit distance code), so no stream inflates to more than 1032 bytes
// per compressed byte. A member declaring more is a zip bomb or broken.
const DeflateMaxRatio = 1032

// npzDeflated checks deflated member zf of f, which will be source
// number source, and parses its .npy header (inflating only the header).
func npzDeflated(f index.File, zf *zip.File, off int64, source int) (*index.Member, *npyArray, error) {
	file := f.Name()
	where := "member " + zf.Name
	if zf.Method != zip.Deflate {
		return nil, nil, index.ErrorAt(file, where, "compressed with zip method %d; tensorfs inflates deflate (method 8, np.savez_compressed) and reads stored members (np.savez)", zf.Method)
	}
	if zf.Flags&1 != 0 {
		return nil, nil, index.ErrorAt(file, where, "encrypted; tensorfs cannot read it")
	}
	csize, size := zf.CompressedSize64, zf.UncompressedSize64
	if csize > math.MaxInt64/DeflateMaxRatio || size > math.MaxInt64 {
		return nil, nil, index.ErrorAt(file, where, "sizes out of range (%d compressed, %d inflated)", csize, size)
	}
	if size > csize*DeflateMaxRatio+258 {
		return nil, nil, index.ErrorAt(file, where, "declares %d bytes inflated from %d compressed bytes, more than deflate can produce (at most %d to 1): a zip bomb or a broken directory", size, csize, DeflateMaxRatio)
	}
	if off < 0 || off > f.Size() || int64(csize) > f.Size()-off {
		return nil, nil, index.Errorf(file, off, "member %s: its %d compressed bytes run past the end of the file", zf.Name, csize)
	}
	m := &index.Member{Source: source, Name: zf.Name, Size: int64(size), Kind: &index.Deflated{Offset: off, CompressedSize: int64(csize), CRC32: zf.CRC32}}
	head, err := npzInflateHead(zf, m.Size)
	if err != nil {
		return nil, nil, &index.FormatError{File: file, Offset: off, Where: where, Msg: fmt.Sprintf("cannot inflate its .npy header: %v", err)}
	}
	a, err := npyReadHeader(&headFile{name: file, head: head, size: m.Size}, 0, m.Size, "compressed "+where+", inflated")
	if err != nil {
		return nil, nil, err
	}
	return m, a, nil
}

// npzInflateHead inflates the start of a member: its .npy header, as far
// as its length field says (at most npyMaxHeader bytes of header).
func npzInflateHead(zf *zip.File, size int64) ([]byte, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	head := make([]byte, min(size, 12))
	if _, err := io.ReadFull(rc, head); err != nil {
		return nil, err
	}
	if len(head) < 12 || string(head[:6]) != npyMagic {
		return head, nil // npyReadHeader says what is wrong
	}
	var hlen int64
	switch head[6] {
	case 1:
		hlen = 10 + int64(binary.LittleEndian.Uint16(head[8:10]))
	case 2, 3:
		hlen = 12 + int64(binary.LittleEndian.Uint32(head[8:12]))
	default:
		return head, nil
	}
	hlen = min(hlen, size, 12+4*npyMaxHeader)
	if hlen <= 12 {
		return head[:hlen], nil
	}
	rest := make([]byte, hlen-12)
	if _, err := io.ReadFull(rc, rest); err != nil {
		return nil, err
	}
	return append(head, rest...), nil
}

// headFile is a File of size bytes of which only the first bytes, head,
// can be read: an inflated member's .npy header.
type headFile struct {
	name string
	head []byte
	size int64
}

func (h *headFile) Name() string { return h.name }
func (h *headFile) Size() int64  { return h.size }
func (h *headFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(h.head)) {
		return 0, fmt.Errorf("internal error: read [%d, +%d) past the inflated header", off, len(p))
	}
	return copy(p, h.head[off:]), nil
}
