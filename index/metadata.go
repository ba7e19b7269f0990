package index

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Metadata values: what a parser keeps in memory, what it leaves in the
// file, and how index.json shows them.
//
// A checkpoint's metadata can be as large as the checkpoint (a GGUF key
// holding a 16 GB array), so no value is held or rendered in full without
// a bound:
//
//   - A GGUF string or array whose encoding in the file is over
//     MaxInlineMetadata bytes is not read at all: the parser records where
//     it lies as a *FileValue, and the mount serves its bytes on demand
//     under .tensorfs/metadata/KEY.
//
//   - RenderMetadata renders the metadata object of index.json (and of
//     `tensorfs ls --json`, and the client's Metadata) within
//     MetadataJSONBudget bytes. A *FileValue, and any value that would take
//     index.json past the budget, appears as an elision object instead:
//
//     {"tensorfs.elided": true, "type": "array", "element_type": "uint8",
//     "count": 67108864, "bytes": 67108864, "encoding": "gguf",
//     "path": ".tensorfs/metadata/big.key"}
//
//     "type" is the value's type (GGUF: "string" or "array"; in memory: the
//     JSON kind, "string", "array", "object", "number", "bool"),
//     "element_type" and "count" describe an array, "bytes" is the size of
//     the file at "path" when known, and "encoding" says what that file
//     holds: "gguf" (the value's bytes exactly as the GGUF file stores them:
//     a string's bytes; an array's elements after its count, fixed-size
//     elements little-endian, strings as a u64 length and the bytes),
//     "text" (a string's bytes) or "json" (the value as JSON). "path" is
//     absent when the key has no file (its file name would be over 255
//     bytes).
const (
	// MaxInlineMetadata is the largest GGUF string or array value, in
	// bytes of the file, read into memory; larger ones are *FileValue.
	// Real tokenizer arrays (up to about 5 MB for 280,000 merges) stay
	// below it.
	MaxInlineMetadata = 16 << 20
	// MetadataJSONBudget bounds the rendered values of RenderMetadata:
	// values past it are elided (each elision object is a few dozen bytes
	// plus its key).
	MetadataJSONBudget = 64 << 20
	// ElidedKey marks an elision object in rendered metadata.
	ElidedKey = "tensorfs.elided"
	// MetadataPathPrefix is where a mount serves each metadata value.
	MetadataPathPrefix = ".tensorfs/metadata/"
	// MaxMetadataFileName is the longest file name a key may have
	// (NAME_MAX); a longer key has no file.
	MaxMetadataFileName = 255
)

// FileValue is a metadata value left in its file (see MaxInlineMetadata):
// bytes [Offset, Offset+Size) of Sources[Source].
type FileValue struct {
	Source   int    // index into Index.Sources
	Offset   int64  // first byte: a string's bytes, an array's first element
	Size     int64  // bytes
	Type     string // "string" or "array"
	ElemType string // an array's element type ("uint8", "string", "array", ...)
	Count    int64  // an array's elements
}

// MarshalJSON renders the elision object (without "path", which needs the
// key: RenderMetadata adds it).
func (v *FileValue) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	v.elision(&buf, "", false)
	return buf.Bytes(), nil
}

// elision writes v's elision object, with "path" for key when withPath.
func (v *FileValue) elision(buf *bytes.Buffer, key string, withPath bool) {
	fmt.Fprintf(buf, `{%q:true,"type":%q`, ElidedKey, v.Type)
	if v.Type == "array" {
		fmt.Fprintf(buf, `,"element_type":%q,"count":%d`, v.ElemType, v.Count)
	}
	fmt.Fprintf(buf, `,"bytes":%d,"encoding":"gguf"`, v.Size)
	if withPath {
		elisionPath(buf, key)
	}
	buf.WriteByte('}')
}

// elisionPath writes the "path" member for key, if the key has a file.
func elisionPath(buf *bytes.Buffer, key string) {
	if name := MetadataFileName(key); len(name) <= MaxMetadataFileName {
		buf.WriteString(`,"path":`)
		writeJSONString(buf, MetadataPathPrefix+name)
	}
}

// MetadataFileName maps a metadata key to its file name under
// .tensorfs/metadata/ by percent-escaping: '%', '/', NUL, bytes that are
// not valid UTF-8 and a leading '.' become %XX (upper-case hex); the empty
// key is "%". The mapping is reversible and distinct keys get distinct
// names. A key whose name is over 255 bytes has no file (it is still in
// index.json).
func MetadataFileName(key string) string {
	if key == "" {
		return "%"
	}
	var sb strings.Builder
	for i := 0; i < len(key); {
		c := key[i]
		if c == '%' || c == '/' || c == 0 || (i == 0 && c == '.') {
			fmt.Fprintf(&sb, "%%%02X", c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(key[i:])
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&sb, "%%%02X", c)
			i++
			continue
		}
		sb.WriteString(key[i : i+n])
		i += n
	}
	return sb.String()
}

// RenderMetadata renders md as one compact JSON object, keys in byte
// order, as encoding/json would (HTML characters not escaped), except that
// a *FileValue, and every value that would take the rendered values past
// budget bytes, is an elision object (see MetadataJSONBudget). A nil md
// is {}. It fails only for a value that JSON cannot hold.
func RenderMetadata(md map[string]any, budget int) ([]byte, error) {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := &jsonWriter{limit: budget}
	w.buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		writeJSONString(&w.buf, k)
		w.buf.WriteByte(':')
		v := md[k]
		if fv, ok := v.(*FileValue); ok {
			fv.elision(&w.buf, k, true)
			continue
		}
		mark := w.buf.Len()
		w.limit = budget + mark - w.spent // what is left of the budget, from here
		fits, err := w.value(v, 0)
		if err != nil {
			return nil, fmt.Errorf("metadata key %s: %w", strconv.Quote(k), err)
		}
		if fits {
			w.spent += w.buf.Len() - mark
			continue
		}
		w.buf.Truncate(mark)
		elideInMemory(&w.buf, k, v)
	}
	w.buf.WriteByte('}')
	return w.buf.Bytes(), nil
}

// elideInMemory writes the elision object of a value held in memory.
func elideInMemory(buf *bytes.Buffer, key string, v any) {
	kind, enc, count := "string", "text", -1
	switch x := v.(type) {
	case string:
	case map[string]any:
		kind, enc, count = "object", "json", len(x)
	case bool:
		kind, enc = "bool", "json"
	case nil:
		kind, enc = "null", "json"
	default:
		enc = "json"
		kind = "number"
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			kind, count = "array", rv.Len()
		} else if rv.Kind() == reflect.Map || rv.Kind() == reflect.Struct {
			kind = "object"
		}
	}
	fmt.Fprintf(buf, `{%q:true,"type":%q`, ElidedKey, kind)
	if count >= 0 {
		fmt.Fprintf(buf, `,"count":%d`, count)
	}
	if s, ok := v.(string); ok {
		fmt.Fprintf(buf, `,"bytes":%d`, len(s))
	}
	fmt.Fprintf(buf, `,"encoding":%q`, enc)
	elisionPath(buf, key)
	buf.WriteByte('}')
}

// jsonWriter renders values into buf and gives up once the rendering is
// over limit bytes, so that a value with shared references (rendered once
// per reference) costs at most the limit. In counting mode (drop) what is
// written is dropped as it is counted: memory stays small whatever the
// size.
type jsonWriter struct {
	buf     bytes.Buffer
	limit   int   // the rendering may not grow past this many bytes
	spent   int   // RenderMetadata: budget used by the values so far
	flushed int64 // bytes counted and dropped (drop)
	drop    bool
}

// room is how many more bytes fit under the limit (< 0: over).
func (w *jsonWriter) room() int64 { return int64(w.limit) - w.flushed - int64(w.buf.Len()) }

// step drops what has been counted (drop mode) and reports whether the
// rendering is still within the limit.
func (w *jsonWriter) step() bool {
	if w.drop && w.buf.Len() >= 64<<10 {
		w.flushed += int64(w.buf.Len())
		w.buf.Reset()
	}
	return w.room() >= 0
}

// value renders v; false when it did not fit (buf then holds a part of
// it, for the caller to truncate).
func (w *jsonWriter) value(v any, depth int) (bool, error) {
	if !w.step() {
		return false, nil
	}
	if depth > MaxNesting {
		return false, fmt.Errorf("nested more than %d deep", MaxNesting)
	}
	b := &w.buf
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		if int64(len(x))+2 > w.room() {
			return false, nil
		}
		writeJSONString(b, x)
	case json.Number:
		if int64(len(x)) > w.room() {
			return false, nil
		}
		if x == "" {
			x = "0"
		}
		if !json.Valid([]byte(x)) {
			return false, fmt.Errorf("invalid number literal %q", string(x))
		}
		b.WriteString(string(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case float64:
		return w.floats64([]float64{x}, false)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if ok, err := w.value(e, depth+1); !ok || err != nil {
				return false, err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		if ok, err := w.object(x, depth); !ok || err != nil {
			return false, err
		}
	case *FileValue:
		x.elision(b, "", false)
	case Uint8s:
		return jsonInts(w, x, func(d []byte, v uint8) []byte { return strconv.AppendUint(d, uint64(v), 10) })
	case []uint16:
		return jsonInts(w, x, func(d []byte, v uint16) []byte { return strconv.AppendUint(d, uint64(v), 10) })
	case []uint32:
		return jsonInts(w, x, func(d []byte, v uint32) []byte { return strconv.AppendUint(d, uint64(v), 10) })
	case []uint64:
		return jsonInts(w, x, func(d []byte, v uint64) []byte { return strconv.AppendUint(d, v, 10) })
	case []int8:
		return jsonInts(w, x, func(d []byte, v int8) []byte { return strconv.AppendInt(d, int64(v), 10) })
	case []int16:
		return jsonInts(w, x, func(d []byte, v int16) []byte { return strconv.AppendInt(d, int64(v), 10) })
	case []int32:
		return jsonInts(w, x, func(d []byte, v int32) []byte { return strconv.AppendInt(d, int64(v), 10) })
	case []int64:
		return jsonInts(w, x, func(d []byte, v int64) []byte { return strconv.AppendInt(d, v, 10) })
	case []bool:
		return jsonInts(w, x, strconv.AppendBool)
	case []float64:
		return w.floats64(x, true)
	case []float32:
		for _, f := range x {
			if f != f || f > math.MaxFloat32 || f < -math.MaxFloat32 {
				return false, fmt.Errorf("unsupported value: %v", f)
			}
		}
		return jsonInts(w, x, func(d []byte, v float32) []byte { return appendJSONFloat(d, float64(v), 32) })
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if ok, err := w.value(e, depth+1); !ok || err != nil {
				return false, err
			}
		}
		b.WriteByte(']')
	default:
		if ok, err := w.other(v); !ok || err != nil {
			return false, err
		}
	}
	return w.step(), nil
}

// object renders a map as a JSON object, its keys sorted; false when it
// did not fit.
func (w *jsonWriter) object(x map[string]any, depth int) (bool, error) {
	b := &w.buf
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(b, k)
		b.WriteByte(':')
		if ok, err := w.value(x[k], depth+1); !ok || err != nil {
			return false, err
		}
	}
	b.WriteByte('}')
	return true, nil
}

// other renders whatever else a parser keeps: encoding/json, after a
// cheap check that a slice cannot fit (every element takes at least two
// bytes); false when it did not fit.
func (w *jsonWriter) other(v any) (bool, error) {
	b := &w.buf
	if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && int64(rv.Len()) > w.room()/2+1 {
		return false, nil
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return false, err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return true, nil
}

// floats64 renders x, as a JSON array when array.
func (w *jsonWriter) floats64(x []float64, array bool) (bool, error) {
	for _, f := range x {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false, fmt.Errorf("unsupported value: %v", f)
		}
	}
	if !array {
		w.buf.Write(appendJSONFloat(nil, x[0], 64))
		return w.step(), nil
	}
	return jsonInts(w, x, func(d []byte, v float64) []byte { return appendJSONFloat(d, v, 64) })
}

// jsonInts renders a slice of scalars as a JSON array, each element by
// app, checking the limit as it goes (every element takes at least two
// bytes, so a slice that cannot fit is refused at once).
func jsonInts[T any](w *jsonWriter, x []T, app func([]byte, T) []byte) (bool, error) {
	if int64(len(x)) > w.room()/2+1 {
		return false, nil
	}
	var tmp [32]byte
	w.buf.WriteByte('[')
	for i, v := range x {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		w.buf.Write(app(tmp[:0], v))
		if i%4096 == 4095 && !w.step() {
			return false, nil
		}
	}
	w.buf.WriteByte(']')
	return w.step(), nil
}

// appendJSONFloat formats f as encoding/json does for a float of bits
// bits.
func appendJSONFloat(b []byte, f float64, bits int) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// MetadataValueJSON returns the file a mount serves for an in-memory
// metadata value that is not a string: v as JSON (as RenderMetadata
// writes it) and a newline. It fails when v is over limit bytes so.
func MetadataValueJSON(v any, limit int) ([]byte, error) {
	w := &jsonWriter{limit: limit - 1}
	ok, err := w.value(v, 0)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("more than %d bytes as JSON", limit)
	}
	w.buf.WriteByte('\n')
	return w.buf.Bytes(), nil
}

// MetadataValueSize returns len(MetadataValueJSON(v, limit)) without
// keeping what it renders: memory stays small whatever v's size.
func MetadataValueSize(v any, limit int) (int64, error) {
	w := &jsonWriter{limit: limit - 1, drop: true}
	ok, err := w.value(v, 0)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("more than %d bytes as JSON", limit)
	}
	return w.flushed + int64(w.buf.Len()) + 1, nil
}

// writeJSONString writes s as encoding/json does with HTML escaping off.
func writeJSONString(buf *bytes.Buffer, s string) {
	if plainJSON(s) { // most names and keys: as they are, in one copy
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return
	}
	start := 0
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				buf.WriteByte('\\')
				buf.WriteByte(c)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			case '\b':
				buf.WriteString(`\b`)
			case '\f':
				buf.WriteString(`\f`)
			default:
				const hex = "0123456789abcdef"
				buf.WriteString(`\u00`)
				buf.WriteByte(hex[c>>4])
				buf.WriteByte(hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString(s[start:i])
			buf.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf.WriteString(s[start:i])
			buf.WriteString(`\u202`)
			buf.WriteByte("0123456789abcdef"[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// Uint8s is a GGUF array of uint8, one byte per element. It renders as a
// JSON array of numbers (a []byte would be base64).
type Uint8s []uint8

// MarshalJSON renders the bytes as a JSON array of numbers.
func (u Uint8s) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+4*len(u))
	b = append(b, '[')
	for i, v := range u {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return append(b, ']'), nil
}

// WithSource returns metadata value v of a part whose source is now
// Sources[base] of a merged index: a *FileValue copied with its Source
// moved, anything else as it is.
func WithSource(v any, base int) any {
	if fv, ok := v.(*FileValue); ok && base != 0 {
		c := *fv
		c.Source += base
		return &c
	}
	return v
}

// plainJSON reports whether s is printable ASCII without '"' or '\\':
// a JSON string of the same bytes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
