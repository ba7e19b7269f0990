package fs

import (
	"io"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// One copy of each byte in memory.
//
// A file of the mount is cached by the kernel as the FUSE inode's pages
// (FOPEN_KEEP_CACHE); the server reads it from the backing file, whose
// pages the kernel caches too. Without help, every byte read through the
// mount sits in memory twice. cacheDrop releases the backing file's copy
// once the mount's copy exists: it counts the bytes served from each
// 2 MiB-aligned chunk of a source, and when a chunk's count reaches the
// bytes of that chunk that tensors cover, it asks the source to drop the
// chunk (backing.CacheDropper: madvise and posix_fadvise DONTNEED).
//
// Why whole aligned chunks: the kernel drops whole folios only (ext4 and
// others cache a file in folios of up to 2 MiB, aligned to their size),
// and dropping a chunk still being read would defeat the backing file's
// readahead; a chunk is complete only once every byte of it has been
// served. Bytes read twice (the stored tensor and its .f32/ view) count
// twice: a chunk is dropped each time its count passes a multiple of its
// covered bytes, so a chunk read again after its drop is dropped again.
// Chunks that are partly header or padding count only their tensor bytes.
//
// When bytes are counted as served (tensor files, views and the
// safetensors exports alike): a read copied out of the source (ReadAt,
// views, an export's copied and converted segments) once the copy is
// done; a spliced read (the kernel moves the backing file's pages) once
// go-fuse has written the reply to the kernel (ReadResult.Done), since a
// page still held by the pipe cannot be dropped.
//
// It is off with Options.KeepBackingCache, for direct-I/O mounts (the
// backing file's pages are then the only copy), and for sources that have
// no page cache (backing.Direct) or cannot drop it.

// cacheChunk is the unit of dropping: the largest folio the page cache
// uses (a PMD), so an aligned chunk always holds whole folios.
const cacheChunk = 2 << 20

// cacheDrop tracks served bytes per chunk of each source.
type cacheDrop struct {
	srcs    []*chunkCounts // per source; nil where nothing is dropped
	dropped atomic.Uint64  // bytes of chunks dropped
	failed  atomic.Uint64  // drops that returned an error
}

// chunkCounts is one source's chunks. Its memory is one 16-byte range
// per run of adjacent tensors (one for a safetensors file) and 8 bytes of
// counter per 2 MiB of the file, which stay unresident (zero pages never
// touched) but for the chunks read.
type chunkCounts struct {
	drop   backing.CacheDropper
	ranges [][2]int64      // the tensors' bytes, merged and sorted. Constant.
	served []atomic.Uint64 // per chunk: bytes served from it so far
}

// covered returns the bytes of chunk i that tensors cover.
func (cc *chunkCounts) covered(i int) int64 {
	start, end := int64(i)*cacheChunk, int64(i+1)*cacheChunk
	k := sort.Search(len(cc.ranges), func(k int) bool { return cc.ranges[k][1] > start })
	var n int64
	for ; k < len(cc.ranges) && cc.ranges[k][0] < end; k++ {
		n += min(end, cc.ranges[k][1]) - max(start, cc.ranges[k][0])
	}
	return n
}

// newCacheDrop prepares the counters of every source that can drop its
// cache; it returns nil (nothing is ever dropped) when keep is set.
func newCacheDrop(idx *index.Index, sources []backing.Source, keep bool) *cacheDrop {
	if keep {
		return nil
	}
	c := &cacheDrop{srcs: make([]*chunkCounts, len(sources))}
	ranges := make([][][2]int64, len(sources))
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if t.Strides != nil || t.Size <= 0 || t.Source < 0 || t.Source >= len(sources) {
			continue // a strided tensor may read only part of its extent
		}
		ranges[t.Source] = append(ranges[t.Source], [2]int64{t.Offset, t.Offset + t.Size})
		// A tensor tiled from chunks (a distributed checkpoint's)
		// covers its chunks' bytes in their files.
		if m := idx.Member(t.Source); m != nil {
			if k, ok := m.Kind.(*index.Tiles); ok {
				for _, p := range k.Ranges(m) {
					if p.Source >= 0 && p.Source < len(sources) {
						ranges[p.Source] = append(ranges[p.Source], [2]int64{p.Offset, p.Offset + p.Size})
					}
				}
			}
		}
	}
	some := false
	for s, src := range sources {
		d, ok := src.(backing.CacheDropper)
		if !ok || len(ranges[s]) == 0 {
			continue
		}
		n := (src.Size() + cacheChunk - 1) / cacheChunk
		merged := mergeRanges(ranges[s])
		c.srcs[s] = &chunkCounts{drop: d, ranges: slices.Clip(merged), served: make([]atomic.Uint64, n)}
		some = true
	}
	if !some {
		return nil
	}
	return c
}

// mergeRanges sorts half-open ranges and merges those that overlap, so
// that bytes shared by two tensors are covered once.
func mergeRanges(rs [][2]int64) [][2]int64 {
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// add calls f for each chunk that [off, off+n) touches, with the bytes of
// the range inside it.
func (cc *chunkCounts) add(off, n int64, f func(chunk int, k int64)) {
	for n > 0 && off >= 0 {
		i := off / cacheChunk
		if i >= int64(len(cc.served)) {
			return
		}
		k := min(n, (i+1)*cacheChunk-off)
		f(int(i), k)
		off += k
		n -= k
	}
}

// served counts [off, off+n) of source s as served, and drops each chunk
// whose count passes a multiple of its covered bytes.
func (c *cacheDrop) served(s int, off, n int64) {
	if c == nil || n <= 0 {
		return
	}
	cc := c.srcs[s]
	if cc == nil {
		return
	}
	cc.add(off, n, func(i int, k int64) {
		now := cc.served[i].Add(uint64(k))
		cov := uint64(cc.covered(i))
		if cov == 0 || now/cov == (now-uint64(k))/cov {
			return
		}
		if err := cc.drop.DropCache(int64(i)*cacheChunk, cacheChunk); err != nil {
			c.failed.Add(1)
			return
		}
		c.dropped.Add(cov)
	})
}

// droppedBytes returns the bytes of chunks dropped so far (0 for nil).
func (c *cacheDrop) droppedBytes() uint64 {
	if c == nil {
		return 0
	}
	return c.dropped.Load()
}

// cacheActive reports whether reads of source s are counted now: not for a
// direct-I/O mount, whose only copy is the backing file's.
func (r *Root) cacheActive(s int) bool {
	return r.cache != nil && r.cache.srcs[s] != nil && !r.directIO.Load()
}

// servedSource wraps source s for a view's reader: every read it makes
// counts as served once copied.
type servedSource struct {
	backing.Source
	r *Root
	s int
}

// ReadAt reads and counts what it read.
func (w *servedSource) ReadAt(p []byte, off int64) (int, error) {
	n, err := w.Source.ReadAt(p, off)
	if n > 0 && w.r.cacheActive(w.s) {
		w.r.cache.served(w.s, off, int64(n))
	}
	return n, err
}

// countTiles makes the reads of sources gathered from other sources
// (backing.Gathered: a distributed checkpoint's tiled tensors) count as
// served on the files they gather from, whose pages are dropped like a
// stored tensor's: each such source is replaced (in the Root's own copy
// of the sources) by one that reads those files through servedSource.
// Reads that Piece hands out as a file's range then come with the
// file's source number for splicing (exportFd, gatheredSplice).
func (r *Root) countTiles() error {
	if r.cache == nil {
		return nil
	}
	var number map[backing.ReaderAt]int // a source (as a gathered one reads it) → its number
	copied := false
	for s, src := range r.sources {
		g, ok := src.(backing.Gathered)
		if !ok {
			continue
		}
		if number == nil {
			number = make(map[backing.ReaderAt]int, 2*len(r.sources))
			for i, f := range r.sources {
				number[f] = i
				number[backing.Unwrap(f)] = i
			}
		}
		counted := false
		w := g.Through(func(in backing.ReaderAt) backing.ReaderAt {
			i, ok := number[in]
			if !ok || r.cache.srcs[i] == nil {
				return in
			}
			counted = true
			return &servedSource{Source: r.sources[i], r: r, s: i}
		})
		if !counted {
			continue
		}
		if !copied {
			r.sources = slices.Clone(r.sources)
			copied = true
		}
		r.sources[s] = w
	}
	return nil
}

// viewSource returns what a view's reader of source s reads through: the
// source itself, or a wrapper counting its reads when they may drop.
func (r *Root) viewSource(s int) backing.Source {
	if r.cache == nil || r.cache.srcs[s] == nil {
		return r.sources[s]
	}
	return &servedSource{Source: r.sources[s], r: r, s: s}
}

// splicedResult answers a read with count bytes of a descriptor at an
// offset, for go-fuse to splice (it has the same Seekable method as
// fuse.ReadResultFd), and counts them as served in Done, after the reply
// was written. Pooled: no allocation per read.
type splicedResult struct {
	r   *Root
	s   int
	fd  uintptr
	off int64
	sz  int
}

var splicedPool = sync.Pool{New: func() any { return new(splicedResult) }}

// fdResult returns the reply to a read of sz bytes at off of source s,
// whose descriptor is fd: fuse.ReadResultFd, or a splicedResult that
// counts the bytes once sent.
func (r *Root) fdResult(s int, fd int, off int64, sz int) fuse.ReadResult {
	if !r.cacheActive(s) {
		return fuse.ReadResultFd(uintptr(fd), off, sz)
	}
	res := splicedPool.Get().(*splicedResult)
	*res = splicedResult{r: r, s: s, fd: uintptr(fd), off: off, sz: sz}
	return res
}

// Seekable gives go-fuse the range to splice.
func (res *splicedResult) Seekable() (uintptr, int64, int) { return res.fd, res.off, res.sz }

// Size is the reply's length.
func (res *splicedResult) Size() int { return res.sz }

// Bytes preads the range into buf, where go-fuse does not splice.
func (res *splicedResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	sz := min(len(buf), res.sz)
	n, err := unix.Pread(int(res.fd), buf[:sz], res.off)
	if err == io.EOF {
		err = nil
	}
	if n < 0 {
		n = 0
	}
	return buf[:n], fuse.ToStatus(err)
}

// Done counts the bytes as served: the reply has been written, and the
// pipe holds no page of the range any more.
func (res *splicedResult) Done() {
	if res.r != nil {
		res.r.cache.served(res.s, res.off, int64(res.sz))
	}
	*res = splicedResult{}
	splicedPool.Put(res)
}
