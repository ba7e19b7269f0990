package view

import (
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
)

// rowConverted is a tensor of a type with row meta (dtype.RowMeta:
// ik_llama.cpp's row-scaled types) converted to another dtype on the fly.
// Its source is rows of the row's meta then its blocks; its output is the
// blocks' elements, a block's output at the same place as for a type
// without meta. A read converts the blocks it covers with their row's
// meta: whole rows inside the read a step of source bytes at a time,
// straight into the caller's buffer; the blocks of a row the read starts
// or ends inside with one more read of that row's meta; a block cut by
// either end of the read into scratch, as converted does.
type rowConverted struct {
	src        raw
	conv       dtype.RowConverter
	meta       int64 // source bytes of a row's meta
	blockBytes int64 // source bytes per block
	outBlock   int64 // output bytes per block
	rowBlocks  int64 // blocks per row
	rowBytes   int64 // source bytes per row: meta + rowBlocks*blockBytes
	size       int64 // output bytes
}

// maxRowMeta bounds a row's meta (ik_llama.cpp's are 2 or 4 bytes).
const maxRowMeta = 16

// rowConvertedSize returns the size of a tensor of dtype from with rows of
// rowLen elements, stored in srcSize bytes, converted to dtype to, and its
// geometry, or why it cannot be converted by rows.
func rowConvertedSize(srcSize, rowLen int64, from, to dtype.DType) (rowConverted, error) {
	info := from.Info()
	outES := to.ElemSize()
	meta := from.RowMeta()
	if info.BlockBytes <= 0 || info.BlockElems <= 0 || outES <= 0 || meta <= 0 || meta > maxRowMeta {
		return rowConverted{}, fmt.Errorf("cannot convert %s to %s", from, to)
	}
	outBlock := info.BlockElems * outES
	if outBlock > maxBlockOut || info.BlockBytes > srcStep {
		return rowConverted{}, fmt.Errorf("%s blocks are too large to convert", from)
	}
	rowBytes, ok := from.RowSize(rowLen)
	if !ok && srcSize != 0 {
		return rowConverted{}, fmt.Errorf("rows of %d elements are not whole %s blocks", rowLen, from)
	}
	c := rowConverted{meta: meta, blockBytes: info.BlockBytes, outBlock: outBlock, rowBytes: rowBytes}
	if srcSize == 0 {
		return c, nil
	}
	if srcSize%rowBytes != 0 {
		return rowConverted{}, fmt.Errorf("%d bytes are not whole %s rows of %d bytes", srcSize, from, rowBytes)
	}
	c.rowBlocks = rowLen / info.BlockElems
	blocks, ok := mul(srcSize/rowBytes, c.rowBlocks)
	if ok {
		c.size, ok = mul(blocks, outBlock)
	}
	if !ok {
		return rowConverted{}, fmt.Errorf("%s view of %d %s rows is too large", to, srcSize/rowBytes, from)
	}
	return c, nil
}

func (c *rowConverted) readRaw(p []byte, off int64) error {
	end := off + int64(len(p))
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	rowOut := c.rowBlocks * c.outBlock
	b := off / c.outBlock                       // first block
	last := (end + c.outBlock - 1) / c.outBlock // one past the last block
	for b < last {
		r, i := b/c.rowBlocks, b%c.rowBlocks
		outStart := b * c.outBlock
		rowAt := r * c.rowBytes
		if i == 0 && outStart >= off {
			// Whole rows inside the read, up to a step: one source read.
			if nr := min(srcStep/c.rowBytes, (end-outStart)/rowOut); nr > 0 {
				in := sc.src[:nr*c.rowBytes]
				if err := c.src.readRaw(in, rowAt); err != nil {
					return err
				}
				for k := int64(0); k < nr; k++ {
					row := in[k*c.rowBytes : (k+1)*c.rowBytes]
					o := outStart - off + k*rowOut
					c.conv(p[o:o+rowOut], row[:c.meta], row[c.meta:])
				}
				b += nr * c.rowBlocks
				continue
			}
		}
		// Blocks of row r from block i: its meta, then the blocks.
		meta := sc.meta[:c.meta]
		if err := c.src.readRaw(meta, rowAt); err != nil {
			return err
		}
		var nb int64
		switch {
		case outStart < off, (b+1)*c.outBlock > end:
			nb = 1 // cut by the start or the end
		default:
			nb = min(c.rowBlocks-i, srcStep/c.blockBytes, (end-outStart)/c.outBlock)
		}
		in := sc.src[:nb*c.blockBytes]
		if err := c.src.readRaw(in, rowAt+c.meta+i*c.blockBytes); err != nil {
			return err
		}
		outEnd := outStart + nb*c.outBlock
		if outStart >= off && outEnd <= end {
			c.conv(p[outStart-off:outEnd-off], meta, in)
		} else {
			out := sc.dst[:c.outBlock]
			c.conv(out, meta, in)
			lo, hi := max(off, outStart), min(end, outEnd)
			copy(p[lo-off:hi-off], out[lo-outStart:hi-outStart])
		}
		b += nb
	}
	return nil
}
