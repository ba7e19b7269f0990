package hdf5

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/lazyweights/tensorfs/index"
)

// Chunk index types of layout messages 4 and 5 (H5Dpublic.h's
// H5D_chunk_index_t).
const (
	indexBTree1 = 0
	indexSingle = 1
	indexNone   = 2 // implicit
	indexFArray = 3
	indexEArray = 4
	indexBTree2 = 5
)

var indexNames = map[int]string{indexBTree1: "v1 B-tree", indexSingle: "single chunk", indexNone: "implicit",
	indexFArray: "fixed array", indexEArray: "extensible array", indexBTree2: "v2 B-tree"}

// layout4 decodes the rest of a chunked layout message of version 4 or
// 5 (HDF5 1.10 and 2): flags, chunk dimensions and the chunk index.
func (r *reader) layout4(c *cursor, m message, d *dataset) error {
	flags := c.u8()
	rank := int(c.u8())
	enc := int(c.u8())
	if rank < 2 || rank > index.MaxDims+1 || enc < 1 || enc > 8 {
		return r.errorf(m.off, "a chunked layout of %d dimensions of %d bytes", rank, enc)
	}
	d.chunk = make([]int64, rank)
	for i := range d.chunk {
		v := c.uint(enc)
		if v == 0 || v > 1<<32 {
			return r.errorf(m.off, "a chunk dimension of %d", v)
		}
		d.chunk[i] = int64(v)
	}
	d.index = int(c.u8())
	switch d.index {
	case indexSingle:
		if flags&0x02 != 0 {
			d.filtered1 = true
			d.singleSize = c.length()
			d.singleMask = c.u32()
		}
	case indexNone:
	case indexFArray:
		c.u8() // page bits: the header's are used
	case indexEArray:
		c.take(5) // the header's parameters are used
	case indexBTree2:
		c.take(6) // node size, split and merge percents: the header's are used
	default:
		return r.errorf(m.off, "chunk index type %d (HDF5 writes 1 to 5)", d.index)
	}
	d.btree = c.addr()
	if c.bad {
		return r.errorf(m.off, "a layout message cut off")
	}
	if flags&0x01 != 0 {
		return unserved("", "partial edge chunks stored unfiltered (H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS), which tensorfs does not read")
	}
	return nil
}

// grid is a chunked dataset's chunk grid: chunks along each dimension
// over the shape (n) and over the maximum shape (max, -1 unlimited),
// and how a chunk's coordinates make its index in a fixed or
// extensible array.
type grid struct {
	rank       int
	n, max     []int64
	chunkBytes int64
	total      int64 // chunks over the shape
}

func (r *reader) grid(d *dataset) (*grid, error) {
	rank := len(d.chunk) - 1
	g := &grid{rank: rank, n: make([]int64, rank), max: make([]int64, rank), total: 1, chunkBytes: d.dt.ElemSize()}
	for k := 0; k < rank; k++ {
		g.n[k] = (d.shape[k] + d.chunk[k] - 1) / d.chunk[k]
		g.max[k] = -1
		if ms := d.maxShape[k]; ms >= 0 {
			g.max[k] = (ms + d.chunk[k] - 1) / d.chunk[k]
		}
		g.total *= max(g.n[k], 1)
		g.chunkBytes *= d.chunk[k]
		if g.total > MaxChunks {
			return nil, r.errorf(-1, "more than %d chunks", MaxChunks)
		}
	}
	return g, nil
}

// linear is the row-major index of scaled chunk coordinates over the
// dimensions' chunk counts dims (the first may be unlimited: -1).
func linear(scaled, dims []int64) (uint64, bool) {
	var idx uint64
	for k := range scaled {
		n := uint64(1)
		if k > 0 {
			if dims[k] < 0 {
				return 0, false
			}
			n = uint64(dims[k])
		}
		hi, lo := bits.Mul64(idx, n)
		if hi != 0 || lo+uint64(scaled[k]) < lo {
			return 0, false
		}
		idx = lo + uint64(scaled[k])
	}
	return idx, true
}

// each calls f with the scaled coordinates of every chunk over the
// shape, in row-major order.
func (g *grid) each(f func(scaled []int64) error) error {
	if g.total == 0 {
		return nil
	}
	s := make([]int64, g.rank)
	for {
		if err := f(s); err != nil {
			return err
		}
		k := g.rank - 1
		for ; k >= 0; k-- {
			if s[k]++; s[k] < g.n[k] {
				break
			}
			s[k] = 0
		}
		if k < 0 {
			return nil
		}
	}
}

// chunkSet collects a dataset's stored chunks, each once, on the grid.
type chunkSet struct {
	r   *reader
	d   *dataset
	g   *grid
	out []chunk
	at  map[string]bool
}

// add records the chunk at scaled coordinates, stored at address addr
// (undefined: never written, left out) in size bytes.
func (s *chunkSet) add(scaled []int64, addr uint64, size uint64, mask uint32, where int64) error {
	r := s.r
	if addr == undefined {
		return nil
	}
	start := make([]int64, len(scaled))
	for k, v := range scaled {
		if v < 0 || v >= s.g.n[k] {
			return nil // outside the shape (a dataset shrunk, or a maximum shape larger than it)
		}
		start[k] = v * s.d.chunk[k]
	}
	key := fmt.Sprint(start)
	if s.at[key] {
		return r.errorf(where, "two chunks at %v", start)
	}
	s.at[key] = true
	off, err := r.abs(addr, "a chunk")
	if err != nil {
		return err
	}
	if size > uint64(r.size-off) {
		return r.errorf(where, "a chunk of %d bytes at byte %d runs past the end of the file (%d bytes)", size, off, r.size)
	}
	if len(s.out) >= MaxChunks {
		return r.errorf(where, "more than %d chunks", MaxChunks)
	}
	s.out = append(s.out, chunk{start: start, off: off, size: int64(size), mask: mask})
	return nil
}

// chunks lists a chunked dataset's stored chunks, sorted by start,
// through its chunk index.
func (r *reader) chunks(d *dataset) ([]chunk, error) {
	if d.index == indexBTree1 {
		return r.chunksV1(d)
	}
	g, err := r.grid(d)
	if err != nil {
		return nil, err
	}
	s := &chunkSet{r: r, d: d, g: g, at: map[string]bool{}}
	filtered := len(d.filters) > 0
	switch d.index {
	case indexSingle:
		if g.total != 1 {
			return nil, r.errorf(-1, "a single-chunk index for %d chunks", g.total)
		}
		size, mask := uint64(g.chunkBytes), uint32(0)
		if d.filtered1 {
			size, mask = d.singleSize, d.singleMask
		} else if filtered {
			return nil, r.errorf(-1, "a single filtered chunk without its stored size")
		}
		err = s.add(make([]int64, g.rank), d.btree, size, mask, -1)
	case indexNone:
		if filtered {
			return nil, r.errorf(-1, "an implicit chunk index with filters")
		}
		if d.btree == undefined {
			break
		}
		err = g.each(func(scaled []int64) error {
			idx, ok := linear(scaled, g.max)
			if !ok || idx > uint64(1<<62)/uint64(g.chunkBytes) {
				return r.errorf(-1, "an implicit chunk index over %v chunks", g.max)
			}
			return s.add(scaled, d.btree+idx*uint64(g.chunkBytes), uint64(g.chunkBytes), 0, -1)
		})
	case indexFArray, indexEArray:
		var a *array
		if a, err = r.array(d, g, filtered); err != nil {
			return nil, err
		}
		err = g.each(func(scaled []int64) error {
			idx, ok := a.index(scaled)
			if !ok {
				return r.errorf(-1, "chunk %v has no index in the %s over %v chunks", scaled, indexNames[d.index], g.max)
			}
			e, where, err := a.element(idx)
			if err != nil {
				return err
			}
			addr, size, mask, err := a.decode(e, where, uint64(g.chunkBytes))
			if err != nil {
				return err
			}
			return s.add(scaled, addr, size, mask, where)
		})
	case indexBTree2:
		err = r.chunksBTree2(d, s, filtered)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(s.out, func(a, b chunk) int { return slices.Compare(a.start, b.start) })
	return s.out, nil
}

// chunksBTree2 reads a v2 B-tree chunk index: records of type 10
// (address, scaled coordinates) or 11 (filtered: address, stored size,
// filter mask, scaled coordinates).
func (r *reader) chunksBTree2(d *dataset, s *chunkSet, filtered bool) error {
	typ := uint8(10)
	if filtered {
		typ = 11
	}
	t, err := r.btree2(d.btree, typ, "the chunk index")
	if err != nil {
		return err
	}
	rank := s.g.rank
	csl := t.recSize - r.so - 8*rank
	if filtered {
		csl -= 4
	}
	if filtered && (csl < 1 || csl > 8) || !filtered && csl != 0 {
		return r.errorf(t.off, "chunk index records of %d bytes for %d dimensions", t.recSize, rank)
	}
	scaled := make([]int64, rank)
	return t.records(func(rec []byte, off int64) error {
		c := &cursor{r: r, b: rec, off: off}
		addr := c.addr()
		size, mask := uint64(s.g.chunkBytes), uint32(0)
		if filtered {
			size, mask = c.uint(csl), c.u32()
		}
		for k := range scaled {
			v := c.u64()
			if v > 1<<62 {
				return r.errorf(off, "a chunk at scaled coordinate %d", v)
			}
			scaled[k] = int64(v)
		}
		return s.add(scaled, addr, size, mask, off)
	})
}
