package backing

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Source is one read-only backing file. Nothing outside this package
// assumes a mapping exists: everything goes through ReadAt (and the
// optional interfaces below, which callers must test for).
//
// ReadAt has io.ReaderAt semantics over the file as it was when opened:
// off < 0 is an error; off >= Size() returns 0, io.EOF; a read that runs
// past Size() returns the bytes up to Size() and io.EOF. Bytes that have
// vanished since (the file was truncated) or cannot be read (EIO) give an
// error wrapping ErrFault. Safe for concurrent use; Close must not race
// with the last reads (reads after Close fail with an error wrapping
// os.ErrClosed, they never touch freed memory).
type Source interface {
	io.ReaderAt
	Size() int64
	Name() string
	Close() error
}

// FdSource is implemented by sources that read a plain file descriptor
// which a caller may splice or pread from itself (the FUSE layer answers a
// read of a contiguous native range with the fd and an offset, so the
// kernel moves the bytes). The fd stays valid until Close. ok is false when
// the source has no descriptor suitable for that (an O_DIRECT descriptor,
// which needs aligned I/O). A source that does not implement FdSource has
// no descriptor: callers use ReadAt.
type FdSource interface {
	Fd() (fd uintptr, ok bool)
}

// Advice is an access-pattern hint for a range of a source.
type Advice uint8

const (
	Normal     Advice = iota // no special treatment (the default)
	Sequential               // read ahead aggressively, drop behind
	Random                   // do not read ahead
	WillNeed                 // start reading the range in now
	DontNeed                 // the range will not be read again soon
)

func (a Advice) String() string {
	switch a {
	case Normal:
		return "normal"
	case Sequential:
		return "sequential"
	case Random:
		return "random"
	case WillNeed:
		return "willneed"
	case DontNeed:
		return "dontneed"
	}
	return fmt.Sprintf("Advice(%d)", uint8(a))
}

// Adviser is implemented by sources that can pass access-pattern hints to
// the kernel: madvise on a mapping, posix_fadvise on a descriptor. The
// range [off, off+n) is clamped to the file; an empty range does nothing.
// Advice never changes what ReadAt returns. A source that does not
// implement Adviser simply gets no hints.
type Adviser interface {
	Advise(off, n int64, advice Advice) error
}

// Mode selects how Open reads a file.
type Mode uint8

const (
	// Mmap maps the whole file read-only (MAP_SHARED) and copies from the
	// mapping: the fastest for local files that fit the page cache. The
	// zero Mode.
	Mmap Mode = iota
	// Pread reads with pread(2) on the descriptor: for network filesystems
	// where page faults on a mapping stall.
	Pread
	// Direct reads with O_DIRECT through aligned bounce buffers, bypassing
	// the page cache (for loading huge checkpoints once without evicting
	// everything else). Open fails with an error wrapping
	// ErrDirectUnsupported where the filesystem refuses O_DIRECT (tmpfs).
	Direct
)

func (m Mode) String() string {
	switch m {
	case Mmap:
		return "mmap"
	case Pread:
		return "pread"
	case Direct:
		return "direct"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses a mode as spelled in flags: "mmap", "pread" or
// "direct", case-insensitively; "" is the default, Mmap.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "mmap":
		return Mmap, nil
	case "pread":
		return Pread, nil
	case "direct":
		return Direct, nil
	}
	return 0, fmt.Errorf("backing: unknown I/O mode %q (want mmap, pread or direct)", s)
}

// Options configure Open. The zero value maps the file.
type Options struct {
	Mode Mode
}

// Errors that callers may test with errors.Is.
var (
	// ErrFault: bytes of the file vanished (it was truncated while open)
	// or could not be read (I/O error, SIGBUS on the mapping). Callers map
	// it to EIO. The error returned is a *FaultError.
	ErrFault = errors.New("backing: file changed or unreadable (I/O fault)")
	// ErrDirectUnsupported: Open with Direct on a filesystem that refuses
	// O_DIRECT. Use Pread or Mmap there.
	ErrDirectUnsupported = errors.New("backing: the filesystem does not support O_DIRECT")
)

// FaultError is the error of a read that hit vanished or unreadable bytes.
// It wraps ErrFault and, where there is one, the system error (EIO).
type FaultError struct {
	Name string // the file
	Off  int64  // the read: offset
	Len  int64  // and length (clamped to the size at open)
	Size int64  // size when opened
	Now  int64  // size now, -1 when unknown
	Err  error  // underlying error, or nil
}

func (e *FaultError) Error() string {
	var b strings.Builder
	b.WriteString(e.Name)
	b.WriteString(": file changed or unreadable (I/O fault)")
	switch {
	case e.Now >= 0 && e.Now < e.Size:
		fmt.Fprintf(&b, ": truncated to %d bytes (was %d when opened)", e.Now, e.Size)
	case e.Err != nil:
		// A remote store's error names the object already: once is
		// enough.
		fmt.Fprintf(&b, ": %s", strings.TrimPrefix(e.Err.Error(), e.Name+": "))
	}
	fmt.Fprintf(&b, " (reading %d bytes at byte %d)", e.Len, e.Off)
	return b.String()
}

// Unwrap gives ErrFault and the underlying error.
func (e *FaultError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrFault, e.Err}
	}
	return []error{ErrFault}
}

// Open opens path read-only in the given mode. path must be a regular file.
// The returned Source serves the file as it is at Open: Size() does not
// change afterwards.
func Open(path string, opts Options) (Source, error) {
	switch opts.Mode {
	case Mmap:
		return openMmap(path)
	case Pread:
		return openPread(path)
	case Direct:
		return openDirect(path)
	}
	return nil, fmt.Errorf("backing: %s: unknown I/O mode %v", path, opts.Mode)
}

// file is what every mode shares: the open descriptor and the size at
// Open.
type file struct {
	name string
	f    *os.File
	fd   int
	size int64

	// mu guards the descriptor (and a mapping) against Close while reads
	// are in flight: readers hold it shared.
	mu     sync.RWMutex
	closed bool // GUARDED_BY(mu)
}

// openFile opens path with extra open flags; it must be a regular file
// (OpenRegular: special files are refused without blocking).
func openFile(path string, flags int) (*file, error) {
	f, err := OpenRegular(path, flags)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &file{name: path, f: f, fd: int(f.Fd()), size: st.Size()}, nil
}

func (b *file) Size() int64  { return b.size }
func (b *file) Name() string { return b.name }

// closedError is the error of a read after Close.
func (b *file) closedError() error {
	return fmt.Errorf("backing: %s: %w", b.name, os.ErrClosed)
}

// negativeOffset is the error of a read at off < 0.
func (b *file) negativeOffset(off int64) error {
	return fmt.Errorf("backing: %s: read at negative offset %d", b.name, off)
}

// span clamps a read of n bytes at off to the size at Open. want is the
// number of bytes that exist; eof reports that the read ran past the end.
func (b *file) span(n int, off int64) (want int, eof bool, err error) {
	if off < 0 {
		return 0, false, b.negativeOffset(off)
	}
	if off >= b.size {
		return 0, true, nil
	}
	if rest := b.size - off; int64(n) > rest {
		return int(rest), true, nil
	}
	return n, false, nil
}

// currentSize returns the file's size now (fstat). REQUIRES mu held shared.
func (b *file) currentSize() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(b.fd, &st); err != nil {
		return -1, err
	}
	return st.Size, nil
}

// fault builds the error of a read [off, off+n) that failed; it looks up
// the current size. REQUIRES mu held shared.
func (b *file) fault(off, n int64, cause error) *FaultError {
	now, err := b.currentSize()
	if err != nil && cause == nil {
		cause = err
	}
	return &FaultError{Name: b.name, Off: off, Len: n, Size: b.size, Now: now, Err: cause}
}

// clampAdvice clamps [off, off+n) to the file; ok is false when empty.
func (b *file) clampAdvice(off, n int64) (int64, int64, bool) {
	if off < 0 {
		n += off
		off = 0
	}
	if off >= b.size || n <= 0 {
		return 0, 0, false
	}
	if n > b.size-off {
		n = b.size - off
	}
	return off, n, true
}

var fadvice = [...]int{
	Normal:     unix.FADV_NORMAL,
	Sequential: unix.FADV_SEQUENTIAL,
	Random:     unix.FADV_RANDOM,
	WillNeed:   unix.FADV_WILLNEED,
	DontNeed:   unix.FADV_DONTNEED,
}

// fadvise passes advice on the descriptor (posix_fadvise).
func (b *file) fadvise(off, n int64, advice Advice) error {
	if int(advice) >= len(fadvice) {
		return fmt.Errorf("backing: %s: unknown advice %v", b.name, advice)
	}
	off, n, ok := b.clampAdvice(off, n)
	if !ok {
		return nil
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return b.closedError()
	}
	if err := unix.Fadvise(b.fd, off, n, fadvice[advice]); err != nil {
		return fmt.Errorf("backing: %s: fadvise %v: %w", b.name, advice, err)
	}
	return nil
}

// closeFile closes the descriptor once; later calls return nil. release
// runs under the write lock first (unmapping).
func (b *file) closeFile(release func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	var err error
	if release != nil {
		err = release()
	}
	if cerr := b.f.Close(); err == nil {
		err = cerr
	}
	return err
}
