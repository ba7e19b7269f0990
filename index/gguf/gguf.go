package gguf

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
	"math"
	"math/bits"
	"sort"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

const (
	Magic                = "GGUF"
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

func Sniff(head []byte) bool { return len(head) >= 4 && string(head[:4]) == Magic }

// SplitInfo reports the split.no (0-based) and split.count keys of a
// part of a split GGUF model (`*-00001-of-0000N.gguf`), and false when idx
// is not GGUF or the keys are missing, not integers, or inconsistent
// (count < 1 or over MaxShards, no outside [0, count)). The parser refuses
// a file whose split.count is over MaxShards, so a count is never larger.
func SplitInfo(idx *index.Index) (no, count int, ok bool) {
	if idx == nil || idx.Format != "gguf" {
		return 0, 0, false
	}
	n, ok1 := Int(idx.Metadata["split.no"])
	c, ok2 := Int(idx.Metadata["split.count"])
	if !ok1 || !ok2 || c < 1 || c > index.MaxShards || n < 0 || n >= c {
		return 0, 0, false
	}
	return int(n), int(c), true
}

// Int returns an integer metadata value as int64.
func Int(v any) (int64, bool) {
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

func Parse(f index.File) (*index.Index, error) {
	return parseGGUFInline(f, index.MaxInlineMetadata)
}

// parseGGUFInline parses with a given MaxInlineMetadata.
func parseGGUFInline(f index.File, inline int64) (*index.Index, error) {
	p := &ggufParser{name: f.Name(), inline: inline}
	p.r = ggufReader{f: f, name: f.Name(), size: f.Size(), raw: make([]byte, min(ggufBufSize, max(f.Size(), 0)))}
	return p.parse()
}

func (p *ggufParser) errAt(off int64, where, format string, args ...any) error {
	return &index.FormatError{File: p.name, Offset: off, Where: where, Msg: fmt.Sprintf(format, args...)}
}

func (p *ggufParser) parse() (*index.Index, error) {
	nTensors, nKV, err := p.header()
	if err != nil {
		return nil, err
	}
	md, err := p.metadata(nKV)
	if err != nil {
		return nil, err
	}
	alignment, err := p.alignment(md)
	if err != nil {
		return nil, err
	}
	infos, err := p.tensorInfos(nTensors, alignment)
	if err != nil {
		return nil, err
	}
	return p.place(md, infos, alignment)
}

// header reads the magic, the version and the two counts, each count
// checked against what the rest of the file can hold.
func (p *ggufParser) header() (nTensors, nKV uint64, err error) {
	r := &p.r
	r.what = "header"
	magic, err := r.next(4)
	if err != nil {
		return 0, 0, err
	}
	if string(magic) != Magic {
		return 0, 0, index.Errorf(p.name, 0, "gguf: bad magic %q (want \"GGUF\")", magic)
	}
	version, err := r.u32()
	if err != nil {
		return 0, 0, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return 0, 0, index.Errorf(p.name, 4, "gguf: version 1 (GGUF's first release, August 2023, with 32-bit counts) is not supported; convert the model again with a current llama.cpp (convert_hf_to_gguf.py), which writes version 3 (want version 2 or 3)")
	case version != 0 && version&0xffff == 0:
		return 0, 0, index.Errorf(p.name, 4, "gguf: big-endian file (version field reads %#08x, version %d byte-swapped); only little-endian GGUF is supported: convert a copy with llama.cpp's gguf-py (gguf_convert_endian.py COPY little, which rewrites the file in place)", version, bits.ReverseBytes32(version))
	default:
		return 0, 0, index.Errorf(p.name, 4, "gguf: unsupported version %d (want 2 or 3)", version)
	}
	countsAt := r.pos
	nTensors, err = r.u64()
	if err != nil {
		return 0, 0, err
	}
	nKV, err = r.u64()
	if err != nil {
		return 0, 0, err
	}
	left := uint64(r.left())
	if nTensors > index.MaxTensors {
		return 0, 0, index.Errorf(p.name, countsAt, "gguf: tensor count %d is over the limit of %d", nTensors, index.MaxTensors)
	}
	if nTensors > left/ggufMinTensorInfo {
		return 0, 0, index.Errorf(p.name, countsAt, "gguf: tensor count %d is impossible: each tensor info needs at least %d bytes and the file has %d left", nTensors, ggufMinTensorInfo, left)
	}
	if nKV > left/ggufMinKV {
		return 0, 0, index.Errorf(p.name, countsAt+8, "gguf: metadata count %d is impossible: each key/value needs at least %d bytes and the file has %d left", nKV, ggufMinKV, left)
	}
	if nKV*ggufMinKV+nTensors*ggufMinTensorInfo > left {
		return 0, 0, index.Errorf(p.name, countsAt, "gguf: %d key/values and %d tensor infos need at least %d bytes, the file has %d left", nKV, nTensors, nKV*ggufMinKV+nTensors*ggufMinTensorInfo, left)
	}
	return nTensors, nKV, nil
}

// metadata reads the nKV key/values, refusing a duplicate key and a
// split.count over the limit.
func (p *ggufParser) metadata(nKV uint64) (map[string]any, error) {
	r := &p.r
	md := make(map[string]any, min(nKV, 1024))
	splitCountAt := int64(-1)
	for i := uint64(0); i < nKV; i++ {
		r.at("metadata entry", i)
		at := r.pos
		key, err := r.str(index.MaxNameLength, "metadata key")
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
			over = x > index.MaxShards
		case int64:
			over = x > index.MaxShards
		}
		if over {
			return nil, p.errAt(splitCountAt, `key "split.count"`, "gguf: split.count %v is over the limit of %d parts of a split model", v, index.MaxShards)
		}
	}
	return md, nil
}

// alignment is the data section's alignment: general.alignment, checked,
// or the default.
func (p *ggufParser) alignment(md map[string]any) (uint64, error) {
	alignment := uint64(ggufDefaultAlignment)
	if v, ok := md["general.alignment"]; ok {
		a, isInt := Int(v)
		if u, big := v.(uint64); big && !isInt {
			return 0, index.ErrorAt(p.name, "key \"general.alignment\"", "gguf: general.alignment %d is over the limit of %d", u, ggufMaxAlignment)
		}
		if !isInt {
			return 0, index.ErrorAt(p.name, "key \"general.alignment\"", "gguf: general.alignment must be an unsigned integer, got %T", v)
		}
		if a <= 0 || a&(a-1) != 0 {
			return 0, index.ErrorAt(p.name, "key \"general.alignment\"", "gguf: general.alignment must be a non-zero power of two, got %d", a)
		}
		if a > ggufMaxAlignment {
			return 0, index.ErrorAt(p.name, "key \"general.alignment\"", "gguf: general.alignment %d is over the limit of %d", a, ggufMaxAlignment)
		}
		alignment = uint64(a)
	}
	return alignment, nil
}

// ggufInfos are the tensor infos read: the tensors of known types (Offset
// not set) with where their infos are and their offsets in the data
// section, and those of unknown types (unserved).
type ggufInfos struct {
	tensors      []index.Tensor
	infoAt       []int64  // file offset of each tensor's info, for errors
	rel          []uint64 // each tensor's offset in the data section
	unserved     []index.Unserved
	unservedAt   []int64 // file offset of the first unserved tensor's info
	unservedCode uint32
}

// tensorInfos reads the nTensors tensor infos: each is validated as it
// is read, except for where its data lies, which needs the end of the
// infos (place).
func (p *ggufParser) tensorInfos(nTensors, alignment uint64) (ggufInfos, error) {
	r := &p.r
	in := ggufInfos{tensors: make([]index.Tensor, 0, min(nTensors, 1<<16))}
	for i := uint64(0); i < nTensors; i++ {
		r.at("tensor info", i)
		ti, err := p.tensorInfo()
		if err != nil {
			return ggufInfos{}, err
		}
		if typ, why, ok := ikUnserved(ti.typ); ok { // iktypes.go
			// Listed by name, not served, and not counted as unknown: a
			// file of only these is refused naming the type (place).
			in.unserved = append(in.unserved, index.Unserved{
				Name: ti.name, Type: typ, Shape: ti.shape(), Offset: int64(min(ti.offset, math.MaxInt64)), Why: why,
			})
			continue
		}
		if typ, why, ok := ikGroupRows(&ti); ok { // iktypes.go
			// A row-interleaved tensor whose rows are not whole
			// groups: listed with why; the file's others served.
			in.unserved = append(in.unserved, index.Unserved{
				Name: ti.name, Type: typ, Shape: ti.shape(), Offset: int64(min(ti.offset, math.MaxInt64)), Why: why,
			})
			continue
		}
		if _, known := dtype.ByGGML(ti.typ); !known {
			// A type code newer than this build: its block size, so the
			// tensor's size, cannot be known. It is listed, not served,
			// and costs nothing else (its bytes are simply not read).
			shape := make([]int64, ti.nd)
			for j := 0; j < ti.nd; j++ {
				shape[ti.nd-1-j] = ti.ne[j]
			}
			in.unserved = append(in.unserved, index.Unserved{
				Name: ti.name, Type: fmt.Sprintf("ggml type %d", ti.typ), Shape: shape, Offset: int64(min(ti.offset, math.MaxInt64)),
				Why: fmt.Sprintf("unknown ggml type code %d (newer than this tensorfs: its block size, so the tensor's size, is not known)", ti.typ),
			})
			if len(in.unservedAt) == 0 {
				in.unservedAt, in.unservedCode = append(in.unservedAt, ti.at), ti.typ
			}
			continue
		}
		t, err := p.tensor(&ti, alignment)
		if err != nil {
			return ggufInfos{}, err
		}
		in.tensors = append(in.tensors, t)
		in.infoAt = append(in.infoAt, ti.at)
		in.rel = append(in.rel, ti.offset)
	}
	return in, nil
}

// shape is the tensor's shape, row-major (ggml lists ne innermost first).
func (ti *ggufTensorInfo) shape() []int64 {
	shape := make([]int64, ti.nd)
	for j := 0; j < ti.nd; j++ {
		shape[ti.nd-1-j] = ti.ne[j]
	}
	return shape
}

// tensorInfo reads one tensor info: name, dimensions, type and offset.
func (p *ggufParser) tensorInfo() (ti ggufTensorInfo, err error) {
	r := &p.r
	ti = ggufTensorInfo{at: r.pos}
	ti.name, err = r.str(index.MaxNameLength, "tensor name")
	if err != nil {
		return ti, err
	}
	r.named(ti.name)
	where := "tensor " + ggufQuote(ti.name)
	ndAt := r.pos
	nd, err := r.u32()
	if err != nil {
		return ti, err
	}
	if nd > ggufMaxDims {
		return ti, p.errAt(ndAt, where, "gguf: %d dimensions (at most %d)", nd, ggufMaxDims)
	}
	ti.nd = int(nd)
	for j := 0; j < ti.nd; j++ {
		dimAt := r.pos
		d, err := r.u64()
		if err != nil {
			return ti, err
		}
		if d > math.MaxInt64 {
			return ti, p.errAt(dimAt, where, "gguf: dimension %d is %d, over 2^63-1", j, d)
		}
		ti.ne[j] = int64(d)
	}
	if ti.typ, err = r.u32(); err != nil {
		return ti, err
	}
	if ti.offset, err = r.u64(); err != nil {
		return ti, err
	}
	return ti, nil
}

// place puts the tensors in the data section, which starts at the end of
// the tensor infos, aligned, and checks them; the unserved ones get
// where their data starts; it makes the index.
func (p *ggufParser) place(md map[string]any, in ggufInfos, alignment uint64) (*index.Index, error) {
	r := &p.r
	tensors, infoAt, rel, unserved := in.tensors, in.infoAt, in.rel, in.unserved
	// The data section starts at the end of the tensor infos, aligned (no
	// overflow: both are far below 2^62).
	end := uint64(r.pos)
	dataStart := int64((end + alignment - 1) &^ (alignment - 1))
	for i := range tensors {
		t := &tensors[i]
		room := r.size - dataStart // bytes from the data section to the end, < 0 if it starts past the end
		// (a tensor of a code forks reuse that runs past the end is a
		// fork's: forkTypes lists it)
		fork := forkCodes[uint32(t.DType.Info().GGML)]
		if rel[i] > uint64(r.size) || int64(rel[i]) > room || (t.Size > room-int64(rel[i]) && !fork) {
			return nil, p.errAt(infoAt[i], "tensor "+ggufQuote(t.Name), "gguf: %d data bytes (%s %v) at offset %d of the data section (which starts at byte %d) run past the end of the file (%d bytes)", t.Size, t.DType, t.Shape, rel[i], dataStart, r.size)
		}
		t.Offset = dataStart + int64(rel[i])
	}
	tensors, unserved = p.forkTypes(tensors, unserved, dataStart, r.size, alignment)
	if err := p.checkTensors(tensors); err != nil {
		return nil, err
	}
	for i := range unserved {
		u := &unserved[i]
		// Where its data starts, when that lies in the file (it is
		// not read); -1 otherwise.
		if u.Offset > r.size-dataStart || dataStart > r.size {
			u.Offset = -1
		} else {
			u.Offset += dataStart
		}
	}
	if len(tensors) == 0 && len(unserved) > 0 && len(in.unservedAt) == 0 { // only forks' types
		return nil, index.ErrorAt(p.name, "tensor "+ggufQuote(unserved[0].Name), "gguf: %s; and no other tensor to serve", unserved[0].Why)
	}
	if len(tensors) == 0 && len(unserved) > 0 {
		return nil, p.errAt(in.unservedAt[0], "tensor "+ggufQuote(unserved[0].Name), "gguf: unknown ggml type code %d, and no tensor of a known type to serve", in.unservedCode)
	}
	sort.Slice(unserved, func(i, j int) bool { return unserved[i].Name < unserved[j].Name })
	return &index.Index{
		Format:   "gguf",
		Sources:  []string{p.name},
		Metadata: md,
		Tensors:  tensors,
		Unserved: unserved,
	}, nil
}

// tensor validates one tensor info, all but where its data lies, and makes
// its Tensor (Offset not set).
func (p *ggufParser) tensor(ti *ggufTensorInfo, alignment uint64) (index.Tensor, error) {
	where := "tensor " + ggufQuote(ti.name)
	dt, ok := dtype.ByGGML(ti.typ)
	if !ok {
		return index.Tensor{}, p.errAt(ti.at, where, "gguf: unknown ggml type code %d", ti.typ)
	}
	shape := make([]int64, ti.nd)
	for j := 0; j < ti.nd; j++ {
		shape[ti.nd-1-j] = ti.ne[j]
	}
	n, ok := index.Elements(shape)
	if !ok {
		return index.Tensor{}, p.errAt(ti.at, where, "gguf: element count of shape %v overflows int64", shape)
	}
	info := dt.Info()
	if info.BlockElems > 1 {
		ne0 := int64(1)
		if ti.nd > 0 {
			ne0 = ti.ne[0]
		}
		if ne0%info.BlockElems != 0 {
			return index.Tensor{}, p.errAt(ti.at, where, "gguf: innermost dimension %d is not a multiple of the %s block size %d", ne0, dt, info.BlockElems)
		}
	}
	// A type with row meta (ik_llama.cpp's row-scaled ones) is rows of
	// its meta and blocks: TensorSize counts both.
	size, ok := dt.TensorSize(n, dtype.RowLen(shape))
	if !ok {
		return index.Tensor{}, p.errAt(ti.at, where, "gguf: byte size of %d %s elements overflows int64", n, dt)
	}
	if ti.offset%alignment != 0 {
		return index.Tensor{}, p.errAt(ti.at, where, "gguf: data offset %d is not a multiple of the alignment %d", ti.offset, alignment)
	}
	return index.Tensor{Name: ti.name, DType: dt, Shape: shape, Size: size}, nil
}

// forkCodes are the ggml type codes that forks of llama.cpp reuse for
// layouts of their own (TurboQuant, TBQ, EOQ, NF4DQ, T5B, TL2 use 41–43,
// which mainline ggml gives Q1_0 and Q2_0 and has not given yet): a
// tensor of such a code is served as the mainline type only when its data
// has exactly that type's size.
var forkCodes = map[uint32]bool{41: true, 42: true, 43: true}

// forkTypes moves out of tensors, into unserved, each tensor whose ggml
// type code forks reuse (forkCodes) and whose data does not have the
// mainline type's size: it would overrun the next tensor's data (by
// offset, or the end of the file), or leave a gap to it of an alignment
// or more, where GGUF writers pad to the alignment only. Such a file is
// a fork's: its tensor is named with its code and listed, never read as
// the mainline type, and the file's other tensors are served (it used to
// make the whole file refused as data that "overlaps tensor", naming no
// type). Offsets are final (dataStart added).
func (p *ggufParser) forkTypes(tensors []index.Tensor, unserved []index.Unserved, dataStart, size int64, alignment uint64) ([]index.Tensor, []index.Unserved) {
	contested := false
	for _, t := range tensors {
		if forkCodes[uint32(t.DType.Info().GGML)] {
			contested = true
			break
		}
	}
	if !contested {
		return tensors, unserved
	}
	// where each piece of data starts: every tensor's, and the unserved
	// ones' that lie in the file
	var starts []int64
	for _, t := range tensors {
		starts = append(starts, t.Offset)
	}
	for _, u := range unserved {
		if at := dataStart + u.Offset; u.Offset >= 0 && u.Offset <= size-dataStart {
			starts = append(starts, at)
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	kept := tensors[:0]
	for _, t := range tensors {
		code := uint32(t.DType.Info().GGML)
		if !forkCodes[code] || t.Size == 0 {
			kept = append(kept, t)
			continue
		}
		next, last := size, true // the first start after t's
		if i := sort.Search(len(starts), func(i int) bool { return starts[i] > t.Offset }); i < len(starts) {
			next, last = starts[i], false
		}
		room := next - t.Offset
		if t.Size <= room && (last || room-t.Size < int64(alignment)) {
			kept = append(kept, t)
			continue
		}
		space := fmt.Sprintf("%d bytes before the next tensor's data", room)
		if last {
			space = fmt.Sprintf("%d bytes to the end of the file", room)
		}
		unserved = append(unserved, index.Unserved{
			Name: t.Name, Type: fmt.Sprintf("ggml type %d", code), Shape: t.Shape, Offset: t.Offset - dataStart,
			Why: fmt.Sprintf("ggml type code %d is %s in ggml, but the tensor's data (%s) does not have %s's size for its shape (%d bytes): a fork's type reusing code %d (TurboQuant, TBQ, EOQ, NF4DQ, T5B, TL2...), not read as %s",
				code, t.DType, space, t.DType, t.Size, code, t.DType),
		})
	}
	return kept, unserved
}

// checkTensors refuses duplicate names and overlapping data, and leaves
// tensors sorted by Name.
func (p *ggufParser) checkTensors(ts []index.Tensor) error {
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
			return index.ErrorAt(p.name, "tensor "+ggufQuote(ts[i].Name), "gguf: data [%d, %d) overlaps tensor %s at [%d, %d) (%s %v: %d bytes)",
				ts[i].Offset, ts[i].Offset+ts[i].Size, ggufQuote(ts[prev].Name), ts[prev].Offset, ts[prev].Offset+ts[prev].Size, ts[prev].DType, ts[prev].Shape, ts[prev].Size)
		}
		prev = i
	}
	sort.SliceStable(ts, func(a, b int) bool { return ts[a].Name < ts[b].Name })
	for i := 1; i < len(ts); i++ {
		if ts[i].Name == ts[i-1].Name {
			return index.ErrorAt(p.name, "tensor "+ggufQuote(ts[i].Name), "gguf: duplicate tensor name")
		}
	}
	return nil
}
