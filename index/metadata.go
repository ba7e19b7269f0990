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

// jsonWriter renders values into buf and gives up once buf is over limit
// bytes, so that a value with shared references (rendered once per
// reference) costs at most the budget.
type jsonWriter struct {
	buf   bytes.Buffer
	limit int // buf may not grow past this length
	spent int // budget used by the values rendered so far
}

func (w *jsonWriter) room() int { return w.limit - w.buf.Len() }

// value renders v; false when it did not fit (buf then holds a part of
// it, for the caller to truncate).
func (w *jsonWriter) value(v any, depth int) (bool, error) {
	if w.room() < 0 {
		return false, nil
	}
	if depth > MaxNesting {
		return false, fmt.Errorf("nested more than %d deep", MaxNesting)
	}
	switch x := v.(type) {
	case nil:
		w.buf.WriteString("null")
	case bool:
		w.buf.WriteString(strconv.FormatBool(x))
	case string:
		if len(x)+2 > w.room() {
			return false, nil
		}
		writeJSONString(&w.buf, x)
	case int64:
		w.buf.WriteString(strconv.FormatInt(x, 10))
	case uint64:
		w.buf.WriteString(strconv.FormatUint(x, 10))
	case []any:
		w.buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			if ok, err := w.value(e, depth+1); !ok || err != nil {
				return false, err
			}
		}
		w.buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			writeJSONString(&w.buf, k)
			w.buf.WriteByte(':')
			if w.room() < 0 {
				return false, nil
			}
			if ok, err := w.value(x[k], depth+1); !ok || err != nil {
				return false, err
			}
		}
		w.buf.WriteByte('}')
	case *FileValue:
		x.elision(&w.buf, "", false)
	default:
		// Numbers, typed slices (at most MaxInlineMetadata file bytes
		// each) and whatever else a parser keeps: encoding/json, after a
		// cheap check that a slice cannot fit (every element takes at
		// least two bytes).
		if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && rv.Len() > w.room()/2+1 {
			return false, nil
		}
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return false, fmt.Errorf("unsupported value: %v", f)
		}
		enc := json.NewEncoder(&w.buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return false, err
		}
		w.buf.Truncate(w.buf.Len() - 1) // Encode's newline
	}
	return w.room() >= 0, nil
}

// writeJSONString writes s as encoding/json does with HTML escaping off.
func writeJSONString(buf *bytes.Buffer, s string) {
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

// withSource returns metadata value v of a part whose source is now
// Sources[base] of a merged index: a *FileValue copied with its Source
// moved, anything else as it is.
func withSource(v any, base int) any {
	if fv, ok := v.(*FileValue); ok && base != 0 {
		c := *fv
		c.Source += base
		return &c
	}
	return v
}
