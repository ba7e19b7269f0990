package testenv

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"
)

// STTensor is one tensor of a safetensors file checked by CheckSafetensors.
type STTensor struct {
	DType string
	Shape []int64
	Begin int64 // data_offsets, relative to the data section
	End   int64
	Data  []byte
}

// STFile is a safetensors file checked by CheckSafetensors.
type STFile struct {
	HeaderLen int64 // N, the header's length after the 8-byte prefix
	Metadata  map[string]string
	Tensors   map[string]STTensor
	Order     []string // tensor names in data order
}

// stElemBits are the safetensors dtypes and their bits per element.
var stElemBits = map[string]int64{
	"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
	"I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
	"F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64, "F4": 4,
}

// CheckSafetensors holds data to the safetensors rules, written here
// independently of the index package's parser: an 8-byte little-endian
// header length N with 8+N <= len(data) and N <= 100 MB; a header that is
// one JSON object of valid UTF-8, starting with '{', followed only by
// spaces, with no duplicate keys; an optional __metadata__ object of
// strings; each tensor an object of exactly dtype (a known one), shape
// (non-negative integers) and data_offsets [begin, end] with end-begin the
// tensor's bytes; sorted by offset, the tensors cover the data section
// exactly (no holes, no overlaps). Stricter than the format, as tensorfs
// writes it: 8+N is a multiple of 8 and every tensor's data starts at a
// multiple of its element size.
func CheckSafetensors(data []byte) (*STFile, error) {
	n, top, err := stHeader(data)
	if err != nil {
		return nil, err
	}
	f := &STFile{HeaderLen: n, Metadata: map[string]string{}, Tensors: map[string]STTensor{}}
	if m, ok := top["__metadata__"]; ok {
		if err := json.Unmarshal(m, &f.Metadata); err != nil {
			return nil, fmt.Errorf("__metadata__: not an object of strings: %v", err)
		}
		delete(top, "__metadata__")
	}
	body := data[8+n:]
	for name, v := range top {
		t, err := stTensor(name, v, body)
		if err != nil {
			return nil, err
		}
		f.Tensors[name] = t
		f.Order = append(f.Order, name)
	}
	if err := f.tile(int64(len(body))); err != nil {
		return nil, err
	}
	return f, nil
}

// stHeader checks data's header length and its header, one JSON object
// with no duplicate keys, and returns them: the length, and the
// header's entries by key.
func stHeader(data []byte) (int64, map[string]json.RawMessage, error) {
	if len(data) < 8 {
		return 0, nil, fmt.Errorf("%d bytes: no header length", len(data))
	}
	n64 := binary.LittleEndian.Uint64(data)
	if n64 > 100_000_000 || n64 > uint64(len(data)-8) {
		return 0, nil, fmt.Errorf("header length %d: over the limit or past the end (%d bytes)", n64, len(data))
	}
	n := int64(n64)
	if (8+n)%8 != 0 {
		return 0, nil, fmt.Errorf("header length %d: data does not start at a multiple of 8", n)
	}
	h := data[8 : 8+n]
	if !utf8.Valid(h) {
		return 0, nil, fmt.Errorf("header is not valid UTF-8")
	}
	if len(h) == 0 || h[0] != '{' {
		return 0, nil, fmt.Errorf("header does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(h))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return 0, nil, fmt.Errorf("header: %v", err)
	}
	if rest := h[dec.InputOffset():]; len(bytes.Trim(rest, " ")) != 0 {
		return 0, nil, fmt.Errorf("header: %q after the JSON object (only spaces may pad it)", rest)
	}
	if err := noDuplicateKeys(raw); err != nil {
		return 0, nil, fmt.Errorf("header: %v", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return 0, nil, fmt.Errorf("header: %v", err)
	}
	return n, top, nil
}

// stTensor checks the header entry v of tensor name against the data
// section body and returns the tensor.
func stTensor(name string, v json.RawMessage, body []byte) (STTensor, error) {
	var t struct {
		DType       string  `json:"dtype"`
		Shape       []int64 `json:"shape"`
		DataOffsets []int64 `json:"data_offsets"`
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.DisallowUnknownFields()
	if err := d.Decode(&t); err != nil {
		return STTensor{}, fmt.Errorf("tensor %q: %v", name, err)
	}
	bits, ok := stElemBits[t.DType]
	if !ok {
		return STTensor{}, fmt.Errorf("tensor %q: unknown dtype %q", name, t.DType)
	}
	if t.Shape == nil || len(t.DataOffsets) != 2 {
		return STTensor{}, fmt.Errorf("tensor %q: missing shape or data_offsets", name)
	}
	elems := int64(1)
	for _, s := range t.Shape {
		if s < 0 || (s > 0 && elems > (1<<62)/s) {
			return STTensor{}, fmt.Errorf("tensor %q: bad shape %v", name, t.Shape)
		}
		elems *= s
	}
	if elems*bits%8 != 0 {
		return STTensor{}, fmt.Errorf("tensor %q: %d elements of %d bits are not whole bytes", name, elems, bits)
	}
	b, e := t.DataOffsets[0], t.DataOffsets[1]
	if b < 0 || e < b || e > int64(len(body)) {
		return STTensor{}, fmt.Errorf("tensor %q: data_offsets %v outside the %d-byte data section", name, t.DataOffsets, len(body))
	}
	if e-b != elems*bits/8 {
		return STTensor{}, fmt.Errorf("tensor %q: %d bytes for %s %v (want %d)", name, e-b, t.DType, t.Shape, elems*bits/8)
	}
	if es := max(1, bits/8); b%es != 0 {
		return STTensor{}, fmt.Errorf("tensor %q: data at %d is not aligned to its %d-byte elements", name, b, es)
	}
	return STTensor{DType: t.DType, Shape: t.Shape, Begin: b, End: e, Data: body[b:e]}, nil
}

// tile sorts f.Order by offset and checks that the tensors cover the
// data section of size bytes exactly.
func (f *STFile) tile(size int64) error {
	sort.Slice(f.Order, func(i, j int) bool {
		a, b := f.Tensors[f.Order[i]], f.Tensors[f.Order[j]]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	var pos int64
	for _, name := range f.Order {
		t := f.Tensors[name]
		if t.Begin != pos {
			return fmt.Errorf("tensor %q: data at %d, but the previous tensor ends at %d (hole or overlap)", name, t.Begin, pos)
		}
		pos = t.End
	}
	if pos != size {
		return fmt.Errorf("tensors end at %d of a %d-byte data section", pos, size)
	}
	return nil
}

// noDuplicateKeys fails on an object (at any depth) with a key twice.
func noDuplicateKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				ks := k.(string)
				if seen[ks] {
					return fmt.Errorf("duplicate key %q", ks)
				}
				seen[ks] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(); err != nil && err != io.EOF {
		return err
	}
	return nil
}
