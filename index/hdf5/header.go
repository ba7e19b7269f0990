package hdf5

import "bytes"

// Header message types used (HDF5 File Format Specification, IV.A.2).
const (
	msgNil          = 0x00
	msgDataspace    = 0x01
	msgLinkInfo     = 0x02
	msgDatatype     = 0x03
	msgLink         = 0x06
	msgLayout       = 0x08
	msgFilters      = 0x0B
	msgContinuation = 0x10
	msgSymbolTable  = 0x11
)

// message is one header message: its type, flags, data, and the data's
// offset in the file (a compact dataset's bytes are a range of it).
type message struct {
	typ   uint16
	flags uint8
	data  []byte
	off   int64
}

// shared reports whether the message is stored elsewhere (flag bit 1):
// a committed datatype, a shared message table entry.
func (m message) shared() bool { return m.flags&0x02 != 0 }

// header reads the object header at addr: its messages, continuation
// blocks followed (each once, at most MaxContinuations, MaxHeaderBytes
// in all).
func (r *reader) header(addr uint64) ([]message, error) {
	off, err := r.abs(addr, "an object header")
	if err != nil {
		return nil, err
	}
	sig, err := r.at(off, min(4, r.size-off), "an object header")
	if err != nil {
		return nil, err
	}
	if bytes.Equal(sig, []byte("OHDR")) {
		return r.headerV2(off)
	}
	return r.headerV1(off)
}

type block struct{ off, n int64 }

// continuation decodes a continuation message's block, refusing one seen
// before and counting the bytes.
func (r *reader) continuation(m message, seen map[int64]bool, total *int64) (block, error) {
	c := &cursor{r: r, b: m.data, off: m.off}
	a, n := c.addr(), c.length()
	if c.bad {
		return block{}, r.errorf(m.off, "a continuation message cut off")
	}
	off, err := r.abs(a, "a header continuation block")
	if err != nil {
		return block{}, err
	}
	if seen[off] {
		return block{}, r.errorf(m.off, "a header continuation block at byte %d is reached twice (a loop)", off)
	}
	seen[off] = true
	if len(seen) > MaxContinuations {
		return block{}, r.errorf(m.off, "more than %d header continuation blocks", MaxContinuations)
	}
	if *total += int64(n); n > MaxHeaderBytes || *total > MaxHeaderBytes {
		return block{}, r.errorf(m.off, "object header over %d bytes", MaxHeaderBytes)
	}
	return block{off, int64(n)}, nil
}

func (r *reader) headerV1(off int64) ([]message, error) {
	b, err := r.at(off, 16, "an object header")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	if v := c.u8(); v != 1 {
		return nil, r.errorf(off, "object header version %d (want 1, or a v2 header's OHDR)", v)
	}
	c.u8()
	count := int(c.u16())
	c.u32() // reference count
	size := int64(c.u32())
	if size > MaxHeaderBytes {
		return nil, r.errorf(off, "object header of %d bytes, over %d", size, MaxHeaderBytes)
	}
	total := size
	seen := map[int64]bool{off: true}
	blocks := []block{{off + 16, size}}
	var msgs []message
	for len(blocks) > 0 && len(msgs) < count {
		bl := blocks[0]
		blocks = blocks[1:]
		data, err := r.at(bl.off, bl.n, "an object header block")
		if err != nil {
			return nil, err
		}
		for p := 0; p+8 <= len(data) && len(msgs) < count; {
			c := &cursor{r: r, b: data[p:], off: bl.off + int64(p)}
			typ, n, flags := c.u16(), int(c.u16()), c.u8()
			c.take(3)
			if n > len(data)-p-8 {
				return nil, r.errorf(c.off, "header message of %d bytes runs past its block", n)
			}
			m := message{typ: typ, flags: flags, data: data[p+8 : p+8+n], off: bl.off + int64(p) + 8}
			msgs = append(msgs, m)
			if typ == msgContinuation {
				nb, err := r.continuation(m, seen, &total)
				if err != nil {
					return nil, err
				}
				blocks = append(blocks, nb)
			}
			p += 8 + (n+7)&^7
		}
	}
	return msgs, nil
}

func (r *reader) headerV2(off int64) ([]message, error) {
	b, err := r.at(off, min(r.size-off, 32), "an object header")
	if err != nil {
		return nil, err
	}
	c := &cursor{r: r, b: b, off: off}
	c.take(4)
	if v := c.u8(); v != 2 {
		return nil, r.errorf(off+4, "object header version %d after OHDR (want 2)", v)
	}
	flags := c.u8()
	if flags&0x20 != 0 {
		c.take(16) // times
	}
	if flags&0x10 != 0 {
		c.take(4) // attribute phase change
	}
	size := int64(c.uint(1 << (flags & 3)))
	if c.bad {
		return nil, r.errorf(off, "object header cut off")
	}
	if size > MaxHeaderBytes {
		return nil, r.errorf(off, "object header of %d bytes, over %d", size, MaxHeaderBytes)
	}
	total := size
	seen := map[int64]bool{off: true}
	blocks := []block{{off + int64(c.p), size}}
	order := flags&0x04 != 0
	var msgs []message
	first := true
	prefix := int64(c.p)
	for len(blocks) > 0 {
		bl := blocks[0]
		blocks = blocks[1:]
		// The first block is the prefix and the messages; a continuation
		// block its OCHK signature and the messages; a checksum of the
		// bytes before it ends each.
		whole, start, what := bl.off-prefix, bl.off, "an object header"
		if !first {
			whole, start, what = bl.off, bl.off+4, "an object header continuation block"
		}
		n := bl.off + bl.n - start
		if !first {
			n -= 4
		}
		if n < 0 {
			return nil, r.errorf(bl.off, "a header continuation block of %d bytes", bl.n)
		}
		full, err := r.at(whole, start-whole+n+4, what)
		if err != nil {
			return nil, err
		}
		if !first && !bytes.Equal(full[:4], []byte("OCHK")) {
			return nil, r.errorf(bl.off, "a header continuation block without its OCHK signature")
		}
		if err := r.checksum(full, int(start-whole+n), whole, what); err != nil {
			return nil, err
		}
		first = false
		data := full[start-whole : start-whole+n]
		hl := 4
		if order {
			hl = 6
		}
		for p := 0; p+hl <= len(data); {
			c := &cursor{r: r, b: data[p:], off: start + int64(p)}
			typ, sz, mflags := uint16(c.u8()), int(c.u16()), c.u8()
			if order {
				c.u16()
			}
			if sz > len(data)-p-hl {
				return nil, r.errorf(c.off, "header message of %d bytes runs past its block", sz)
			}
			m := message{typ: typ, flags: mflags, data: data[p+hl : p+hl+sz], off: start + int64(p+hl)}
			msgs = append(msgs, m)
			if typ == msgContinuation {
				nb, err := r.continuation(m, seen, &total)
				if err != nil {
					return nil, err
				}
				blocks = append(blocks, nb)
			}
			p += hl + sz
		}
	}
	return msgs, nil
}
