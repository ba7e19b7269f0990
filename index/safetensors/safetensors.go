package safetensors

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// safetensors layout (https://github.com/huggingface/safetensors):
//
//	8 bytes   N, little-endian uint64
//	N bytes   JSON header: {"__metadata__": {str: str}?, NAME: {"dtype": DT,
//	          "shape": [uint...], "data_offsets": [BEGIN, END]}, ...}
//	          followed by optional JSON whitespace (writers pad to 8 bytes)
//	rest      the data section; offsets are relative to its start, 8+N
//
// The checks follow the reference implementation (safetensors/src/tensor.rs,
// SafeTensors::read_metadata and Metadata::validate): N at most
// MaxSafetensorsHeader and 8+N within the file; the header valid UTF-8 and
// JSON; tensors sorted by (BEGIN, END) tile the data section exactly, the
// first at 0, each starting where the previous ended, the last ending at the
// end of the file (trailing bytes are refused, like the reference's
// MetadataIncompleteBuffer); END-BEGIN equals the bytes that dtype and shape
// need, where a sub-byte dtype must fill whole bytes (the reference's
// MisalignedSlice). Unknown fields inside a tensor entry are ignored, as
// serde does. Stricter than the reference: the header must start with '{'
// (the reference has the check written but disabled), duplicate keys
// anywhere are refused (serde keeps the last tensor of a duplicated name),
// and a tensor entry written as a JSON array instead of an object (which
// serde's derive would accept) is refused.

// safetensorsDTypes maps the safetensors dtype spellings to dtypes. F4 is
// the OCP MX E2M1 4-bit float, two per byte, low nibble first.
var safetensorsDTypes = map[string]dtype.DType{
	"BOOL":    dtype.Bool,
	"U8":      dtype.U8,
	"I8":      dtype.I8,
	"F8_E5M2": dtype.F8E5M2,
	"F8_E4M3": dtype.F8E4M3,
	"F8_E8M0": dtype.F8E8M0,
	"I16":     dtype.I16,
	"U16":     dtype.U16,
	"F16":     dtype.F16,
	"BF16":    dtype.BF16,
	"I32":     dtype.I32,
	"U32":     dtype.U32,
	"F32":     dtype.F32,
	"C64":     dtype.C64,
	"F64":     dtype.F64,
	"I64":     dtype.I64,
	"U64":     dtype.U64,
	"F4":      dtype.F4,
}

// safetensorsUnsupported are dtypes the reference knows but tensorfs cannot
// serve: the format defines their bit width (6) but not how the 6-bit
// elements are packed into bytes. A tensor of one is checked like any
// other (its bytes: elements·6 bits, whole bytes) and listed in
// Index.Unserved with f6Why; the file's other tensors are served.
var safetensorsUnsupported = map[string]bool{"F6_E2M3": true, "F6_E3M2": true}

// f6Why is why an F6 tensor is not served: what was looked for, and where.
const f6Why = "6-bit floats: safetensors defines their width but not the order of their bits in the bytes, and no writer stores them " +
	"(safetensors 24b0b285 tensor.rs and its bindings, torch 2.14, torchao 36027d82 keeps MX fp6 one a byte as U8): not guessed"

func Sniff(head []byte) bool {
	if len(head) < 9 {
		return false
	}
	n := binary.LittleEndian.Uint64(head)
	return n >= 2 && n <= index.MaxSafetensorsHeader && head[8] == '{'
}

// stEntry is one tensor entry of a safetensors header.
type stEntry struct {
	name       string
	at         int64 // file offset of the entry's key, for errors
	dt         dtype.DType
	dtName     string
	unserved   bool // a dtype of safetensorsUnsupported: dtName names it
	shape      []int64
	begin, end uint64
}

func Parse(f index.File) (*index.Index, error) {
	name := f.Name()
	size := f.Size()
	if size < 8 {
		return nil, index.Errorf(name, 0, "safetensors: file is %d bytes, too short for the 8-byte header length", size)
	}
	var nb [8]byte
	if k, err := f.ReadAt(nb[:], 0); k < len(nb) {
		return nil, index.Errorf(name, 0, "safetensors: cannot read the header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n > index.MaxSafetensorsHeader {
		return nil, index.Errorf(name, 0, "safetensors: header length %d is over the limit of %d bytes", n, index.MaxSafetensorsHeader)
	}
	if int64(n) > size-8 {
		return nil, index.Errorf(name, 0, "safetensors: header length %d runs past the end of the file (%d bytes)", n, size)
	}
	if n < 2 {
		return nil, index.Errorf(name, 8, "safetensors: header length %d is too short for a JSON object", n)
	}
	hdr := make([]byte, n)
	if k, err := f.ReadAt(hdr, 8); k < len(hdr) {
		return nil, index.Errorf(name, 8, "safetensors: cannot read the header: %v", err)
	}
	if !utf8.Valid(hdr) {
		return nil, index.Errorf(name, 8+int64(index.InvalidUTF8At(hdr)), "safetensors: header is not valid UTF-8")
	}
	if hdr[0] != '{' {
		return nil, index.Errorf(name, 8, "safetensors: header does not start with '{'")
	}
	dataStart := 8 + int64(n)
	entries, meta, err := parseSafetensorsHeader(name, hdr)
	if err != nil {
		return nil, err
	}
	if err := checkSafetensorsLayout(name, entries, dataStart, size-dataStart); err != nil {
		return nil, err
	}
	idx := &index.Index{
		Format:  "safetensors",
		Sources: []string{name},
		Tensors: make([]index.Tensor, 0, len(entries)),
	}
	if meta != nil {
		idx.Metadata = meta
	}
	var unserved index.UnservedList
	var first *stEntry
	for i, e := range entries {
		if e.unserved {
			unserved.Add(index.Unserved{Name: e.name, Type: e.dtName, Shape: e.shape, Offset: dataStart + int64(e.begin), Why: f6Why})
			if first == nil || e.at < first.at {
				first = &entries[i]
			}
			continue
		}
		idx.Tensors = append(idx.Tensors, index.Tensor{
			Name:   e.name,
			DType:  e.dt,
			Shape:  e.shape,
			Offset: dataStart + int64(e.begin),
			Size:   int64(e.end - e.begin),
		})
	}
	if first != nil && len(idx.Tensors) == 0 {
		return nil, &index.FormatError{File: name, Offset: first.at, Where: "tensor " + strconv.Quote(first.name),
			Msg: fmt.Sprintf("safetensors: nothing to serve: every tensor is F6_E2M3 or F6_E3M2 (this one %s): %s", first.dtName, f6Why)}
	}
	slices.SortFunc(idx.Tensors, func(a, b index.Tensor) int { return cmp.Compare(a.Name, b.Name) })
	if unserved.Len() > 0 {
		idx.Unserved = unserved.List()
		slices.SortStableFunc(idx.Unserved, func(a, b index.Unserved) int { return cmp.Compare(a.Name, b.Name) })
	}
	return idx, nil
}

// parseSafetensorsHeader reads the JSON header: tensor entries in file
// order, and __metadata__ (nil when absent or null).
func parseSafetensorsHeader(file string, hdr []byte) ([]stEntry, map[string]any, error) {
	r := index.NewJSONReader(file, "safetensors", hdr, 8)
	if err := r.Open('{', "header"); err != nil {
		return nil, nil, err
	}
	var (
		entries []stEntry
		meta    map[string]any
		seen    = map[string]struct{}{}
	)
	for r.More() {
		key, at, err := r.Key(seen, "header")
		if err != nil {
			return nil, nil, err
		}
		if key == "__metadata__" {
			if meta, err = parseSafetensorsMetadata(r); err != nil {
				return nil, nil, err
			}
			continue
		}
		if len(entries) >= index.MaxTensors {
			return nil, nil, r.Errorf(at, "more than %d tensors", index.MaxTensors)
		}
		if len(key) > index.MaxNameLength {
			return nil, nil, r.Errorf(at, "tensor name of %d bytes is over the limit of %d", len(key), index.MaxNameLength)
		}
		e, err := parseSafetensorsEntry(r, key, at)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if err := r.Close(); err != nil {
		return nil, nil, err
	}
	if err := r.End("header"); err != nil {
		return nil, nil, err
	}
	return entries, meta, nil
}

// parseSafetensorsMetadata reads the value of __metadata__: null, or an
// object whose values are all strings.
func parseSafetensorsMetadata(r *index.JSONReader) (map[string]any, error) {
	if isNull, err := r.Null(); isNull || err != nil {
		return nil, err
	}
	if err := r.Open('{', "__metadata__"); err != nil {
		return nil, err
	}
	meta := map[string]any{}
	seen := map[string]struct{}{}
	for r.More() {
		k, _, err := r.Key(seen, "__metadata__")
		if err != nil {
			return nil, err
		}
		r.SetEntry("__metadata__", k)
		v, err := r.Str("")
		r.SetEntry("", "")
		if err != nil {
			return nil, err
		}
		meta[k] = v
	}
	return meta, r.Close()
}

// parseSafetensorsEntry reads one tensor entry (an object with dtype,
// shape and data_offsets; other fields ignored).
func parseSafetensorsEntry(r *index.JSONReader, name string, at int64) (stEntry, error) {
	e := stEntry{name: name, at: at}
	r.SetEntry("tensor", name)
	defer r.SetEntry("", "")
	if err := r.Open('{', ""); err != nil {
		return e, err
	}
	var hasDType, hasShape, hasOffsets bool
	var others map[string]struct{} // fields other than the three, for duplicates
	for r.More() {
		fieldRaw, fat, err := r.KeyRaw() // no allocation for the usual names
		if err != nil {
			return e, err
		}
		var field string
		switch string(fieldRaw) {
		case "dtype":
			field = "dtype"
		case "shape":
			field = "shape"
		case "data_offsets":
			field = "data_offsets"
		default:
			field = string(fieldRaw)
		}
		if dup := (field == "dtype" && hasDType) || (field == "shape" && hasShape) || (field == "data_offsets" && hasOffsets); dup {
			return e, r.Errorf(fat, "duplicate key %s", strconv.Quote(field))
		}
		switch field {
		case "dtype":
			hasDType = true
			if err := e.readDType(r, fat); err != nil {
				return e, err
			}
		case "shape":
			hasShape = true
			if err := e.readShape(r, fat); err != nil {
				return e, err
			}
		case "data_offsets":
			hasOffsets = true
			if err := e.readOffsets(r, fat); err != nil {
				return e, err
			}
		default:
			if others == nil {
				others = map[string]struct{}{}
			}
			if _, dup := others[field]; dup {
				return e, r.Errorf(fat, "duplicate key %s", strconv.Quote(field))
			}
			others[field] = struct{}{}
			if err := r.Skip(field); err != nil {
				return e, err
			}
		}
	}
	if err := r.Close(); err != nil {
		return e, err
	}
	switch {
	case !hasDType:
		return e, r.Errorf(at, "missing dtype")
	case !hasShape:
		return e, r.Errorf(at, "missing shape")
	case !hasOffsets:
		return e, r.Errorf(at, "missing data_offsets")
	}
	return e, nil
}

// readDType reads an entry's dtype (the key at fat).
func (e *stEntry) readDType(r *index.JSONReader, fat int64) error {
	s, err := r.StrRaw("dtype")
	if err != nil {
		return err
	}
	dt, ok := safetensorsDTypes[string(s)]
	switch {
	case ok:
		e.dt, e.dtName = dt, dt.Name()
	case safetensorsUnsupported[string(s)]:
		e.dtName, e.unserved = string(s), true
	default:
		return r.Errorf(fat, "unknown dtype %s", strconv.Quote(string(s)))
	}
	return nil
}

// readShape reads an entry's shape (the key at fat).
func (e *stEntry) readShape(r *index.JSONReader, fat int64) error {
	if err := r.Open('[', "shape"); err != nil {
		return err
	}
	e.shape = make([]int64, 0, 4)
	for r.More() {
		if len(e.shape) >= index.MaxDims {
			return r.Errorf(fat, "shape has more than %d dimensions", index.MaxDims)
		}
		d, err := r.Uint("shape")
		if err != nil {
			return err
		}
		if d > 1<<63-1 {
			return r.Errorf(fat, "shape dimension %d is too large", d)
		}
		e.shape = append(e.shape, int64(d))
	}
	if err := r.Close(); err != nil {
		return err
	}
	return nil
}

// readOffsets reads an entry's data_offsets [begin, end] (the key at
// fat).
func (e *stEntry) readOffsets(r *index.JSONReader, fat int64) error {
	if err := r.Open('[', "data_offsets"); err != nil {
		return err
	}
	var offs [2]uint64
	k := 0
	for r.More() {
		if k == 2 {
			return r.Errorf(fat, "data_offsets has more than 2 numbers")
		}
		v, err := r.Uint("data_offsets")
		if err != nil {
			return err
		}
		offs[k] = v
		k++
	}
	if err := r.Close(); err != nil {
		return err
	}
	if k != 2 {
		return r.Errorf(fat, "data_offsets has %d numbers, want [begin, end]", k)
	}
	e.begin, e.end = offs[0], offs[1]
	return nil
}

// checkSafetensorsLayout checks each entry's byte count against its dtype
// and shape, and that the entries, sorted by offsets, tile the data section
// of dataLen bytes at file offset dataStart exactly. It sorts entries.
func checkSafetensorsLayout(file string, entries []stEntry, dataStart, dataLen int64) error {
	for i := range entries {
		e := &entries[i]
		fail := func(format string, args ...any) error {
			return &index.FormatError{File: file, Offset: e.at, Where: "tensor " + strconv.Quote(e.name), Msg: "safetensors: " + fmt.Sprintf(format, args...)}
		}
		offs := func() string { return fmt.Sprintf("[%d,%d]", e.begin, e.end) }
		if e.end < e.begin {
			return fail("data_offsets %s end before they begin", offs())
		}
		if e.end > uint64(dataLen) {
			return fail("data_offsets %s run past the end of the data section (%d bytes)", offs(), dataLen)
		}
		elems, ok := index.Elements(e.shape)
		if !ok {
			return fail("shape %s overflows", index.ShapeString(e.shape))
		}
		need, ok := e.dt.ByteSize(elems)
		if e.unserved { // 6 bits an element, packed: whole bytes
			bits, hi := elems*6, elems > math.MaxInt64/6
			if hi || bits%8 != 0 {
				return fail("%s packs 6 bits an element, but shape %s has %d elements, not a whole number of bytes", e.dtName, index.ShapeString(e.shape), elems)
			}
			need, ok = bits/8, true
		}
		if !ok {
			if e.dt == dtype.F4 {
				return fail("F4 packs two elements per byte, but shape %s has an odd number of elements (%d)", index.ShapeString(e.shape), elems)
			}
			return fail("%s %s overflows", e.dtName, index.ShapeString(e.shape))
		}
		if uint64(need) != e.end-e.begin {
			return fail("%s %s needs %d bytes, but data_offsets %s hold %d", e.dtName, index.ShapeString(e.shape), need, offs(), e.end-e.begin)
		}
	}
	slices.SortFunc(entries, func(a, b stEntry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), cmp.Compare(a.name, b.name))
	})
	var pos, prevBegin uint64
	prev := ""
	for i := range entries {
		e := &entries[i]
		if e.begin != pos {
			where := "tensor " + strconv.Quote(e.name)
			var msg string
			switch {
			case i == 0:
				msg = fmt.Sprintf("the data section starts with %s that belong to no tensor (first tensor at data offset %d)", nBytes(e.begin), e.begin)
			case e.begin > pos:
				msg = fmt.Sprintf("%s between tensor %s (ends at data offset %d) and this tensor (begins at %d) belong to no tensor", nBytes(e.begin-pos), strconv.Quote(prev), pos, e.begin)
			default:
				msg = fmt.Sprintf("tensors %s and %s overlap: their data_offsets are [%d,%d] and [%d,%d], %s in both", strconv.Quote(prev), strconv.Quote(e.name), prevBegin, pos, e.begin, e.end, nBytes(min(pos, e.end)-e.begin))
			}
			return &index.FormatError{File: file, Offset: e.at, Where: where, Msg: "safetensors: " + msg}
		}
		pos = e.end
		prevBegin = e.begin
		prev = e.name
	}
	if pos != uint64(dataLen) {
		return index.Errorf(file, dataStart+int64(pos),
			"safetensors: %s after the last tensor's data belong to no tensor (the data section is %s, tensors end at data offset %d)",
			nBytes(uint64(dataLen)-pos), nBytes(uint64(dataLen)), pos)
	}
	return nil
}

// nBytes is "1 byte", "2 bytes".
func nBytes(n uint64) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatUint(n, 10) + " bytes"
}
