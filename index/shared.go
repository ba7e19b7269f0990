package index

// Helpers the format packages share: zip archives (npz and torch.save
// tell theirs apart by member names), tensor names in messages, strides,
// sorting, and the check every parsed tensor must pass (CheckTensor).

import (
	"archive/zip"
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// ZipMagic begins a zip archive (its first local file header).
const ZipMagic = "PK\x03\x04"

// ZipFirstName returns the name in the first local file header of head,
// and whether all of it is in head.
func ZipFirstName(head []byte) (name string, complete, ok bool) {
	if len(head) < 30 || !bytes.HasPrefix(head, []byte(ZipMagic)) {
		return "", false, false
	}
	n := int(head[26]) | int(head[27])<<8
	end := 30 + n
	if end > len(head) {
		return string(head[30:]), false, true
	}
	return string(head[30:end]), true, true
}

// TorchMember reports whether a zip member name belongs to a torch.save
// or torch.jit.save archive.
func TorchMember(name string) bool {
	if name == "data.pkl" || strings.HasSuffix(name, ".pkl") {
		return true
	}
	for _, s := range []string{"/data.pkl", "/data/", "/.data/", "/code/", "/constants/"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	for _, s := range []string{"/version", "/byteorder", "/.format_version", "/.storage_alignment", "/constants.pkl"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// OpenZip opens f as a zip archive and checks every member's local
// header as Python's zipfile does before it reads one (ZipSpans): every
// zip tensorfs reads (.npz, torch.save, .keras) goes through it, and
// one zipfile refuses is refused in one line. It returns the members'
// spans in zr.File order. Non-local member names are fine: no member is
// ever extracted.
func OpenZip(f File) (*zip.Reader, []ZipSpan, error) {
	zr, err := zip.NewReader(f, f.Size())
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, nil, ErrorAt(f.Name(), "", "not a readable zip archive: %v", err)
	}
	spans, err := ZipSpans(ReadAhead(f), zr) // local headers in file order: a block read serves many
	if err != nil {
		return nil, nil, err
	}
	return zr, spans, nil
}

// BaseName is a file's base name without its extension.
func BaseName(file string) string {
	b := filepath.Base(file)
	if e := filepath.Ext(b); e != "" && e != b {
		b = strings.TrimSuffix(b, e)
	}
	if b == "" || b == "." || b == "/" {
		return "tensor"
	}
	return b
}

func TensorWhere(name string) string { return "tensor " + strconv.Quote(name) }

// RowMajor reports whether strides are the row-major contiguous strides
// of shape (dimensions of size 1 may have any stride; an empty tensor is
// contiguous).
func RowMajor(shape, strides []int64) bool {
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] == 0 {
			return true
		}
		if shape[i] != 1 && strides[i] != want {
			return false
		}
		want *= shape[i]
	}
	return true
}

// SortTensors sorts ts by name and reports a name that appears twice.
func SortTensors(ts []Tensor) (string, bool) {
	slices.SortStableFunc(ts, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(ts); i++ {
		if ts[i].Name == ts[i-1].Name {
			return ts[i].Name, true
		}
	}
	return "", false
}

// CheckTensor checks a parsed tensor's invariants (see Tensor).
func CheckTensor(t *Tensor, src string, fileSize int64) error {
	bad := func(format string, args ...any) error {
		return ErrorAt(src, "tensor "+strconv.Quote(t.Name), "internal error: "+format, args...)
	}
	if !t.DType.Valid() {
		return bad("invalid dtype")
	}
	if len(t.Shape) > MaxDims {
		return bad("%d dimensions", len(t.Shape))
	}
	n, ok := Elements(t.Shape)
	if !ok {
		return bad("shape %s overflows", ShapeString(t.Shape))
	}
	size, ok := t.DType.TensorSize(n, dtype.RowLen(t.Shape))
	if !ok || size != t.Size {
		return bad("size %d for %s %s", t.Size, t.DType, ShapeString(t.Shape))
	}
	if t.Strides != nil && len(t.Strides) != len(t.Shape) {
		return bad("%d strides for %d dimensions", len(t.Strides), len(t.Shape))
	}
	if t.Offset < 0 || (t.Strides == nil && t.Size > fileSize-t.Offset) {
		return bad("bytes [%d, +%d) outside the file (%d bytes)", t.Offset, t.Size, fileSize)
	}
	return nil
}
