package dtype

import (
	"fmt"
	"strings"
)

// DType identifies how a tensor's elements are stored. The zero value is
// Invalid. DType values are stable within one build only; use Name() or
// Parse() at boundaries.
type DType uint8

const (
	Invalid DType = iota
	F64
	F32
	F16
	BF16
	F8E4M3 // F8_E4M3 (fn variant: no Inf, NaN = S.1111.111)
	F8E5M2 // F8_E5M2 (IEEE-like: Inf and NaN)
	F8E8M0 // F8_E8M0 (scale format: 2^(e-127), 0xFF NaN)
	F4     // F4 (E2M1, two per byte, low nibble first)
	// F8_E4M3FNUZ and F8_E5M2FNUZ (torch float8_e4m3fnuz, float8_e5m2fnuz;
	// AMD's formats): bias 8 and 16, no Inf, no -0, 0x80 the only NaN.
	F8E4M3FNUZ
	F8E5M2FNUZ
	C64  // complex64: two F32
	C128 // complex128: two F64
	C32  // complex32: two F16 (torch ComplexHalf)
	I64
	I32
	I16
	I8
	U64
	U32
	U16
	U8
	Bool
	// ggml quantized block types (GGUF). Raw blocks as stored.
	Q4_0
	Q4_1
	Q5_0
	Q5_1
	Q6_0 // ik_llama.cpp's (its code 133; quant_q6_0.go)
	Q8_0
	Q8_1
	Q2_K
	Q3_K
	Q4_K
	Q5_K
	Q6_K
	Q8_K
	IQ2_XXS
	IQ2_XS
	IQ3_XXS
	IQ1_S
	IQ4_NL
	IQ3_S
	IQ2_S
	IQ4_XS
	IQ1_M
	TQ1_0
	TQ2_0
	MXFP4
	NVFP4
	Q1_0
	Q2_0
	// ik_llama.cpp's own ggml types (quant_ik.go)
	IQ2_K
	IQ3_K
	IQ4_K
	IQ5_K
	IQ6_K
	// ik_llama.cpp's row-scaled types (quant_ikrow.go): blocks of 256 after
	// a scale at the start of each row (RowMeta).
	IQ4_KS
	IQ2_KS
	IQ4_KSS
	IQ5_KS
	IQ3_KS
	IQ2_KL
	// ik_llama.cpp's trellis types (quant_iktrellis.go): a float32 scale
	// per row too.
	IQ1_KT
	IQ2_KT
	IQ3_KT
	IQ4_KT
	// ik_llama.cpp's BitNet ternary types (quant_ikbn.go): blocks of 64
	// after a scale per row (fp16 for IQ1_BN, float32 for IQ2_BN).
	IQ1_BN
	IQ2_BN
	// ik_llama.cpp's row-interleaved types (quant_ikrepacked.go): one
	// DType per row of ikGroups, in its order, from firstGroup on
	// (ByName("Q4_0_R8"), ByGGML(202)...); blocks of G rows (RowGroup).
	firstGroup
	numDTypes = firstGroup + DType(len(ikGroups))
)

// Kind groups dtypes by what conversion can do with them.
type Kind uint8

const (
	KindFloat   Kind = iota + 1 // real floating point: convertible to float views
	KindQuant                   // block-quantized: convertible when it has a dequantizer
	KindInt                     // signed or unsigned integer
	KindBool                    // one byte, 0 or 1
	KindComplex                 // complex: not convertible to real views
)

// Info is one row of the dtype table.
type Info struct {
	Name       string // safetensors spelling, or ggml spelling for quant types
	Kind       Kind
	BlockElems int64 // elements per block (1 for scalar types, 2 for F4)
	BlockBytes int64 // bytes per block
	// Unit is the byte width of the byte-order unit (what a big-endian
	// source swaps): the element size, or the component size for complex.
	Unit int
	// NumPy is the numpy descr (little-endian) where NumPy has the type,
	// "" otherwise.
	NumPy string
	// GGML is the ggml type code for GGUF, -1 where GGUF has none.
	GGML int
}

var table = withGroups([numDTypes]Info{
	Invalid:    {Name: "INVALID", GGML: -1},
	F64:        {"F64", KindFloat, 1, 8, 8, "<f8", 28},
	F32:        {"F32", KindFloat, 1, 4, 4, "<f4", 0},
	F16:        {"F16", KindFloat, 1, 2, 2, "<f2", 1},
	BF16:       {"BF16", KindFloat, 1, 2, 2, "", 30},
	F8E4M3:     {"F8_E4M3", KindFloat, 1, 1, 1, "", -1},
	F8E5M2:     {"F8_E5M2", KindFloat, 1, 1, 1, "", -1},
	F8E8M0:     {"F8_E8M0", KindFloat, 1, 1, 1, "", -1},
	F4:         {"F4", KindFloat, 2, 1, 1, "", -1},
	F8E4M3FNUZ: {"F8_E4M3FNUZ", KindFloat, 1, 1, 1, "", -1},
	F8E5M2FNUZ: {"F8_E5M2FNUZ", KindFloat, 1, 1, 1, "", -1},
	C64:        {"C64", KindComplex, 1, 8, 4, "<c8", -1},
	C128:       {"C128", KindComplex, 1, 16, 8, "<c16", -1},
	C32:        {"C32", KindComplex, 1, 4, 2, "", -1},
	I64:        {"I64", KindInt, 1, 8, 8, "<i8", 27},
	I32:        {"I32", KindInt, 1, 4, 4, "<i4", 26},
	I16:        {"I16", KindInt, 1, 2, 2, "<i2", 25},
	I8:         {"I8", KindInt, 1, 1, 1, "|i1", 24},
	U64:        {"U64", KindInt, 1, 8, 8, "<u8", -1},
	U32:        {"U32", KindInt, 1, 4, 4, "<u4", -1},
	U16:        {"U16", KindInt, 1, 2, 2, "<u2", -1},
	U8:         {"U8", KindInt, 1, 1, 1, "|u1", -1},
	Bool:       {"BOOL", KindBool, 1, 1, 1, "|b1", -1},
	Q4_0:       {"Q4_0", KindQuant, 32, 18, 1, "", 2},
	Q4_1:       {"Q4_1", KindQuant, 32, 20, 1, "", 3},
	Q5_0:       {"Q5_0", KindQuant, 32, 22, 1, "", 6},
	Q5_1:       {"Q5_1", KindQuant, 32, 24, 1, "", 7},
	Q6_0:       {"Q6_0", KindQuant, 32, 26, 1, "", 133}, // ik_llama.cpp
	Q8_0:       {"Q8_0", KindQuant, 32, 34, 1, "", 8},
	Q8_1:       {"Q8_1", KindQuant, 32, 36, 1, "", 9},
	Q2_K:       {"Q2_K", KindQuant, 256, 84, 1, "", 10},
	Q3_K:       {"Q3_K", KindQuant, 256, 110, 1, "", 11},
	Q4_K:       {"Q4_K", KindQuant, 256, 144, 1, "", 12},
	Q5_K:       {"Q5_K", KindQuant, 256, 176, 1, "", 13},
	Q6_K:       {"Q6_K", KindQuant, 256, 210, 1, "", 14},
	Q8_K:       {"Q8_K", KindQuant, 256, 292, 1, "", 15},
	IQ2_XXS:    {"IQ2_XXS", KindQuant, 256, 66, 1, "", 16},
	IQ2_XS:     {"IQ2_XS", KindQuant, 256, 74, 1, "", 17},
	IQ3_XXS:    {"IQ3_XXS", KindQuant, 256, 98, 1, "", 18},
	IQ1_S:      {"IQ1_S", KindQuant, 256, 50, 1, "", 19},
	IQ4_NL:     {"IQ4_NL", KindQuant, 32, 18, 1, "", 20},
	IQ3_S:      {"IQ3_S", KindQuant, 256, 110, 1, "", 21},
	IQ2_S:      {"IQ2_S", KindQuant, 256, 82, 1, "", 22},
	IQ4_XS:     {"IQ4_XS", KindQuant, 256, 136, 1, "", 23},
	IQ1_M:      {"IQ1_M", KindQuant, 256, 56, 1, "", 29},
	TQ1_0:      {"TQ1_0", KindQuant, 256, 54, 1, "", 34},
	TQ2_0:      {"TQ2_0", KindQuant, 256, 66, 1, "", 35},
	MXFP4:      {"MXFP4", KindQuant, 32, 17, 1, "", 39},
	NVFP4:      {"NVFP4", KindQuant, 64, 36, 1, "", 40},
	Q1_0:       {"Q1_0", KindQuant, 128, 18, 1, "", 41},
	Q2_0:       {"Q2_0", KindQuant, 64, 18, 1, "", 42},
	// ik_llama.cpp's codes (its ggml.h), which mainline ggml does not use
	IQ2_K: {"IQ2_K", KindQuant, 256, 76, 1, "", 137},
	IQ3_K: {"IQ3_K", KindQuant, 256, 110, 1, "", 138},
	IQ4_K: {"IQ4_K", KindQuant, 256, 144, 1, "", 139},
	IQ5_K: {"IQ5_K", KindQuant, 256, 176, 1, "", 140},
	IQ6_K: {"IQ6_K", KindQuant, 256, 212, 1, "", 141},
	// ik_llama.cpp's row-scaled codes: BlockBytes is a block's, without
	// the row's scale (RowMeta)
	IQ4_KS:  {"IQ4_KS", KindQuant, 256, 136, 1, "", 144},
	IQ2_KS:  {"IQ2_KS", KindQuant, 256, 70, 1, "", 145},
	IQ4_KSS: {"IQ4_KSS", KindQuant, 256, 128, 1, "", 146},
	IQ5_KS:  {"IQ5_KS", KindQuant, 256, 168, 1, "", 152},
	IQ3_KS:  {"IQ3_KS", KindQuant, 256, 102, 1, "", 156},
	IQ2_KL:  {"IQ2_KL", KindQuant, 256, 86, 1, "", 157},
	IQ1_KT:  {"IQ1_KT", KindQuant, 256, 56, 1, "", 158},
	IQ2_KT:  {"IQ2_KT", KindQuant, 256, 68, 1, "", 153},
	IQ3_KT:  {"IQ3_KT", KindQuant, 256, 100, 1, "", 154},
	IQ4_KT:  {"IQ4_KT", KindQuant, 256, 128, 1, "", 155},
	IQ1_BN:  {"IQ1_BN", KindQuant, 64, 13, 1, "", 134},
	IQ2_BN:  {"IQ2_BN", KindQuant, 64, 16, 1, "", 135},
})

// withGroups fills in t the rows of the row-interleaved types, one per
// row of ikGroups: BlockElems a row's elements per interleaved block,
// BlockBytes a row's share of it (the base type's block), so that G rows
// take the bytes G rows of the base type take.
func withGroups(t [numDTypes]Info) [numDTypes]Info {
	for i, g := range ikGroups {
		t[firstGroup+DType(i)] = Info{Name: g.name, Kind: KindQuant, BlockElems: int64(g.blockElems),
			BlockBytes: int64(g.blockBytes / g.rows), Unit: 1, GGML: int(g.code)}
	}
	return t
}

// rowMeta is the bytes each row of a tensor starts with, before the row's
// blocks, for the types that keep data per row (ik_llama.cpp's
// row_meta_size); 0 for every other type.
var rowMeta = [numDTypes]int64{
	IQ4_KS: 4, IQ2_KS: 2, IQ4_KSS: 4, IQ5_KS: 4, IQ3_KS: 2, IQ2_KL: 2,
	IQ1_KT: 4, IQ2_KT: 4, IQ3_KT: 4, IQ4_KT: 4,
	IQ1_BN: 2, IQ2_BN: 4,
}

// RowMeta returns the bytes that each row of a tensor of d (its innermost
// dimension) starts with before the row's blocks: a scale for
// ik_llama.cpp's row-scaled types, 0 for the types whose blocks are
// self-contained. A type with row meta is stored as rows of RowMeta +
// rowLen/BlockElems*BlockBytes bytes (RowSize, TensorSize); its blocks
// are converted with their row's meta (RowConverterFor).
func (d DType) RowMeta() int64 {
	if d >= numDTypes {
		return 0
	}
	return rowMeta[d]
}

// RowGroup returns the rows per group of a row-interleaved type
// (ik_llama.cpp's _R4 and _R8 types: 4 or 8 consecutive rows stored as
// one run of blocks, block b of the run holding block b of each row), 0
// for every other type. A tensor of such a type is whole groups of rows
// (TensorSize; ByteSize refuses it), GroupSize bytes each, and is
// converted a group's blocks at a time (GroupConverterFor).
func (d DType) RowGroup() int64 {
	if d < firstGroup || d >= numDTypes {
		return 0
	}
	return int64(ikGroups[d-firstGroup].rows)
}

// GroupMeta returns the bytes at the head of each group of a
// row-interleaved type, before its blocks (ik_llama.cpp's row_meta_size
// of the group's rows, their scales gathered: 4 float32 for IQ4_KS_R4),
// 0 for the types without and for every other type.
func (d DType) GroupMeta() int64 {
	if d.RowGroup() == 0 {
		return 0
	}
	return int64(ikGroups[d-firstGroup].meta)
}

// GroupSize returns the bytes of one group of RowGroup rows of rowLen
// elements of a row-interleaved type (its GroupMeta head and its
// interleaved blocks), and false when rowLen is not a positive whole
// number of blocks or d is not row-interleaved.
func (d DType) GroupSize(rowLen int64) (int64, bool) {
	i, g, m := d.Info(), d.RowGroup(), d.GroupMeta()
	if g == 0 || rowLen <= 0 || rowLen%i.BlockElems != 0 {
		return 0, false
	}
	blocks := rowLen / i.BlockElems
	if i.BlockBytes > (1<<63-1-m)/g/blocks {
		return 0, false
	}
	return m + g*blocks*i.BlockBytes, true
}

// RowLen returns the innermost dimension of shape, the elements of one
// row for RowMeta, or 1 for a scalar.
func RowLen(shape []int64) int64 {
	if len(shape) == 0 {
		return 1
	}
	return shape[len(shape)-1]
}

// Info returns d's row of the table. Invalid and out-of-range values give
// the Invalid row.
func (d DType) Info() Info {
	if d >= numDTypes {
		return table[Invalid]
	}
	return table[d]
}

// String returns the canonical name (safetensors or ggml spelling).
func (d DType) String() string {
	if d >= numDTypes {
		return fmt.Sprintf("DType(%d)", uint8(d))
	}
	return table[d].Name
}

// Name is String.
func (d DType) Name() string { return d.String() }

// Valid reports whether d is a known dtype.
func (d DType) Valid() bool { return d > Invalid && d < numDTypes }

// Kind returns d's kind.
func (d DType) Kind() Kind { return d.Info().Kind }

// IsFloatView reports whether d can be a view target (F64, F32, F16, BF16).
func (d DType) IsFloatView() bool { return d == F64 || d == F32 || d == F16 || d == BF16 }

// ElemSize returns the byte size of one element for scalar types (block of
// one element), or 0 for packed/block types (F4, quantized).
func (d DType) ElemSize() int64 {
	i := d.Info()
	if i.BlockElems != 1 {
		return 0
	}
	return i.BlockBytes
}

// All returns every valid dtype in table order.
func All() []DType {
	out := make([]DType, 0, numDTypes-1)
	for d := DType(1); d < numDTypes; d++ {
		out = append(out, d)
	}
	return out
}

// ByName returns the dtype with exactly this canonical name ("F32",
// "F8_E4M3", "Q4_K"...).
func ByName(name string) (DType, bool) {
	for d := DType(1); d < numDTypes; d++ {
		if table[d].Name == name {
			return d, true
		}
	}
	return Invalid, false
}

// ByGGML returns the dtype for a ggml type code.
func ByGGML(code uint32) (DType, bool) {
	for d := DType(1); d < numDTypes; d++ {
		if table[d].GGML >= 0 && uint32(table[d].GGML) == code {
			return d, true
		}
	}
	return Invalid, false
}

var aliases = map[string]DType{
	"f64": F64, "float64": F64, "double": F64, "fp64": F64,
	"f32": F32, "float32": F32, "float": F32, "fp32": F32,
	"f16": F16, "float16": F16, "half": F16, "fp16": F16,
	"bf16": BF16, "bfloat16": BF16,
}

// Parse accepts the usual spellings of a dtype in flags: canonical names
// ("F32", "BF16", "Q4_0"), case-insensitively, and aliases such as
// "float32", "fp16", "bfloat16", "half", "double".
func Parse(s string) (DType, error) {
	if d, ok := ByName(strings.ToUpper(s)); ok {
		return d, nil
	}
	if d, ok := aliases[strings.ToLower(s)]; ok {
		return d, nil
	}
	return Invalid, fmt.Errorf("unknown dtype %q (want f32, f16, bf16, f64 or a name such as F32, BF16, I64)", s)
}

// ParseView is Parse restricted to the view targets F64, F32, F16, BF16.
func ParseView(s string) (DType, error) {
	d, err := Parse(s)
	if err != nil {
		return Invalid, fmt.Errorf("unknown dtype %q (want f32, f16, bf16 or f64)", s)
	}
	if !d.IsFloatView() {
		return Invalid, fmt.Errorf("%s is not a view dtype (want f32, f16, bf16 or f64)", d)
	}
	return d, nil
}

// ByteSize returns the bytes that n elements of d occupy, and false when n
// is not a whole number of blocks or the product overflows int64, or when
// d has row meta or interleaves rows (its size depends on the row length:
// TensorSize).
func (d DType) ByteSize(n int64) (int64, bool) {
	i := d.Info()
	if !d.Valid() || n < 0 || i.BlockElems <= 0 || d.RowMeta() != 0 || d.RowGroup() != 0 {
		return 0, false
	}
	if n%i.BlockElems != 0 {
		return 0, false
	}
	blocks := n / i.BlockElems
	if blocks != 0 && i.BlockBytes > (1<<63-1)/blocks {
		return 0, false
	}
	return blocks * i.BlockBytes, true
}

// RowSize returns the bytes of one row of rowLen elements of a type with
// row meta (the meta and the row's blocks), and false when rowLen is not
// a positive whole number of blocks or d has no row meta.
func (d DType) RowSize(rowLen int64) (int64, bool) {
	i, m := d.Info(), d.RowMeta()
	if m == 0 || rowLen <= 0 || rowLen%i.BlockElems != 0 {
		return 0, false
	}
	blocks := rowLen / i.BlockElems
	if i.BlockBytes > (1<<63-1-m)/blocks {
		return 0, false
	}
	return m + blocks*i.BlockBytes, true
}

// TensorSize returns the bytes of a tensor of d of n elements in rows of
// rowLen (its innermost dimension, RowLen): ByteSize(n) for a type
// without row meta, whatever rowLen; n/rowLen rows of RowSize(rowLen)
// bytes for one with, false when n is not whole rows or it overflows; for
// a row-interleaved type, n/rowLen rows in whole groups of RowGroup rows
// of GroupSize(rowLen) bytes, false when the rows are not whole groups.
func (d DType) TensorSize(n, rowLen int64) (int64, bool) {
	if g := d.RowGroup(); g != 0 {
		if n == 0 && rowLen >= 0 && rowLen%d.Info().BlockElems == 0 {
			return 0, true
		}
		group, ok := d.GroupSize(rowLen)
		if !ok || n < 0 || n%rowLen != 0 || n/rowLen%g != 0 {
			return 0, false
		}
		groups := n / rowLen / g
		if groups != 0 && group > (1<<63-1)/groups {
			return 0, false
		}
		return groups * group, true
	}
	if d.RowMeta() == 0 {
		return d.ByteSize(n)
	}
	if n == 0 && rowLen >= 0 && rowLen%d.Info().BlockElems == 0 {
		return 0, true // no rows, or rows of no elements
	}
	row, ok := d.RowSize(rowLen)
	if !ok || n < 0 || n%rowLen != 0 {
		return 0, false
	}
	rows := n / rowLen
	if rows != 0 && row > (1<<63-1)/rows {
		return 0, false
	}
	return rows * row, true
}
