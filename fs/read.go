package fs

import (
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/backing"
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
// splice; everything else is copied into dest, with no allocation. A read
// that comes back short inside the file (the backing file shrank) is EIO:
// a short reply would make the kernel truncate its idea of the file.
func (r *Root) read(f *fileData, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off < 0 {
		return nil, syscall.EINVAL
	}
	n := clamp(f.size, dest, off)
	if n == 0 {
		return fuse.ReadResultData(nil), 0
	}
	switch f.kind {
	case kindStatic:
		return fuse.ReadResultData(f.data[off : off+int64(n)]), 0
	case kindTensor:
	default:
		return nil, syscall.EIO
	}
	if f.direct && f.fd >= 0 {
		// go-fuse turns a splice that comes back short into a short
		// reply, which the kernel takes for the end of the file; so the
		// range must still exist before it is handed over.
		if err := checkExtent(f.fd, f.off+off+int64(n)); err != nil {
			return nil, toErrno(err)
		}
		return fuse.ReadResultFd(uintptr(f.fd), f.off+off, n), 0
	}
	var got int
	var err error
	if f.direct {
		got, err = f.src.ReadAt(dest[:n], f.off+off)
	} else {
		got, err = f.r.ReadAt(dest[:n], off)
	}
	if got == n {
		return fuse.ReadResultData(dest[:n]), 0
	}
	if err == nil {
		err = fmt.Errorf("short read: %d of %d bytes", got, n)
	}
	return nil, toErrno(err)
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
