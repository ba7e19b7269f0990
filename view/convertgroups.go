package view

import (
	"fmt"
	"sync"

	"github.com/lazyweights/tensorfs/dtype"
)

// groupConverted is a tensor of a row-interleaved type (dtype.RowGroup:
// ik_llama.cpp's _R4/_R8 types, G rows stored as one run of interleaved
// blocks) converted to another dtype on the fly. Its source is whole
// groups of G rows (a head of the rows' scales, for the types that keep
// them, then the interleaved blocks); a group's output is its G rows,
// row-major, so contiguous. A read converts the groups it covers: whole
// groups inside the read straight into the caller's buffer, many to a
// source step (or, a group larger than a step, its head and then a step
// of its blocks at a time into each of its rows); of a group the read
// starts or ends inside, its head and only the interleaved blocks whose
// output meets the read, through pooled scratch (16 KiB: G rows of a
// few blocks), the bytes the read wants copied out. No scratch grows
// with the rows.
type groupConverted struct {
	src        raw
	conv       dtype.GroupConverter
	rows       int64 // G, rows per group
	meta       int64 // source bytes of a group's head, before its blocks
	blockBytes int64 // source bytes of an interleaved block (G rows)
	outBlock   int64 // output bytes of a row's part of a block
	rowBlocks  int64 // blocks per row
	rowOut     int64 // output bytes per row
	groupBytes int64 // source bytes per group
	groupOut   int64 // output bytes per group: rows*rowOut
	size       int64 // output bytes
}

// maxGroupOut bounds the output of one interleaved block of all of a
// group's rows (scratch for a group cut by a read): 8 rows of 256 F64.
const maxGroupOut = 16 << 10

// maxGroupMeta bounds a group's head (ik_llama.cpp's: 4 float32 scales).
const maxGroupMeta = 64

// groupScratch is a group read's pooled working memory.
type groupScratch struct {
	src  [srcStep]byte      // source of one step
	out  [maxGroupOut]byte  // blocks of a cut group, converted
	head [maxGroupMeta]byte // the head of a group read in steps
}

var groupScratchPool = sync.Pool{New: func() any { return new(groupScratch) }}

// groupConvertedSize returns the conversion of a tensor of row-interleaved
// dtype from with rows of rowLen elements, stored in srcSize bytes, to
// dtype to (its geometry and size), or why it cannot be converted.
func groupConvertedSize(srcSize, rowLen int64, from, to dtype.DType) (groupConverted, error) {
	info, g, outES := from.Info(), from.RowGroup(), to.ElemSize()
	if g <= 0 || info.BlockBytes <= 0 || info.BlockElems <= 0 || outES <= 0 {
		return groupConverted{}, fmt.Errorf("cannot convert %s to %s", from, to)
	}
	c := groupConverted{rows: g, meta: from.GroupMeta(), blockBytes: g * info.BlockBytes, outBlock: info.BlockElems * outES}
	if c.blockBytes > srcStep || g*c.outBlock > maxGroupOut || c.meta < 0 || c.meta > maxGroupMeta {
		return groupConverted{}, fmt.Errorf("%s blocks of %d rows are too large to convert", from, g)
	}
	if srcSize == 0 {
		return c, nil
	}
	groupBytes, ok := from.GroupSize(rowLen)
	if !ok {
		return groupConverted{}, fmt.Errorf("rows of %d elements are not whole %s blocks", rowLen, from)
	}
	if srcSize%groupBytes != 0 {
		return groupConverted{}, fmt.Errorf("%d bytes are not whole %s groups of %d rows (%d bytes)", srcSize, from, g, groupBytes)
	}
	c.groupBytes, c.rowBlocks = groupBytes, rowLen/info.BlockElems
	var ok1, ok2, ok3 bool
	c.rowOut, ok1 = mul(rowLen, outES)
	c.groupOut, ok2 = mul(c.rowOut, g)
	c.size, ok3 = mul(srcSize/groupBytes, c.groupOut)
	if !ok1 || !ok2 || !ok3 {
		return groupConverted{}, fmt.Errorf("%s view of %d %s groups is too large", to, srcSize/groupBytes, from)
	}
	return c, nil
}

func (c *groupConverted) readRaw(p []byte, off int64) error {
	end := off + int64(len(p))
	sc := groupScratchPool.Get().(*groupScratch)
	defer groupScratchPool.Put(sc)
	stepBlocks := srcStep / c.blockBytes
	g := off / c.groupOut                       // first group
	last := (end + c.groupOut - 1) / c.groupOut // one past the last group
	for g < last {
		gs, at := g*c.groupOut, g*c.groupBytes
		if gs >= off && gs+c.groupOut <= end {
			if c.groupBytes <= srcStep {
				// Whole groups inside the read, up to a step: one
				// source read.
				ng := min(srcStep/c.groupBytes, (end-gs)/c.groupOut)
				in := sc.src[:ng*c.groupBytes]
				if err := c.src.readRaw(in, at); err != nil {
					return err
				}
				for k := int64(0); k < ng; k++ {
					o := gs - off + k*c.groupOut
					grp := in[k*c.groupBytes : (k+1)*c.groupBytes]
					c.conv(p[o:o+c.groupOut], int(c.rowOut), grp[:c.meta], grp[c.meta:])
				}
				g += ng
				continue
			}
			// A group larger than a step: its head, then a step of
			// its blocks at a time, each into its G rows.
			head, err := c.head(sc, at)
			if err != nil {
				return err
			}
			for b := int64(0); b < c.rowBlocks; {
				nb := min(stepBlocks, c.rowBlocks-b)
				in := sc.src[:nb*c.blockBytes]
				if err := c.src.readRaw(in, at+c.meta+b*c.blockBytes); err != nil {
					return err
				}
				o := gs - off + b*c.outBlock
				c.conv(p[o:o+(c.rows-1)*c.rowOut+nb*c.outBlock], int(c.rowOut), head, in)
				b += nb
			}
			g++
			continue
		}
		// A group cut by the read: its head, then the runs of blocks
		// whose output meets the read, a step at most, into scratch.
		head, err := c.head(sc, at)
		if err != nil {
			return err
		}
		for b := int64(0); b < c.rowBlocks; {
			if !c.meets(gs, b, off, end) {
				b++
				continue
			}
			nb := int64(1)
			for nb < stepBlocks && b+nb < c.rowBlocks && c.meets(gs, b+nb, off, end) {
				nb++
			}
			in := sc.src[:nb*c.blockBytes]
			if err := c.src.readRaw(in, at+c.meta+b*c.blockBytes); err != nil {
				return err
			}
			// as many blocks at a time as scratch holds for all the rows
			per := maxGroupOut / (c.rows * c.outBlock)
			for j := int64(0); j < nb; j += per {
				m := min(per, nb-j)
				w := m * c.outBlock // a row's part
				out := sc.out[:c.rows*w]
				c.conv(out, int(w), head, in[j*c.blockBytes:(j+m)*c.blockBytes])
				for r := int64(0); r < c.rows; r++ {
					o := gs + r*c.rowOut + (b+j)*c.outBlock // where row r's part lies
					lo, hi := max(off, o), min(end, o+w)
					if lo < hi {
						copy(p[lo-off:hi-off], out[r*w+lo-o:r*w+hi-o])
					}
				}
			}
			b += nb
		}
		g++
	}
	return nil
}

// head returns the head of the group whose source starts at at, read
// into sc (nothing to read for a type without).
func (c *groupConverted) head(sc *groupScratch, at int64) ([]byte, error) {
	h := sc.head[:c.meta]
	if c.meta == 0 {
		return h, nil
	}
	return h, c.src.readRaw(h, at)
}

// meets reports whether the output of block b of the group whose output
// starts at gs, in any of its rows, meets [off, end).
func (c *groupConverted) meets(gs, b, off, end int64) bool {
	for r := int64(0); r < c.rows; r++ {
		o := gs + r*c.rowOut + b*c.outBlock
		if o < end && o+c.outBlock > off {
			return true
		}
	}
	return false
}
