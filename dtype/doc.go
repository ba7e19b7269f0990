// Package dtype is the table of tensor element types and the conversions
// between them. It is a leaf: it imports nothing from tensorfs, and index,
// view and the client import it.
//
// # The table
//
// A DType is one row of a fixed table (dtype.go): its canonical name (the
// safetensors spelling, or the ggml one for quantized types), its Kind, its
// block shape (BlockElems elements in BlockBytes bytes: 1 in 8 for F64, 2 in
// 1 for F4, 32 in 18 for Q4_0), its byte-order unit, and its NumPy and GGML
// codes. DType values are stable within one build only; use names at
// boundaries. ByteSize refuses partial blocks and overflow.
//
// # Conversions
//
// ConverterFor(from, to) gives a Converter for every target in F64, F32,
// F16, BF16 (the view dtypes) from:
//
//	F64, F32, F16, BF16   IEEE binary64/32/16 and bfloat16
//	F8_E4M3               "fn": bias 7, no Inf, S.1111.111 is NaN, max 448
//	F8_E5M2               IEEE-like: bias 15, Inf and NaN (the top byte of an F16)
//	F8_E8M0               unsigned scale 2^(e-127); 0xFF is NaN
//	F8_E4M3FNUZ           bias 8, no Inf, no -0: 0x80 is the only NaN, max 240
//	F8_E5M2FNUZ           bias 16, no Inf, no -0: 0x80 is the only NaN, max 57344
//	                      (torch float8_e4m3fnuz, float8_e5m2fnuz; the NaN
//	                      becomes the positive default quiet NaN, as torch gives)
//	F4                    E2M1, bias 1, no Inf or NaN; two per byte, element 0
//	                      in the low nibble (OCP MX / torch float4_e2m1fn_x2)
//	quantized             every ggml type, through quantDequantizer (quant.go)
//	                      to float32 exactly as ggml's to_float, then to the
//	                      target
//
// Integer, bool and complex dtypes have no converter, and nothing converts
// to a dtype outside the four targets. A dtype converts to itself by a
// plain copy (bits unchanged, signalling NaNs included).
//
// # Rounding
//
// Every conversion is the IEEE 754 conversion of the exact source value,
// rounded once to nearest, ties to even:
//
//   - Narrowing rounds in one step from the source: F64 to F16 and F64 to
//     BF16 do not pass through F32 (which could round twice). BF16 is
//     rounded like any format, never truncated.
//   - Subnormal inputs and outputs are exact: no flush to zero.
//   - A magnitude at or above the target's largest finite value plus half
//     an ulp becomes ±Inf (F16: 65520 and up, F32 to BF16: 0x7F7F8000 and
//     up); ±Inf and ±0 keep their sign.
//   - Widening (F16, BF16, F8, F4 to F32 or F64; F32 to F64) is exact.
//   - A quantized source gives the dequantizer's float32 value; F32 is that
//     value, F64 is exact, F16 and BF16 round it once.
//
// # NaN
//
// A NaN stays NaN, and comes out quiet: its sign is kept, the quiet bit (the
// top mantissa bit) is set, and the source's payload (the mantissa below
// the exponent) is kept left-aligned, its low bits dropped when the target
// is narrower. This is what x86 (CVTSD2SS, F16C) and ARM hardware do, and
// what github.com/x448/float16 does. F8_E4M3 and F8_E8M0 NaNs have no
// payload and become the default quiet NaN (F8_E4M3 with its sign, F8_E8M0
// positive). Only the identity copy leaves a signalling NaN signalling.
//
// # The Converter contract
//
// A Converter takes src of k whole blocks and writes the k*BlockElems
// target elements, little-endian, at the start of dst; it writes nothing
// else. It is safe for concurrent use, allocates nothing, and is
// block-local: converting any run of whole blocks gives the same bytes as
// that run of a larger conversion, so a view can convert any range of a
// tensor on its own. It panics when src is not whole blocks or dst is too
// short (a bug in the caller). Quantized sources are converted in chunks of
// at most 4096 elements through a pooled scratch buffer, so memory does not
// grow with the input.
//
// A type with row meta (RowMeta: bytes at the head of each row, before
// its blocks; ik_llama.cpp's row-scaled and _KT types) has no Converter:
// a tensor of it is rows of RowSize bytes (TensorSize; ByteSize refuses
// it), and a RowConverter converts any run of a row's whole blocks given
// that row's meta, with the same contract otherwise.
//
// A row-interleaved type (RowGroup: ik_llama.cpp's _R4/_R8 types, G rows
// stored as one run of blocks, block b holding block b of each row) has
// no Converter either: a tensor of it is whole groups of G rows of
// GroupSize bytes (TensorSize; ByteSize refuses it), and a GroupConverter
// converts any run of a group's interleaved blocks into the G rows of the
// output at a stride, with the same contract otherwise. Each row of
// quant_ikrepacked.go's ikGroups is such a DType (withGroups).
//
// # Registration and kernels
//
// Nothing registers itself: there is no init(). The converter table is
// built from explicit switches on first use (sync.OnceValue), so
// ConverterFor is a table lookup that does not allocate. On amd64 with AVX2
// and F16C (checked at run time with golang.org/x/sys/cpu), BF16 to F32,
// F16 to F32, F32 to F16, F32 to BF16, F16 to BF16 and BF16 to F16 run in
// assembly (convert_amd64.s) and Go converts the last few elements; the
// build tag purego, or another architecture, uses the pure-Go loops only.
// Tests run both paths over every F16 and BF16 input and require identical
// bytes.
//
// # ggml dequantization
//
// Every ggml block type has a dequantizer that gives the float32 bits of
// ggml's own to_float (dequantize_row_* in ggml-quants.c): the same float32
// operations in the same order, each rounded on its own (explicit float32
// conversions keep Go from fusing a multiply-add C does not). The IQ types'
// codebooks are data generated from ggml-common.h (quant_iqgrid_iq{1,2,3}.go, by
// quant_iqgrid_gen.py; a test pins each table's sha256 as the header prints
// it). Tests compare every type bit for bit with libggml0's to_float on
// blocks from ggml's own quantizer (testdata/ggmltypes and the shared
// gguf/types). On amd64 with AVX2, Q4_K, Q6_K, Q8_0, Q8_1, TQ2_0, IQ4_XS,
// IQ4_NL, MXFP4, NVFP4 and the IQ2/IQ3 grid types run through assembly
// kernels (quant_accel.go, quant_amd64.s: nibble codebooks, Q6_K, int8,
// TQ2_0, signed grid bytes) after Go computes each block's scales; the plain loops are the
// reference, and tests require identical bits from both on every type.
// ik_llama.cpp's trellis types IQ1_KT-IQ4_KT compute a block's group
// indices and scales in Go and their values eight lanes at a time
// (kt_amd64.s: VPMULLD by the multiplier's powers, the byte sum by a
// multiplication; TestKTRuns, and TestQuantIKTrellis on both paths).
package dtype
