package dtype

import (
	"fmt"
	"sync"
)

// Converter converts whole blocks: src holds k blocks of the source dtype
// (len(src) == k*from.BlockBytes), dst has room for the k*from.BlockElems
// elements in the target dtype; it writes exactly that many bytes at the
// start of dst and nothing else. Both sides are little-endian. A Converter
// is safe for concurrent use, does not allocate, and converting a run of
// whole blocks gives the same bytes as the same run cut out of a larger
// conversion. It panics when src is not a whole number of blocks or dst is
// too short: that is a bug in the caller, not bad input.
type Converter func(dst, src []byte)

// ConverterFor returns the converter from one dtype to another, and false
// when there is none (integer, bool and complex sources; quantized types
// without a dequantizer; targets other than F64, F32, F16, BF16). A dtype
// converts to itself by copying. ConverterFor does not allocate.
func ConverterFor(from, to DType) (Converter, bool) {
	t := targetIndex(to)
	if t < 0 || !from.Valid() {
		return nil, false
	}
	c := converters()[from][t]
	return c, c != nil
}

// CanConvert reports whether ConverterFor(from, to) exists (for a type
// with row meta, which has none, see RowConverterFor).
func CanConvert(from, to DType) bool { _, ok := ConverterFor(from, to); return ok }

// RowConverter converts whole blocks of one row of a type with row meta
// (DType.RowMeta): meta is the row's RowMeta bytes, src k of its blocks
// (len(src) == k*from.BlockBytes, any run of the row's blocks), dst has
// room for the k*from.BlockElems elements in the target dtype. Otherwise
// it keeps Converter's contract: it writes exactly those bytes, is safe
// for concurrent use, does not allocate, and panics on a short dst, a
// partial block or short meta.
type RowConverter func(dst, meta, src []byte)

// RowConverterFor returns the converter of the blocks of a row of a type
// with row meta to a view dtype, and false for any other pair. Types with
// row meta have no Converter: their blocks need their row's meta.
func RowConverterFor(from, to DType) (RowConverter, bool) {
	t := targetIndex(to)
	if t < 0 || !from.Valid() {
		return nil, false
	}
	c := rowConverters()[from][t]
	return c, c != nil
}

// rowConverters is the table of every RowConverter, built on first use.
var rowConverters = sync.OnceValue(func() *[numDTypes][len(targets)]RowConverter {
	var c [numDTypes][len(targets)]RowConverter
	for from := DType(1); from < numDTypes; from++ {
		deq, ok := rowDequantizer(from)
		if !ok {
			continue
		}
		for t, to := range targets {
			c[from][t] = wrapRow(from, to, quantRowKernel(from, to, deq))
		}
	}
	return &c
})

// wrapRow is wrap for a RowConverter.
func wrapRow(from, to DType, kernel func(dst, meta, src []byte)) RowConverter {
	blockBytes, blockElems := int(from.Info().BlockBytes), int(from.Info().BlockElems)
	metaBytes := int(from.RowMeta())
	outSize := int(to.ElemSize())
	return func(dst, meta, src []byte) {
		if len(meta) < metaBytes {
			panic(fmt.Sprintf("dtype: %s to %s row converter: meta of %d bytes, not %d", from, to, len(meta), metaBytes))
		}
		if len(src)%blockBytes != 0 {
			contractPanic(from, to, len(dst), len(src))
		}
		n := len(src) / blockBytes * blockElems * outSize
		if len(dst) < n {
			contractPanic(from, to, len(dst), len(src))
		}
		kernel(dst[:n], meta[:metaBytes], src)
	}
}

// targets are the view dtypes, in the column order of the converter table.
var targets = [4]DType{F64, F32, F16, BF16}

func targetIndex(d DType) int {
	for i, t := range targets {
		if t == d {
			return i
		}
	}
	return -1
}

// converters is the table of every converter, built on first use.
var converters = sync.OnceValue(func() *[numDTypes][len(targets)]Converter {
	var c [numDTypes][len(targets)]Converter
	for from := DType(1); from < numDTypes; from++ {
		for t, to := range targets {
			c[from][t] = buildConverter(from, to)
		}
	}
	return &c
})

// buildConverter returns the converter from one dtype to a view dtype, or
// nil.
func buildConverter(from, to DType) Converter {
	if from == to {
		return wrap(from, to, func(dst, src []byte) { copy(dst, src) })
	}
	switch from.Kind() {
	case KindFloat:
		if k := floatKernel(from, to); k != nil {
			return wrap(from, to, k)
		}
	case KindQuant:
		if deq, ok := quantDequantizer(from); ok && deq != nil {
			return wrap(from, to, quantKernel(from, to, deq))
		}
	}
	return nil
}

// floatKernel returns the kernel between two different float dtypes.
func floatKernel(from, to DType) func(dst, src []byte) {
	type pair struct{ from, to DType }
	switch (pair{from, to}) {
	case pair{F64, F32}:
		return f64ToF32
	case pair{F64, F16}:
		return f64ToF16
	case pair{F64, BF16}:
		return f64ToBF16
	case pair{F32, F64}:
		return f32ToF64
	case pair{F32, F16}:
		return f32ToF16
	case pair{F32, BF16}:
		return f32ToBF16
	case pair{F16, F64}:
		return f16ToF64
	case pair{F16, F32}:
		return f16ToF32
	case pair{F16, BF16}:
		return f16ToBF16
	case pair{BF16, F64}:
		return bf16ToF64
	case pair{BF16, F32}:
		return bf16ToF32
	case pair{BF16, F16}:
		return bf16ToF16
	}
	t := tables()
	if k := f8Index(from); k >= 0 {
		switch to {
		case F64:
			return lut8To64(&t.f64[k])
		case F32:
			return lut8To32(&t.f32[k])
		case F16:
			return lut8To16(&t.f16[k])
		case BF16:
			return lut8To16(&t.bf16[k])
		}
	}
	if from == F4 {
		switch to {
		case F64:
			return f4ToF64(&t.f4f64)
		case F32:
			return lut8To64(&t.f4f32)
		case F16:
			return lut8To32(&t.f4f16)
		case BF16:
			return lut8To32(&t.f4bf16)
		}
	}
	return nil
}

// wrap checks the Converter contract and hands the kernel exactly the
// output bytes.
func wrap(from, to DType, kernel func(dst, src []byte)) Converter {
	fi := from.Info()
	blockBytes, blockElems := int(fi.BlockBytes), int(fi.BlockElems)
	outSize := int(to.ElemSize())
	return func(dst, src []byte) {
		if len(src)%blockBytes != 0 {
			contractPanic(from, to, len(dst), len(src))
		}
		n := len(src) / blockBytes * blockElems * outSize
		if len(dst) < n {
			contractPanic(from, to, len(dst), len(src))
		}
		kernel(dst[:n], src)
	}
}

//go:noinline
func contractPanic(from, to DType, dst, src int) {
	fi := from.Info()
	if int64(src)%fi.BlockBytes != 0 {
		panic(fmt.Sprintf("dtype: %s to %s converter: src of %d bytes is not whole blocks of %d bytes", from, to, src, fi.BlockBytes))
	}
	panic(fmt.Sprintf("dtype: %s to %s converter: dst of %d bytes is shorter than the %d bytes of output", from, to, dst, int64(src)/fi.BlockBytes*fi.BlockElems*to.ElemSize()))
}
