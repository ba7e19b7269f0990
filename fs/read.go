package fs

import (
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

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
