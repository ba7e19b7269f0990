package hdf5

import (
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// dataset is what a dataset's header messages say.
type dataset struct {
	shape     []int64
	dt        dtype.DType
	bigEndian bool
	typeName  string // the stored type, for Unserved
	layout    int    // 0 compact, 1 contiguous, 2 chunked
	offset    int64  // compact, contiguous: absolute offset of the bytes
	size      int64  // compact, contiguous: bytes stored
	undefined bool   // contiguous storage never allocated
	btree     uint64 // chunked: the chunk B-tree's address (layout 3), the chunk index's (layout 4)
	chunk     []int64
	filters   []filter
	maxShape  []int64 // the dataspace's maximum dimensions (-1: unlimited); the shape when absent

	// Layout 4 (HDF5 1.10) and 5 (HDF5 2): the chunk index.
	index      int    // 0: v1 B-tree (layout 3); 1 single chunk, 2 implicit, 3 fixed array, 4 extensible array, 5 v2 B-tree
	singleSize uint64 // single chunk, filtered: its stored size
	singleMask uint32 // single chunk, filtered: its filter mask
	filtered1  bool   // single chunk: the layout message gives the filtered size
}

// filter is one filter of a dataset's pipeline.
type filter struct {
	id     uint16
	name   string
	client []uint32
}

// Filter ids (H5Zpublic.h).
const (
	filterDeflate = 1
	filterShuffle = 2
)

// unservedError is a dataset tensorfs lists but does not serve: the
// stored type, and why.
type unservedError struct{ typ, why string }

func (e *unservedError) Error() string { return e.why }

func unserved(typ, format string, args ...any) error {
	return &unservedError{typ: typ, why: fmt.Sprintf(format, args...)}
}

// dataspace decodes a dataspace message: the shape, and the maximum
// shape (-1 for an unlimited dimension; the shape when not stored).
func (r *reader) dataspace(m message) ([]int64, []int64, error) {
	shape, maxShape, err := r.dataspace1(m)
	if err == nil && maxShape == nil {
		maxShape = shape
	}
	return shape, maxShape, err
}

func (r *reader) dataspace1(m message) ([]int64, []int64, error) {
	c := &cursor{r: r, b: m.data, off: m.off}
	version, rank, flags := c.u8(), int(c.u8()), c.u8()
	switch version {
	case 1:
		c.take(5)
	case 2:
		if typ := c.u8(); typ == 2 {
			return nil, nil, unserved("null dataspace", "a null dataspace (no elements, no shape)")
		}
	default:
		return nil, nil, r.errorf(m.off, "dataspace version %d (want 1 or 2)", version)
	}
	if rank > index.MaxDims {
		return nil, nil, r.errorf(m.off, "a dataspace of %d dimensions, over %d", rank, index.MaxDims)
	}
	shape := make([]int64, rank)
	for i := range shape {
		d := c.length()
		if d > 1<<62 {
			return nil, nil, r.errorf(m.off, "dimension %d of %d", i, d)
		}
		shape[i] = int64(d)
	}
	var maxShape []int64
	if flags&1 != 0 {
		maxShape = make([]int64, rank)
		for i := range maxShape {
			d := c.uint(r.sl)
			switch {
			case d == undefined:
				maxShape[i] = -1
			case d > 1<<62 || int64(d) < shape[i]:
				return nil, nil, r.errorf(m.off, "dimension %d of %d with a maximum of %d", i, shape[i], d)
			default:
				maxShape[i] = int64(d)
			}
		}
	}
	if c.bad {
		return nil, nil, r.errorf(m.off, "a dataspace message cut off")
	}
	return shape, maxShape, nil
}

// datatype decodes a datatype message into a dtype, or an unserved
// error naming the type.
func (r *reader) datatype(m message, d *dataset) error {
	c := &cursor{r: r, b: m.data, off: m.off}
	cv := c.u8()
	class := cv & 0x0f
	bits := c.take(3)
	size := c.u32()
	if c.bad {
		return r.errorf(m.off, "a datatype message cut off")
	}
	switch class {
	case 0: // fixed-point
		offset, precision := c.u16(), c.u16()
		signed := bits[0]&0x08 != 0
		d.bigEndian = bits[0]&0x01 != 0
		d.typeName = fmt.Sprintf("%s%d", map[bool]string{true: "int", false: "uint"}[signed], 8*size)
		if c.bad || offset != 0 || uint32(precision) != 8*size {
			return unserved(d.typeName, "an integer of %d bits at bit %d in %d bytes, which tensorfs does not unpack", precision, offset, size)
		}
		ints := map[uint32][2]dtype.DType{1: {dtype.U8, dtype.I8}, 2: {dtype.U16, dtype.I16}, 4: {dtype.U32, dtype.I32}, 8: {dtype.U64, dtype.I64}}
		t, ok := ints[size]
		if !ok {
			return unserved(d.typeName, "an integer of %d bytes", size)
		}
		d.dt = t[0]
		if signed {
			d.dt = t[1]
		}
		return nil
	case 1: // floating-point
		order := bits[0]&0x01 | (bits[0]>>6&1)<<1
		offset, precision := c.u16(), c.u16()
		c.u8() // exponent location
		esize := c.u8()
		c.u8() // mantissa location
		msize := c.u8()
		d.typeName = fmt.Sprintf("float%d", 8*size)
		if c.bad {
			return r.errorf(m.off, "a datatype message cut off")
		}
		if order > 1 {
			return unserved(d.typeName, "a VAX-order float, which tensorfs does not read")
		}
		d.bigEndian = order == 1
		switch {
		case offset != 0 || uint32(precision) != 8*size:
			return unserved(d.typeName, "a float of %d bits at bit %d in %d bytes, which tensorfs does not unpack", precision, offset, size)
		case size == 2 && esize == 5 && msize == 10:
			d.dt = dtype.F16
		case size == 2 && esize == 8 && msize == 7:
			d.dt, d.typeName = dtype.BF16, "bfloat16"
		case size == 4 && esize == 8 && msize == 23:
			d.dt = dtype.F32
		case size == 8 && esize == 11 && msize == 52:
			d.dt = dtype.F64
		default:
			return unserved(d.typeName, "a float with %d exponent and %d mantissa bits, which tensorfs has no dtype for", esize, msize)
		}
		return nil
	}
	name := map[uint8]string{2: "time", 3: "string", 4: "bitfield", 5: "opaque", 6: "compound", 7: "reference", 8: "enum", 9: "variable-length", 10: "array", 11: "complex"}[class]
	if name == "" {
		name = fmt.Sprintf("datatype class %d", class)
	}
	return unserved(name, "a %s datatype, which tensorfs does not serve", name)
}

// layout decodes a data layout message (version 3 to 5: 4 is HDF5
// 1.10's, with chunk indexes; 5, HDF5 2's, differs in how filtered chunk
// sizes are stored, which the indexes' own sizes say).
func (r *reader) layout(m message, d *dataset) error {
	c := &cursor{r: r, b: m.data, off: m.off}
	version, class := c.u8(), c.u8()
	if version < 3 || version > 5 {
		return unserved("", "data layout message version %d, which tensorfs does not read (it reads 3 to 5)", version)
	}
	d.layout = int(class)
	switch class {
	case 0:
		n := int64(c.u16())
		d.offset, d.size = m.off+int64(c.p), n
		if n > int64(len(m.data)-c.p) {
			return r.errorf(m.off, "compact data of %d bytes runs past its message", n)
		}
		return nil
	case 1:
		a, n := c.addr(), c.length()
		if c.bad {
			return r.errorf(m.off, "a layout message cut off")
		}
		d.size = int64(min(n, 1<<62))
		if a == undefined {
			d.undefined = true
			return nil
		}
		off, err := r.abs(a, "contiguous data")
		if err != nil {
			return err
		}
		d.offset = off
		return nil
	case 2:
		if version >= 4 {
			return r.layout4(c, m, d)
		}
		rank := int(c.u8())
		d.btree = c.addr()
		if rank < 2 || rank > index.MaxDims+1 {
			return r.errorf(m.off, "a chunked layout of %d dimensions", rank)
		}
		d.chunk = make([]int64, rank)
		for i := range d.chunk {
			d.chunk[i] = int64(c.u32())
		}
		if c.bad {
			return r.errorf(m.off, "a layout message cut off")
		}
		return nil
	case 3:
		return unserved("", "a virtual dataset, which tensorfs does not read")
	}
	return r.errorf(m.off, "layout class %d", class)
}

// filters decodes a filter pipeline message.
func (r *reader) filters(m message, d *dataset) error {
	c := &cursor{r: r, b: m.data, off: m.off}
	version, n := c.u8(), int(c.u8())
	if version == 1 {
		c.take(6)
	} else if version != 2 {
		return r.errorf(m.off, "filter pipeline version %d", version)
	}
	for i := 0; i < n && !c.bad; i++ {
		var f filter
		f.id = c.u16()
		nameLen := 0
		if version == 1 || f.id >= 256 {
			nameLen = int(c.u16())
		}
		c.u16() // flags
		nv := int(c.u16())
		if nameLen > 0 {
			name := c.take(nameLen)
			for j, b := range name {
				if b == 0 {
					name = name[:j]
					break
				}
			}
			f.name = string(name)
		}
		if nv > 256 {
			return r.errorf(m.off, "a filter with %d parameters", nv)
		}
		for j := 0; j < nv; j++ {
			f.client = append(f.client, c.u32())
		}
		if version == 1 && nv%2 == 1 {
			c.take(4)
		}
		d.filters = append(d.filters, f)
	}
	if c.bad {
		return r.errorf(m.off, "a filter pipeline message cut off")
	}
	return nil
}

// readDataset decodes the messages of a dataset's header.
func (r *reader) readDataset(msgs []message) (*dataset, error) {
	d := &dataset{}
	have := map[uint16]bool{}
	for _, m := range msgs {
		switch m.typ {
		case msgDataspace, msgDatatype, msgLayout, msgFilters:
		default:
			continue
		}
		if have[m.typ] {
			return nil, r.errorf(m.off, "two header messages of type %d", m.typ)
		}
		have[m.typ] = true
		if m.shared() {
			return nil, unserved("", "a shared header message (type %d: a committed datatype?), which tensorfs does not read", m.typ)
		}
		var err error
		switch m.typ {
		case msgDataspace:
			d.shape, d.maxShape, err = r.dataspace(m)
		case msgDatatype:
			err = r.datatype(m, d)
		case msgLayout:
			err = r.layout(m, d)
		case msgFilters:
			err = r.filters(m, d)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, t := range []uint16{msgDataspace, msgDatatype, msgLayout} {
		if !have[t] {
			return nil, r.errorf(-1, "a dataset without its header message of type %d", t)
		}
	}
	return d, nil
}
