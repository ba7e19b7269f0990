package hdf5

import (
	"bytes"
	"math/bits"
)

// MaxBTree2NodeBytes caps the node size of a version-2 B-tree (HDF5
// writes 512 bytes for link indexes and 2048 for chunk indexes).
const MaxBTree2NodeBytes = 1 << 20

// btree2 is a version-2 B-tree's header (HDF5 1.8: dense groups' link
// indexes, layout-4 chunk indexes, huge fractal heap objects).
type btree2 struct {
	r        *reader
	off      int64 // the header's offset
	typ      uint8
	nodeSize int
	recSize  int
	depth    int
	root     uint64
	rootN    int
	total    uint64
	nrecSize int   // bytes of a child pointer's record count
	maxRec   []int // most records of a node, per depth
	cumSize  []int // bytes of a child pointer's total count, per depth
	what     string
}

// encSize is the bytes HDF5 uses to store counts up to l
// (H5VM_limit_enc_size).
func encSize(l uint64) int { return (bits.Len64(l)-1)/8 + 1 }

// btree2 reads the header of the version-2 B-tree of type typ at addr,
// what it indexes named by what; the header's checksum is verified.
func (r *reader) btree2(addr uint64, typ uint8, what string) (*btree2, error) {
	off, err := r.abs(addr, what+"'s B-tree")
	if err != nil {
		return nil, err
	}
	hl := 16 + 2 + r.so + r.sl + 4
	b, err := r.at(off, int64(hl), what+"'s B-tree header")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	if !bytes.Equal(c.take(4), []byte("BTHD")) {
		return nil, r.errorf(off, "%s's B-tree header without its BTHD signature", what)
	}
	if v := c.u8(); v != 0 {
		return nil, r.errorf(off, "%s's B-tree header: version %d (want 0)", what, v)
	}
	t := &btree2{r: r, off: off, what: what}
	t.typ = c.u8()
	t.nodeSize = int(c.u32())
	t.recSize = int(c.u16())
	t.depth = int(c.u16())
	c.take(2) // split and merge percents
	t.root = c.addr()
	t.rootN = int(c.u16())
	t.total = c.length()
	if err := r.checksum(b, c.p, off, what+"'s B-tree header"); err != nil {
		return nil, err
	}
	if t.typ != typ {
		return nil, r.errorf(off, "%s's B-tree has type %d (want %d)", what, t.typ, typ)
	}
	const prefix = 10 // signature, version, type, checksum
	if t.nodeSize > MaxBTree2NodeBytes || t.recSize == 0 || t.nodeSize < prefix+t.recSize || t.depth > 16 {
		return nil, r.errorf(off, "%s's B-tree: nodes of %d bytes, records of %d, depth %d", what, t.nodeSize, t.recSize, t.depth)
	}
	leaf := (t.nodeSize - prefix) / t.recSize
	t.nrecSize = encSize(uint64(leaf))
	t.maxRec = []int{leaf}
	t.cumSize = []int{0}
	cum := uint64(leaf)
	for d := 1; d <= t.depth; d++ {
		ptr := r.so + t.nrecSize + t.cumSize[d-1]
		n := (t.nodeSize - (prefix + ptr)) / (t.recSize + ptr)
		if n <= 0 {
			return nil, r.errorf(off, "%s's B-tree: internal nodes of %d bytes hold no record", what, t.nodeSize)
		}
		hi, lo := bits.Mul64(uint64(n)+1, cum)
		if cum = lo + uint64(n); hi != 0 || cum < lo {
			cum = ^uint64(0)
		}
		t.maxRec = append(t.maxRec, n)
		t.cumSize = append(t.cumSize, encSize(cum))
	}
	if t.rootN > t.maxRec[t.depth] {
		return nil, r.errorf(off, "%s's B-tree: %d records in its root, over %d", what, t.rootN, t.maxRec[t.depth])
	}
	return t, nil
}

// records calls visit with each record, in key order; every node once
// (a node reached twice is a loop), at most MaxBTreeNodes nodes in the
// file; node checksums verified.
func (t *btree2) records(visit func(rec []byte, off int64) error) error {
	if t.root == undefined || t.rootN == 0 && t.depth == 0 {
		return nil
	}
	seen := map[int64]bool{}
	return t.node(t.root, t.rootN, t.depth, seen, visit)
}

func (t *btree2) node(addr uint64, nrec, depth int, seen map[int64]bool, visit func([]byte, int64) error) error {
	r := t.r
	off, err := r.abs(addr, t.what+"'s B-tree node")
	if err != nil {
		return err
	}
	if seen[off] {
		return r.errorf(off, "%s's B-tree node is reached twice (a loop)", t.what)
	}
	seen[off] = true
	if r.nodes++; r.nodes > MaxBTreeNodes {
		return r.errorf(off, "more than %d B-tree nodes", MaxBTreeNodes)
	}
	if nrec < 0 || nrec > t.maxRec[depth] {
		return r.errorf(off, "%s's B-tree node: %d records, over %d", t.what, nrec, t.maxRec[depth])
	}
	b, err := r.at(off, int64(min(int64(t.nodeSize), r.size-off)), t.what+"'s B-tree node")
	if err != nil {
		return err
	}
	sig := "BTLF"
	if depth > 0 {
		sig = "BTIN"
	}
	c := &cursor{r: r, b: b, off: off}
	if string(c.take(4)) != sig {
		return r.errorf(off, "%s's B-tree node without its %s signature", t.what, sig)
	}
	if v, typ := c.u8(), c.u8(); v != 0 || typ != t.typ {
		return r.errorf(off, "%s's B-tree node: version %d, type %d (want 0, %d)", t.what, v, typ, t.typ)
	}
	recs := c.p
	c.take(nrec * t.recSize)
	type child struct {
		addr uint64
		n    int
	}
	var kids []child
	if depth > 0 {
		for i := 0; i <= nrec; i++ {
			a := c.addr()
			n := int(c.uint(t.nrecSize))
			if depth > 1 {
				c.uint(t.cumSize[depth-1])
			}
			kids = append(kids, child{a, n})
		}
	}
	if c.bad {
		return r.errorf(off, "%s's B-tree node: %d records overrun its %d bytes", t.what, nrec, t.nodeSize)
	}
	if err := r.checksum(b, c.p, off, t.what+"'s B-tree node"); err != nil {
		return err
	}
	for i := 0; i <= nrec; i++ {
		if depth > 0 {
			if err := t.node(kids[i].addr, kids[i].n, depth-1, seen, visit); err != nil {
				return err
			}
		}
		if i < nrec {
			p := recs + i*t.recSize
			if err := visit(b[p:p+t.recSize], off+int64(p)); err != nil {
				return err
			}
		}
	}
	return nil
}
