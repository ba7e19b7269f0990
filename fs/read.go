package fs

import (
	"fmt"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/splice"
	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/view"
)

// spliceFd returns src's descriptor when it offers one that can be
// spliced from at any offset (backing.FdSource), or -1.
func spliceFd(src backing.Source) int {
	if s, ok := src.(backing.FdSource); ok {
		if fd, ok := s.Fd(); ok {
			return int(fd)
		}
	}
	return -1
}

// maxSpliced is the largest read handed to go-fuse to splice: go-fuse
// grows a pipe to hold the reply (a 16-byte header and the data) and one
// page more, and a pipe grows to /proc/sys/fs/pipe-max-size at most
// (1 MiB by default). A larger read would fail there, be logged by
// go-fuse ("trySplice: splice: want 1052688 bytes, max pipe size
// 1048576"), then be copied after all; it is copied into dest instead,
// quietly. Mount caps requests at it when it splices (MaxRequestSize),
// but a kernel may still send a larger READ (a large folio read whole).
var maxSpliced = splice.MaxPipeSize() - os.Getpagesize() - 16

// clamp returns how many bytes a read of len(dest) at off may return from
// a file of size bytes: 0 at or past the end.
func clamp(size int64, dest []byte, off int64) int {
	if off < 0 || off >= size {
		return 0
	}
	n := int64(len(dest))
	if rest := size - off; n > rest {
		n = rest
	}
	return int(n)
}

// read serves [off, off+len(dest)) of f, clamped to its size. A stored
// contiguous tensor whose source has a descriptor is handed to go-fuse to
// splice; everything else is copied into dest, with no allocation (but
// for building a view's reader on the file's first read). A read
// that comes back short inside the file (the backing file shrank) is EIO:
// a short reply would make the kernel truncate its idea of the file.
func (r *Root) read(e *node, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f := &e.file
	if off < 0 {
		return nil, syscall.EINVAL
	}
	n := clamp(f.size, dest, off)
	if n == 0 {
		return fuse.ReadResultData(nil), 0
	}
	switch f.kind {
	case kindStatic:
		return fuse.ReadResultData(e.data()[off : off+int64(n)]), 0
	case kindVirtual:
		got, err := e.virtual().ReadAt(dest[:n], off)
		if got == n {
			return fuse.ReadResultData(dest[:n]), 0
		}
		if err == nil {
			err = fmt.Errorf("short read: %d of %d bytes", got, n)
		}
		return nil, toErrno(err)
	case kindExport:
		return r.readExport(e, dest[:n], off) // export.go
	case kindTensor:
	case kindLazy: // metadata.go: read from contents.r, as a tensor's view
	default:
		return nil, syscall.EIO
	}
	var got int
	var err error
	if f.form == formDirect {
		at := f.t.Offset + f.skip() + off
		if fd := r.fds[f.t.Source]; fd >= 0 {
			if res, ok, err := r.spliced(f.t.Source, fd, at, n); err != nil {
				return nil, toErrno(err)
			} else if ok {
				return res, 0
			}
		}
		if res, ok := r.gatheredSplice(r.sources[f.t.Source], at, n); ok {
			return res, 0
		}
		got, err = r.sources[f.t.Source].ReadAt(dest[:n], at)
		if got == n && r.cacheActive(f.t.Source) {
			r.cache.served(f.t.Source, at, int64(n)) // cache.go
		}
	} else {
		var v view.Reader
		if v, err = r.reader(e); err == nil {
			got, err = v.ReadAt(dest[:n], off)
		}
	}
	if got == n {
		return fuse.ReadResultData(dest[:n]), 0
	}
	if err == nil {
		err = fmt.Errorf("short read: %d of %d bytes", got, n)
	}
	return nil, toErrno(err)
}

// reader returns the view.Reader of tensor file e (any form but
// formDirect), building it on first use. Concurrent first reads may each
// build one; the first stored is kept and the others dropped (readers
// hold no state). NewRoot sized the file with view.Sizeof,
// which runs the checks view.Open runs, so building cannot fail;
// should it, or should the size differ, the file is EIO from then on,
// with one log line.
func (r *Root) reader(e *node) (view.Reader, error) {
	if c := e.loadContents(); c != nil {
		return c.r, c.err
	}
	f := &e.file
	if f.kind != kindTensor {
		return nil, fmt.Errorf("not a tensor file")
	}
	src := r.viewSource(f.t.Source) // counts served bytes: cache.go
	var v view.Reader
	var err error
	if form, ok := f.viewForm(); ok {
		v, err = view.Open(f.t, src, form)
	} else {
		err = fmt.Errorf("no reader for a %s file", f.form)
	}
	if err == nil && v.Size() != f.size {
		err = fmt.Errorf("reader of %d bytes for a file of %d", v.Size(), f.size)
	}
	c := &fileContents{r: v, err: err}
	if err != nil {
		c.r = nil
	}
	if c, stored := e.storeContents(c); !stored {
		return c.r, c.err
	} else if err != nil {
		r.logger.Printf("tensor %q (%s, %s): %v", f.t.Name, f.dtype, f.form, err)
	}
	return c.r, c.err
}

// gatheredSplice serves a read of a source gathered from others
// (backing.Gathered: a distributed checkpoint's tiled tensor) that lies
// in one run, by splicing from the run's file, as a stored tensor's read
// is: ok is false for any other read (it crosses a chunk's end, or the
// file has no descriptor to splice), which is then copied through ReadAt.
func (r *Root) gatheredSplice(src backing.Source, at int64, n int) (fuse.ReadResult, bool) {
	tl, ok := src.(backing.Gathered)
	if !ok {
		return nil, false
	}
	piece, off, ok := tl.Piece(at, int64(n))
	if !ok {
		return nil, false
	}
	ps, ok := piece.(backing.Source)
	if !ok {
		return nil, false
	}
	s, fd := r.exportFd(ps) // export.go: a counted chunk file has its number
	if fd < 0 {
		return nil, false
	}
	res, ok, err := r.spliced(s, fd, off, n)
	return res, ok && err == nil
}

// spliced returns the reply that has go-fuse splice n bytes at offset at
// of descriptor fd (of source s, counted as served once sent; s < 0: not
// counted), and true; or false where the read must be copied instead:
// it is over maxSpliced, or the pipe go-fuse uses may not hold it whole
// (splicedWhole). An error: the range is no longer in the file.
//
// Everything that splices comes here. go-fuse writes the reply's header
// before it splices and takes a splice that comes back short for the end
// of the file: it shortens the reply, and the kernel then believes the
// file ends there (the size it reports shrinks until the attributes are
// refreshed). So a range is handed over only when it is sure to arrive
// whole: it must still exist (checkExtent), and it must fit the pipe.
func (r *Root) spliced(s, fd int, at int64, n int) (fuse.ReadResult, bool, error) {
	if n > maxSpliced {
		return nil, false, nil
	}
	if !splicedWhole(at, n) {
		r.stats.copiedTails.Add(1)
		return nil, false, nil
	}
	// A short splice would be a short reply, which the kernel takes for
	// the end of the file; so the range must still exist before it is
	// handed over.
	if err := checkExtent(fd, at+int64(n)); err != nil {
		return nil, false, err
	}
	r.stats.spliced.Add(1)
	if s < 0 {
		return fuse.ReadResultFd(uintptr(fd), at, n), true, nil
	}
	return r.fdResult(s, fd, at, n), true, nil // counted once sent: cache.go
}

// replyHeader is the size of a read reply's header (fuse_out_header),
// which go-fuse writes into the pipe before it splices the data.
const replyHeader = 16

// pipePow2 reports whether this kernel rounds a pipe's size up to a
// power of two pages (every Linux since 2.6.35: round_pipe_size), probed
// once; where it does not, splicedWhole counts only the pages asked for.
var pipePow2 = probePipePow2()

func probePipePow2() bool {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return false
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	page := os.Getpagesize()
	if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETPIPE_SZ, 3*page); err != nil {
		return false
	}
	sz, err := unix.FcntlInt(uintptr(p[0]), unix.F_GETPIPE_SZ, 0)
	return err == nil && sz == 4*page
}

// pipeSlots returns how many buffers go-fuse's pipe surely has for a
// read reply of n bytes: trySplice grows the pipe it takes from its pool
// to the header, the data and one page more (a pooled pipe may be
// larger: pipes only grow), and the kernel sizes a pipe in whole pages,
// rounded up to a power of two.
func pipeSlots(n int) int {
	page := os.Getpagesize()
	pages := (replyHeader + n + page + page - 1) / page
	if pipePow2 {
		p := 1
		for p < pages {
			p <<= 1
		}
		pages = p
	}
	return pages
}

// splicedWhole reports whether n bytes of a file at offset at surely fit
// go-fuse's pipe when spliced: the header takes one buffer, and the data
// one per page of the file it touches, which is one more than its size
// needs when it starts off a page boundary. (63 pages of pipe for the
// data of a 256,000-byte read at offset 3,056 hold 254,992 of its bytes.)
// Requests of whole pages always fit; a file's last, partial request
// may not, and is copied.
func splicedWhole(at int64, n int) bool {
	page := int64(os.Getpagesize())
	span := (at%page + int64(n) + page - 1) / page
	return 1+span <= int64(pipeSlots(n))
}

// checkExtent fails unless the file open as fd still holds at least end
// bytes: it shrank under the mount if not. (A file truncated between this
// check and the splice still gives a short reply; the window is one
// system call wide.)
func checkExtent(fd int, end int64) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Size < end {
		return fmt.Errorf("backing file truncated to %d bytes under the mount (a read needs %d)", st.Size, end)
	}
	return nil
}
