package backing

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// directAlign is the offset, length and memory alignment of O_DIRECT
	// reads: 4 KiB covers 512-byte and 4 KiB logical blocks.
	directAlign = 4096
	// bounceSize is the size of one bounce buffer; a larger unaligned read
	// takes several preads.
	bounceSize = 1 << 20
)

// bouncePool holds aligned bounce buffers (*[]byte of bounceSize).
var bouncePool = sync.Pool{New: func() any {
	b := alignedBuffer(bounceSize)
	return &b
}}

// alignedBuffer returns n bytes starting at a directAlign boundary.
func alignedBuffer(n int) []byte {
	raw := make([]byte, n+directAlign)
	shift := (directAlign - int(uintptr(unsafe.Pointer(&raw[0]))%directAlign)) % directAlign
	return raw[shift : shift+n : shift+n]
}

func isAligned(p []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(p)))%directAlign == 0
}

// directFile serves reads with O_DIRECT preads, rounded out to directAlign
// and copied out of a pooled bounce buffer (or read straight into the
// caller's buffer where it, the offset and the length are aligned).
type directFile struct {
	*file
}

var (
	_ Source   = (*directFile)(nil)
	_ FdSource = (*directFile)(nil)
	_ Adviser  = (*directFile)(nil)
)

func openDirect(path string) (Source, error) {
	b, err := openFile(path, unix.O_DIRECT)
	if err != nil {
		return nil, directError(path, err)
	}
	d := &directFile{file: b}
	if b.size > 0 {
		// Some filesystems accept the flag and refuse the reads.
		bp := bouncePool.Get().(*[]byte)
		_, err := d.preadFull((*bp)[:directAlign], 0)
		bouncePool.Put(bp)
		if err != nil {
			b.f.Close()
			return nil, directError(path, fmt.Errorf("backing: %s: O_DIRECT read: %w", path, err))
		}
	}
	return d, nil
}

// directError is the error of an O_DIRECT open or first read: EINVAL means
// the filesystem refuses O_DIRECT.
func directError(path string, err error) error {
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: %s (use --io pread or mmap)", ErrDirectUnsupported, path)
	}
	return err
}

// preadFull preads into buf (aligned, at an aligned offset) until it is
// full or the file ends. A short read ends it: the next position would be
// unaligned, and a short read only happens at the end of the file.
func (d *directFile) preadFull(buf []byte, off int64) (int, error) {
	got := 0
	for got < len(buf) {
		n, err := unix.Pread(d.fd, buf[got:], off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return got, err
		}
		got += n
		if n == 0 || got%directAlign != 0 {
			break
		}
	}
	return got, nil
}

// ReadAt reads the clamped range in aligned preads. A pread that ends
// before the size at Open means the file was truncated: ErrFault.
func (d *directFile) ReadAt(p []byte, off int64) (int, error) {
	want, eof, err := d.span(len(p), off)
	if err != nil {
		return 0, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return 0, d.closedError()
	}
	var bp *[]byte
	defer func() {
		if bp != nil {
			bouncePool.Put(bp)
		}
	}()
	done := 0
	for done < want {
		pos := off + int64(done)
		rest := want - done
		if pos%directAlign == 0 && rest >= directAlign && isAligned(p[done:]) {
			n := rest &^ (directAlign - 1)
			got, err := d.preadFull(p[done:done+n], pos)
			if got < n {
				return done + max(0, got), d.fault(off, int64(want), err)
			}
			done += n
			continue
		}
		if bp == nil {
			bp = bouncePool.Get().(*[]byte)
		}
		start := pos &^ (directAlign - 1)
		skip := int(pos - start)
		length := (skip + rest + directAlign - 1) &^ (directAlign - 1)
		if length > bounceSize {
			length = bounceSize
		}
		need := min(rest, length-skip)
		got, err := d.preadFull((*bp)[:length], start)
		if avail := got - skip; avail < need {
			avail = max(0, avail)
			copy(p[done:done+avail], (*bp)[skip:skip+avail])
			return done + avail, d.fault(off, int64(want), err)
		}
		copy(p[done:done+need], (*bp)[skip:skip+need])
		done += need
	}
	if eof {
		return want, io.EOF
	}
	return want, nil
}

// Fd reports no descriptor: the O_DIRECT one needs aligned I/O, which
// splice and plain pread callers do not do.
func (d *directFile) Fd() (uintptr, bool) { return 0, false }

// Advise calls posix_fadvise (the page cache is bypassed anyway, so this
// matters little).
func (d *directFile) Advise(off, n int64, advice Advice) error {
	return d.fadvise(off, n, advice)
}

// Close closes the file. Reads in flight finish first.
func (d *directFile) Close() error { return d.closeFile(nil) }
