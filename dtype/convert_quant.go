package dtype

import (
	"math"
	"sync"
)

// Quantized sources: the dequantizer (quantDequantizer, from quant.go)
// writes float32 values into a pooled scratch buffer, a bounded chunk of
// blocks at a time, and the float32 kernels take them to the target: F32 is
// the dequantized value itself, F64 is exact, F16 and BF16 round once from
// that float32.

// quantChunk is the scratch size in elements: 16 KiB of float32 and 16 KiB
// of their bytes, whatever the size of the conversion.
const quantChunk = 4096

type quantScratch struct {
	f [quantChunk]float32
	b [4 * quantChunk]byte
}

var quantPool = sync.Pool{New: func() any { return new(quantScratch) }}

// quantKernel returns the kernel from a quantized dtype with dequantizer deq
// to the view dtype to.
func quantKernel(from, to DType, deq func(dst []float32, src []byte)) func(dst, src []byte) {
	k := quantRowKernel(from, to, func(dst []float32, _, src []byte) { deq(dst, src) })
	if k == nil {
		return nil
	}
	return func(dst, src []byte) { k(dst, nil, src) }
}

// quantRowKernel returns the kernel from a quantized dtype with
// dequantizer deq, which takes the meta of the row of its blocks (nil for
// a type without row meta), to the view dtype to.
func quantRowKernel(from, to DType, deq func(dst []float32, meta, src []byte)) func(dst, meta, src []byte) {
	fi := from.Info()
	blockBytes, blockElems := int(fi.BlockBytes), int(fi.BlockElems)
	if blockElems > quantChunk {
		return nil // no such type in the table; refuse rather than overflow scratch
	}
	perChunk := quantChunk / blockElems
	outSize := int(to.ElemSize())
	fromF32 := fromF32Kernel(to)
	return func(dst, meta, src []byte) {
		s := quantPool.Get().(*quantScratch)
		for len(src) > 0 {
			nb := min(perChunk, len(src)/blockBytes)
			ne := nb * blockElems
			f := s.f[:ne]
			deq(f, meta, src[:nb*blockBytes])
			out := dst[:ne*outSize]
			if fromF32 == nil { // F32
				for i, v := range f {
					le.PutUint32(out[4*i:], math.Float32bits(v))
				}
			} else {
				b := s.b[:4*ne]
				for i, v := range f {
					le.PutUint32(b[4*i:], math.Float32bits(v))
				}
				fromF32(out, b)
			}
			src, dst = src[nb*blockBytes:], dst[ne*outSize:]
		}
		quantPool.Put(s)
	}
}

// fromF32Kernel returns the kernel from float32 bytes to the view dtype
// to, nil for F32 itself (the dequantized values are the output).
func fromF32Kernel(to DType) func(dst, src []byte) {
	switch to {
	case F64:
		return f32ToF64
	case F16:
		return f32ToF16
	case BF16:
		return f32ToBF16
	}
	return nil
}
