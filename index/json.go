package index

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/dtype"
)

// Document is the JSON object served as .tensorfs/index.json in a mount and
// printed by `tensorfs ls --json`. It is the contract between a mount and
// the Go client, which reads a mount through ParseDocument.
//
// Metadata is never null ({} when the checkpoint has none) and Tensors is
// never null. A program that serves more (the fs layer's list of views)
// embeds Document in its own struct; ParseDocument ignores unknown fields.
type Document struct {
	Format string `json:"format"`
	// View is set by a mount whose top level is a converted view
	// (tensorfs mount --dtype): the dtype of its files, e.g. "F32".
	View     string         `json:"view,omitempty"`
	Sources  []string       `json:"sources"`
	Metadata map[string]any `json:"metadata"`
	// Tensors describes the files of the top level.
	Tensors []DocTensor `json:"tensors"`
	// Native, only with View, describes the stored tree under .native/:
	// every tensor as stored, at paths that start ".native/".
	Native []DocTensor `json:"native,omitempty"`
	// Unserved lists what the checkpoint holds that is not served
	// (Index.Unserved), in name order; absent when there is nothing.
	Unserved []DocUnserved `json:"unserved,omitempty"`
	// Keys are the format's own keys of the names (Index.Keys): a
	// distributed checkpoint's dotted keys; absent for most formats.
	Keys map[string]string `json:"keys,omitempty"`
	// NotRead is Index.NotRead: tensors listed, not served, by name.
	NotRead map[string]string `json:"not_read,omitempty"`
	// Quantization is Index.Quantization: the scheme, each logical
	// weight (the converted views' files at its path) and its parts;
	// absent when nothing is quantized.
	Quantization *Quantization `json:"quantization,omitempty"`
}

// DocUnserved is one Index.Unserved entry in a Document. Shape is absent
// where it is not known, Source and Offset where the data's place is not.
type DocUnserved struct {
	Name    string  `json:"name"`
	NameHex string  `json:"name_hex,omitempty"` // as DocTensor's
	Type    string  `json:"type"`
	Shape   []int64 `json:"shape,omitempty"`
	Source  string  `json:"source,omitempty"`
	Offset  *int64  `json:"offset,omitempty"`
	Why     string  `json:"why"`
	// More is Unserved.More: how many entries of its kind the list left
	// out; absent when none.
	More int64 `json:"more,omitempty"`
}

// DocTensor is one tensor in a Document.
//
// Source and Offset are present only when the tensor is served as one
// contiguous, little-endian byte range of its source file (Tensor.Contiguous),
// so that reading Size bytes at Offset of Source gives the tensor file's
// bytes. Offset is a pointer so that a contiguous tensor at offset 0 still
// shows "offset": 0.
type DocTensor struct {
	Name string `json:"name"`
	// NameHex is the name's bytes in hex, present only when the name is
	// not valid UTF-8: JSON cannot carry such a name, and Name has
	// U+FFFD in place of the invalid bytes. ParseDocument restores Name
	// from it.
	NameHex string  `json:"name_hex,omitempty"`
	Path    string  `json:"path"`
	DType   string  `json:"dtype"` // canonical spelling (dtype.DType.Name)
	Shape   []int64 `json:"shape"` // [] for a scalar, never null
	Size    int64   `json:"size"`  // bytes of the native view
	Source  string  `json:"source,omitempty"`
	Offset  *int64  `json:"offset,omitempty"`
	// Chunks are the pieces a tiled tensor (a distributed checkpoint's
	// chunks, the Hugging Face storage writer's pieces) is assembled
	// from, in the order stored; nil for any other tensor.
	Chunks []DocChunk `json:"chunks,omitempty"`
	// Role is the tensor's Role when it is not RoleStored: "part" (one
	// part of a quantized weight: listed in the stored tree only) or
	// "logical" (a weight read as its values: in the converted views
	// only); absent for a stored tensor.
	Role string `json:"role,omitempty"`
}

// DocChunk is one chunk of a tiled tensor: the box [Offsets[k],
// Offsets[k]+Shape[k]) of the whole along each dim k, its elements
// row-major from byte Offset of Source (a file, or a member named
// HOLDER:NAME: a zstd item's storage).
type DocChunk struct {
	Offsets []int64 `json:"offsets"`
	Shape   []int64 `json:"shape"`
	Source  string  `json:"source"`
	Offset  int64   `json:"offset"`
}

// docChunks returns the chunks of t when it is a tiled tensor (its
// source a Tiles member, read from its start), else nil.
func (idx *Index) docChunks(t *Tensor) []DocChunk {
	m := idx.Member(t.Source)
	if m == nil || t.Offset != 0 {
		return nil
	}
	k, ok := m.Kind.(*Tiles)
	if !ok || !slices.Equal(k.Shape, t.Shape) {
		return nil // not tiles of the tensor's shape: a concatenation of byte ranges
	}
	out := make([]DocChunk, len(k.Chunks))
	for i, c := range k.Chunks {
		out[i] = DocChunk{Offsets: c.Start, Shape: c.Shape, Source: idx.SourceName(c.Source), Offset: c.Offset}
		if out[i].Offsets == nil {
			out[i].Offsets = []int64{}
		}
		if out[i].Shape == nil {
			out[i].Shape = []int64{}
		}
	}
	return out
}

// Document returns idx as an index.json document: tensors in name order,
// shapes never null, metadata never null.
func (idx *Index) Document() Document {
	d := idx.DocFields()
	d.Tensors = make([]DocTensor, 0, len(idx.Tensors))
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if !t.Listed(false) {
			continue // a logical tensor: not a file of the stored tree
		}
		d.Tensors = append(d.Tensors, idx.DocTensorOf(t))
	}
	if !slices.IsSortedFunc(d.Tensors, func(a, b DocTensor) int { return cmpString(a.Name, b.Name) }) {
		slices.SortStableFunc(d.Tensors, func(a, b DocTensor) int { return cmpString(a.Name, b.Name) })
	}
	return d
}

// DocFields returns idx's document but its tensor lists (Tensors nil):
// what a writer that renders the tensors a line at a time (the mount's
// index.json) puts around them.
func (idx *Index) DocFields() Document {
	d := Document{
		Format:       idx.Format,
		Sources:      idx.Files(), // not the compressed members
		Metadata:     idx.Metadata,
		Keys:         idx.Keys,
		NotRead:      idx.NotRead,
		Unserved:     idx.DocUnserved(),
		Quantization: idx.Quantization,
	}
	if d.Sources == nil {
		d.Sources = []string{}
	}
	if d.Metadata == nil {
		d.Metadata = map[string]any{}
	}
	return d
}

// DocTensorOf describes t as stored, as Document lists it: its stored
// dtype and size, its shape ([] for a scalar), Source and Offset when it
// is one contiguous range of a source file (not a member), its chunks
// when it is tiled, and its role. A listing that serves t otherwise (a
// converted view) changes what differs.
func (idx *Index) DocTensorOf(t *Tensor) DocTensor {
	dt := DocTensor{
		Name:    t.Name,
		NameHex: NameHex(t.Name),
		Path:    t.Path,
		DType:   t.DType.Name(),
		Shape:   t.Shape,
		Size:    t.Size,
		Role:    t.Role.docName(),
	}
	if dt.Shape == nil {
		dt.Shape = []int64{}
	}
	if t.Contiguous() && t.Source >= 0 && t.Source < len(idx.Sources) && idx.Member(t.Source) == nil {
		dt.Source = idx.Sources[t.Source]
		off := t.Offset
		dt.Offset = &off
	}
	dt.Chunks = idx.docChunks(t)
	return dt
}

// DocUnserved returns idx.Unserved as a Document lists it, in name order;
// nil when there is nothing.
func (idx *Index) DocUnserved() []DocUnserved {
	var out []DocUnserved
	for _, u := range idx.Unserved {
		du := DocUnserved{Name: u.Name, NameHex: NameHex(u.Name), Type: u.Type, Shape: u.Shape, Why: u.Why, More: u.More}
		if u.Offset >= 0 && u.Source >= 0 && u.Source < len(idx.Sources) && idx.Member(u.Source) == nil {
			du.Source = idx.Sources[u.Source]
			off := u.Offset
			du.Offset = &off
		}
		out = append(out, du)
	}
	slices.SortStableFunc(out, func(a, b DocUnserved) int { return cmpString(a.Name, b.Name) })
	return out
}

// JSON returns the document as compact JSON followed by a newline. Names
// that are not valid UTF-8 are written with U+FFFD in place of the invalid
// bytes (JSON cannot carry them), and exactly in name_hex; their paths are
// exact (see AssignPaths).
//
// Metadata is rendered by RenderMetadata within MetadataJSONBudget: a
// value left in its file (*FileValue) or past the budget is an elision
// object.
func (d Document) JSON() ([]byte, error) {
	var b bytes.Buffer
	if err := d.WriteJSON(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteJSON writes what JSON returns to w, a tensor at a time: it holds
// one tensor's JSON, not the document's (names megabytes long). It is
// the Go value's encoding (json.Marshal's); index.json's text, which
// `tensorfs ls --json` prints, is WriteIndexJSON's.
func (d Document) WriteJSON(w io.Writer) error {
	dw := newDocWriter(w, false)
	d.head(dw)
	dw.tensors("tensors", d.Tensors)
	if len(d.Native) > 0 {
		dw.tensors("native", d.Native)
	}
	d.tail(dw)
	return dw.err
}

// WriteIndexJSON writes d as index.json's text: what a mount serves as
// .tensorfs/index.json and `tensorfs ls --json` prints, byte for byte. It
// is indented with one tensor a line, so that `head` shows the top, and
// HTML characters are written as they are:
//
//	{
//	  "format": "safetensors",
//	  "sources": ["/m/model.safetensors"],
//	  "metadata": {"format":"pt"},
//	  "tensors": [
//	    {"name":"a","path":"a","dtype":"F32","shape":[2],"size":8,"source":"/m/model.safetensors","offset":0},
//	    {"name":"b",...}
//	  ],
//	  "native": [...],        (with View: the stored tree, even empty)
//	  "unserved": [...], "keys": {...}, "not_read": {...}, "quantization": {...}
//	}
//
// (the fields after the lists only where Document has them). It holds
// one tensor's text at a time. The mount writes the same pieces (Frame,
// WriteDocLine) a unit at a time, on demand.
func (d Document) WriteIndexJSON(w io.Writer) error {
	head, mid, tail, err := d.Frame(len(d.Tensors), len(d.Native))
	if err != nil {
		return err
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	var buf bytes.Buffer
	lines := func(ts []DocTensor) error {
		for i := range ts {
			buf.Reset()
			if err := WriteDocLine(&buf, i, &ts[i]); err != nil {
				return err
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return err
			}
		}
		return nil
	}
	if err := lines(d.Tensors); err != nil {
		return err
	}
	if _, err := w.Write(mid); err != nil {
		return err
	}
	if d.View != "" {
		if err := lines(d.Native); err != nil {
			return err
		}
	}
	_, err = w.Write(tail)
	return err
}

// Frame returns index.json's text around its tensor lines (see
// WriteIndexJSON) for a document of n tensors and, with a View, m
// native ones: head is everything up to the first tensor line
// (`"tensors": [`), mid what closes "tensors" (and, with a View, opens
// "native"), tail what closes the last list, the fields after the
// lists and the closing brace. The document's own lists are not read.
func (d Document) Frame(n, m int) (head, mid, tail []byte, err error) {
	var b bytes.Buffer
	dw := newDocWriter(&b, true)
	d.head(dw)
	dw.put(",\n  \"tensors\": [")
	if dw.err != nil {
		return nil, nil, nil, dw.err
	}
	head = bytes.Clone(b.Bytes())
	mid = []byte(listEnd(n))
	b.Reset()
	dw = newDocWriter(&b, true)
	dw.first = false
	if d.View != "" {
		mid = append(mid, ",\n  \"native\": ["...)
		dw.put(listEnd(m))
	}
	d.tail(dw)
	return head, mid, b.Bytes(), dw.err
}

// listEnd closes a list of n tensor lines.
func listEnd(n int) string {
	if n > 0 {
		return "\n  ]"
	}
	return "]"
}

// WriteDocLine writes line i of a tensor list of index.json to buf: the
// comma after the line before, the indent, and WriteDocTensor's object.
func WriteDocLine(buf *bytes.Buffer, i int, t *DocTensor) error {
	if i > 0 {
		buf.WriteByte(',')
	}
	buf.WriteString("\n    ")
	return WriteDocTensor(buf, t)
}

// WriteDocTensor writes t as an encoding/json Encoder with HTML escaping
// off would, without reflection (but for chunks): a mount renders a
// million tensors' lines at mount.
func WriteDocTensor(buf *bytes.Buffer, d *DocTensor) error {
	buf.WriteString(`{"name":`)
	writeJSONString(buf, d.Name)
	if d.NameHex != "" {
		buf.WriteString(`,"name_hex":`)
		writeJSONString(buf, d.NameHex)
	}
	buf.WriteString(`,"path":`)
	writeJSONString(buf, d.Path)
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
		writeJSONString(buf, d.Source)
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
			return fmt.Errorf("index: encoding index.json: %w", err)
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
	}
	if d.Role != "" {
		buf.WriteString(`,"role":`)
		writeJSONString(buf, d.Role)
	}
	buf.WriteByte('}')
	return nil
}

// head writes the opening brace and the fields before the tensor lists.
func (d Document) head(dw *docWriter) {
	md, err := RenderMetadata(d.Metadata, MetadataJSONBudget)
	if err != nil {
		dw.err = fmt.Errorf("index: encoding index.json: %w", err)
		return
	}
	dw.put("{")
	dw.field("format", d.Format)
	if d.View != "" {
		dw.field("view", d.View)
	}
	dw.field("sources", d.Sources)
	dw.field("metadata", json.RawMessage(md))
}

// tail writes the fields after the tensor lists, in Document's order
// (omitempty as it has them), and the closing brace.
func (d Document) tail(dw *docWriter) {
	if len(d.Unserved) > 0 {
		dw.field("unserved", d.Unserved)
	}
	if len(d.Keys) > 0 {
		dw.field("keys", d.Keys)
	}
	if len(d.NotRead) > 0 {
		dw.field("not_read", d.NotRead)
	}
	if d.Quantization != nil {
		dw.field("quantization", d.Quantization)
	}
	if dw.pretty {
		dw.put("\n")
	}
	dw.put("}\n")
}

// docWriter writes a Document's fields: compact and HTML-escaped as
// json.Marshal of the whole document would (WriteJSON), or indented by
// field with HTML characters as they are (pretty: the mount's). Each
// value goes through one Encoder into one scratch buffer; the first
// error stays in err and ends the writing.
type docWriter struct {
	w       io.Writer
	pretty  bool
	first   bool // no field written yet
	scratch bytes.Buffer
	enc     *json.Encoder
	err     error
}

func newDocWriter(w io.Writer, pretty bool) *docWriter {
	dw := &docWriter{w: w, pretty: pretty, first: true}
	dw.enc = json.NewEncoder(&dw.scratch)
	dw.enc.SetEscapeHTML(!pretty)
	return dw
}

func (dw *docWriter) put(s string) {
	if dw.err == nil {
		_, dw.err = io.WriteString(dw.w, s)
	}
}

func (dw *docWriter) value(v any) {
	if dw.err != nil {
		return
	}
	dw.scratch.Reset()
	if err := dw.enc.Encode(v); err != nil {
		dw.err = fmt.Errorf("index: encoding index.json: %w", err)
		return
	}
	_, dw.err = dw.w.Write(bytes.TrimSuffix(dw.scratch.Bytes(), []byte("\n")))
}

// field writes `"name":value`, after a comma unless it is the first.
func (dw *docWriter) field(name string, v any) {
	if !dw.first {
		dw.put(",")
	}
	dw.first = false
	if dw.pretty {
		dw.put("\n  \"" + name + "\": ")
	} else {
		dw.put(`"` + name + `":`)
	}
	dw.value(v)
}

// tensors writes a list of tensors (compact: WriteJSON's).
func (dw *docWriter) tensors(name string, ts []DocTensor) {
	dw.put(`,"` + name + `":`)
	if ts == nil {
		dw.put("null")
		return
	}
	dw.put("[")
	for i := range ts {
		if i > 0 {
			dw.put(",")
		}
		dw.value(&ts[i])
	}
	dw.put("]")
}

// ParseDocument parses and checks an index.json document: every dtype and
// role is known, shapes are non-negative and Size matches dtype and shape, a tensor
// has both source and offset or neither, sources are listed in Sources,
// tensors are in strict name order, and View, when present, is a view
// dtype. Numbers in Metadata are json.Number, so that no integer loses
// precision.
func ParseDocument(data []byte) (*Document, error) {
	const file = "index.json"
	var d Document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return nil, &FormatError{File: file, Offset: -1, Msg: "not a tensorfs index document: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FormatError{File: file, Offset: dec.InputOffset(), Msg: "not a tensorfs index document: data after the object"}
	}
	if d.Format == "" {
		return nil, ErrorAt(file, "format", "missing format")
	}
	if d.View != "" {
		if v, ok := dtype.ByName(d.View); !ok || !v.IsFloatView() {
			return nil, ErrorAt(file, "view", "%q is not a view dtype", d.View)
		}
	} else if d.Native != nil {
		return nil, ErrorAt(file, "native", "native tensors without a view")
	}
	if d.Metadata == nil {
		d.Metadata = map[string]any{}
	}
	if d.Sources == nil {
		d.Sources = []string{}
	}
	if d.Tensors == nil {
		d.Tensors = []DocTensor{}
	}
	if err := d.checkTensors(file, "tensor ", d.Tensors); err != nil {
		return nil, err
	}
	if err := d.checkTensors(file, "native tensor ", d.Native); err != nil {
		return nil, err
	}
	for i := range d.Unserved {
		u := &d.Unserved[i]
		if u.NameHex != "" {
			b, err := hex.DecodeString(u.NameHex)
			if err != nil {
				return nil, ErrorAt(file, "unserved "+strconv.Quote(u.Name), "bad name_hex")
			}
			u.Name = string(b)
		}
		if u.Type == "" || u.Why == "" {
			return nil, ErrorAt(file, "unserved "+strconv.Quote(u.Name), "missing type or why")
		}
	}
	return &d, nil
}

// NameHex returns what DocTensor.NameHex holds for a tensor called name:
// its bytes in hex when it is not valid UTF-8, "" otherwise.
func NameHex(name string) string {
	if utf8.ValidString(name) {
		return ""
	}
	return hex.EncodeToString([]byte(name))
}

func (d *Document) checkTensors(file, what string, tensors []DocTensor) error {
	for i := range tensors {
		t := &tensors[i]
		if t.NameHex != "" {
			b, err := hex.DecodeString(t.NameHex)
			if err != nil || utf8.Valid(b) {
				return ErrorAt(file, what+strconv.Quote(t.Name), "name_hex %q is not the hex of a name that is not UTF-8", t.NameHex)
			}
			t.Name = string(b)
		}
		where := what + strconv.Quote(t.Name)
		if i > 0 && tensors[i-1].Name >= t.Name {
			return ErrorAt(file, where, "tensors are not in strict name order")
		}
		if t.Path == "" {
			return ErrorAt(file, where, "missing path")
		}
		dt, ok := dtype.ByName(t.DType)
		if !ok {
			return ErrorAt(file, where, "unknown dtype %q", t.DType)
		}
		if t.Shape == nil {
			t.Shape = []int64{}
		}
		n, ok := Elements(t.Shape)
		if !ok {
			return ErrorAt(file, where, "shape %s has a negative dimension or overflows", ShapeString(t.Shape))
		}
		size, ok := dt.TensorSize(n, dtype.RowLen(t.Shape))
		if !ok || size != t.Size {
			return ErrorAt(file, where, "size %d does not match %s %s", t.Size, t.DType, ShapeString(t.Shape))
		}
		if _, ok := ParseRole(t.Role); !ok {
			return ErrorAt(file, where, "unknown role %q", t.Role)
		}
		if (t.Source == "") != (t.Offset == nil) {
			return ErrorAt(file, where, "source and offset must come together")
		}
		if t.Offset != nil {
			if *t.Offset < 0 {
				return ErrorAt(file, where, "negative offset %d", *t.Offset)
			}
			if !slices.Contains(d.Sources, t.Source) {
				return ErrorAt(file, where, "source %q is not in sources", t.Source)
			}
		}
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ShapeString formats a shape as JSON, e.g. [4096,11008].
func ShapeString(shape []int64) string {
	b := make([]byte, 0, 2+len(shape)*6)
	b = append(b, '[')
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}
