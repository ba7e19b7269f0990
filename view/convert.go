package view

import (
	"fmt"
	"sync"

	"github.com/lazyweights/tensorfs/dtype"
)

const (
	// srcStep bounds the source bytes converted in one step of a read.
	srcStep = 64 << 10
	// maxBlockOut bounds one source block's converted bytes: 256 elements
	// (the largest quant block) of 8 bytes (F64).
	maxBlockOut = 256 * 8
)

// scratch is the per-read working memory of a converted read, pooled so
// that reads do not allocate.
type scratch struct {
	src  [srcStep]byte     // source blocks of one step
	dst  [maxBlockOut]byte // a block whose output is cut by the read's ends
	meta [maxRowMeta]byte  // the meta of a row (rowConverted)
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// converted is a tensor converted to another dtype on the fly. The source
// representation (native, strided and/or byteswapped: anything raw) is
// read a step of whole blocks at a time into pooled scratch and converted
// straight into the caller's buffer; a block cut by either end of the read
// is converted into scratch and the needed bytes copied out.
type converted struct {
	src        raw
	conv       dtype.Converter
	blockBytes int64 // source bytes per block
	outBlock   int64 // output bytes per block
	stepBlocks int64 // blocks per step
	size       int64 // output bytes
}

// newConverted returns the conversion of src (srcSize bytes of dtype from)
// to dtype to with conv.
func newConverted(src raw, srcSize int64, from, to dtype.DType, conv dtype.Converter) (*converted, error) {
	size, err := convertedSize(srcSize, from, to)
	if err != nil {
		return nil, err
	}
	return buildConverted(src, from, to, conv, size), nil
}

// convertedSize returns the size of srcSize bytes of dtype from converted
// to dtype to, or why they cannot be converted by blocks.
func convertedSize(srcSize int64, from, to dtype.DType) (int64, error) {
	info := from.Info()
	outES := to.ElemSize()
	if info.BlockBytes <= 0 || info.BlockElems <= 0 || outES <= 0 {
		return 0, fmt.Errorf("cannot convert %s to %s", from, to)
	}
	outBlock := info.BlockElems * outES
	if outBlock > maxBlockOut || info.BlockBytes > srcStep {
		return 0, fmt.Errorf("%s blocks are too large to convert", from)
	}
	if srcSize%info.BlockBytes != 0 {
		return 0, fmt.Errorf("%d bytes are not whole %s blocks", srcSize, from)
	}
	blocks := srcSize / info.BlockBytes
	size, ok := mul(blocks, outBlock)
	if !ok {
		return 0, fmt.Errorf("%s view of %d %s blocks is too large", to, blocks, from)
	}
	return size, nil
}

// buildConverted returns the conversion of src to dtype to, of size bytes,
// which convertedSize has computed.
func buildConverted(src raw, from, to dtype.DType, conv dtype.Converter, size int64) *converted {
	info := from.Info()
	return &converted{
		src:        src,
		conv:       conv,
		blockBytes: info.BlockBytes,
		outBlock:   info.BlockElems * to.ElemSize(),
		stepBlocks: srcStep / info.BlockBytes,
		size:       size,
	}
}

func (c *converted) readRaw(p []byte, off int64) error {
	end := off + int64(len(p))
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	b := off / c.outBlock                       // first block
	last := (end + c.outBlock - 1) / c.outBlock // one past the last block
	for b < last {
		outStart := b * c.outBlock
		var nb int64
		switch {
		case outStart < off:
			nb = 1 // cut by the start
		case (b+1)*c.outBlock > end:
			nb = 1 // cut by the end
		default:
			// Whole blocks inside the read, up to a step.
			nb = min(c.stepBlocks, (end-outStart)/c.outBlock)
		}
		in := sc.src[:nb*c.blockBytes]
		if err := c.src.readRaw(in, b*c.blockBytes); err != nil {
			return err
		}
		outEnd := outStart + nb*c.outBlock
		if outStart >= off && outEnd <= end {
			c.conv(p[outStart-off:outEnd-off], in)
		} else {
			out := sc.dst[:c.outBlock]
			c.conv(out, in)
			lo, hi := max(off, outStart), min(end, outEnd)
			copy(p[lo-off:hi-off], out[lo-outStart:hi-outStart])
		}
		b += nb
	}
	return nil
}
