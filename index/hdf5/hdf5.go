package hdf5

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/index"
)

// Magic is HDF5's format signature, the superblock's first bytes.
const Magic = "\x89HDF\r\n\x1a\n"

// Sniff reports whether head starts with an HDF5 superblock.
func Sniff(head []byte) bool { return bytes.HasPrefix(head, []byte(Magic)) }

// Parse reads an HDF5 file whose superblock is at byte 0 (a Keras 3
// .weights.h5): every dataset, named by its path.
func Parse(f index.File) (*index.Index, error) {
	return ParseAt(f, f.Name(), 0, f.Size())
}

// CheckSuperblock reads the superblock at the start of head, the first
// bytes of an HDF5 file of size bytes (all of them, or at least 256),
// and checks that the root group's address lies in the file: a .keras
// zip's deflated member is checked so, from its first bytes inflated
// alone, before it is inflated whole.
func CheckSuperblock(head []byte, name string, size int64) error {
	r := &reader{f: bytes.NewReader(head), name: name, size: size}
	if len(head) < len(Magic) || string(head[:len(Magic)]) != Magic {
		return r.errorf(0, "not an HDF5 file (no \\x89HDF signature at its start)")
	}
	root, err := r.superblock(0)
	if err != nil {
		return err
	}
	_, err = r.abs(root, "the root group")
	return err
}

// ParseAt reads the HDF5 file held in [base, base+size) of f (an
// .keras zip's stored model.weights.h5), named name in messages;
// offsets in the Index are f's.
func ParseAt(f index.File, name string, base, size int64) (*index.Index, error) {
	r := &reader{f: f, name: name, size: base + size, base: base}
	idx := &index.Index{Format: "hdf5", Sources: []string{f.Name()}, Metadata: map[string]any{}}
	sig := make([]byte, len(Magic))
	if n, _ := f.ReadAt(sig, base); n < len(sig) || string(sig) != Magic || size < int64(len(Magic)) {
		return nil, r.errorf(base, "not an HDF5 file (no \\x89HDF signature at its start)")
	}
	root, err := r.superblock(base)
	if err != nil {
		return nil, err
	}
	w := &walker{r: r, idx: idx, groups: map[int64]bool{}}
	if err := w.group(root, "", 0); err != nil {
		return nil, err
	}
	for i := range w.plans {
		t := &idx.Tensors[w.planTensor[i]]
		src := len(idx.Sources)
		t.Source = src
		idx.Sources = append(idx.Sources, "")
		idx.Members = append(idx.Members, index.Member{Source: src, File: 0, Name: t.Name, Size: t.Size,
			Kind: &index.Decoded{Decode: w.plans[i].decode, Read: w.plans[i].ranges()}})
	}
	if len(idx.Tensors) == 0 && len(idx.Unserved) == 0 {
		idx.Notes = append(idx.Notes, "the HDF5 file has no datasets")
	}
	return idx, nil
}

// walker visits the groups of one file.
type walker struct {
	r          *reader
	idx        *index.Index
	groups     map[int64]bool // group object headers visited
	objects    int
	plans      []*plan
	planTensor []int // idx.Tensors index of plans[i]
}

// group visits the group whose object header is at addr, at path.
func (w *walker) group(addr uint64, path string, depth int) error {
	r := w.r
	if depth > MaxDepth {
		return r.errorf(-1, "groups nest more than %d deep (at %q)", MaxDepth, path)
	}
	off, err := r.abs(addr, "group "+quote(path))
	if err != nil {
		return err
	}
	if w.groups[off] {
		return r.errorf(off, "group %s is reached twice (a cycle of groups?)", quote(path))
	}
	w.groups[off] = true
	msgs, err := r.header(addr)
	if err != nil {
		return err
	}
	return w.members(msgs, path, depth)
}

// members visits a group's links, in name order.
func (w *walker) members(msgs []message, path string, depth int) error {
	r := w.r
	var links []link
	for _, m := range msgs {
		switch m.typ {
		case msgSymbolTable:
			c := &cursor{r: r, b: m.data, off: m.off}
			bt, heap := c.addr(), c.addr()
			if c.bad {
				return r.errorf(m.off, "a symbol table message cut off")
			}
			l, err := r.symbolTable(bt, heap)
			if err != nil {
				return err
			}
			links = append(links, l...)
		case msgLink:
			l, ok, what, err := r.linkMessage(m)
			if err != nil {
				return err
			}
			if !ok {
				w.idx.Unserved = append(w.idx.Unserved, index.Unserved{Name: join(path, l.name), Type: "link", Offset: -1, Why: what + ", which tensorfs does not follow"})
				continue
			}
			links = append(links, l)
		case msgLinkInfo:
			c := &cursor{r: r, b: m.data, off: m.off}
			if v := c.u8(); v != 0 {
				return r.errorf(m.off, "group %s: link info message version %d (want 0)", quote(path), v)
			}
			flags := c.u8()
			if flags&1 != 0 {
				c.u64() // the largest creation order
			}
			heap, names := c.addr(), c.addr()
			if c.bad {
				return r.errorf(m.off, "group %s: a link info message cut off", quote(path))
			}
			if heap == undefined {
				continue // compact: the links are link messages
			}
			l, others, what, err := r.denseLinks(heap, names, path)
			if err != nil {
				return err
			}
			links = append(links, l...)
			for i, o := range others {
				w.idx.Unserved = append(w.idx.Unserved, index.Unserved{Name: join(path, o.name), Type: "link", Offset: -1, Why: what[i] + ", which tensorfs does not follow"})
			}
		}
	}
	slices.SortStableFunc(links, func(a, b link) int { return strings.Compare(a.name, b.name) })
	for i, l := range links {
		if i > 0 && links[i-1].name == l.name {
			return r.errorf(-1, "group %s has two links named %q", quote(path), l.name)
		}
		if err := w.object(l.addr, join(path, l.name), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// object visits a group member: a group or a dataset.
func (w *walker) object(addr uint64, path string, depth int) error {
	r := w.r
	if w.objects++; w.objects > MaxObjects {
		return r.errorf(-1, "more than %d objects", MaxObjects)
	}
	if len(path) > index.MaxNameLength {
		return r.errorf(-1, "a path of %d bytes, over %d", len(path), index.MaxNameLength)
	}
	msgs, err := r.header(addr)
	if err != nil {
		return err
	}
	isGroup, isDataset := false, false
	for _, m := range msgs {
		switch m.typ {
		case msgSymbolTable, msgLink, msgLinkInfo:
			isGroup = true
		case msgLayout:
			isDataset = true
		}
	}
	switch {
	case isDataset:
		return w.dataset(msgs, path)
	case isGroup:
		off, _ := r.abs(addr, "")
		if w.groups[off] {
			return r.errorf(off, "group %s is reached twice (a cycle of groups?)", quote(path))
		}
		w.groups[off] = true
		return w.members(msgs, path, depth)
	}
	// A new-style group with no links has only a link info message
	// (counted above); anything else (a committed datatype) is not data.
	return nil
}

// dataset reads one dataset into a tensor, or an Unserved entry.
func (w *walker) dataset(msgs []message, path string) error {
	r := w.r
	d, err := r.readDataset(msgs)
	var ue *unservedError
	if errors.As(err, &ue) {
		typ := ue.typ
		if typ == "" && d != nil {
			typ = d.typeName
		}
		w.idx.Unserved = append(w.idx.Unserved, index.Unserved{Name: path, Type: typ, Offset: -1, Why: ue.why})
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w (dataset %s)", err, quote(path))
	}
	n, ok := index.Elements(d.shape)
	if !ok {
		return r.errorf(-1, "dataset %s: shape %s overflows", quote(path), index.ShapeString(d.shape))
	}
	size, ok := d.dt.ByteSize(n)
	if !ok {
		return r.errorf(-1, "dataset %s: shape %s overflows", quote(path), index.ShapeString(d.shape))
	}
	t := index.Tensor{Name: path, DType: d.dt, Shape: d.shape, Size: size, BigEndian: d.bigEndian && d.dt.ElemSize() > 1}
	switch d.layout {
	case 0, 1:
		if d.layout == 1 && d.undefined {
			if size != 0 {
				return w.miss(d, path, "its storage was never allocated (no data written; h5py reads the fill value)")
			}
		} else if d.size != size {
			return r.errorf(d.offset, "dataset %s: %d bytes stored; %s %s needs %d", quote(path), d.size, d.dt, index.ShapeString(d.shape), size)
		} else if size > r.size-d.offset {
			return r.errorf(d.offset, "dataset %s: %d bytes at byte %d run past the end of the file", quote(path), size, d.offset)
		}
		t.Offset = d.offset
		if len(d.filters) > 0 && d.layout == 1 {
			return w.miss(d, path, "a contiguous dataset with filters")
		}
	case 2:
		if served, err := w.chunked(d, path, &t, size); !served || err != nil {
			return err
		}
	default:
		return r.errorf(-1, "dataset %s: layout class %d", quote(path), d.layout)
	}
	if len(w.idx.Tensors) >= index.MaxTensors {
		return r.errorf(-1, "more than %d datasets", index.MaxTensors)
	}
	w.idx.Tensors = append(w.idx.Tensors, t)
	return nil
}

// chunked checks chunked dataset d (the tensor t of size bytes at path):
// its chunk shape, filters and chunks. A dataset of one unfiltered chunk
// is a range of the file; another is planned (w.plans). served is false
// when it is listed as unserved instead (or err is set).
func (w *walker) chunked(d *dataset, path string, t *index.Tensor, size int64) (served bool, err error) {
	r := w.r
	rank := len(d.shape)
	if len(d.chunk) != rank+1 || int64(d.chunk[rank]) != d.dt.ElemSize() {
		return false, r.errorf(-1, "dataset %s: chunks of %d dimensions with elements of %d bytes, for a %d-dimensional dataset of %s", quote(path), len(d.chunk)-1, d.chunk[len(d.chunk)-1], rank, d.dt)
	}
	for _, f := range d.filters {
		if f.id != filterDeflate && f.id != filterShuffle {
			name := f.name
			if name == "" {
				name = map[uint16]string{3: "fletcher32", 4: "szip", 5: "nbit", 6: "scaleoffset", 32000: "lzf", 32001: "blosc", 32015: "zstd"}[f.id]
			}
			return false, w.miss(d, path, "filter %d (%s), which tensorfs does not decode (it reads gzip and shuffle)", f.id, name)
		}
	}
	chunkElems := int64(1)
	for _, c := range d.chunk[:rank] {
		if c <= 0 {
			return false, r.errorf(-1, "dataset %s: a chunk dimension of %d", quote(path), c)
		}
		if chunkElems > MaxChunkBytes/c {
			return false, w.miss(d, path, "chunks of %v elements, over %d bytes", d.chunk[:rank], MaxChunkBytes)
		}
		chunkElems *= c
	}
	chunkBytes := chunkElems * d.dt.ElemSize()
	if chunkBytes > MaxChunkBytes {
		return false, w.miss(d, path, "chunks of %d bytes, over %d", chunkBytes, MaxChunkBytes)
	}
	if size > 0 && size/max(d.shape[0], 1)*min(d.chunk[0], d.shape[0]) > MaxSlabBytes {
		return false, w.miss(d, path, "a row of chunks over %d bytes", MaxSlabBytes)
	}
	if size == 0 {
		return true, nil
	}
	chunks, err := r.chunks(d)
	if err != nil {
		return false, fmt.Errorf("%w (dataset %s)", err, quote(path))
	}
	want := int64(1)
	for k := range d.shape {
		want *= (d.shape[k] + d.chunk[k] - 1) / d.chunk[k]
	}
	if int64(len(chunks)) != want {
		return false, w.miss(d, path, "%d of its %d chunks are stored (h5py reads the rest as the fill value)", len(chunks), want)
	}
	for _, c := range chunks {
		if c.size > 2*chunkBytes+4096 {
			return false, r.errorf(c.off, "dataset %s: a stored chunk of %d bytes for %d bytes of data", quote(path), c.size, chunkBytes)
		}
	}
	if len(d.filters) == 0 && len(chunks) == 1 && slices.Equal(d.chunk[:rank], d.shape) && chunks[0].size == size {
		t.Offset = chunks[0].off // one unfiltered chunk the dataset's shape: a range of the file
		return true, nil
	}
	w.plans = append(w.plans, &plan{shape: d.shape, chunk: d.chunk[:rank], elem: d.dt.ElemSize(), filters: d.filters, chunks: chunks})
	w.planTensor = append(w.planTensor, len(w.idx.Tensors))
	return true, nil
}

// miss lists dataset d at path as unserved, saying why; it returns nil
// (the walk goes on).
func (w *walker) miss(d *dataset, path, why string, args ...any) error {
	w.idx.Unserved = append(w.idx.Unserved, index.Unserved{Name: path, Type: d.typeName, Shape: d.shape, Offset: -1, Why: fmt.Sprintf(why, args...)})
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "/" + name
}

func quote(path string) string {
	if path == "" {
		return "/"
	}
	return fmt.Sprintf("%q", path)
}
