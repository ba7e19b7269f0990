package backing

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// CacheDropper is implemented by sources whose reads leave the bytes in
// the kernel's page cache (Mmap and Pread sources). DropCache says that
// the bytes [off, off+n) have been copied out and are cached elsewhere
// (by the FUSE mount that served them), so the source's own cached pages
// for the whole pages inside the range may go: it unmaps them from this
// process (a mapping's pages cannot be dropped while mapped) and asks
// the kernel to drop them (posix_fadvise POSIX_FADV_DONTNEED).
//
// It only drops clean, unmapped pages: pages another process maps, or
// that are being read right now, stay. It never changes what ReadAt
// returns; a later read of the range reads the file again. The range is
// clamped to the file; partial pages at either end are kept. A source
// that does not implement CacheDropper (Direct, which bypasses the page
// cache, or a remote source) has nothing to drop.
type CacheDropper interface {
	DropCache(off, n int64) error
}

var (
	_ CacheDropper = (*mmapFile)(nil)
	_ CacheDropper = (*preadFile)(nil)
)

// pageRange returns the whole pages inside [off, off+n) clamped to the
// file, as an offset and a length that are multiples of the page size;
// ok is false when there are none. A range that ends at the end of the
// file keeps the file's last, partial page (the kernel treats the end of
// file as the end of that page).
func (b *file) pageRange(off, n int64) (start, length int64, ok bool) {
	off, n, ok = b.clampAdvice(off, n)
	if !ok {
		return 0, 0, false
	}
	const page = 4096
	start = (off + page - 1) &^ (page - 1)
	end := off + n
	if end == b.size {
		end = (end + page - 1) &^ (page - 1)
	} else {
		end &^= page - 1
	}
	if end <= start {
		return 0, 0, false
	}
	return start, end - start, true
}

// dropPages asks the kernel to drop the cached pages of
// [start, start+length) (whole pages). REQUIRES mu held shared.
func (b *file) dropPages(start, length int64) error {
	if err := unix.Fadvise(b.fd, start, length, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("backing: %s: dropping cached pages: %w", b.name, err)
	}
	return nil
}

// DropCache drops the page cache of the whole pages in [off, off+n).
func (s *preadFile) DropCache(off, n int64) error {
	start, length, ok := s.pageRange(off, n)
	if !ok {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return s.closedError()
	}
	return s.dropPages(start, length)
}

// DropCache unmaps the whole pages of [off, off+n) from the mapping
// (madvise MADV_DONTNEED: a shared file mapping refaults from the file)
// and drops them from the page cache.
func (m *mmapFile) DropCache(off, n int64) error {
	start, length, ok := m.pageRange(off, n)
	if !ok {
		return nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return m.closedError()
	}
	end := min(start+length, int64(len(m.data)))
	if end > start {
		if err := unix.Madvise(m.data[start:end], unix.MADV_DONTNEED); err != nil {
			return fmt.Errorf("backing: %s: unmapping served pages: %w", m.name, err)
		}
	}
	return m.dropPages(start, length)
}
