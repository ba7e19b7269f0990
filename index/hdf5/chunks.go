package hdf5

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"github.com/lazyweights/tensorfs/index"
	"io"
	"slices"
)

// chunk is one stored chunk of a dataset: where it starts in the
// dataset (element coordinates), and its stored bytes.
type chunk struct {
	start []int64
	off   int64 // absolute offset of its stored bytes
	size  int64 // stored (filtered) bytes
	mask  uint32
}

// chunksV1 walks a dataset's chunk B-tree (a v1 B-tree of type 1): each
// node once, levels descending, at most MaxChunks chunks; every chunk
// on the chunk grid, inside the dataset, once.
func (r *reader) chunksV1(d *dataset) ([]chunk, error) {
	rank := len(d.chunk) - 1
	keySize := 8 + 8*len(d.chunk)
	var out []chunk
	seen := map[int64]bool{}
	at := map[string]bool{}
	var walk func(addr uint64, level int) error
	walk = func(addr uint64, level int) error {
		off, err := r.abs(addr, "a chunk B-tree node")
		if err != nil {
			return err
		}
		if seen[off] {
			return r.errorf(off, "a chunk B-tree node is reached twice (a loop)")
		}
		seen[off] = true
		if r.nodes++; r.nodes > MaxBTreeNodes {
			return r.errorf(off, "more than %d B-tree nodes", MaxBTreeNodes)
		}
		hl := int64(8 + 2*r.so)
		b, err := r.at(off, hl, "a chunk B-tree node")
		if err != nil {
			return err
		}
		c := &cursor{r: r, b: b, off: off}
		if !bytes.Equal(c.take(4), []byte("TREE")) {
			return r.errorf(off, "a chunk B-tree node without its TREE signature")
		}
		typ, lv, used := c.u8(), int(c.u8()), int(c.u16())
		if typ != 1 {
			return r.errorf(off, "a chunk B-tree node of type %d (want 1)", typ)
		}
		if level >= 0 && lv != level {
			return r.errorf(off, "a chunk B-tree node at level %d where its parent wants %d (a loop?)", lv, level)
		}
		body := int64(used)*int64(keySize+r.so) + int64(keySize)
		b, err = r.at(off+hl, body, "a chunk B-tree node")
		if err != nil {
			return err
		}
		c = &cursor{r: r, b: b, off: off + hl}
		for i := 0; i < used; i++ {
			size, mask := c.u32(), c.u32()
			start := make([]int64, rank)
			for k := range start {
				start[k] = int64(c.u64())
			}
			c.u64() // the element-size dimension's offset, 0
			child := c.addr()
			if lv > 0 {
				if err := walk(child, lv-1); err != nil {
					return err
				}
				continue
			}
			where := c.where()
			for k, s := range start {
				if s < 0 || s >= max(d.shape[k], 1) || s%d.chunk[k] != 0 {
					return r.errorf(where, "a chunk at %v, not on the chunk grid %v inside the dataset %v", start, d.chunk[:rank], d.shape)
				}
			}
			key := fmt.Sprint(start)
			if at[key] {
				return r.errorf(where, "two chunks at %v", start)
			}
			at[key] = true
			coff, err := r.abs(child, "a chunk")
			if err != nil {
				return err
			}
			if int64(size) > r.size-coff {
				return r.errorf(where, "a chunk of %d bytes at byte %d runs past the end of the file (%d bytes)", size, coff, r.size)
			}
			if len(out) >= MaxChunks {
				return r.errorf(off, "more than %d chunks", MaxChunks)
			}
			out = append(out, chunk{start: start, off: coff, size: int64(size), mask: mask})
		}
		return nil
	}
	if err := walk(d.btree, -1); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b chunk) int { return slices.Compare(a.start, b.start) })
	return out, nil
}

// plan is how a chunked dataset is decoded: its shape, chunk shape,
// element size, filters and chunks (sorted by start).
type plan struct {
	shape   []int64
	chunk   []int64 // without the element-size dimension
	elem    int64
	filters []filter
	chunks  []chunk
}

// ranges are the stored bytes of the chunks, in the file.
func (p *plan) ranges() []index.Part {
	out := make([]index.Part, len(p.chunks))
	for i, c := range p.chunks {
		out[i] = index.Part{Source: 0, Offset: c.off, Size: c.size}
	}
	return out
}

// decode writes the dataset's bytes, row-major, to w: each chunk read,
// its filters undone in reverse order (gzip bounded to the chunk's size:
// a chunk that inflates to more is refused at the first byte over), and
// its part inside the dataset written into place. Given an
// index.DecodeTarget (the cache of decoded members), each chunk's runs
// are written at their offsets and its chunk buffers (two where it is
// shuffled, else one) are working memory taken from the cache's budget:
// every byte of decoded chunk data lies in memory or files that the
// budgets count. Given a plain writer,
// it writes one row of chunks along the first dimension at a time (at
// most MaxSlabBytes) from a buffer of its own. The compressed bytes are
// streamed, never held whole.
func (p *plan) decode(w io.Writer, file io.ReaderAt) error {
	rank := len(p.shape)
	rowElems := int64(1)
	for _, d := range p.shape[1:] {
		rowElems *= d
	}
	chunkElems := int64(1)
	for _, d := range p.chunk {
		chunkElems *= d
	}
	d := &decoder{chunkBytes: chunkElems * p.elem}
	if t, ok := w.(index.DecodeTarget); ok {
		// Two chunk buffers where shuffling is undone (from one into
		// the other), else one.
		n := int64(1)
		for _, f := range p.filters {
			if f.id == filterShuffle {
				n = 2
			}
		}
		bufs, err := t.Scratch(n * d.chunkBytes)
		if err != nil {
			return err
		}
		for i := int64(0); i < n; i++ {
			d.bufs[i] = bufs[i*d.chunkBytes : (i+1)*d.chunkBytes : (i+1)*d.chunkBytes]
		}
		for _, ch := range p.chunks {
			data, err := d.read(p, file, ch)
			if err != nil {
				return err
			}
			var werr error
			p.place(data, ch.start, rank, func(at int64, b []byte) {
				if werr == nil {
					_, werr = t.WriteAt(b, at*p.elem)
				}
			})
			if werr != nil {
				return werr
			}
		}
		return nil
	}
	var slab []byte
	for i := 0; i < len(p.chunks); {
		s0 := p.chunks[i].start[0]
		rows := min(p.chunk[0], p.shape[0]-s0)
		if n := rows * rowElems * p.elem; int64(cap(slab)) < n {
			slab = make([]byte, n)
		} else {
			slab = slab[:n]
		}
		for ; i < len(p.chunks) && p.chunks[i].start[0] == s0; i++ {
			ch := p.chunks[i]
			data, err := d.read(p, file, ch)
			if err != nil {
				return err
			}
			p.place(data, ch.start, rank, func(at int64, b []byte) {
				copy(slab[(at-s0*rowElems)*p.elem:], b)
			})
		}
		if _, err := w.Write(slab); err != nil {
			return err
		}
	}
	return nil
}

// decoder holds the buffers and the zlib reader reused across chunks.
type decoder struct {
	chunkBytes int64
	bufs       [2][]byte
	zr         io.ReadCloser
	br         *bufio.Reader
}

// read reads chunk ch and undoes its filters; the result (chunkBytes
// bytes) is valid until the next call.
func (d *decoder) read(p *plan, file io.ReaderAt, ch chunk) ([]byte, error) {
	// cur is the bytes so far: the stored chunk in the file until a
	// filter has been undone (fromFile), then a buffer.
	var cur []byte
	fromFile, next := true, 0
	stored := func() ([]byte, error) { // the stored chunk, read whole
		if ch.size != d.chunkBytes {
			return nil, fmt.Errorf("the chunk at %v (byte %d) is %d bytes stored, not %d", ch.start, ch.off, ch.size, d.chunkBytes)
		}
		b := d.buf(next)
		if n, err := file.ReadAt(b, ch.off); int64(n) < ch.size {
			return nil, fmt.Errorf("cannot read the chunk at %v (%d bytes at byte %d): %v", ch.start, ch.size, ch.off, err)
		}
		next = 1 - next
		return b, nil
	}
	for k := len(p.filters) - 1; k >= 0; k-- {
		if ch.mask&(1<<k) != 0 {
			continue // not applied to this chunk
		}
		switch f := p.filters[k]; f.id {
		case filterDeflate:
			var src io.Reader
			if fromFile {
				sr := &chunkReader{r: io.NewSectionReader(file, ch.off, ch.size)}
				if d.br == nil {
					d.br = bufio.NewReaderSize(sr, 64<<10)
				} else {
					d.br.Reset(sr)
				}
				src = d.br
			} else {
				src = bytes.NewReader(cur)
			}
			out := d.buf(next)
			var err error
			if d.zr == nil {
				d.zr, err = zlib.NewReader(src)
			} else {
				err = d.zr.(zlib.Resetter).Reset(src, nil)
			}
			if err != nil {
				return nil, chunkErr(err, "the chunk at %v (byte %d): bad zlib header: %v", ch.start, ch.off, err)
			}
			n, err := io.ReadFull(d.zr, out)
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && err != io.EOF {
				return nil, chunkErr(err, "the chunk at %v (byte %d): %v", ch.start, ch.off, err)
			}
			if n < len(out) {
				return nil, fmt.Errorf("the chunk at %v (byte %d) inflates to %d bytes, not %d", ch.start, ch.off, n, len(out))
			}
			var one [1]byte
			if k, _ := d.zr.Read(one[:]); k > 0 {
				return nil, fmt.Errorf("the chunk at %v (byte %d) inflates to more than its %d bytes", ch.start, ch.off, len(out))
			}
			cur, next = out, 1-next
		case filterShuffle:
			if fromFile {
				b, err := stored()
				if err != nil {
					return nil, err
				}
				cur = b
			}
			if int64(len(cur)) != d.chunkBytes {
				return nil, fmt.Errorf("the chunk at %v (byte %d) is %d bytes before unshuffling, not %d", ch.start, ch.off, len(cur), d.chunkBytes)
			}
			out := d.buf(next)
			unshuffle(out, cur, int(p.elem))
			cur, next = out, 1-next
		}
		fromFile = false
	}
	if fromFile { // no filter applied to this chunk
		return stored()
	}
	if int64(len(cur)) != d.chunkBytes {
		return nil, fmt.Errorf("the chunk at %v (byte %d) is %d bytes, not %d", ch.start, ch.off, len(cur), d.chunkBytes)
	}
	return cur, nil
}

// buf returns chunk buffer i, made where the caller gave none.
func (d *decoder) buf(i int) []byte {
	if int64(cap(d.bufs[i])) < d.chunkBytes {
		d.bufs[i] = make([]byte, d.chunkBytes)
	}
	return d.bufs[i][:d.chunkBytes]
}

// chunkReader marks the errors of reading the file (not of the data).
type chunkReader struct{ r io.Reader }

type chunkReadError struct{ err error }

func (e *chunkReadError) Error() string { return e.err.Error() }

func (c *chunkReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		err = &chunkReadError{err}
	}
	return n, err
}

// chunkErr is the error of a chunk's data, or, where reading the file
// failed, one that says so.
func chunkErr(err error, format string, args ...any) error {
	var re *chunkReadError
	if errors.As(err, &re) {
		return fmt.Errorf("cannot read a stored chunk: %v", re.err)
	}
	return fmt.Errorf(format, args...)
}

// unshuffle undoes HDF5's shuffle filter: src holds byte 0 of every
// element, then byte 1 of every element...; bytes past the last whole
// element are left as they are.
func unshuffle(dst, src []byte, elem int) {
	n := len(src) / elem
	for b := 0; b < elem; b++ {
		for i := 0; i < n; i++ {
			dst[i*elem+b] = src[b*n+i]
		}
	}
	copy(dst[n*elem:], src[n*elem:])
}

// place passes put each run of the part of chunk data (starting at
// start) inside the dataset, with the dataset element index it starts
// at.
func (p *plan) place(data []byte, start []int64, rank int, put func(at int64, b []byte)) {
	// idx walks the chunk's in-bounds elements by runs along the last
	// dimension.
	ext := make([]int64, rank) // in-bounds extent of the chunk
	for k := range ext {
		ext[k] = min(p.chunk[k], p.shape[k]-start[k])
	}
	if slices.Contains(ext, 0) {
		return
	}
	run := ext[rank-1] * p.elem
	idx := make([]int64, rank)
	for {
		// Offset in the chunk (full chunk shape) and in the slab.
		var co, so int64
		for k := 0; k < rank; k++ {
			co = co*p.chunk[k] + idx[k]
			so = so*p.shape[k] + start[k] + idx[k]
		}
		put(so, data[co*p.elem:co*p.elem+run])
		k := rank - 2
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < ext[k] {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return
		}
	}
}
