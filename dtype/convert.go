package dtype

// STUB: replaced by the conversion kernels.

// Converter converts whole blocks: src holds k blocks of the source dtype
// (len(src) == k*from.BlockBytes), dst has room for the k*from.BlockElems
// elements in the target dtype; it writes exactly that many bytes.
type Converter func(dst, src []byte)

// ConverterFor returns the converter from one dtype to another, and false
// when there is none (integer, bool and complex sources; quantized types
// without a dequantizer; targets other than F64, F32, F16, BF16).
func ConverterFor(from, to DType) (Converter, bool) { return nil, false }

// CanConvert reports whether ConverterFor(from, to) exists.
func CanConvert(from, to DType) bool { _, ok := ConverterFor(from, to); return ok }
