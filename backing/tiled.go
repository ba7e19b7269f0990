package backing

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/lazyweights/tensorfs/tiling"
)

// Tile is one chunk of a tiled source: the chunk's elements, row-major and
// contiguous, are bytes [Offset, Offset+elements*elemSize) of Src; the
// chunk is the box [Start[k], Start[k]+Shape[k]) of the whole along each
// dim k.
type Tile struct {
	Src    ReaderAt
	Offset int64
	Start  []int64
	Shape  []int64
}

// MaxTiles caps the tiles of one tiled source.
const MaxTiles = 1 << 16

// Tiled is a source whose bytes are a row-major array (a tensor) tiled
// from chunks that lie in other sources, as a distributed checkpoint saves
// a tensor sharded over ranks. Nothing is materialised: a read gathers the
// bytes it covers from the tiles, one ReadAt per contiguous run (a tensor
// chunked along dim 0 reads one range per chunk it spans; chunks along
// other dims one row piece per row). It does not own the tiles' sources:
// Close closes nothing.
type Tiled struct {
	name  string
	shape []int64 // at least one dim (a scalar is [1])
	es    int64   // bytes per element
	size  int64
	inner []int64 // inner[k]: elements of one step along dim k (product of shape[k+1:])
	tiles []tile  // the non-empty tiles, in row-major order of their Start
	index *tiling.Index
}

// tiledProbes counts the tiles a find tests, for the tests: a read costs
// a few per piece it touches, whatever the count of tiles.
var tiledProbes atomic.Int64

// tile is a Tile with what a read needs precomputed.
type tile struct {
	src   ReaderAt
	off   int64
	start []int64
	end   []int64
	inner []int64 // the tile's own inner products
	// d is the dim along which a run inside this tile stops: every dim
	// after it is whole in the tile, so a run spans whole steps of d.
	// -1 when the tile is the whole array.
	d int
}

var _ Source = (*Tiled)(nil)

// NewTiled returns the source of the array of the given shape and element
// size tiled from tiles. It checks that the tiles lie inside the array and
// inside their sources, do not overlap and cover it all (tiles with no
// elements are dropped).
func NewTiled(name string, shape []int64, elemSize int64, tiles []Tile) (*Tiled, error) {
	bad := func(format string, args ...any) (*Tiled, error) {
		return nil, fmt.Errorf("backing: %s: %s", name, fmt.Sprintf(format, args...))
	}
	if elemSize <= 0 {
		return bad("element size %d", elemSize)
	}
	if len(tiles) > MaxTiles {
		return bad("%d tiles (at most %d)", len(tiles), MaxTiles)
	}
	scalar := len(shape) == 0
	if scalar {
		shape = []int64{1}
	}
	t := &Tiled{name: name, shape: slices.Clone(shape), es: elemSize, inner: make([]int64, len(shape))}
	n := int64(1)
	for k := len(shape) - 1; k >= 0; k-- {
		t.inner[k] = n
		d := shape[k]
		if d < 0 || (d > 0 && n > (1<<62)/d) {
			return bad("shape %v overflows", shape)
		}
		n *= d
	}
	if n > 0 && n > (1<<62)/elemSize {
		return bad("shape %v overflows", shape)
	}
	t.size = n * elemSize
	var covered int64
	for i, c := range tiles {
		start, sh := c.Start, c.Shape
		if scalar && len(start) == 0 && len(sh) == 0 {
			start, sh = []int64{0}, []int64{1}
		}
		if len(start) != len(shape) || len(sh) != len(shape) {
			return bad("tile %d has %d/%d dims for %d", i, len(start), len(sh), len(shape))
		}
		tl := tile{src: c.Src, off: c.Offset, start: slices.Clone(start), end: make([]int64, len(shape)), inner: make([]int64, len(shape)), d: -1}
		m := int64(1)
		for k := len(shape) - 1; k >= 0; k-- {
			if start[k] < 0 || sh[k] < 0 || start[k] > shape[k] || sh[k] > shape[k]-start[k] {
				return bad("tile %d (offsets %v, sizes %v) is outside the shape %v", i, start, sh, shape)
			}
			tl.end[k] = start[k] + sh[k]
			tl.inner[k] = m
			m *= sh[k]
			if tl.d < 0 && sh[k] != shape[k] {
				tl.d = k
			}
		}
		if m == 0 {
			continue
		}
		if c.Src == nil || c.Offset < 0 || c.Offset > c.Src.Size() || m*elemSize > c.Src.Size()-c.Offset {
			return bad("tile %d (%d bytes at byte %d) is outside its source", i, m*elemSize, c.Offset)
		}
		covered += m
		t.tiles = append(t.tiles, tl)
	}
	slices.SortFunc(t.tiles, func(a, b tile) int { return slices.Compare(a.start, b.start) })
	boxes := make([]tiling.Box, len(t.tiles))
	for i := range t.tiles {
		tl := &t.tiles[i]
		boxes[i] = tiling.Box{Start: tl.start, Shape: make([]int64, len(tl.start))}
		for k := range tl.start {
			boxes[i].Shape[k] = tl.end[k] - tl.start[k]
		}
	}
	if covered < n {
		return bad("the tiles cover %d of %d elements", covered, n)
	}
	if err := tiling.Check(t.shape, boxes); err != nil { // overlaps
		return bad("%v", err)
	}
	t.index = tiling.NewIndex(boxes)
	return t, nil
}
func (t *Tiled) Size() int64  { return t.size }
func (t *Tiled) Name() string { return t.name }
func (t *Tiled) Close() error { return nil }

// contains reports whether the tile holds the element at multi-index idx.
func (c *tile) contains(idx []int64) bool {
	for k, i := range idx {
		if i < c.start[k] || i >= c.end[k] {
			return false
		}
	}
	return true
}

// find returns the tile holding idx, trying hint and the one after it
// first (reads go forward), then the index of the tiles (a few probes
// per dim, whatever their count).
func (t *Tiled) find(idx []int64, hint int) int {
	for n, i := range [2]int{hint, hint + 1} {
		if i >= 0 && i < len(t.tiles) && t.tiles[i].contains(idx) {
			tiledProbes.Add(int64(n + 1))
			return i
		}
	}
	i, probes := t.index.Find(idx)
	tiledProbes.Add(int64(probes + 2))
	return i
}

// errHole is a read of an element no tile holds: NewTiled makes it
// impossible.
var errHole = errors.New("no tile holds the element")

// locate finds the run that byte off (inside the array) begins: the
// tile holding it (searched from hint on), the offset of that byte in the
// tile's source, and the bytes from it to the run's end, which are
// contiguous both in the array and in the tile (a run spans whole steps
// of the dims the tile holds whole). idx is scratch of len(shape).
func (t *Tiled) locate(off int64, idx []int64, hint int) (tile int, at, n int64, err error) {
	e, b := off/t.es, off%t.es
	rem := e
	for k := range t.shape {
		idx[k] = rem / t.inner[k]
		rem %= t.inner[k]
	}
	i := t.find(idx, hint)
	if i < 0 {
		return -1, 0, 0, fmt.Errorf("backing: %s: element %v: %w", t.name, idx, errHole)
	}
	c := &t.tiles[i]
	var se, run int64 // e's element offset in the tile; elements in the run from e
	for k := range idx {
		se += (idx[k] - c.start[k]) * c.inner[k]
	}
	if c.d < 0 {
		run = t.size/t.es - e
	} else {
		// e's offset inside its step of dim d (dims after d are whole).
		run = (c.end[c.d]-idx[c.d])*t.inner[c.d] - e%t.inner[c.d]
	}
	return i, c.off + se*t.es + b, run*t.es - b, nil
}

// scratch returns an index of len(t.shape), in arr when it fits.
func (t *Tiled) scratch(arr *[16]int64) []int64 {
	if len(t.shape) > len(arr) {
		return make([]int64, len(t.shape))
	}
	return arr[:len(t.shape)]
}

// ReadAt gathers [off, off+len(p)): for each run of elements that is
// contiguous both in the array and in one tile, one ReadAt of that tile's
// source straight into p.
func (t *Tiled) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("backing: %s: read at negative offset %d", t.name, off)
	}
	if off >= t.size {
		return 0, io.EOF
	}
	want := int64(len(p))
	if rest := t.size - off; want > rest {
		want = rest
	}
	var arr [16]int64
	idx := t.scratch(&arr)
	hint := -1
	for pos, end := off, off+want; pos < end; {
		i, at, run, err := t.locate(pos, idx, hint)
		if err != nil {
			return int(pos - off), err
		}
		hint = i
		src := t.tiles[i].src
		n := min(run, end-pos)
		got, err := src.ReadAt(p[pos-off:pos-off+n], at)
		if int64(got) < n {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("%s ended at byte %d: %w", src.Name(), at+int64(got), io.ErrUnexpectedEOF)
			}
			return int(pos - off + int64(got)), fmt.Errorf("backing: %s: %w", t.name, err)
		}
		pos += n
	}
	if want < int64(len(p)) {
		return int(want), io.EOF
	}
	return int(want), nil
}

// Piece returns, for a read of [off, off+n) that lies in one tile as one
// contiguous run, the tile's source and the offset there (ok); a caller
// may then serve the read from that source, by splicing its descriptor.
// Reads of a tensor chunked along dim 0 are such runs unless they cross
// a chunk's end.
func (t *Tiled) Piece(off, n int64) (src ReaderAt, at int64, ok bool) {
	src, at, run, ok := t.Run(off)
	if !ok || n <= 0 || n > run {
		return nil, 0, false
	}
	return src, at, true
}

// Run returns the contiguous run of bytes that starts at off: n bytes
// [at, at+n) of src, one tile's, are bytes [off, off+n) of t. A tensor
// chunked along dim 0 is one run per chunk. ok is false when off is not
// in [0, Size()).
func (t *Tiled) Run(off int64) (src ReaderAt, at, n int64, ok bool) {
	if off < 0 || off >= t.size {
		return nil, 0, 0, false
	}
	var arr [16]int64
	i, at, n, err := t.locate(off, t.scratch(&arr), -1)
	if err != nil {
		return nil, 0, 0, false
	}
	return t.tiles[i].src, at, n, true
}

// ReaderAt is what a tile is read from: a random-access file of known
// size (a Source, or index.File).
type ReaderAt interface {
	io.ReaderAt
	Size() int64
	Name() string
}
