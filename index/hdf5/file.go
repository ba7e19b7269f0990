package hdf5

import (
	"encoding/binary"
	"io"

	"github.com/lazyweights/tensorfs/index"
)

// Named caps. A file over them is refused, one line; a dataset over the
// chunk caps is listed as unserved.
const (
	// MaxObjects caps the groups and datasets visited in one file.
	MaxObjects = 1_000_000
	// MaxBTreeNodes caps the B-tree nodes (group and chunk indexes) and
	// symbol table nodes read in one file.
	MaxBTreeNodes = 4_000_000
	// MaxDepth caps how deep groups nest.
	MaxDepth = 64
	// MaxHeaderBytes caps one object header's messages, continuation
	// blocks included.
	MaxHeaderBytes = 16 << 20
	// MaxContinuations caps one object header's continuation blocks.
	MaxContinuations = 1024
	// MaxChunks caps the chunks of one dataset.
	MaxChunks = 1 << 22
	// MaxChunkBytes caps one chunk, decoded (HDF5's own limit is 4 GiB;
	// writers use a few MiB at most).
	MaxChunkBytes = 64 << 20
	// MaxSlabBytes caps the bytes decoded at once: one row of chunks
	// along the first dimension, assembled in memory and then written.
	MaxSlabBytes = 256 << 20
	// MaxMetadataBytes caps the bytes of structures (headers, B-tree
	// nodes, heap and chunk index blocks; not data) read from one file:
	// overlapping or many small structures cannot make a small file
	// cost more.
	MaxMetadataBytes = 1 << 30
)

// undefined is HDF5's undefined address (all bits set), after widening.
const undefined = ^uint64(0)

// reader reads structures of one HDF5 file. Addresses are relative to
// the superblock's position (base), as the format defines them for
// files after a user block, and for an HDF5 file inside a zip.
type reader struct {
	f      io.ReaderAt
	name   string
	size   int64 // bytes of f
	base   int64 // the superblock's offset
	so, sl int   // size of offsets, of lengths (bytes)
	nodes  int   // B-tree and symbol table nodes read
	read   int64 // bytes of structures read
}

// errorf returns a one-line error at byte off of the file.
func (r *reader) errorf(off int64, format string, args ...any) error {
	return index.Errorf(r.name, off, "HDF5: "+format, args...)
}

// at returns n bytes at file offset off (absolute), refusing a range
// outside the file.
func (r *reader) at(off int64, n int64, what string) ([]byte, error) {
	if off < 0 || n < 0 || off > r.size || n > r.size-off {
		return nil, r.errorf(max(off, 0), "%s of %d bytes at byte %d lies outside the file (%d bytes)", what, n, off, r.size)
	}
	if r.read += n; r.read > MaxMetadataBytes {
		return nil, r.errorf(off, "more than %d bytes of HDF5 structures read (reading %s)", MaxMetadataBytes, what)
	}
	buf := make([]byte, n)
	if k, err := r.f.ReadAt(buf, off); int64(k) < n {
		return nil, r.errorf(off, "cannot read %s: %v", what, err)
	}
	return buf, nil
}

// abs turns a file address into an absolute offset, refusing the
// undefined address and addresses past the file.
func (r *reader) abs(addr uint64, what string) (int64, error) {
	if addr == undefined {
		return 0, r.errorf(-1, "%s has the undefined address", what)
	}
	if addr > uint64(r.size-r.base) {
		return 0, r.errorf(-1, "%s at address %d lies past the end of the file (%d bytes)", what, addr, r.size)
	}
	return r.base + int64(addr), nil
}

// cursor decodes little-endian fields of a structure read into b; off
// is b's offset in the file, for messages. A read past b sets bad.
type cursor struct {
	r   *reader
	b   []byte
	p   int
	off int64
	bad bool
}

func (c *cursor) take(n int) []byte {
	if c.bad || n < 0 || n > len(c.b)-c.p {
		c.bad = true
		return make([]byte, max(n, 0))
	}
	s := c.b[c.p : c.p+n]
	c.p += n
	return s
}

func (c *cursor) u8() uint8   { return c.take(1)[0] }
func (c *cursor) u16() uint16 { return binary.LittleEndian.Uint16(c.take(2)) }
func (c *cursor) u32() uint32 { return binary.LittleEndian.Uint32(c.take(4)) }
func (c *cursor) u64() uint64 { return binary.LittleEndian.Uint64(c.take(8)) }

// uint reads an n-byte little-endian unsigned integer (n 1..8); all ones
// widen to undefined.
func (c *cursor) uint(n int) uint64 {
	b := c.take(n)
	var v uint64
	all := true
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
		all = all && b[i] == 0xff
	}
	if all && n > 0 {
		return undefined
	}
	return v
}

func (c *cursor) addr() uint64 { return c.uint(c.r.so) }
func (c *cursor) length() uint64 {
	v := c.uint(c.r.sl)
	if v == undefined {
		return 1<<63 - 1 // not a length: fails every range check
	}
	return v
}

// where is the file offset of the cursor.
func (c *cursor) where() int64 { return c.off + int64(c.p) }

// superblock reads the superblock at off and returns the root group's
// object header address.
func (r *reader) superblock(off int64) (uint64, error) {
	head, err := r.at(off, min(r.size-off, 256), "the superblock")
	if err != nil {
		return 0, err
	}
	c := &cursor{r: r, b: head, off: off}
	c.take(8)
	version := c.u8()
	switch version {
	case 0, 1:
		c.take(4) // free-space, root group symbol table, reserved, shared header versions
		r.so, r.sl = int(c.u8()), int(c.u8())
		if !okSize(r.so) || !okSize(r.sl) {
			return 0, r.errorf(off+13, "sizes of offsets %d and lengths %d (want 2, 4 or 8)", r.so, r.sl)
		}
		c.take(1)
		c.u16() // group leaf node K
		c.u16() // group internal node K
		c.u32() // file consistency flags
		if version == 1 {
			c.take(4) // indexed storage internal node K, reserved
		}
		c.addr() // base address: addresses are relative to the superblock (see reader)
		c.addr() // free-space info
		c.addr() // end of file
		c.addr() // driver information block
		// The root group's symbol table entry.
		c.addr() // link name offset
		root := c.addr()
		if c.bad {
			return 0, r.errorf(off, "the superblock is cut off")
		}
		return root, nil
	case 2, 3:
		r.so, r.sl = int(c.u8()), int(c.u8())
		if !okSize(r.so) || !okSize(r.sl) {
			return 0, r.errorf(off+9, "sizes of offsets %d and lengths %d (want 2, 4 or 8)", r.so, r.sl)
		}
		c.u8()   // file consistency flags
		c.addr() // base address
		c.addr() // superblock extension
		c.addr() // end of file
		root := c.addr()
		if c.bad {
			return 0, r.errorf(off, "the superblock is cut off")
		}
		if err := r.checksum(head, c.p, off, "the superblock"); err != nil {
			return 0, err
		}
		return root, nil
	}
	return 0, r.errorf(off+8, "superblock version %d (tensorfs reads versions 0 to 3)", version)
}

func okSize(n int) bool { return n == 2 || n == 4 || n == 8 }
