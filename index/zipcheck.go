package index

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"reflect"
	"sort"
	"strconv"
)

// ZipSpan is where one member of a zip archive lies in the file: its
// local header at Header, its data at [Data, End).
type ZipSpan struct {
	Header, Data, End int64
}

// zipHeaderOffset is the offset of zf's local header in its archive
// (archive/zip keeps it unexported: it includes the archive's base
// offset, which only the reader knows).
func zipHeaderOffset(zf *zip.File) (int64, bool) {
	v := reflect.ValueOf(zf).Elem().FieldByName("headerOffset")
	if !v.IsValid() || v.Kind() != reflect.Int64 {
		return 0, false
	}
	return v.Int(), true
}

// ZipSpans reads the local header of every member of zr (an archive of
// f) and checks what Python's zipfile checks before it reads a member:
// the local header is one, it names the member as the central directory
// does, and no member's header or data overlaps another's (the central
// directory can point many entries at one stream: a zip bomb that no
// per-member ratio bounds). It returns the members' spans, in zr.File
// order.
func ZipSpans(f File, zr *zip.Reader) ([]ZipSpan, error) {
	file := f.Name()
	spans := make([]ZipSpan, len(zr.File))
	var buf []byte
	for i, zf := range zr.File {
		where := "member " + zf.Name
		h, ok := zipHeaderOffset(zf)
		if !ok {
			return nil, ErrorAt(file, where, "internal error: archive/zip no longer says where a local header is")
		}
		var pre [30]byte
		if h < 0 || h > f.Size()-30 {
			return nil, ErrorAt(file, where, "its local header at byte %d lies outside the file", h)
		}
		if _, err := f.ReadAt(pre[:], h); err != nil {
			return nil, Errorf(file, h, "cannot read the local header of member %s: %v", zf.Name, err)
		}
		if binary.LittleEndian.Uint32(pre[:4]) != 0x04034b50 {
			return nil, Errorf(file, h, "member %s: no local header where the central directory says", zf.Name)
		}
		n, e := int64(binary.LittleEndian.Uint16(pre[26:])), int64(binary.LittleEndian.Uint16(pre[28:]))
		if h+30+n+e > f.Size() {
			return nil, Errorf(file, h, "member %s: its local header runs past the end of the file", zf.Name)
		}
		buf = append(buf[:0], make([]byte, n)...)
		if _, err := f.ReadAt(buf, h+30); err != nil {
			return nil, Errorf(file, h, "cannot read the local header of member %s: %v", zf.Name, err)
		}
		if string(buf) != zf.Name {
			return nil, &FormatError{File: file, Offset: h, Where: where, Msg: fmt.Sprintf("its local header names it %s, the central directory %s (zipfile refuses such a file)", strconv.Quote(string(buf)), strconv.Quote(zf.Name))}
		}
		d := h + 30 + n + e
		if zf.CompressedSize64 > uint64(f.Size()-d) {
			return nil, Errorf(file, d, "member %s (%d bytes in the file) runs past the end of the file", zf.Name, zf.CompressedSize64)
		}
		end := d + int64(zf.CompressedSize64)
		if zf.Flags&8 != 0 { // a data descriptor follows the data
			end = min(end+12, f.Size())
		}
		spans[i] = ZipSpan{Header: h, Data: d, End: end}
	}
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return spans[order[a]].Header < spans[order[b]].Header })
	for k := 1; k < len(order); k++ {
		prev, cur := order[k-1], order[k]
		if spans[cur].Header < spans[prev].End {
			return nil, &FormatError{File: file, Offset: spans[cur].Header, Where: "member " + zr.File[cur].Name,
				Msg: fmt.Sprintf("overlaps member %s (bytes %d to %d): two members share bytes, as in a zip bomb (zipfile refuses such a file)", zr.File[prev].Name, spans[prev].Header, spans[prev].End)}
		}
	}
	return spans, nil
}
