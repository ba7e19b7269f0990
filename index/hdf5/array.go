package hdf5

// The fixed array (FAHD) and extensible array (EAHD) chunk indexes of
// layout messages 4 and 5: their headers, blocks, pages and elements.

import (
	"bytes"
	"math/bits"
)

// MaxIndexBlockBytes caps one block of a fixed or extensible array
// chunk index read at once.
const MaxIndexBlockBytes = 64 << 20

// array is a fixed array (FAHD) or extensible array (EAHD) chunk index.
type array struct {
	r        *reader
	what     string
	fixed    bool
	hdrAddr  uint64
	esize    int
	pageN    uint64 // elements of a data block page
	dims     []int64
	unlim    int // extensible: the unlimited dimension, moved first
	filtered bool

	// fixed array
	nelmts   uint64
	dblk     int64 // the data block's offset
	paged    bool
	npages   uint64
	bitmap   []byte // pages initialised
	prefix   int64  // data block bytes before its elements or pages
	pages    map[uint64][]byte
	elements []byte // not paged

	// extensible array
	idxElmts         uint64
	minElmts         uint64
	offSize          int
	sblks            []sblkInfo
	ibElems          []byte
	ibDblks, ibSblks []uint64
	nsblksIB         int
	sblocks          map[int]*easb
	dblocks          map[int64][]byte // non-paged data blocks' elements; paged: pages by offset
	held             int64
	seen             map[int64]string
	empty            bool // no index block: no chunk written
}

type sblkInfo struct {
	ndblks, dblkN, start, startDblk uint64
}

type easb struct {
	dblks  []uint64
	bitmap []byte
	initSz int
}

// index is the array index of the chunk at scaled coordinates.
func (a *array) index(scaled []int64) (uint64, bool) {
	if a.fixed {
		return linear(scaled, a.dims)
	}
	s := make([]int64, 0, len(scaled))
	s = append(s, scaled[a.unlim])
	s = append(s, scaled[:a.unlim]...)
	s = append(s, scaled[a.unlim+1:]...)
	return linear(s, a.dims)
}

// decode reads one element: a chunk's address, stored size and mask.
func (a *array) decode(e []byte, where int64, chunkBytes uint64) (uint64, uint64, uint32, error) {
	c := &cursor{r: a.r, b: e, off: where}
	addr := c.addr()
	if !a.filtered {
		return addr, chunkBytes, 0, nil
	}
	size := c.uint(a.esize - a.r.so - 4)
	mask := c.u32()
	return addr, size, mask, nil
}

// block reads n bytes at addr (once: a block reached twice under
// another role is a loop), checking its signature and that its header
// address is the array's.
func (a *array) block(addr uint64, n int64, sig, role string) ([]byte, int64, error) {
	r := a.r
	off, err := r.abs(addr, a.what+"'s "+role)
	if err != nil {
		return nil, 0, err
	}
	if prev, ok := a.seen[off]; ok && prev != role {
		return nil, 0, r.errorf(off, "%s's %s is reached twice, also as its %s (a loop)", a.what, role, prev)
	}
	a.seen[off] = role
	if r.nodes++; r.nodes > MaxBTreeNodes {
		return nil, 0, r.errorf(off, "more than %d B-tree and index nodes", MaxBTreeNodes)
	}
	if n > MaxIndexBlockBytes {
		return nil, 0, r.errorf(off, "%s's %s of %d bytes, over %d", a.what, role, n, MaxIndexBlockBytes)
	}
	if a.held += n; a.held > 4*MaxIndexBlockBytes {
		return nil, 0, r.errorf(off, "%s's blocks over %d bytes", a.what, 4*MaxIndexBlockBytes)
	}
	b, err := r.at(off, n, a.what+"'s "+role)
	if err != nil {
		return nil, 0, err
	}
	if sig != "" {
		c := &cursor{r: r, b: b, off: off}
		if !bytes.Equal(c.take(4), []byte(sig)) {
			return nil, 0, r.errorf(off, "%s's %s without its %s signature", a.what, role, sig)
		}
		if v, cl := c.u8(), c.u8(); v != 0 || cl != map[bool]uint8{false: 0, true: 1}[a.filtered] {
			return nil, 0, r.errorf(off, "%s's %s: version %d, class %d", a.what, role, v, cl)
		}
		if h := c.addr(); h != a.hdrAddr {
			return nil, 0, r.errorf(off, "%s's %s names the header at %d, not %d", a.what, role, h, a.hdrAddr)
		}
	}
	return b, off, nil
}

// array reads the header of a fixed or extensible array chunk index.
func (r *reader) array(d *dataset, g *grid, filtered bool) (*array, error) {
	a := &array{r: r, fixed: d.index == indexFArray, hdrAddr: d.btree, filtered: filtered, what: "the chunk index",
		pages: map[uint64][]byte{}, sblocks: map[int]*easb{}, dblocks: map[int64][]byte{}, seen: map[int64]string{}}
	sig := "EAHD"
	n := int64(4 + 1 + 1 + 6 + 6*r.sl + r.so + 4)
	if a.fixed {
		sig = "FAHD"
		n = int64(4 + 1 + 1 + 2 + r.sl + r.so + 4)
	}
	off, err := r.abs(d.btree, "the chunk index")
	if err != nil {
		return nil, err
	}
	b, err := r.at(off, n, "the chunk index header")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	if !bytes.Equal(c.take(4), []byte(sig)) {
		return nil, r.errorf(off, "the chunk index header without its %s signature", sig)
	}
	v, cl := c.u8(), c.u8()
	if v != 0 || cl != map[bool]uint8{false: 0, true: 1}[filtered] {
		return nil, r.errorf(off, "the chunk index header: version %d, class %d (want 0, %d for a dataset with %d filters)", v, cl, map[bool]uint8{false: 0, true: 1}[filtered], len(d.filters))
	}
	a.esize = int(c.u8())
	if want := r.so; !filtered && a.esize != want || filtered && (a.esize < r.so+5 || a.esize > r.so+12) {
		return nil, r.errorf(off, "the chunk index header: elements of %d bytes", a.esize)
	}
	if a.fixed {
		err = a.fixedHeader(c, b, off, g)
	} else {
		err = a.extensibleHeader(c, b, off, g)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// fixedHeader reads the rest of a fixed array's header, from its page
// bits, and its data block.
func (a *array) fixedHeader(c *cursor, b []byte, off int64, g *grid) error {
	r := a.r
	pageBits := int(c.u8())
	a.nelmts = c.length()
	dblk := c.addr()
	if err := r.checksum(b, c.p, off, "the chunk index header"); err != nil {
		return err
	}
	a.dims = g.max
	for _, m := range g.max {
		if m < 0 {
			return r.errorf(off, "a fixed array chunk index for an unlimited dimension")
		}
	}
	if pageBits < 1 || pageBits > 32 {
		return r.errorf(off, "the chunk index header: pages of 2^%d elements", pageBits)
	}
	a.pageN = 1 << pageBits
	want := uint64(1)
	for _, m := range g.max {
		if hi, lo := bits.Mul64(want, uint64(m)); hi != 0 {
			return r.errorf(off, "the chunk index over %v chunks", g.max)
		} else {
			want = lo
		}
	}
	if a.nelmts != want {
		return r.errorf(off, "a fixed array of %d elements for %d chunks", a.nelmts, want)
	}
	if dblk == undefined {
		return nil // no chunk written
	}
	return a.fixedBlock(dblk)
}

// extensibleHeader reads the rest of an extensible array's header,
// from its bit counts, its super block table and its index block.
func (a *array) extensibleHeader(c *cursor, b []byte, off int64, g *grid) error {
	r := a.r
	maxBits, idxElmts, minElmts, minPtrs, pageBits := int(c.u8()), int(c.u8()), int(c.u8()), int(c.u8()), int(c.u8())
	for range 6 {
		c.length()
	}
	ib := c.addr()
	if err := r.checksum(b, c.p, off, "the chunk index header"); err != nil {
		return err
	}
	pow2 := func(v int) bool { return v > 0 && v&(v-1) == 0 }
	if maxBits < 1 || maxBits > 64 || !pow2(minElmts) || !pow2(minPtrs) || bits.Len(uint(minElmts))-1 > maxBits || pageBits < 1 || pageBits > 32 {
		return r.errorf(off, "an extensible array of 2^%d elements, data blocks of at least %d, super blocks of at least %d, pages of 2^%d", maxBits, minElmts, minPtrs, pageBits)
	}
	a.unlim = -1
	for k, m := range g.max {
		if m < 0 {
			if a.unlim >= 0 {
				return r.errorf(off, "an extensible array chunk index for two unlimited dimensions")
			}
			a.unlim = k
		}
	}
	if a.unlim < 0 {
		return r.errorf(off, "an extensible array chunk index without an unlimited dimension")
	}
	a.dims = append([]int64{-1}, g.max[:a.unlim]...)
	a.dims = append(a.dims, g.max[a.unlim+1:]...)
	a.idxElmts, a.minElmts, a.pageN = uint64(idxElmts), uint64(minElmts), 1<<pageBits
	a.offSize = (maxBits + 7) / 8
	nsblks := 1 + maxBits - (bits.Len(uint(minElmts)) - 1)
	var start, startDblk uint64
	for u := 0; u < nsblks; u++ {
		s := sblkInfo{ndblks: 1 << (u / 2), dblkN: uint64(minElmts) << ((u + 1) / 2), start: start, startDblk: startDblk}
		a.sblks = append(a.sblks, s)
		hi, lo := bits.Mul64(s.ndblks, s.dblkN)
		if hi != 0 || start+lo < start {
			break // past any index
		}
		start += lo
		startDblk += s.ndblks
	}
	a.nsblksIB = 2 * (bits.Len(uint(minPtrs)) - 1)
	ndblk := 2 * (minPtrs - 1)
	nsblk := max(nsblks-a.nsblksIB, 0)
	if ib == undefined {
		a.empty = true
		return nil
	}
	return a.indexBlock(ib, idxElmts, ndblk, nsblk)
}

// indexBlock reads the extensible array's index block at ib: its
// elements and the addresses of its data and super blocks.
func (a *array) indexBlock(ib uint64, idxElmts, ndblk, nsblk int) error {
	r := a.r
	size := int64(4+1+1+r.so) + int64(idxElmts*a.esize) + int64((ndblk+nsblk)*r.so) + 4
	blk, boff, err := a.block(ib, size, "EAIB", "index block")
	if err != nil {
		return err
	}
	if err := r.checksum(blk, int(size-4), boff, "the chunk index's index block"); err != nil {
		return err
	}
	p := 6 + r.so
	a.ibElems = blk[p : p+idxElmts*a.esize]
	c := &cursor{r: r, b: blk[p+idxElmts*a.esize:], off: boff + int64(p+idxElmts*a.esize)}
	for range ndblk {
		a.ibDblks = append(a.ibDblks, c.addr())
	}
	for range nsblk {
		a.ibSblks = append(a.ibSblks, c.addr())
	}
	return nil
}

// fixedBlock reads a fixed array's data block: its elements, or (paged)
// its page bitmap, the pages read when needed.
func (a *array) fixedBlock(addr uint64) error {
	r := a.r
	a.paged = a.nelmts > a.pageN
	if a.paged {
		a.npages = (a.nelmts + a.pageN - 1) / a.pageN
		bm := int64((a.npages + 7) / 8)
		a.prefix = int64(6+r.so) + bm + 4
		b, off, err := a.block(addr, a.prefix, "FADB", "data block")
		if err != nil {
			return err
		}
		if err := r.checksum(b, int(a.prefix-4), off, "the chunk index's data block"); err != nil {
			return err
		}
		a.dblk, a.bitmap = off, b[6+r.so:6+int64(r.so)+bm]
		return nil
	}
	n := int64(6+r.so) + int64(a.nelmts)*int64(a.esize) + 4
	b, off, err := a.block(addr, n, "FADB", "data block")
	if err != nil {
		return err
	}
	if err := r.checksum(b, int(n-4), off, "the chunk index's data block"); err != nil {
		return err
	}
	a.dblk, a.elements = off, b[6+r.so:n-4]
	return nil
}

// bit reports bit i of a page-initialised bitmap (most significant
// bit first, as H5VM_bit_get reads it).
func bit(bm []byte, i uint64) bool { return bm[i/8]&(0x80>>(i%8)) != 0 }

// undefElement is an element whose chunk was never written.
var undefElement = bytes.Repeat([]byte{0xff}, 8+8+4)

// element returns element idx of the array and its file offset.
func (a *array) element(idx uint64) ([]byte, int64, error) {
	if a.fixed {
		return a.fixedElement(idx)
	}
	return a.extensibleElement(idx)
}

// fixedElement returns element idx of a fixed array and its file offset.
func (a *array) fixedElement(idx uint64) ([]byte, int64, error) {
	r := a.r
	if idx >= a.nelmts {
		return nil, 0, r.errorf(-1, "chunk index element %d of %d", idx, a.nelmts)
	}
	if a.elements == nil && !a.paged {
		return undefElement[:a.esize], -1, nil
	}
	if !a.paged {
		return a.elements[idx*uint64(a.esize) : (idx+1)*uint64(a.esize)], a.dblk + int64(6+r.so) + int64(idx)*int64(a.esize), nil
	}
	p := idx / a.pageN
	if !bit(a.bitmap, p) {
		return undefElement[:a.esize], -1, nil
	}
	pg, err := a.page(a.dblk+a.prefix, p, min(a.pageN, a.nelmts-p*a.pageN))
	if err != nil {
		return nil, 0, err
	}
	e := (idx - p*a.pageN) * uint64(a.esize)
	return pg.b[e : e+uint64(a.esize)], pg.off + int64(e), nil
}

// extensibleElement returns element idx of an extensible array and its
// file offset: from the index block, or from the data block (found
// through the index block or a super block) that holds it.
func (a *array) extensibleElement(idx uint64) ([]byte, int64, error) {
	r := a.r
	if a.empty {
		return undefElement[:a.esize], -1, nil
	}
	if idx < a.idxElmts {
		return a.ibElems[idx*uint64(a.esize) : (idx+1)*uint64(a.esize)], -1, nil
	}
	j := idx - a.idxElmts
	s := bits.Len64(j/a.minElmts+1) - 1
	if s >= len(a.sblks) {
		return nil, 0, r.errorf(-1, "chunk index element %d past the extensible array", idx)
	}
	si := a.sblks[s]
	within := j - si.start
	di, e := within/si.dblkN, within%si.dblkN
	var daddr uint64
	var bitmap []byte // the super block's page-initialised bits
	if s < a.nsblksIB {
		k := si.startDblk + di
		if k >= uint64(len(a.ibDblks)) {
			return nil, 0, r.errorf(-1, "chunk index element %d: data block %d of the index block's %d", idx, k, len(a.ibDblks))
		}
		daddr = a.ibDblks[k]
	} else {
		if s-a.nsblksIB >= len(a.ibSblks) {
			return nil, 0, r.errorf(-1, "chunk index element %d: super block %d of the index block's %d", idx, s-a.nsblksIB, len(a.ibSblks))
		}
		sb, err := a.superBlock(s, a.ibSblks[s-a.nsblksIB])
		if err != nil {
			return nil, 0, err
		}
		if sb == nil {
			return undefElement[:a.esize], -1, nil
		}
		daddr = sb.dblks[di]
		bitmap = sb.bitmap
	}
	if daddr == undefined {
		return undefElement[:a.esize], -1, nil
	}
	paged := si.dblkN > a.pageN
	// The offset libhdf5 writes in a data block: the super block's
	// first element plus the data block's index times its size, the
	// index counted from the array's first data block for those the
	// index block lists (H5EA__lookup_elmt), from the super block's
	// first otherwise; either is accepted.
	blockOff := [2]uint64{si.start + di*si.dblkN, si.start + (si.startDblk+di)*si.dblkN}
	if !paged {
		return a.dataBlockElement(daddr, si, e, blockOff)
	}
	if s < a.nsblksIB || bitmap == nil {
		return nil, 0, r.errorf(-1, "a paged data block under the extensible array's index block")
	}
	return a.pagedElement(daddr, si, di, e, bitmap, blockOff)
}

// dataBlockElement returns element e of the extensible array's data
// block at daddr (not paged), reading the block once; blockOff is the
// offset its parent gives it.
func (a *array) dataBlockElement(daddr uint64, si sblkInfo, e uint64, blockOff [2]uint64) ([]byte, int64, error) {
	r := a.r
	prefix := int64(6+r.so+a.offSize) + 4
	n := prefix + int64(si.dblkN)*int64(a.esize)
	off, err := r.abs(daddr, "a data block")
	if err != nil {
		return nil, 0, err
	}
	els, ok := a.dblocks[off]
	if !ok {
		b, off, err := a.block(daddr, n, "EADB", "data block")
		if err != nil {
			return nil, 0, err
		}
		if err := r.checksum(b, int(n-4), off, "the chunk index's data block"); err != nil {
			return nil, 0, err
		}
		if err := a.blockOffset(b, off, blockOff); err != nil {
			return nil, 0, err
		}
		els = b[prefix-4 : n-4]
		a.dblocks[off] = els
	}
	return els[e*uint64(a.esize) : (e+1)*uint64(a.esize)], off + prefix - 4 + int64(e)*int64(a.esize), nil
}

// pagedElement returns element e of data block di of a super block, the
// paged data block at daddr (its header read once, its page when
// needed); bitmap is the super block's page-initialised bits.
func (a *array) pagedElement(daddr uint64, si sblkInfo, di, e uint64, bitmap []byte, blockOff [2]uint64) ([]byte, int64, error) {
	r := a.r
	prefix := int64(6+r.so+a.offSize) + 4
	// One bit per page of each data block, packed across the super
	// block's data blocks (H5EA__lookup_elmt: dblk_idx * dblk_npages +
	// page), in a bitmap of a whole number of bytes per data block.
	p := e / a.pageN
	if !bit(bitmap, di*(si.dblkN/a.pageN)+p) {
		return undefElement[:a.esize], -1, nil
	}
	off, err := r.abs(daddr, "a data block")
	if err != nil {
		return nil, 0, err
	}
	if _, ok := a.dblocks[off]; !ok {
		b, off, err := a.block(daddr, prefix, "EADB", "data block")
		if err != nil {
			return nil, 0, err
		}
		if err := r.checksum(b, int(prefix-4), off, "the chunk index's data block"); err != nil {
			return nil, 0, err
		}
		if err := a.blockOffset(b, off, blockOff); err != nil {
			return nil, 0, err
		}
		a.dblocks[off] = nil
	}
	pg, err := a.page(off+prefix, p, a.pageN)
	if err != nil {
		return nil, 0, err
	}
	q := (e - p*a.pageN) * uint64(a.esize)
	return pg.b[q : q+uint64(a.esize)], pg.off + int64(q), nil
}

// blockOffset checks an extensible array block's offset field.
func (a *array) blockOffset(b []byte, off int64, want [2]uint64) error {
	c := &cursor{r: a.r, b: b[6+a.r.so:], off: off}
	if got := c.uint(a.offSize); got != want[0] && got != want[1] {
		return a.r.errorf(off, "%s's block says element %d where its parent puts element %d (a loop?)", a.what, got, want[0])
	}
	return nil
}

type page struct {
	b   []byte
	off int64
}

// page reads page p (n elements and a checksum) of the paged data block
// whose pages start at file offset first.
func (a *array) page(first int64, p, n uint64) (page, error) {
	r := a.r
	size := int64(a.pageN)*int64(a.esize) + 4
	off := first + int64(p)*size
	key := uint64(off)
	if b, ok := a.pages[key]; ok {
		return page{b, off}, nil
	}
	b, _, err := a.block(uint64(off-r.base), int64(n)*int64(a.esize)+4, "", "data block page")
	if err != nil {
		return page{}, err
	}
	if err := r.checksum(b, len(b)-4, off, "the chunk index's data block page"); err != nil {
		return page{}, err
	}
	a.pages[key] = b[:len(b)-4]
	return page{b[:len(b)-4], off}, nil
}

// superBlock reads (once) the extensible array's super block s at addr.
func (a *array) superBlock(s int, addr uint64) (*easb, error) {
	r := a.r
	if sb, ok := a.sblocks[s]; ok {
		return sb, nil
	}
	if addr == undefined {
		a.sblocks[s] = nil
		return nil, nil
	}
	si := a.sblks[s]
	sb := &easb{}
	if si.dblkN > a.pageN {
		sb.initSz = int((si.dblkN/a.pageN + 7) / 8)
	}
	if si.ndblks > 1<<20 {
		return nil, r.errorf(-1, "an extensible array super block of %d data blocks", si.ndblks)
	}
	n := int64(6+r.so+a.offSize) + int64(si.ndblks)*int64(sb.initSz) + int64(si.ndblks)*int64(r.so) + 4
	b, off, err := a.block(addr, n, "EASB", "super block")
	if err != nil {
		return nil, err
	}
	if err := r.checksum(b, int(n-4), off, "the chunk index's super block"); err != nil {
		return nil, err
	}
	if err := a.blockOffset(b, off, [2]uint64{si.start, si.start}); err != nil {
		return nil, err
	}
	p := 6 + r.so + a.offSize
	if sb.initSz > 0 {
		sb.bitmap = b[p : p+int(si.ndblks)*sb.initSz]
		p += int(si.ndblks) * sb.initSz
	}
	c := &cursor{r: r, b: b[p:], off: off + int64(p)}
	for range si.ndblks {
		sb.dblks = append(sb.dblks, c.addr())
	}
	a.sblocks[s] = sb
	return sb, nil
}
