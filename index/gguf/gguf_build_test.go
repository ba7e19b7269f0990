package gguf

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/lazyweights/tensorfs/index"
)

// A small GGUF writer for tests: valid files, and hostile ones made by
// writing raw bytes where the format wants structure.

// ggufMemFile is an in-memory File.
type ggufMemFile struct {
	*bytes.Reader
	name string
}

func (m ggufMemFile) Name() string { return m.name }

func ggufFile(name string, b []byte) ggufMemFile { return ggufMemFile{bytes.NewReader(b), name} }

func ggufLE32(v uint32) []byte  { return binary.LittleEndian.AppendUint32(nil, v) }
func ggufLE64b(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// ggufStr encodes a GGUF string: u64 length, bytes.
func ggufStr(s string) []byte { return append(ggufLE64b(uint64(len(s))), s...) }

func ggufCat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// ggufArr encodes an array value (after its type code): element type,
// count, then the element payloads.
func ggufArr(et uint32, n uint64, elems ...[]byte) []byte {
	return ggufCat(ggufLE32(et), ggufLE64b(n), ggufCat(elems...))
}

// ggufKV is one key/value: the value's type code and its encoded payload.
type ggufKV struct {
	key     string
	typ     uint32
	payload []byte
}

// ggufTI is one tensor info. offset is relative to the data section.
type ggufTI struct {
	name   string
	dims   []uint64 // GGUF order: innermost first
	typ    uint32
	offset uint64
}

type ggufBuild struct {
	version   uint32
	nTensors  *uint64 // override the counts written
	nKV       *uint64
	kvs       []ggufKV
	tensors   []ggufTI
	alignment uint64 // padding used for the data section (default 32)
	data      []byte
}

func (g *ggufBuild) bytes() []byte {
	v := g.version
	if v == 0 {
		v = 3
	}
	nt, nkv := uint64(len(g.tensors)), uint64(len(g.kvs))
	if g.nTensors != nil {
		nt = *g.nTensors
	}
	if g.nKV != nil {
		nkv = *g.nKV
	}
	b := ggufCat([]byte("GGUF"), ggufLE32(v), ggufLE64b(nt), ggufLE64b(nkv))
	for _, kv := range g.kvs {
		b = ggufCat(b, ggufStr(kv.key), ggufLE32(kv.typ), kv.payload)
	}
	for _, t := range g.tensors {
		b = ggufCat(b, ggufStr(t.name), ggufLE32(uint32(len(t.dims))))
		for _, d := range t.dims {
			b = append(b, ggufLE64b(d)...)
		}
		b = ggufCat(b, ggufLE32(t.typ), ggufLE64b(t.offset))
	}
	if len(g.tensors) > 0 || len(g.data) > 0 {
		a := g.alignment
		if a == 0 {
			a = 32
		}
		for uint64(len(b))%a != 0 {
			b = append(b, 0)
		}
		b = append(b, g.data...)
	}
	return b
}

// ggufU64p returns a pointer to v (for count overrides).
func ggufU64p(v uint64) *uint64 { return &v }

// ggufAllTypesKVs is one key/value of every scalar type, strings, typed
// arrays of each element type and nested arrays.
func ggufAllTypesKVs() []ggufKV {
	return []ggufKV{
		{"u8", ggufTypeU8, []byte{200}},
		{"i8", ggufTypeI8, []byte{0x80}},
		{"u16", ggufTypeU16, ggufLE32(65535)[:2]},
		{"i16", ggufTypeI16, []byte{0x00, 0x80}},
		{"u32", ggufTypeU32, ggufLE32(4000000000)},
		{"i32", ggufTypeI32, ggufLE32(uint32(0xfffffff9))},
		{"f32", ggufTypeF32, ggufLE32(math.Float32bits(0.1))},
		{"bool.t", ggufTypeBool, []byte{1}},
		{"bool.f", ggufTypeBool, []byte{0}},
		{"str", ggufTypeString, ggufStr("héllo")},
		{"u64", ggufTypeU64, ggufLE64b(1<<63 + 5)},
		{"i64", ggufTypeI64, ggufLE64b(uint64(1) << 62)},
		{"f64", ggufTypeF64, ggufLE64b(math.Float64bits(-2.5))},
		{"f32.nan", ggufTypeF32, ggufLE32(0x7fc00000)},
		{"f64.inf", ggufTypeF64, ggufLE64b(math.Float64bits(math.Inf(-1)))},
		{"arr.u8", ggufTypeArray, ggufArr(ggufTypeU8, 3, []byte{1, 2, 255})},
		{"arr.i8", ggufTypeArray, ggufArr(ggufTypeI8, 2, []byte{0xff, 7})},
		{"arr.u16", ggufTypeArray, ggufArr(ggufTypeU16, 2, []byte{1, 0, 0xff, 0xff})},
		{"arr.i16", ggufTypeArray, ggufArr(ggufTypeI16, 1, []byte{0xfe, 0xff})},
		{"arr.u32", ggufTypeArray, ggufArr(ggufTypeU32, 2, ggufLE32(7), ggufLE32(1<<31))},
		{"arr.i32", ggufTypeArray, ggufArr(ggufTypeI32, 2, ggufLE32(3), ggufLE32(uint32(0xffffffff)))},
		{"arr.f32", ggufTypeArray, ggufArr(ggufTypeF32, 2, ggufLE32(math.Float32bits(1.5)), ggufLE32(math.Float32bits(-1000)))},
		{"arr.f32.inf", ggufTypeArray, ggufArr(ggufTypeF32, 2, ggufLE32(math.Float32bits(1.5)), ggufLE32(0x7f800000))},
		{"arr.bool", ggufTypeArray, ggufArr(ggufTypeBool, 3, []byte{1, 0, 1})},
		{"arr.str", ggufTypeArray, ggufArr(ggufTypeString, 3, ggufStr("a"), ggufStr(""), ggufStr("<0x0A>"))},
		{"arr.u64", ggufTypeArray, ggufArr(ggufTypeU64, 1, ggufLE64b(math.MaxUint64))},
		{"arr.i64", ggufTypeArray, ggufArr(ggufTypeI64, 1, ggufLE64b(uint64(1<<64-2)))},
		{"arr.f64", ggufTypeArray, ggufArr(ggufTypeF64, 1, ggufLE64b(math.Float64bits(0.25)))},
		{"arr.empty", ggufTypeArray, ggufArr(ggufTypeI32, 0)},
		{"arr.nested", ggufTypeArray, ggufArr(ggufTypeArray, 2,
			ggufArr(ggufTypeString, 1, ggufStr("x")),
			ggufArr(ggufTypeArray, 1, ggufArr(ggufTypeU8, 1, []byte{9})))},
	}
}

// ggufAllTypesWant is what ggufAllTypesKVs parses to.
func ggufAllTypesWant() map[string]any {
	return map[string]any{
		"u8":          uint64(200),
		"i8":          int64(-128),
		"u16":         uint64(65535),
		"i16":         int64(-32768),
		"u32":         uint64(4000000000),
		"i32":         int64(-7),
		"f32":         float64(float32(0.1)),
		"bool.t":      true,
		"bool.f":      false,
		"str":         "héllo",
		"u64":         uint64(1<<63 + 5),
		"i64":         int64(1) << 62,
		"f64":         -2.5,
		"f32.nan":     "NaN",
		"f64.inf":     "-Inf",
		"arr.u8":      index.Uint8s{1, 2, 255},
		"arr.i8":      []int8{-1, 7},
		"arr.u16":     []uint16{1, 65535},
		"arr.i16":     []int16{-2},
		"arr.u32":     []uint32{7, 1 << 31},
		"arr.i32":     []int32{3, -1},
		"arr.f32":     []float32{1.5, -1000},
		"arr.f32.inf": []any{1.5, "+Inf"},
		"arr.bool":    []bool{true, false, true},
		"arr.str":     []string{"a", "", "<0x0A>"},
		"arr.u64":     []uint64{math.MaxUint64},
		"arr.i64":     []int64{-2},
		"arr.f64":     []float64{0.25},
		"arr.empty":   []int32{},
		"arr.nested":  []any{[]string{"x"}, []any{index.Uint8s{9}}},
	}
}

// ggufValidBuild is a valid v3 file with every value type and tensors of
// several dtypes, laid out with padding, data bytes set to a pattern.
func ggufValidBuild() *ggufBuild {
	g := &ggufBuild{kvs: ggufAllTypesKVs()}
	g.kvs = append(g.kvs,
		ggufKV{"general.architecture", ggufTypeString, ggufStr("llama")},
		ggufKV{"general.alignment", ggufTypeU32, ggufLE32(64)})
	g.alignment = 64
	// (name, dims, ggml type, bytes)
	specs := []struct {
		name string
		dims []uint64
		typ  uint32
		size uint64
	}{
		{"token_embd.weight", []uint64{64, 3}, 8, 2 * 34 * 3},        // Q8_0: 2 blocks per row
		{"blk.0.attn_norm.weight", []uint64{5}, 0, 20},               // F32
		{"blk.0.ffn_up.weight", []uint64{256, 2, 1, 2}, 12, 4 * 144}, // Q4_K
		{"a.scalar", nil, 0, 4},                                      // F32, 0 dims
		{"empty", []uint64{0, 7}, 1, 0},                              // F16, no elements
		{"bf16", []uint64{3, 2}, 30, 12},                             // BF16
		{"ints", []uint64{2}, 26, 8},                                 // I32
	}
	// Padding goes between tensors only: the file ends with the last
	// tensor's last byte, so any truncation of it is invalid.
	off := uint64(0)
	for i, s := range specs {
		for off%64 != 0 {
			off++
			g.data = append(g.data, 0xee)
		}
		g.tensors = append(g.tensors, ggufTI{s.name, s.dims, s.typ, off})
		for k := uint64(0); k < s.size; k++ {
			g.data = append(g.data, byte(i*37+int(k)))
		}
		off += s.size
	}
	return g
}
