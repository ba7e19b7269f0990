package index

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONReader reads one JSON document from a byte slice, value by value, so
// that the parsers can refuse duplicate object keys (encoding/json keeps
// the last one silently), refuse numbers that are not plain non-negative
// integers where sizes are expected, say at which byte of the file a
// problem is, and read a large header without an allocation per token.
//
// It accepts exactly RFC 8259 JSON, except that it refuses \u escapes of
// unpaired UTF-16 surrogates (as serde_json, the safetensors reference's
// parser, does) and nesting deeper than MaxNesting. The caller checks that
// the input is valid UTF-8. Errors are *FormatError with byte offsets in
// the file (base + offset in data).
type JSONReader struct {
	data []byte
	pos  int
	base int64  // offset of data[0] in the file
	file string // for errors
	what string // message prefix, e.g. "safetensors"
	// The entry being read, named in errors as KIND "NAME": set by the
	// caller around an entry (kept raw so that no message is built until
	// one is needed).
	entryKind, entry string
	// stack of open containers: '{' or '['; first is set until the first
	// element of the innermost one is read.
	stack []byte
	first bool
	err   error // a syntax error found by more, returned by close
}

func NewJSONReader(file, what string, data []byte, base int64) *JSONReader {
	return &JSONReader{data: data, base: base, file: file, what: what}
}

// setEntry names the entry being read in errors; kind "" clears it.
func (r *JSONReader) SetEntry(kind, name string) { r.entryKind, r.entry = kind, name }

// fail returns a *FormatError at file offset at: "WHAT: [KIND "ENTRY": ]
// [what: ]message".
func (r *JSONReader) Fail(at int64, what, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if what != "" {
		msg = what + ": " + msg
	}
	if r.entryKind != "" {
		msg = r.entryKind + " " + strconv.Quote(r.entry) + ": " + msg
	}
	return Errorf(r.file, at, "%s: %s", r.what, msg)
}

func (r *JSONReader) Errorf(at int64, format string, args ...any) error {
	return r.Fail(at, "", format, args...)
}

func (r *JSONReader) ws() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\r', '\n':
			r.pos++
			continue
		}
		return
	}
}

// next skips whitespace and returns the file offset of the next token.
func (r *JSONReader) next() int64 {
	r.ws()
	return r.base + int64(r.pos)
}

// syntax returns the error for an unexpected byte (or the end) at pos.
func (r *JSONReader) syntax(want string) error {
	at := r.base + int64(r.pos)
	if r.pos >= len(r.data) {
		return r.Errorf(at, "JSON ends early (want %s)", want)
	}
	c, _ := utf8.DecodeRune(r.data[r.pos:])
	return r.Errorf(at, "invalid JSON: want %s, found %q", want, c)
}

// kind describes the value starting at pos, for messages.
func (r *JSONReader) Kind() string {
	if r.pos >= len(r.data) {
		return "the end of the JSON"
	}
	switch c := r.data[r.pos]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || '0' <= c && c <= '9':
		return "a number"
	}
	return "data"
}

// open reads the delimiter want ('{' or '[') that starts a container.
func (r *JSONReader) Open(want byte, what string) error {
	at := r.next()
	if r.pos >= len(r.data) || r.data[r.pos] != want {
		kind := "an object"
		if want == '[' {
			kind = "an array"
		}
		return r.Fail(at, what, "want %s, found %s", kind, r.Kind())
	}
	if len(r.stack) >= MaxNesting {
		return r.Fail(at, what, "nested deeper than %d", MaxNesting)
	}
	r.pos++
	r.stack = append(r.stack, want)
	r.first = true
	return nil
}

// more reports whether the innermost container has another element, and
// reads the comma before it. A syntax error makes it return false and is
// returned by close.
func (r *JSONReader) More() bool {
	if r.err != nil || len(r.stack) == 0 {
		return false
	}
	r.ws()
	end := byte('}')
	if r.stack[len(r.stack)-1] == '[' {
		end = ']'
	}
	if r.pos < len(r.data) && r.data[r.pos] == end {
		return false
	}
	if r.first {
		r.first = false
		return true
	}
	if r.pos >= len(r.data) || r.data[r.pos] != ',' {
		r.err = r.syntax("',' or '" + string(end) + "'")
		return false
	}
	r.pos++
	return true
}

// close reads the end of the innermost container, after more returned
// false.
func (r *JSONReader) Close() error {
	if r.err != nil {
		return r.err
	}
	end := byte('}')
	if r.stack[len(r.stack)-1] == '[' {
		end = ']'
	}
	r.ws()
	if r.pos >= len(r.data) || r.data[r.pos] != end {
		return r.syntax("'" + string(end) + "'")
	}
	r.pos++
	r.stack = r.stack[:len(r.stack)-1]
	r.first = false
	return nil
}

// key reads an object key and its colon, and refuses a duplicate of one in
// seen (nil: no check). It returns the file offset of the key.
func (r *JSONReader) Key(seen map[string]struct{}, what string) (string, int64, error) {
	kb, at, err := r.KeyRaw()
	if err != nil {
		return "", at, err
	}
	k := string(kb)
	if seen != nil {
		if _, dup := seen[k]; dup {
			return "", at, r.Fail(at, what, "duplicate key %s", strconv.Quote(k))
		}
		seen[k] = struct{}{}
	}
	return k, at, nil
}

// keyRaw reads an object key and its colon, as readRaw does.
func (r *JSONReader) KeyRaw() ([]byte, int64, error) {
	at := r.next()
	if r.pos >= len(r.data) || r.data[r.pos] != '"' {
		return nil, at, r.syntax("a string key")
	}
	k, err := r.readRaw()
	if err != nil {
		return nil, at, err
	}
	r.ws()
	if r.pos >= len(r.data) || r.data[r.pos] != ':' {
		return nil, at, r.syntax("':' after an object key")
	}
	r.pos++
	return k, at, nil
}

// strRaw reads a string value, as readRaw does.
func (r *JSONReader) StrRaw(what string) ([]byte, error) {
	at := r.next()
	if r.pos >= len(r.data) || r.data[r.pos] != '"' {
		if r.Kind() == "data" {
			return nil, r.syntax("a value")
		}
		return nil, r.Fail(at, what, "want a string, found %s", r.Kind())
	}
	return r.readRaw()
}

// str reads a string value.
func (r *JSONReader) Str(what string) (string, error) {
	at := r.next()
	if r.pos >= len(r.data) || r.data[r.pos] != '"' {
		if r.Kind() == "data" {
			return "", r.syntax("a value")
		}
		return "", r.Fail(at, what, "want a string, found %s", r.Kind())
	}
	return r.readString()
}

// null reads a null if one is next.
func (r *JSONReader) Null() (bool, error) {
	r.ws()
	if r.pos >= len(r.data) || r.data[r.pos] != 'n' {
		return false, nil
	}
	return true, r.Literal("null")
}

// uint reads a non-negative integer written as plain digits (what a Rust
// usize accepts from serde_json: no sign, fraction or exponent).
func (r *JSONReader) Uint(what string) (uint64, error) {
	at := r.next()
	if r.Kind() != "a number" {
		if r.Kind() == "data" {
			return 0, r.syntax("a value")
		}
		return 0, r.Fail(at, what, "want a non-negative integer, found %s", r.Kind())
	}
	lit, err := r.readNumber()
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseUint(lit, 10, 64)
	if perr != nil {
		return 0, r.Fail(at, what, "want a non-negative integer below 2^64, found %s", lit)
	}
	return v, nil
}

// readNumber reads a JSON number and returns its text.
func (r *JSONReader) readNumber() (string, error) {
	start := r.pos
	d := r.data
	digits := func() bool {
		n := r.pos
		for r.pos < len(d) && '0' <= d[r.pos] && d[r.pos] <= '9' {
			r.pos++
		}
		return r.pos > n
	}
	if d[r.pos] == '-' {
		r.pos++
	}
	switch {
	case r.pos < len(d) && d[r.pos] == '0':
		r.pos++
	case !digits():
		return "", r.syntax("a digit")
	}
	if r.pos < len(d) && d[r.pos] == '.' {
		r.pos++
		if !digits() {
			return "", r.syntax("a digit after '.'")
		}
	}
	if r.pos < len(d) && (d[r.pos] == 'e' || d[r.pos] == 'E') {
		r.pos++
		if r.pos < len(d) && (d[r.pos] == '+' || d[r.pos] == '-') {
			r.pos++
		}
		if !digits() {
			return "", r.syntax("a digit in the exponent")
		}
	}
	if err := r.delimited(); err != nil {
		return "", err
	}
	return string(d[start:r.pos]), nil
}

// delimited checks that a number or literal is not run together with what
// follows it ("01", "nullx").
func (r *JSONReader) delimited() error {
	if r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\r', '\n', ',', ']', '}':
		default:
			return r.syntax("',', ']', '}' or whitespace")
		}
	}
	return nil
}

// literal reads the literal word (true, false, null).
func (r *JSONReader) Literal(word string) error {
	if len(r.data)-r.pos < len(word) || string(r.data[r.pos:r.pos+len(word)]) != word {
		return r.syntax(strconv.Quote(word))
	}
	r.pos += len(word)
	return r.delimited()
}

// readString reads a string starting at the opening quote at pos.
func (r *JSONReader) readString() (string, error) {
	b, err := r.readRaw()
	return string(b), err
}

// readRaw reads a string starting at the opening quote at pos, and returns
// its bytes: a slice of the input when it has no escapes (so the caller
// must not keep or change it), a new slice otherwise.
func (r *JSONReader) readRaw() ([]byte, error) {
	d := r.data
	r.pos++ // opening quote
	start := r.pos
	for r.pos < len(d) {
		c := d[r.pos]
		if c == '"' {
			s := d[start:r.pos]
			r.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		r.pos++
	}
	// Slow path: escapes.
	b := append([]byte(nil), d[start:r.pos]...)
	for r.pos < len(d) {
		c := d[r.pos]
		switch {
		case c == '"':
			r.pos++
			return b, nil
		case c < 0x20:
			return nil, r.Errorf(r.base+int64(r.pos), "invalid JSON: control byte 0x%02x in a string", c)
		case c != '\\':
			b = append(b, c)
			r.pos++
			continue
		}
		escAt := r.pos
		r.pos++
		if r.pos >= len(d) {
			break
		}
		e := d[r.pos]
		r.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			u, ok := r.hex4()
			if !ok {
				return nil, r.Errorf(r.base+int64(escAt), "invalid JSON: bad \\u escape")
			}
			ru := rune(u)
			if utf16.IsSurrogate(ru) {
				var lo uint16
				ok := u < 0xDC00 && r.pos+1 < len(d) && d[r.pos] == '\\' && d[r.pos+1] == 'u'
				if ok {
					r.pos += 2
					lo, ok = r.hex4()
				}
				if ru = utf16.DecodeRune(ru, rune(lo)); !ok || ru == utf8.RuneError {
					return nil, r.Errorf(r.base+int64(escAt), "invalid JSON: \\u escape of an unpaired UTF-16 surrogate")
				}
			}
			b = utf8.AppendRune(b, ru)
		default:
			return nil, r.Errorf(r.base+int64(escAt), "invalid JSON: bad escape %q", []byte{'\\', e})
		}
	}
	r.pos = len(d)
	return nil, r.syntax("'\"' to end the string")
}

// hex4 reads four hex digits.
func (r *JSONReader) hex4() (uint16, bool) {
	if len(r.data)-r.pos < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(r.data[r.pos:r.pos+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	r.pos += 4
	return uint16(v), true
}

// value reads any JSON value: objects as map[string]any (duplicate keys
// refused), arrays as []any, numbers as json.Number, and strings, booleans
// and null as string, bool and nil.
func (r *JSONReader) Value(what string) (any, error) {
	at := r.next()
	switch r.Kind() {
	case "an object":
		if err := r.Open('{', what); err != nil {
			return nil, err
		}
		m := map[string]any{}
		seen := map[string]struct{}{}
		for r.More() {
			k, _, err := r.Key(seen, what)
			if err != nil {
				return nil, err
			}
			v, err := r.Value(what)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, r.Close()
	case "an array":
		if err := r.Open('[', what); err != nil {
			return nil, err
		}
		a := []any{}
		for r.More() {
			v, err := r.Value(what)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, r.Close()
	case "a string":
		return r.readString()
	case "a number":
		n, err := r.readNumber()
		return json.Number(n), err
	case "a boolean":
		if r.data[r.pos] == 't' {
			return true, r.Literal("true")
		}
		return false, r.Literal("false")
	case "null":
		return nil, r.Literal("null")
	}
	_ = at
	return nil, r.syntax("a value")
}

// skip reads and drops one value of any kind (duplicate keys inside are
// not checked).
func (r *JSONReader) Skip(what string) error {
	switch r.next(); r.Kind() {
	case "an object":
		if err := r.Open('{', what); err != nil {
			return err
		}
		for r.More() {
			if _, _, err := r.Key(nil, what); err != nil {
				return err
			}
			if err := r.Skip(what); err != nil {
				return err
			}
		}
		return r.Close()
	case "an array":
		if err := r.Open('[', what); err != nil {
			return err
		}
		for r.More() {
			if err := r.Skip(what); err != nil {
				return err
			}
		}
		return r.Close()
	case "a string":
		// Validate escapes without keeping the text.
		_, err := r.readString()
		return err
	}
	_, err := r.Value(what)
	return err
}

// end checks that only JSON whitespace follows the document.
func (r *JSONReader) End(what string) error {
	at := r.next()
	if r.pos < len(r.data) {
		return r.Fail(at, what, "%s after the end of the JSON object", r.Kind())
	}
	return nil
}

// DescribeValue names a decoded value's JSON type for messages.
func DescribeValue(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// InvalidUTF8At returns the index of the first byte of b that is not part
// of valid UTF-8.
func InvalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}
