package fs

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// listFiles returns the tensors place p holds (by index), sorted by
// tensor name, then path: index.json's order.
func (r *Root) listFiles(p place) []uint32 {
	in := r.placeIn(p)
	n := 0
	for _, m := range r.paths.fileIn {
		if m&in != 0 {
			n++
		}
	}
	out := make([]uint32, 0, n)
	for i, m := range r.paths.fileIn {
		if m&in != 0 {
			out = append(out, uint32(i))
		}
	}
	ts := r.idx.Tensors
	less := func(a, b uint32) int {
		if c := strings.Compare(ts[a].Name, ts[b].Name); c != 0 {
			return c
		}
		return strings.Compare(tensorPath(&ts[a]), tensorPath(&ts[b]))
	}
	if !slices.IsSortedFunc(out, less) {
		slices.SortStableFunc(out, less)
	}
	return out
}

// indexDoc is index.json's document without its tensor lists, which
// the mount writes a line at a time (writeDoc): index.Document's Head
// and Tail, written by the code that writes `ls --json`.
func (r *Root) indexDoc() index.Document {
	d := index.Document{
		Format:       r.idx.Format,
		Sources:      r.idx.Files(), // not the compressed members
		Metadata:     r.idx.Metadata,
		Unserved:     r.idx.DocUnserved(),
		Keys:         r.idx.Keys,
		NotRead:      r.idx.NotRead,
		Quantization: r.idx.Quantization,
	}
	if r.opts.View != dtype.Invalid {
		d.View = r.opts.View.String()
	}
	if d.Sources == nil {
		d.Sources = []string{}
	}
	return d
}

// writeDoc writes docOf(l) as encoding/json would (HTML characters not
// escaped), without reflection: a million tensors' lines are rendered at
// mount.
func (r *Root) writeDoc(buf *bytes.Buffer, p place, t uint32) error {
	d := r.docOf(p, t)
	buf.WriteString(`{"name":`)
	if err := writeJSONString(buf, d.Name); err != nil {
		return err
	}
	if d.NameHex != "" {
		buf.WriteString(`,"name_hex":`)
		writeJSONString(buf, d.NameHex)
	}
	buf.WriteString(`,"path":`)
	if err := writeJSONString(buf, d.Path); err != nil {
		return err
	}
	buf.WriteString(`,"dtype":`)
	writeJSONString(buf, d.DType)
	buf.WriteString(`,"shape":[`)
	var num [20]byte
	for i, n := range d.Shape {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(strconv.AppendInt(num[:0], n, 10))
	}
	buf.WriteString(`],"size":`)
	buf.Write(strconv.AppendInt(num[:0], d.Size, 10))
	if d.Source != "" {
		buf.WriteString(`,"source":`)
		if err := writeJSONString(buf, d.Source); err != nil {
			return err
		}
	}
	if d.Offset != nil {
		buf.WriteString(`,"offset":`)
		buf.Write(strconv.AppendInt(num[:0], *d.Offset, 10))
	}
	if len(d.Chunks) > 0 {
		buf.WriteString(`,"chunks":`)
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(d.Chunks); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
	}
	buf.WriteByte('}')
	return nil
}

// writeJSONString writes s as a JSON string, exactly as an
// encoding/json Encoder with SetEscapeHTML(false) does: printable ASCII
// without '"' or '\\' as it is, anything else through the Encoder.
func writeJSONString(buf *bytes.Buffer, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			enc := json.NewEncoder(buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(s); err != nil {
				return err
			}
			buf.Truncate(buf.Len() - 1) // Encode's newline
			return nil
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
	return nil
}

// docOf describes tensor ti's file in place p (placeTop, or placeNative
// under .native/).
func (r *Root) docOf(p place, ti uint32) index.DocTensor {
	f := r.fileIn(ti, p)
	f.size = r.fileSize(0, &f)
	t, path := f.t, tensorPath(f.t)
	if p == placeNative {
		path = nativeDir + "/" + path
	}
	d := index.DocTensor{Name: t.Name, NameHex: index.NameHex(t.Name), Path: path, DType: f.dtype.Name(), Shape: t.Shape, Size: f.size}
	if d.Shape == nil {
		d.Shape = []int64{}
	}
	if f.form == formDirect && r.idx.Member(t.Source) == nil { // not a compressed member
		off := t.Offset
		d.Source, d.Offset = r.idx.SourceName(t.Source), &off
	}
	if f.form == formDirect {
		d.Chunks = r.idx.DocChunks(t) // the stored bytes: a tiled tensor's chunks
	}
	return d
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
