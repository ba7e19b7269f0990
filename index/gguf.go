package index

// GGUF (llama.cpp / ggml), versions 2 and 3, little-endian.
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count, the
// metadata key/values, the tensor infos, padding to general.alignment
// (default 32), then the data section. A tensor info is a string name, u32
// n_dims (at most 4), n_dims u64 dims (innermost first: reversed here into
// the row-major Shape), u32 ggml type, u64 offset relative to the data
// section. Strings are u64 length + bytes.
//
// Hardening: the header is read through a small buffered reader over the
// io.ReaderAt. Every count and length read from the file is checked against
// the bytes the file still has (each entry of its kind needs at least a
// known number of bytes) before anything is allocated for it, so a hostile
// file costs time and memory in proportion to its real size. Array nesting
// is capped at MaxNesting, names at MaxNameLength, n_dims at 4; element
// counts and byte sizes use checked arithmetic.
//
// Metadata: every key/value of the file, nothing added. Integers become
// uint64 (u8..u64) or int64 (i8..i64), floats float64 (f32 widened
// exactly), bools bool, strings string. Arrays become typed slices:
// Uint8s for u8 (one byte per element, rendered as JSON numbers), []uint16,
// []int8, []int16, []int32, []int64, []uint32, []uint64, []float32,
// []float64, []bool, []string, and []any for arrays of arrays. JSON has no
// NaN or infinity, so a non-finite float is stored as the string "NaN",
// "+Inf" or "-Inf" (a float array holding one becomes []any). A string or
// array whose encoding is over MaxInlineMetadata bytes is a *FileValue:
// only its place in the file is kept (an array of strings or arrays is
// walked once to find its end, without allocating), so a large value costs
// no memory at all; see metadata.go.
//
// split.count (the number of parts of a split model) is refused over
// MaxShards here, before anything is sized from it.

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"

	"github.com/lazyweights/tensorfs/dtype"
)

const (
	ggufMagic            = "GGUF"
	ggufDefaultAlignment = 32
	ggufMaxDims          = 4 // GGML_MAX_DIMS
	ggufBufSize          = 64 << 10
	ggufMaxAlignment     = 1 << 30 // general.alignment cap (real files use 32)

	// The fewest bytes one entry of each kind occupies, used to bound
	// counts by the bytes left: a key/value is a key length (8), a type (4)
	// and a value of at least 1 byte; a tensor info is a name length (8),
	// n_dims (4), a type (4) and an offset (8).
	ggufMinKV         = 13
	ggufMinTensorInfo = 24
)

// GGUF metadata value types.
const (
	ggufTypeU8 uint32 = iota
	ggufTypeI8
	ggufTypeU16
	ggufTypeI16
	ggufTypeU32
	ggufTypeI32
	ggufTypeF32
	ggufTypeBool
	ggufTypeString
	ggufTypeArray
	ggufTypeU64
	ggufTypeI64
	ggufTypeF64
	ggufNumTypes
)

var ggufTypeNames = [ggufNumTypes]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// ggufMinSize is the fewest bytes one value of each type occupies (a
// string: its length; an array: its element type and count).
var ggufMinSize = [ggufNumTypes]int64{1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8}

func ggufTypeName(t uint32) string {
	if t < ggufNumTypes {
		return ggufTypeNames[t]
	}
	return fmt.Sprintf("type %d", t)
}

func sniffGGUF(head []byte) bool { return len(head) >= 4 && string(head[:4]) == ggufMagic }

// GGUFSplitInfo reports the split.no (0-based) and split.count keys of a
// part of a split GGUF model (`*-00001-of-0000N.gguf`), and false when idx
// is not GGUF or the keys are missing, not integers, or inconsistent
// (count < 1 or over MaxShards, no outside [0, count)). The parser refuses
// a file whose split.count is over MaxShards, so a count is never larger.
func GGUFSplitInfo(idx *Index) (no, count int, ok bool) {
	if idx == nil || idx.Format != "gguf" {
		return 0, 0, false
	}
	n, ok1 := ggufInt(idx.Metadata["split.no"])
	c, ok2 := ggufInt(idx.Metadata["split.count"])
	if !ok1 || !ok2 || c < 1 || c > MaxShards || n < 0 || n >= c {
		return 0, 0, false
	}
	return int(n), int(c), true
}

// ggufInt returns an integer metadata value as int64.
func ggufInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// ggufQuote quotes a name from the file for an error message, shortened.
func ggufQuote(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%q...", s[:120])
	}
	return fmt.Sprintf("%q", s)
}

// ggufReader reads the header sequentially through a window of the file.
type ggufReader struct {
	f     File
	name  string
	size  int64
	pos   int64  // file offset of the next byte
	buf   []byte // file bytes [bufAt, bufAt+len(buf))
	bufAt int64
	raw   []byte // backing store of buf

	// what is being read, for a truncation error (formatted lazily):
	// "header", or what+idx and the key or tensor name once read
	what   string
	idx    uint64
	key    string
	hasKey bool
}

// at sets what is being read.
func (r *ggufReader) at(what string, idx uint64) {
	r.what, r.idx, r.key, r.hasKey = what, idx, "", false
}

// named adds the key or tensor name of the entry being read.
func (r *ggufReader) named(key string) { r.key, r.hasKey = key, true }

func (r *ggufReader) left() int64 { return r.size - r.pos }

// where names the key or tensor being read, for FormatError.Where.
func (r *ggufReader) where() string {
	switch {
	case !r.hasKey:
		return ""
	case r.what == "metadata entry":
		return "key " + ggufQuote(r.key)
	}
	return "tensor " + ggufQuote(r.key)
}

func (r *ggufReader) context() string {
	if r.what == "header" {
		return r.what
	}
	s := fmt.Sprintf("%s %d", r.what, r.idx)
	if r.hasKey && r.what == "metadata entry" {
		s += " (key " + ggufQuote(r.key) + ")"
	} else if r.hasKey {
		s += " (" + ggufQuote(r.key) + ")"
	}
	return s
}

// next returns the next n bytes, valid until the following call.
func (r *ggufReader) next(n int64) ([]byte, error) {
	if n < 0 || n > r.left() {
		return nil, Errorf(r.name, r.pos, "gguf: file truncated in %s: %d bytes needed, %d left (file is %d bytes)", r.context(), n, r.left(), r.size)
	}
	if r.pos >= r.bufAt && r.pos+n <= r.bufAt+int64(len(r.buf)) {
		s := r.buf[r.pos-r.bufAt:][:n]
		r.pos += n
		return s, nil
	}
	if n > int64(len(r.raw)) {
		// a long string: checked against the file's size above
		b := make([]byte, n)
		if err := r.readAt(b, r.pos); err != nil {
			return nil, err
		}
		r.pos += n
		return b, nil
	}
	m := min(int64(len(r.raw)), r.left())
	if err := r.readAt(r.raw[:m], r.pos); err != nil {
		return nil, err
	}
	r.buf, r.bufAt = r.raw[:m], r.pos
	s := r.buf[:n]
	r.pos += n
	return s, nil
}

func (r *ggufReader) readAt(b []byte, off int64) error {
	n, err := r.f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return Errorf(r.name, off, "gguf: cannot read %d bytes: %v", len(b), err)
}

func (r *ggufReader) u32() (uint32, error) {
	b, err := r.next(4)
	if err != nil {
		return 0, err
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24, nil
}

func (r *ggufReader) u64() (uint64, error) {
	b, err := r.next(8)
	if err != nil {
		return 0, err
	}
	return ggufLE64(b), nil
}

func ggufLE64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// str reads a string of at most maxLen bytes (0: bounded by the file only).
func (r *ggufReader) str(maxLen int64, what string) (string, error) {
	n, err := r.strLen(maxLen, what)
	if err != nil {
		return "", err
	}
	b, err := r.next(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// strLen reads a string's length, checked against maxLen (0: no limit)
// and the bytes left.
func (r *ggufReader) strLen(maxLen int64, what string) (int64, error) {
	at := r.pos
	n, err := r.u64()
	if err != nil {
		return 0, err
	}
	if n > uint64(r.left()) {
		return 0, &FormatError{File: r.name, Offset: at, Where: r.where(), Msg: fmt.Sprintf("gguf: %s length %d runs past the end of the file (%d bytes left)", what, n, r.left())}
	}
	if maxLen > 0 && n > uint64(maxLen) {
		return 0, &FormatError{File: r.name, Offset: at, Where: r.where(), Msg: fmt.Sprintf("gguf: %s length %d is over the limit of %d bytes", what, n, maxLen)}
	}
	return int64(n), nil
}

// skip moves past n bytes without reading them.
func (r *ggufReader) skip(n int64) error {
	if n < 0 || n > r.left() {
		return Errorf(r.name, r.pos, "gguf: file truncated in %s: %d bytes needed, %d left (file is %d bytes)", r.context(), n, r.left(), r.size)
	}
	r.pos += n
	return nil
}

// ggufTensorInfo is a tensor info as read, before validation.
type ggufTensorInfo struct {
	name   string
	at     int64 // file offset of the info
	nd     int
	ne     [ggufMaxDims]int64
	typ    uint32
	offset uint64 // relative to the data section
}

type ggufParser struct {
	r    ggufReader
	name string
	// inline is the largest string or array value read into memory, in
	// bytes of the file (MaxInlineMetadata; tests use less)
	inline int64
}

func parseGGUF(f File) (*Index, error) { return parseGGUFInline(f, MaxInlineMetadata) }

// parseGGUFInline parses with a given MaxInlineMetadata.
func parseGGUFInline(f File, inline int64) (*Index, error) {
	p := &ggufParser{name: f.Name(), inline: inline}
	p.r = ggufReader{f: f, name: f.Name(), size: f.Size(), raw: make([]byte, min(ggufBufSize, max(f.Size(), 0)))}
	return p.parse()
}

func (p *ggufParser) errAt(off int64, where, format string, args ...any) error {
	return &FormatError{File: p.name, Offset: off, Where: where, Msg: fmt.Sprintf(format, args...)}
}

func (p *ggufParser) parse() (*Index, error) {
	r := &p.r
	r.what = "header"
	magic, err := r.next(4)
	if err != nil {
		return nil, err
	}
	if string(magic) != ggufMagic {
		return nil, Errorf(p.name, 0, "gguf: bad magic %q (want \"GGUF\")", magic)
	}
	version, err := r.u32()
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, Errorf(p.name, 4, "gguf: version 1 (32-bit counts, before August 2023) is not supported; convert the model again with a current llama.cpp (want version 2 or 3)")
	case version != 0 && version&0xffff == 0:
		return nil, Errorf(p.name, 4, "gguf: big-endian file (version field reads %#08x, version %d byte-swapped); only little-endian GGUF is supported", version, bits.ReverseBytes32(version))
	default:
		return nil, Errorf(p.name, 4, "gguf: unsupported version %d (want 2 or 3)", version)
	}
	countsAt := r.pos
	nTensors, err := r.u64()
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, err
	}
	left := uint64(r.left())
	if nTensors > MaxTensors {
		return nil, Errorf(p.name, countsAt, "gguf: tensor count %d is over the limit of %d", nTensors, MaxTensors)
	}
	if nTensors > left/ggufMinTensorInfo {
		return nil, Errorf(p.name, countsAt, "gguf: tensor count %d is impossible: each tensor info needs at least %d bytes and the file has %d left", nTensors, ggufMinTensorInfo, left)
	}
	if nKV > left/ggufMinKV {
		return nil, Errorf(p.name, countsAt+8, "gguf: metadata count %d is impossible: each key/value needs at least %d bytes and the file has %d left", nKV, ggufMinKV, left)
	}
	if nKV*ggufMinKV+nTensors*ggufMinTensorInfo > left {
		return nil, Errorf(p.name, countsAt, "gguf: %d key/values and %d tensor infos need at least %d bytes, the file has %d left", nKV, nTensors, nKV*ggufMinKV+nTensors*ggufMinTensorInfo, left)
	}

	md := make(map[string]any, min(nKV, 1024))
	splitCountAt := int64(-1)
	for i := uint64(0); i < nKV; i++ {
		r.at("metadata entry", i)
		at := r.pos
		key, err := r.str(MaxNameLength, "metadata key")
		if err != nil {
			return nil, err
		}
		r.named(key)
		if _, dup := md[key]; dup {
			return nil, p.errAt(at, "key "+ggufQuote(key), "gguf: duplicate metadata key")
		}
		typAt := r.pos
		typ, err := r.u32()
		if err != nil {
			return nil, err
		}
		if key == "split.count" {
			splitCountAt = r.pos
		}
		v, err := p.value(typ, typAt, key, 0)
		if err != nil {
			return nil, err
		}
		md[key] = v
	}

	// split.count sizes the loader's list of parts: refused here, before
	// anything is allocated from it, when over the limit.
	if v, ok := md["split.count"]; ok {
		over := false
		switch x := v.(type) {
		case uint64:
			over = x > MaxShards
		case int64:
			over = x > MaxShards
		}
		if over {
			return nil, p.errAt(splitCountAt, `key "split.count"`, "gguf: split.count %v is over the limit of %d parts of a split model", v, MaxShards)
		}
	}

	alignment := uint64(ggufDefaultAlignment)
	if v, ok := md["general.alignment"]; ok {
		a, isInt := ggufInt(v)
		if u, big := v.(uint64); big && !isInt {
			return nil, ErrorAt(p.name, "key \"general.alignment\"", "gguf: general.alignment %d is over the limit of %d", u, ggufMaxAlignment)
		}
		if !isInt {
			return nil, ErrorAt(p.name, "key \"general.alignment\"", "gguf: general.alignment must be an unsigned integer, got %T", v)
		}
		if a <= 0 || a&(a-1) != 0 {
			return nil, ErrorAt(p.name, "key \"general.alignment\"", "gguf: general.alignment must be a non-zero power of two, got %d", a)
		}
		if a > ggufMaxAlignment {
			return nil, ErrorAt(p.name, "key \"general.alignment\"", "gguf: general.alignment %d is over the limit of %d", a, ggufMaxAlignment)
		}
		alignment = uint64(a)
	}

	// Tensor infos: each is validated as it is read, except for where its
	// data lies, which needs the end of the infos.
	tensors := make([]Tensor, 0, min(nTensors, 1<<16))
	var infoAt []int64 // file offset of each tensor's info, for errors
	var rel []uint64   // each tensor's offset in the data section
	for i := uint64(0); i < nTensors; i++ {
		r.at("tensor info", i)
		ti := ggufTensorInfo{at: r.pos}
		ti.name, err = r.str(MaxNameLength, "tensor name")
		if err != nil {
			return nil, err
		}
		r.named(ti.name)
		where := "tensor " + ggufQuote(ti.name)
		ndAt := r.pos
		nd, err := r.u32()
		if err != nil {
			return nil, err
		}
		if nd > ggufMaxDims {
			return nil, p.errAt(ndAt, where, "gguf: %d dimensions (at most %d)", nd, ggufMaxDims)
		}
		ti.nd = int(nd)
		for j := 0; j < ti.nd; j++ {
			dimAt := r.pos
			d, err := r.u64()
			if err != nil {
				return nil, err
			}
			if d > math.MaxInt64 {
				return nil, p.errAt(dimAt, where, "gguf: dimension %d is %d, over 2^63-1", j, d)
			}
			ti.ne[j] = int64(d)
		}
		if ti.typ, err = r.u32(); err != nil {
			return nil, err
		}
		if ti.offset, err = r.u64(); err != nil {
			return nil, err
		}
		t, err := p.tensor(&ti, alignment)
		if err != nil {
			return nil, err
		}
		tensors = append(tensors, t)
		infoAt = append(infoAt, ti.at)
		rel = append(rel, ti.offset)
	}

	// The data section starts at the end of the tensor infos, aligned (no
	// overflow: both are far below 2^62).
	end := uint64(r.pos)
	dataStart := int64((end + alignment - 1) &^ (alignment - 1))
	for i := range tensors {
		t := &tensors[i]
		room := r.size - dataStart // bytes from the data section to the end, < 0 if it starts past the end
		if rel[i] > uint64(r.size) || int64(rel[i]) > room || t.Size > room-int64(rel[i]) {
			return nil, p.errAt(infoAt[i], "tensor "+ggufQuote(t.Name), "gguf: %d data bytes at offset %d of the data section (which starts at byte %d) run past the end of the file (%d bytes)", t.Size, rel[i], dataStart, r.size)
		}
		t.Offset = dataStart + int64(rel[i])
	}
	if err := p.checkTensors(tensors); err != nil {
		return nil, err
	}
	return &Index{
		Format:   "gguf",
		Sources:  []string{p.name},
		Metadata: md,
		Tensors:  tensors,
	}, nil
}

// tensor validates one tensor info, all but where its data lies, and makes
// its Tensor (Offset not set).
func (p *ggufParser) tensor(ti *ggufTensorInfo, alignment uint64) (Tensor, error) {
	where := "tensor " + ggufQuote(ti.name)
	dt, ok := dtype.ByGGML(ti.typ)
	if !ok {
		return Tensor{}, p.errAt(ti.at, where, "gguf: unknown ggml type code %d", ti.typ)
	}
	shape := make([]int64, ti.nd)
	for j := 0; j < ti.nd; j++ {
		shape[ti.nd-1-j] = ti.ne[j]
	}
	n, ok := Elements(shape)
	if !ok {
		return Tensor{}, p.errAt(ti.at, where, "gguf: element count of shape %v overflows int64", shape)
	}
	info := dt.Info()
	if info.BlockElems > 1 {
		ne0 := int64(1)
		if ti.nd > 0 {
			ne0 = ti.ne[0]
		}
		if ne0%info.BlockElems != 0 {
			return Tensor{}, p.errAt(ti.at, where, "gguf: innermost dimension %d is not a multiple of the %s block size %d", ne0, dt, info.BlockElems)
		}
	}
	size, ok := dt.ByteSize(n)
	if !ok {
		return Tensor{}, p.errAt(ti.at, where, "gguf: byte size of %d %s elements overflows int64", n, dt)
	}
	if ti.offset%alignment != 0 {
		return Tensor{}, p.errAt(ti.at, where, "gguf: data offset %d is not a multiple of the alignment %d", ti.offset, alignment)
	}
	return Tensor{Name: ti.name, DType: dt, Shape: shape, Size: size}, nil
}

// checkTensors refuses duplicate names and overlapping data, and leaves
// tensors sorted by Name.
func (p *ggufParser) checkTensors(ts []Tensor) error {
	byOffset := make([]int, len(ts))
	for i := range byOffset {
		byOffset[i] = i
	}
	sort.SliceStable(byOffset, func(a, b int) bool { return ts[byOffset[a]].Offset < ts[byOffset[b]].Offset })
	prev := -1
	for _, i := range byOffset {
		if ts[i].Size == 0 {
			continue
		}
		if prev >= 0 && ts[prev].Offset+ts[prev].Size > ts[i].Offset {
			return ErrorAt(p.name, "tensor "+ggufQuote(ts[i].Name), "gguf: data [%d, %d) overlaps tensor %s at [%d, %d)",
				ts[i].Offset, ts[i].Offset+ts[i].Size, ggufQuote(ts[prev].Name), ts[prev].Offset, ts[prev].Offset+ts[prev].Size)
		}
		prev = i
	}
	sort.SliceStable(ts, func(a, b int) bool { return ts[a].Name < ts[b].Name })
	for i := 1; i < len(ts); i++ {
		if ts[i].Name == ts[i-1].Name {
			return ErrorAt(p.name, "tensor "+ggufQuote(ts[i].Name), "gguf: duplicate tensor name")
		}
	}
	return nil
}

// value reads one metadata value of type typ (read at typAt).
func (p *ggufParser) value(typ uint32, typAt int64, key string, depth int) (any, error) {
	r := &p.r
	switch typ {
	case ggufTypeU8, ggufTypeI8, ggufTypeBool:
		b, err := r.next(1)
		if err != nil {
			return nil, err
		}
		switch typ {
		case ggufTypeU8:
			return uint64(b[0]), nil
		case ggufTypeI8:
			return int64(int8(b[0])), nil
		}
		return b[0] != 0, nil
	case ggufTypeU16, ggufTypeI16:
		b, err := r.next(2)
		if err != nil {
			return nil, err
		}
		v := uint16(b[0]) | uint16(b[1])<<8
		if typ == ggufTypeU16 {
			return uint64(v), nil
		}
		return int64(int16(v)), nil
	case ggufTypeU32, ggufTypeI32, ggufTypeF32:
		v, err := r.u32()
		if err != nil {
			return nil, err
		}
		switch typ {
		case ggufTypeU32:
			return uint64(v), nil
		case ggufTypeI32:
			return int64(int32(v)), nil
		}
		return ggufFloat(float64(math.Float32frombits(v))), nil
	case ggufTypeU64, ggufTypeI64, ggufTypeF64:
		v, err := r.u64()
		if err != nil {
			return nil, err
		}
		switch typ {
		case ggufTypeU64:
			return v, nil
		case ggufTypeI64:
			return int64(v), nil
		}
		return ggufFloat(math.Float64frombits(v)), nil
	case ggufTypeString:
		n, err := r.strLen(0, "string value")
		if err != nil {
			return nil, err
		}
		if n > p.inline {
			fv := &FileValue{Offset: r.pos, Size: n, Type: "string"}
			return fv, r.skip(n)
		}
		b, err := r.next(n)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	case ggufTypeArray:
		return p.array(key, depth+1)
	}
	return nil, p.errAt(typAt, "key "+ggufQuote(key), "gguf: unknown metadata value type %d (want 0..12)", typ)
}

// strings reads an array of n strings, or returns nil (and no error) as
// soon as a string would end past byte end of the file, having allocated
// no more than the strings before it.
func (p *ggufParser) strings(n int64, end int64) ([]string, error) {
	r := &p.r
	out := make([]string, n)
	for i := range out {
		l, err := r.strLen(0, "string in array")
		if err != nil {
			return nil, err
		}
		if r.pos > end-l {
			return nil, nil
		}
		b, err := r.next(l)
		if err != nil {
			return nil, err
		}
		out[i] = string(b)
	}
	return out, nil
}

// ggufFloat is a float as JSON can hold it: the value, or a string for
// NaN and infinities.
func ggufFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}

// ggufEmpty holds an empty array of each element type, boxed once: a file
// of empty arrays costs no allocation per array.
var ggufEmpty = [ggufNumTypes]any{
	ggufTypeU8: Uint8s{}, ggufTypeI8: []int8{}, ggufTypeU16: []uint16{}, ggufTypeI16: []int16{},
	ggufTypeU32: []uint32{}, ggufTypeI32: []int32{}, ggufTypeF32: []float32{}, ggufTypeBool: []bool{},
	ggufTypeString: []string{}, ggufTypeArray: []any{}, ggufTypeU64: []uint64{}, ggufTypeI64: []int64{},
	ggufTypeF64: []float64{},
}

// arrayHead reads an array's element type and count, checked against the
// bytes left.
func (p *ggufParser) arrayHead(key string, depth int) (et uint32, n int64, err error) {
	r := &p.r
	at := r.pos
	if depth > MaxNesting {
		return 0, 0, p.errAt(at, "key "+ggufQuote(key), "gguf: arrays nested more than %d deep", MaxNesting)
	}
	if et, err = r.u32(); err != nil {
		return 0, 0, err
	}
	if et >= ggufNumTypes {
		return 0, 0, p.errAt(at, "key "+ggufQuote(key), "gguf: unknown array element type %d (want 0..12)", et)
	}
	nAt := r.pos
	count, err := r.u64()
	if err != nil {
		return 0, 0, err
	}
	minSize := ggufMinSize[et]
	if count > uint64(r.left()/minSize) {
		return 0, 0, p.errAt(nAt, "key "+ggufQuote(key), "gguf: array of %d %s needs at least %d bytes each and the file has %d left", count, ggufTypeName(et), minSize, r.left())
	}
	return et, int64(count), nil
}

// skipElems moves past n elements of type et, checking every length and
// count on the way, allocating nothing.
func (p *ggufParser) skipElems(et uint32, n int64, key string, depth int) error {
	r := &p.r
	switch et {
	case ggufTypeString:
		for i := int64(0); i < n; i++ {
			l, err := r.strLen(0, "string in array")
			if err != nil {
				return err
			}
			if err := r.skip(l); err != nil {
				return err
			}
		}
		return nil
	case ggufTypeArray:
		for i := int64(0); i < n; i++ {
			et, m, err := p.arrayHead(key, depth+1)
			if err != nil {
				return err
			}
			if err := p.skipElems(et, m, key, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return r.skip(n * ggufMinSize[et]) // no overflow: checked against the bytes left
}

// array reads an array value (element type, count, elements). At the top
// (depth 1), an array whose elements take more than p.inline bytes is a
// *FileValue: an array of fixed-size elements is sized from its count, one
// of strings or arrays is walked to its end first.
func (p *ggufParser) array(key string, depth int) (any, error) {
	r := &p.r
	et, n, err := p.arrayHead(key, depth)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return ggufEmpty[et], nil
	}
	if depth == 1 {
		start := r.pos
		// n*ggufMinSize[et] <= the bytes left: no overflow
		small := n*ggufMinSize[et] <= p.inline
		if small && et == ggufTypeString {
			// One pass: read, unless the strings turn out too long.
			out, err := p.strings(n, start+p.inline)
			if out != nil || err != nil {
				return out, err
			}
			r.pos = start
			small = false
		}
		if !small || et == ggufTypeArray {
			if err := p.skipElems(et, n, key, depth); err != nil {
				return nil, err
			}
			if size := r.pos - start; size > p.inline {
				return &FileValue{Offset: start, Size: size, Type: "array", ElemType: ggufTypeName(et), Count: n}, nil
			}
			r.pos = start // small enough: read it
		}
	}
	count := int(n)
	switch et {
	case ggufTypeString:
		return p.strings(n, math.MaxInt64)
	case ggufTypeArray:
		out := make([]any, count)
		for i := range out {
			v, err := p.array(key, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	minSize := ggufMinSize[et]
	// Fixed-size elements: read in chunks of the buffer.
	size := int(minSize)
	var (
		u8s  Uint8s
		u16s []uint16
		i8s  []int8
		i16s []int16
		u32s []uint32
		i32s []int32
		f32s []float32
		u64s []uint64
		i64s []int64
		f64s []float64
		bs   []bool
	)
	switch et {
	case ggufTypeU8:
		u8s = make(Uint8s, count)
	case ggufTypeU16:
		u16s = make([]uint16, count)
	case ggufTypeI8:
		i8s = make([]int8, count)
	case ggufTypeI16:
		i16s = make([]int16, count)
	case ggufTypeU32:
		u32s = make([]uint32, count)
	case ggufTypeI32:
		i32s = make([]int32, count)
	case ggufTypeF32:
		f32s = make([]float32, count)
	case ggufTypeU64:
		u64s = make([]uint64, count)
	case ggufTypeI64:
		i64s = make([]int64, count)
	case ggufTypeF64:
		f64s = make([]float64, count)
	case ggufTypeBool:
		bs = make([]bool, count)
	}
	finite := true
	for done := 0; done < count; {
		k := min(count-done, ggufBufSize/size)
		b, err := r.next(int64(k * size))
		if err != nil {
			return nil, err
		}
		for i := 0; i < k; i++ {
			e := b[i*size:]
			j := done + i
			switch et {
			case ggufTypeU8:
				u8s[j] = e[0]
			case ggufTypeI8:
				i8s[j] = int8(e[0])
			case ggufTypeBool:
				bs[j] = e[0] != 0
			case ggufTypeU16:
				u16s[j] = uint16(e[0]) | uint16(e[1])<<8
			case ggufTypeI16:
				i16s[j] = int16(uint16(e[0]) | uint16(e[1])<<8)
			case ggufTypeU32, ggufTypeI32, ggufTypeF32:
				v := uint32(e[0]) | uint32(e[1])<<8 | uint32(e[2])<<16 | uint32(e[3])<<24
				switch et {
				case ggufTypeU32:
					u32s[j] = v
				case ggufTypeI32:
					i32s[j] = int32(v)
				default:
					f32s[j] = math.Float32frombits(v)
					finite = finite && v&0x7f800000 != 0x7f800000
				}
			default: // 64-bit
				v := ggufLE64(e)
				switch et {
				case ggufTypeU64:
					u64s[j] = v
				case ggufTypeI64:
					i64s[j] = int64(v)
				default:
					f64s[j] = math.Float64frombits(v)
					finite = finite && v&0x7ff0000000000000 != 0x7ff0000000000000
				}
			}
		}
		done += k
	}
	switch et {
	case ggufTypeU8:
		return u8s, nil
	case ggufTypeU16:
		return u16s, nil
	case ggufTypeI8:
		return i8s, nil
	case ggufTypeI16:
		return i16s, nil
	case ggufTypeU32:
		return u32s, nil
	case ggufTypeI32:
		return i32s, nil
	case ggufTypeU64:
		return u64s, nil
	case ggufTypeI64:
		return i64s, nil
	case ggufTypeBool:
		return bs, nil
	case ggufTypeF32:
		if finite {
			return f32s, nil
		}
		out := make([]any, count)
		for i, v := range f32s {
			out[i] = ggufFloat(float64(v))
		}
		return out, nil
	}
	if finite {
		return f64s, nil
	}
	out := make([]any, count)
	for i, v := range f64s {
		out[i] = ggufFloat(v)
	}
	return out, nil
}
