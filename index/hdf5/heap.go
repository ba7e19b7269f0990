package hdf5

import (
	"bytes"
	"math/bits"
)

// Caps of one fractal heap.
const (
	// MaxHeapBlockBytes caps one direct block (HDF5 writes at most 64
	// KiB for a group's heap).
	MaxHeapBlockBytes = 16 << 20
	// MaxHeapBytes caps the direct blocks of one heap read (and held)
	// while its group is listed.
	MaxHeapBytes = 256 << 20
)

// fheap is a fractal heap (HDF5 1.8: the link messages of a dense
// group): its header, and the blocks read so far.
type fheap struct {
	r          *reader
	off        int64  // the header's offset
	addr       uint64 // the header's address, as blocks name it
	idLen      int
	dblockSums bool // direct blocks carry checksums
	maxMan     uint64
	hugeBTree  uint64
	width      uint64
	start      uint64 // starting block size
	maxDirect  uint64
	maxBits    int
	root       uint64
	rows       int // rows of the root indirect block; 0: the root is a direct block
	offSize    int // bytes of a heap offset (block offsets, managed IDs)
	lenSize    int // bytes of a managed object's length in an ID
	directRows int // rows of an indirect block that hold direct blocks
	what       string

	iblocks map[int64]*iblock
	dblocks map[int64]dblock // direct blocks read, checked
	held    int64            // bytes of dblocks
	huge    map[uint64][2]uint64
}

// dblock is a direct block read: its heap offset and bytes.
type dblock struct {
	base uint64
	b    []byte
}

// iblock is a fractal heap indirect block: where it lies in the heap's
// address space, its rows and its children's addresses.
type iblock struct {
	base uint64
	rows int
	kids []uint64
}

// fheap reads the fractal heap header at addr; what names the heap's
// owner in messages.
func (r *reader) fheap(addr uint64, what string) (*fheap, error) {
	off, err := r.abs(addr, what+"'s fractal heap")
	if err != nil {
		return nil, err
	}
	n := int64(4 + 1 + 2 + 2 + 1 + 4 + 12*r.sl + 3*r.so + 2 + 2 + 2 + 2 + 4)
	b, err := r.at(off, n, what+"'s fractal heap header")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	if !bytes.Equal(c.take(4), []byte("FRHP")) {
		return nil, r.errorf(off, "%s's fractal heap header without its FRHP signature", what)
	}
	if v := c.u8(); v != 0 {
		return nil, r.errorf(off, "%s's fractal heap header: version %d (want 0)", what, v)
	}
	h := &fheap{r: r, off: off, addr: addr, what: what, iblocks: map[int64]*iblock{}, dblocks: map[int64]dblock{}}
	h.idLen = int(c.u16())
	filterLen := c.u16()
	flags := c.u8()
	h.dblockSums = flags&0x02 != 0
	h.maxMan = uint64(c.u32())
	c.length() // next huge object ID
	h.hugeBTree = c.addr()
	c.length() // free space in managed blocks
	c.addr()   // free-space manager
	c.length() // managed space
	c.length() // allocated managed space
	c.length() // direct block allocation iterator
	c.length() // managed objects
	c.length() // huge objects' size
	c.length() // huge objects
	c.length() // tiny objects' size
	c.length() // tiny objects
	h.width = uint64(c.u16())
	h.start = c.length()
	h.maxDirect = c.length()
	h.maxBits = int(c.u16())
	c.u16() // starting rows of the root indirect block
	h.root = c.addr()
	h.rows = int(c.u16())
	if c.bad {
		return nil, r.errorf(off, "%s's fractal heap header is cut off", what)
	}
	if filterLen != 0 {
		return nil, r.errorf(off, "%s's fractal heap has I/O filters, which tensorfs does not read", what)
	}
	if err := r.checksum(b, c.p, off, what+"'s fractal heap header"); err != nil {
		return nil, err
	}
	pow2 := func(v uint64) bool { return v != 0 && v&(v-1) == 0 }
	if !pow2(h.width) || h.width > 1<<16 || !pow2(h.start) || !pow2(h.maxDirect) || h.start > h.maxDirect ||
		h.maxDirect > MaxHeapBlockBytes || h.maxBits < 1 || h.maxBits > 64 || h.idLen < 2 || h.idLen > 1<<12 ||
		bits.Len64(h.start*h.width) > h.maxBits+1 || h.rows > h.maxBits+1 {
		return nil, r.errorf(off, "%s's fractal heap: width %d, blocks of %d to %d bytes, %d-bit offsets, %d-byte IDs, %d root rows (not a heap HDF5 writes)",
			what, off, h.width, h.start, h.maxDirect, h.maxBits, h.idLen, h.rows)
	}
	h.offSize = (h.maxBits + 7) / 8
	h.lenSize = min((bits.Len64(h.maxDirect)-1+7)/8, encSize(h.maxMan))
	h.directRows = bits.Len64(h.maxDirect) - bits.Len64(h.start) + 2
	return h, nil
}

// rowSize is the size of the blocks of row k of the doubling table.
func (h *fheap) rowSize(k int) uint64 {
	if k == 0 {
		return h.start
	}
	return h.start << (k - 1)
}

// object returns the heap object whose ID is id (managed, huge or tiny)
// and its offset in the file (-1 for a tiny object).
func (h *fheap) object(id []byte, where int64) ([]byte, int64, error) {
	r := h.r
	if len(id) != h.idLen {
		return nil, 0, r.errorf(where, "a heap ID of %d bytes in %s (the heap's are %d)", len(id), h.what, h.idLen)
	}
	if id[0]>>6 != 0 {
		return nil, 0, r.errorf(where, "a heap ID of version %d in %s", id[0]>>6, h.what)
	}
	c := &cursor{r: r, b: id[1:], off: where + 1}
	switch id[0] >> 4 & 3 {
	case 0:
		o, n := c.uint(h.offSize), c.uint(h.lenSize)
		if c.bad || o == undefined || n == undefined {
			return nil, 0, r.errorf(where, "a managed heap ID cut off in %s", h.what)
		}
		return h.managed(o, n, where)
	case 1:
		return h.hugeObject(c, where)
	case 2:
		n, p := int(id[0]&0x0f)+1, 1
		if h.idLen > 18 {
			n, p = int(id[0]&0x0f)<<8|int(id[1])+1, 2
		}
		if p+n > len(id) {
			return nil, 0, r.errorf(where, "a tiny heap object of %d bytes in an ID of %d, in %s", n, len(id), h.what)
		}
		return id[p : p+n], -1, nil
	}
	return nil, 0, r.errorf(where, "a heap ID of type 3 in %s", h.what)
}

// managed returns the managed object of n bytes at heap offset o.
func (h *fheap) managed(o, n uint64, where int64) ([]byte, int64, error) {
	r := h.r
	if n == 0 || n > h.maxMan || h.maxBits < 64 && o >= 1<<h.maxBits {
		return nil, 0, r.errorf(where, "a heap object of %d bytes at heap offset %d in %s", n, o, h.what)
	}
	var blk []byte
	var base uint64
	var err error
	if h.rows == 0 {
		base = 0
		blk, err = h.dblock(h.root, 0, h.start, where)
	} else {
		blk, base, err = h.find(h.root, 0, h.rows, o, 0, where)
	}
	if err != nil {
		return nil, 0, err
	}
	head := uint64(5 + r.so + h.offSize)
	if h.dblockSums {
		head += 4
	}
	rel := o - base
	if rel < head || rel > uint64(len(blk)) || n > uint64(len(blk))-rel {
		return nil, 0, r.errorf(where, "a heap object of %d bytes at heap offset %d lies outside its direct block (heap offsets %d to %d) in %s", n, o, base, base+uint64(len(blk)), h.what)
	}
	return blk[rel : rel+n], -1, nil
}

// find descends from the indirect block at addr (heap offset base,
// rows rows) to the direct block holding heap offset o.
func (h *fheap) find(addr, base uint64, rows int, o uint64, depth int, where int64) ([]byte, uint64, error) {
	r := h.r
	if depth > 64 {
		return nil, 0, r.errorf(where, "%s's fractal heap: indirect blocks nest more than 64 deep", h.what)
	}
	ib, err := h.iblock(addr, base, rows)
	if err != nil {
		return nil, 0, err
	}
	rel := o - base
	if o < base {
		return nil, 0, r.errorf(where, "heap offset %d before its indirect block's %d in %s", o, base, h.what)
	}
	first := h.width * h.start
	var row int
	var rowStart uint64
	if rel < first {
		row, rowStart = 0, 0
	} else {
		row = bits.Len64(rel/first) - 1 + 1
		rowStart = first << (row - 1)
	}
	if row >= rows {
		return nil, 0, r.errorf(where, "heap offset %d past the %d rows of its indirect block in %s", o, rows, h.what)
	}
	size := h.rowSize(row)
	if size == 0 || size > 1<<62 {
		return nil, 0, r.errorf(where, "heap offset %d in a row of blocks over 2^62 bytes in %s", o, h.what)
	}
	col := (rel - rowStart) / size
	kid := ib.kids[uint64(row)*h.width+col]
	kbase := base + rowStart + col*size
	if kid == undefined {
		return nil, 0, r.errorf(where, "heap offset %d lies in a block never allocated in %s", o, h.what)
	}
	if row < h.directRows {
		b, err := h.dblock(kid, kbase, size, where)
		return b, kbase, err
	}
	krows := bits.Len64(size) - bits.Len64(first) + 1
	return h.find(kid, kbase, krows, o, depth+1, where)
}

// iblock reads (once) the indirect block at addr, which must say it
// starts at heap offset base and have rows rows.
func (h *fheap) iblock(addr, base uint64, rows int) (*iblock, error) {
	r := h.r
	off, err := r.abs(addr, h.what+"'s fractal heap indirect block")
	if err != nil {
		return nil, err
	}
	if ib := h.iblocks[off]; ib != nil {
		if ib.base != base || ib.rows != rows {
			return nil, r.errorf(off, "%s's fractal heap indirect block is reached twice (a loop)", h.what)
		}
		return ib, nil
	}
	if r.nodes++; r.nodes > MaxBTreeNodes {
		return nil, r.errorf(off, "more than %d B-tree and heap nodes", MaxBTreeNodes)
	}
	n := int64(rows) * int64(h.width)
	size := int64(5+r.so+h.offSize) + n*int64(r.so) + 4
	b, err := r.at(off, size, h.what+"'s fractal heap indirect block")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	if !bytes.Equal(c.take(4), []byte("FHIB")) {
		return nil, r.errorf(off, "%s's fractal heap indirect block without its FHIB signature", h.what)
	}
	v, hdr, got := c.u8(), c.addr(), c.uint(h.offSize)
	if v != 0 || hdr != h.addr {
		return nil, r.errorf(off, "%s's fractal heap indirect block: version %d, of the heap at %d (want 0, %d)", h.what, v, hdr, h.addr)
	}
	if got != base {
		return nil, r.errorf(off, "%s's fractal heap indirect block says heap offset %d where its parent puts it at %d (a loop?)", h.what, got, base)
	}
	ib := &iblock{base: base, rows: rows, kids: make([]uint64, n)}
	for i := range ib.kids {
		ib.kids[i] = c.addr()
	}
	if err := r.checksum(b, c.p, off, h.what+"'s fractal heap indirect block"); err != nil {
		return nil, err
	}
	h.iblocks[off] = ib
	return ib, nil
}

// dblock reads (once) the direct block of size bytes at addr, which
// must say it starts at heap offset base.
func (h *fheap) dblock(addr, base, size uint64, where int64) ([]byte, error) {
	r := h.r
	off, err := r.abs(addr, h.what+"'s fractal heap direct block")
	if err != nil {
		return nil, err
	}
	if d, ok := h.dblocks[off]; ok {
		if uint64(len(d.b)) != size || d.base != base {
			return nil, r.errorf(off, "%s's fractal heap direct block is reached twice, at heap offsets %d and %d", h.what, d.base, base)
		}
		return d.b, nil
	}
	if h.held += int64(size); h.held > MaxHeapBytes {
		return nil, r.errorf(off, "%s's fractal heap: direct blocks over %d bytes", h.what, MaxHeapBytes)
	}
	if r.nodes++; r.nodes > MaxBTreeNodes {
		return nil, r.errorf(off, "more than %d B-tree and heap nodes", MaxBTreeNodes)
	}
	b, err := r.at(off, int64(size), h.what+"'s fractal heap direct block")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	if !bytes.Equal(c.take(4), []byte("FHDB")) {
		return nil, r.errorf(off, "%s's fractal heap direct block without its FHDB signature", h.what)
	}
	v, hdr, got := c.u8(), c.addr(), c.uint(h.offSize)
	if c.bad || v != 0 || hdr != h.addr || got != base {
		return nil, r.errorf(off, "%s's fractal heap direct block: version %d, of the heap at %d, at heap offset %d (want 0, %d, %d)", h.what, v, hdr, got, h.addr, base)
	}
	if h.dblockSums {
		p := c.p
		want := c.u32()
		if c.bad {
			return nil, r.errorf(off, "%s's fractal heap direct block is cut off", h.what)
		}
		z := bytes.Clone(b)
		clear(z[p : p+4])
		if got := lookup3(z); got != want {
			return nil, r.errorf(off, "%s's fractal heap direct block: checksum %08x, computed %08x (a damaged file)", h.what, want, got)
		}
	}
	h.dblocks[off] = dblock{base, b}
	return b, nil
}

// hugeObject reads a huge object: its address and length in the ID
// (when the ID is long enough), else looked up by the ID in the heap's
// v2 B-tree of type 1.
func (h *fheap) hugeObject(c *cursor, where int64) ([]byte, int64, error) {
	r := h.r
	var a, n uint64
	if h.idLen-1 >= r.so+r.sl {
		a, n = c.addr(), c.length()
	} else {
		if h.huge == nil {
			t, err := r.btree2(h.hugeBTree, 1, h.what+"'s huge heap objects")
			if err != nil {
				return nil, 0, err
			}
			h.huge = map[uint64][2]uint64{}
			err = t.records(func(rec []byte, off int64) error {
				rc := &cursor{r: r, b: rec, off: off}
				a, n, id := rc.addr(), rc.length(), rc.length()
				if rc.bad {
					return r.errorf(off, "a huge object record cut off in %s", h.what)
				}
				if len(h.huge) >= MaxObjects {
					return r.errorf(off, "more than %d huge objects in %s", MaxObjects, h.what)
				}
				h.huge[id] = [2]uint64{a, n}
				return nil
			})
			if err != nil {
				return nil, 0, err
			}
		}
		id := c.uint(min(h.idLen-1, 8))
		e, ok := h.huge[id]
		if !ok {
			return nil, 0, r.errorf(where, "huge heap object %d is not in %s's index", id, h.what)
		}
		a, n = e[0], e[1]
	}
	if c.bad {
		return nil, 0, r.errorf(where, "a huge heap ID cut off in %s", h.what)
	}
	if n > MaxHeaderBytes {
		return nil, 0, r.errorf(where, "a huge heap object of %d bytes in %s, over %d", n, h.what, MaxHeaderBytes)
	}
	off, err := r.abs(a, "a huge heap object")
	if err != nil {
		return nil, 0, err
	}
	b, err := r.at(off, int64(n), "a huge heap object")
	return b, off, err
}
