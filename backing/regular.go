package backing

import (
	"fmt"
	iofs "io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotRegular is wrapped by the error of OpenRegular (and Open) for a
// path that is not a regular file: a named pipe, a device, a socket or a
// directory, itself or at the end of a symbolic link.
var ErrNotRegular = fmt.Errorf("not a regular file")

// OpenRegular opens path read-only, following symbolic links, only when
// it is a regular file, and never blocks or has a side effect on anything
// else: it stats path first (so a link to a device or a named pipe is
// refused before it is opened), then opens it with O_NONBLOCK (so a file
// swapped for a named pipe in between cannot hang open(2)), checks the
// opened descriptor with fstat and clears O_NONBLOCK. flags are extra
// open(2) flags (O_DIRECT). The error names path and, for a special file,
// says what it is.
func OpenRegular(path string, flags int) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	var fd int
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|flags, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if fst.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, notRegular(path, unixMode(fst.Mode))
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// unixMode returns the file type bits of a stat mode as an os.FileMode.
func unixMode(m uint32) iofs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return iofs.ModeDir
	case unix.S_IFIFO:
		return iofs.ModeNamedPipe
	case unix.S_IFCHR:
		return iofs.ModeDevice | iofs.ModeCharDevice
	case unix.S_IFBLK:
		return iofs.ModeDevice
	case unix.S_IFSOCK:
		return iofs.ModeSocket
	case unix.S_IFLNK:
		return iofs.ModeSymlink
	}
	return iofs.ModeIrregular
}

// notRegular is the error for path, of type mode, that is not a regular
// file.
func notRegular(path string, mode iofs.FileMode) error {
	return fmt.Errorf("%s: %w (%s); tensorfs reads only regular files", path, ErrNotRegular, DescribeType(mode))
}

// DescribeType names the type of a file mode in words: "a directory", "a
// named pipe (FIFO)", "a character device"...
func DescribeType(mode iofs.FileMode) string {
	switch t := mode.Type(); {
	case t == 0:
		return "a regular file"
	case t&iofs.ModeDir != 0:
		return "a directory"
	case t&iofs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&iofs.ModeCharDevice != 0:
		return "a character device"
	case t&iofs.ModeDevice != 0:
		return "a block device"
	case t&iofs.ModeSocket != 0:
		return "a socket"
	case t&iofs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}
