package backing

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotPrivate is wrapped by the errors of OpenPrivateDir and
// CheckPrivate: a cache directory, or a file or directory in it, that
// someone other than this user (or root) could have written.
var ErrNotPrivate = errors.New("not private")

// OpenPrivateDir opens dir, a cache directory (--cache-dir), creating it
// (mode 0700) when it is missing, and checks it as ssh checks its files:
// it must be a directory owned by this user or root and writable by
// neither group nor others, so that nobody else can plant, replace or
// remove what is in it. The path given may go through symbolic links;
// the directory opened is the one checked, and callers work under the
// descriptor returned (openat and friends), never under the path again.
// The error is one line naming dir and what is wrong.
func OpenPrivateDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: cannot create the cache directory: %v", dir, pathErr(err))
	}
	var fd int
	var err error
	for {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: cannot open the cache directory: %v", dir, err)
	}
	if err := CheckPrivate(fd, dir, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// OpenPrivateSubdir opens the directory name in the private directory
// parent (a descriptor of OpenPrivateDir or of this function), without
// following a symbolic link, creating it (0700) when create is set and
// it is missing, and checks it with CheckPrivate. path names it in
// messages.
func OpenPrivateSubdir(parent int, name, path string, create bool) (int, error) {
	if create {
		if err := unix.Mkdirat(parent, name, 0o700); err != nil && err != unix.EEXIST {
			return -1, fmt.Errorf("%s: cannot create it: %v", path, err)
		}
	}
	var fd int
	var err error
	for {
		fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		if err == unix.ELOOP || err == unix.ENOTDIR {
			var st unix.Stat_t
			if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				return -1, fmt.Errorf("%s: %w: %s, not a directory", path, ErrNotPrivate, DescribeType(unixMode(st.Mode)))
			}
		}
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := CheckPrivate(fd, path, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// CheckPrivate checks the open descriptor fd, named path in messages: a
// directory (dir) or a regular file owned by this user or root, that
// neither group nor others may write.
func CheckPrivate(fd int, path string, dir bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	want, what := uint32(unix.S_IFREG), "a regular file"
	if dir {
		want, what = unix.S_IFDIR, "a directory"
	}
	if st.Mode&unix.S_IFMT != want {
		return fmt.Errorf("%s: %w: %s, not %s", path, ErrNotPrivate, DescribeType(unixMode(st.Mode)), what)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
		return fmt.Errorf("%s: %w: owned by user %d, not by you (user %d) or root; use a directory of your own", path, ErrNotPrivate, st.Uid, uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s: %w: writable by others (mode %04o); make it yours alone (chmod go-w %s)", path, ErrNotPrivate, st.Mode&0o7777, path)
	}
	return nil
}

// pathErr is a *PathError's bare errno (its path is said already).
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
