package hdf5

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// link is one named member of a group: a hard link to an object header.
type link struct {
	name string
	addr uint64
}

// localHeap is a group's local heap: the names of its symbol table.
type localHeap struct {
	data []byte
	off  int64
}

func (r *reader) localHeap(addr uint64) (*localHeap, error) {
	off, err := r.abs(addr, "a local heap")
	if err != nil {
		return nil, err
	}
	b, err := r.at(off, min(r.size-off, int64(8+2*r.sl+r.so)), "a local heap")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	if !bytes.Equal(c.take(4), []byte("HEAP")) {
		return nil, r.errorf(off, "a local heap without its HEAP signature")
	}
	c.take(4) // version, reserved
	size := c.length()
	c.length() // free list
	data := c.addr()
	if c.bad {
		return nil, r.errorf(off, "a local heap cut off")
	}
	doff, err := r.abs(data, "a local heap's data")
	if err != nil {
		return nil, err
	}
	if size > uint64(MaxHeaderBytes) {
		return nil, r.errorf(off, "a local heap of %d bytes, over %d", size, MaxHeaderBytes)
	}
	d, err := r.at(doff, int64(size), "a local heap's data")
	if err != nil {
		return nil, err
	}
	return &localHeap{data: d, off: doff}, nil
}

// name returns the NUL-terminated string at offset o of the heap.
func (h *localHeap) name(r *reader, o uint64) (string, error) {
	if o >= uint64(len(h.data)) {
		return "", r.errorf(h.off, "a link name at heap offset %d, past the heap's %d bytes", o, len(h.data))
	}
	s := h.data[o:]
	end := bytes.IndexByte(s, 0)
	if end < 0 {
		return "", r.errorf(h.off+int64(o), "a link name without its NUL")
	}
	return string(s[:end]), nil
}

// symbolTable lists the links of a symbol table group: the v1 B-tree
// (type 0) at btree, whose leaves are symbol table nodes, naming from
// the local heap at heap.
func (r *reader) symbolTable(btree, heap uint64) ([]link, error) {
	h, err := r.localHeap(heap)
	if err != nil {
		return nil, err
	}
	var links []link
	seen := map[int64]bool{}
	var walk func(addr uint64, level int) error
	walk = func(addr uint64, level int) error {
		off, err := r.abs(addr, "a group B-tree node")
		if err != nil {
			return err
		}
		if seen[off] {
			return r.errorf(off, "a group B-tree node is reached twice (a loop)")
		}
		seen[off] = true
		if r.nodes++; r.nodes > MaxBTreeNodes {
			return r.errorf(off, "more than %d B-tree nodes", MaxBTreeNodes)
		}
		hl := int64(8 + 2*r.so)
		b, err := r.at(off, hl, "a group B-tree node")
		if err != nil {
			return err
		}
		c := &cursor{r: r, b: b, off: off}
		if !bytes.Equal(c.take(4), []byte("TREE")) {
			return r.errorf(off, "a group B-tree node without its TREE signature")
		}
		typ, lv, used := c.u8(), int(c.u8()), int(c.u16())
		if typ != 0 {
			return r.errorf(off, "a group B-tree node of type %d (want 0)", typ)
		}
		if level >= 0 && lv != level {
			return r.errorf(off, "a group B-tree node at level %d where its parent wants %d (a loop?)", lv, level)
		}
		body := int64(used)*int64(r.sl+r.so) + int64(r.sl)
		b, err = r.at(off+hl, body, "a group B-tree node")
		if err != nil {
			return err
		}
		c = &cursor{r: r, b: b, off: off + hl}
		for i := 0; i < used; i++ {
			c.length() // key: a heap offset
			child := c.addr()
			if lv > 0 {
				if err := walk(child, lv-1); err != nil {
					return err
				}
				continue
			}
			l, err := r.symbolNode(child, h, seen)
			if err != nil {
				return err
			}
			links = append(links, l...)
			if len(links) > MaxObjects {
				return r.errorf(off, "more than %d links in a group", MaxObjects)
			}
		}
		return nil
	}
	if err := walk(btree, -1); err != nil {
		return nil, err
	}
	return links, nil
}

// symbolNode reads a symbol table node (SNOD): its entries' names and
// object header addresses.
func (r *reader) symbolNode(addr uint64, h *localHeap, seen map[int64]bool) ([]link, error) {
	off, err := r.abs(addr, "a symbol table node")
	if err != nil {
		return nil, err
	}
	if seen[off] {
		return nil, r.errorf(off, "a symbol table node is reached twice (a loop)")
	}
	seen[off] = true
	if r.nodes++; r.nodes > MaxBTreeNodes {
		return nil, r.errorf(off, "more than %d B-tree nodes", MaxBTreeNodes)
	}
	b, err := r.at(off, 8, "a symbol table node")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	if !bytes.Equal(c.take(4), []byte("SNOD")) {
		return nil, r.errorf(off, "a symbol table node without its SNOD signature")
	}
	c.take(2)
	n := int(c.u16())
	entry := 2*r.so + 24
	b, err = r.at(off+8, int64(n*entry), "a symbol table node's entries")
	if err != nil {
		return nil, err
	}
	links := make([]link, 0, n)
	for i := 0; i < n; i++ {
		c := &cursor{r: r, b: b[i*entry : (i+1)*entry], off: off + 8 + int64(i*entry)}
		nameOff, obj := c.addr(), c.addr()
		name, err := h.name(r, nameOff)
		if err != nil {
			return nil, err
		}
		links = append(links, link{name, obj})
	}
	return links, nil
}

// denseLinks lists the links of a dense group (HDF5 1.8 new-style
// storage, h5py's libver='latest' beyond 8 links): the link messages in
// the fractal heap at heapAddr, enumerated by the name index (a v2
// B-tree of type 5 at nameIndex), each record's hash checked against
// its name. Soft and external links come back with ok false in others.
func (r *reader) denseLinks(heapAddr, nameIndex uint64, path string) (links []link, others []link, what []string, err error) {
	h, err := r.fheap(heapAddr, "group "+quote(path))
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := r.btree2(nameIndex, 5, "group "+quote(path))
	if err != nil {
		return nil, nil, nil, err
	}
	if t.recSize != 4+h.idLen {
		return nil, nil, nil, r.errorf(t.off, "group %s's name index has records of %d bytes, for heap IDs of %d", quote(path), t.recSize, h.idLen)
	}
	err = t.records(func(rec []byte, off int64) error {
		if len(links)+len(others) >= MaxObjects {
			return r.errorf(off, "more than %d links in group %s", MaxObjects, quote(path))
		}
		obj, at, err := h.object(rec[4:], off+4)
		if err != nil {
			return err
		}
		if at < 0 {
			at = off + 4
		}
		l, ok, w, err := r.linkMessage(message{typ: msgLink, data: obj, off: at})
		if err != nil {
			return err
		}
		if hash := binary.LittleEndian.Uint32(rec); hash != lookup3([]byte(l.name)) {
			return r.errorf(off, "group %s's name index: the record at byte %d hashes %08x, its link %q %08x", quote(path), off, hash, l.name, lookup3([]byte(l.name)))
		}
		if ok {
			links = append(links, l)
		} else {
			others = append(others, l)
			what = append(what, w)
		}
		return nil
	})
	return links, others, what, err
}

// linkMessage decodes a link message (new-style compact groups). A soft
// or external link returns ok false with what it is.
func (r *reader) linkMessage(m message) (l link, ok bool, what string, err error) {
	c := &cursor{r: r, b: m.data, off: m.off}
	if v := c.u8(); v != 1 {
		return l, false, "", r.errorf(m.off, "link message version %d (want 1)", v)
	}
	flags := c.u8()
	typ := uint8(0)
	if flags&0x08 != 0 {
		typ = c.u8()
	}
	if flags&0x04 != 0 {
		c.u64()
	}
	if flags&0x10 != 0 {
		c.u8()
	}
	n := c.uint(1 << (flags & 3))
	if n > uint64(len(m.data)) {
		return l, false, "", r.errorf(m.off, "a link name of %d bytes runs past its message", n)
	}
	l.name = string(c.take(int(n)))
	switch typ {
	case 0:
		l.addr = c.addr()
	case 1:
		what = "a soft link"
	case 64:
		what = "an external link"
	default:
		what = fmt.Sprintf("a link of type %d", typ)
	}
	if c.bad {
		return l, false, "", r.errorf(m.off, "a link message cut off")
	}
	return l, typ == 0, what, nil
}
