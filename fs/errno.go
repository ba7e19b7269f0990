package fs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"syscall"

	"github.com/lazyweights/tensorfs/backing"
)

// toErrno is the one place where an error becomes the errno the kernel
// sees. A fault of the server's own reading (backing.ErrFault: the
// backing file changed, a remote store failed, a compressed member could
// not be inflated, even for want of room in --cache-dir) is EIO whatever
// system error caused it: read(2) has no ENOSPC, and a reader told "no
// space left on device" looks at its own disk; the server's log line says
// the cause. Other errors that already are an errno keep it (EINTR,
// ENOMEM...); a short read and every other error are EIO.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, backing.ErrFault) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return syscall.EIO
	case errors.As(err, &errno) && errno != 0:
		return errno
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return syscall.EIO
	}
	return syscall.EIO
}
