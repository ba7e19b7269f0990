package backing

import "slices"

// Gathered is a source whose bytes are gathered, run by run, from ranges
// of other sources (a Tiled is one). A server asks for it instead of a
// concrete type: it may serve a read that lies in one run straight from
// that run's source (splicing its descriptor), and may read the same
// bytes with each source it gathers from wrapped (to count what is read
// from a file).
type Gathered interface {
	Source
	// Piece returns, for a read of [off, off+n) that lies in one run,
	// the run's source and the offset there (ok).
	Piece(off, n int64) (src ReaderAt, at int64, ok bool)
	// Run returns the run that starts at off: n bytes [at, at+n) of
	// src are bytes [off, off+n) of the source; ok is false when off
	// is not in [0, Size()).
	Run(off int64) (src ReaderAt, at, n int64, ok bool)
	// Through returns a source of the same bytes that reads each
	// source src it gathers from through wrap(src) (src itself where
	// wrap returns it).
	Through(wrap func(src ReaderAt) ReaderAt) Source
}

var _ Gathered = (*Tiled)(nil)

// Through returns a copy of t whose tiles read through wrap.
func (t *Tiled) Through(wrap func(src ReaderAt) ReaderAt) Source {
	c := *t
	c.tiles = slices.Clone(t.tiles)
	for i := range c.tiles {
		c.tiles[i].src = wrap(c.tiles[i].src)
	}
	return &c
}
