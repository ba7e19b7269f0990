package fs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"syscall"
)

// toErrno is the one place where an error becomes the errno the kernel
// sees. Errors that already are an errno keep it (EINTR, EIO, ENOMEM...);
// a short read (the backing file changed under the mount) and every other
// error, including a fault while copying from a mapping, are EIO.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	switch {
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
