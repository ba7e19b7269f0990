package backing

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// mmapFile serves reads by copying from a read-only shared mapping of the
// whole file.
type mmapFile struct {
	*file
	data []byte // the mapping; nil for an empty file or after Close. GUARDED_BY(mu)
}

var (
	_ Source   = (*mmapFile)(nil)
	_ FdSource = (*mmapFile)(nil)
	_ Adviser  = (*mmapFile)(nil)
)

func openMmap(path string) (Source, error) {
	b, err := openFile(path, 0)
	if err != nil {
		return nil, err
	}
	m := &mmapFile{file: b}
	if b.size > 0 {
		if int64(int(b.size)) != b.size {
			b.f.Close()
			return nil, fmt.Errorf("backing: %s: %d bytes do not fit the address space (use --io pread)", path, b.size)
		}
		data, err := unix.Mmap(b.fd, 0, int(b.size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			b.f.Close()
			return nil, fmt.Errorf("backing: %s: mmap: %w (use --io pread)", path, err)
		}
		m.data = data
	}
	return m, nil
}

// mmapPreadMin is the size from which a read of a mapped file is a
// pread(2) instead of a copy out of the mapping: touching pages of the
// mapping that are not mapped yet costs a fault per few pages, and a
// conversion reading 64 KiB steps of a checkpoint whose pages the mount
// drops (the .f32/ view of BF16) spent a third of its server CPU there;
// pread copies the same page-cache bytes with no fault (tensorfs bench,
// --backing pread against mmap: server CPU for the .f32/ files 0.18–0.30 s
// against 0.26–0.36 s, docs/BENCHMARKS.md).
const mmapPreadMin = 64 << 10

// ReadAt copies from the mapping, or preads reads of mmapPreadMin bytes
// and more. A page that vanished (the file was
// truncated) raises SIGBUS, which copyMapped turns into a flag; the bytes
// of a truncated file's last partial page read as zeros without a fault,
// so a read whose last byte is zero also checks the file's current size.
func (m *mmapFile) ReadAt(p []byte, off int64) (int, error) {
	if len(p) >= mmapPreadMin {
		return m.file.pread(p, off)
	}
	want, eof, err := m.span(len(p), off)
	if err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, m.closedError()
	}
	if want > 0 {
		end := off + int64(want)
		faulted := copyMapped(p[:want], m.data[off:end])
		if faulted || p[want-1] == 0 {
			if n, err := m.recheck(p, off, want, faulted); err != nil {
				return n, err
			}
		}
	}
	if eof {
		return want, io.EOF
	}
	return want, nil
}

// recheck runs after a fault, or when the last byte copied was zero: it
// compares the read with the file's size now. It returns an error when
// bytes of [off, off+want) no longer exist, after serving those that do.
// REQUIRES mu held shared.
func (m *mmapFile) recheck(p []byte, off int64, want int, faulted bool) (int, error) {
	end := off + int64(want)
	now, err := m.currentSize()
	if err != nil {
		return 0, &FaultError{Name: m.name, Off: off, Len: int64(want), Size: m.size, Now: -1, Err: err}
	}
	if now >= end {
		if !faulted || !copyMapped(p[:want], m.data[off:end]) {
			return want, nil // the zero is real, or the file grew back
		}
		return 0, &FaultError{Name: m.name, Off: off, Len: int64(want), Size: m.size, Now: now}
	}
	valid := int64(0)
	if now > off {
		valid = now - off
		if copyMapped(p[:valid], m.data[off:off+valid]) {
			valid = 0
		}
	}
	return int(valid), &FaultError{Name: m.name, Off: off, Len: int64(want), Size: m.size, Now: now}
}

// copyMapped copies src (inside a mapping) to dst and reports whether a
// memory fault (SIGBUS, SIGSEGV) interrupted it; dst is then partly
// written.
func copyMapped(dst, src []byte) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); ok {
				faulted = true
				return
			}
			panic(r)
		}
	}()
	copy(dst, src)
	return false
}

// Fd returns the mapped file's descriptor.
func (m *mmapFile) Fd() (uintptr, bool) { return uintptr(m.fd), true }

var madvice = [...]int{
	Normal:     unix.MADV_NORMAL,
	Sequential: unix.MADV_SEQUENTIAL,
	Random:     unix.MADV_RANDOM,
	WillNeed:   unix.MADV_WILLNEED,
	DontNeed:   unix.MADV_DONTNEED,
}

// Advise calls madvise on the pages of the mapping that hold the range.
func (m *mmapFile) Advise(off, n int64, advice Advice) error {
	if int(advice) >= len(madvice) {
		return fmt.Errorf("backing: %s: unknown advice %v", m.name, advice)
	}
	off, n, ok := m.clampAdvice(off, n)
	if !ok {
		return nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return m.closedError()
	}
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	end := off + n
	if err := unix.Madvise(m.data[start:end], madvice[advice]); err != nil {
		return fmt.Errorf("backing: %s: madvise %v: %w", m.name, advice, err)
	}
	return nil
}

// Close unmaps the file and closes it. Reads in flight finish first.
func (m *mmapFile) Close() error {
	return m.closeFile(func() error {
		if m.data == nil {
			return nil
		}
		err := unix.Munmap(m.data)
		m.data = nil
		return err
	})
}

// Mapper is implemented by sources that read from a mapping of the whole
// file (the Mmap mode). Mapping returns it: read-only memory, valid until
// Close, that a caller may hand to something that reads memory directly
// (a GPU driver registering it for DMA) instead of copying through
// ReadAt. A load from it faults (SIGBUS) where the file was truncated
// since; ReadAt turns that into an error, a direct reader must cope. Nil
// for an empty file. Nothing may assume a source has one: test for the
// interface.
type Mapper interface {
	Mapping() []byte
}

var _ Mapper = (*mmapFile)(nil)

// Mapping returns the file's mapping (Mapper); nil after Close.
func (m *mmapFile) Mapping() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil
	}
	return m.data
}
