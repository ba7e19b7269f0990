package backing

import (
	"io"

	"golang.org/x/sys/unix"
)

// preadFile serves reads with pread(2) on the descriptor.
type preadFile struct {
	*file
}

var (
	_ Source   = (*preadFile)(nil)
	_ FdSource = (*preadFile)(nil)
	_ Adviser  = (*preadFile)(nil)
)

func openPread(path string) (Source, error) {
	b, err := openFile(path, 0)
	if err != nil {
		return nil, err
	}
	return &preadFile{file: b}, nil
}

// ReadAt preads until the clamped range is filled. End of file before the
// size at Open means the file was truncated: ErrFault.
func (s *preadFile) ReadAt(p []byte, off int64) (int, error) { return s.file.pread(p, off) }

// pread reads with pread(2) (both the Pread mode's ReadAt and the Mmap
// mode's large reads): a read that ends early or fails is a *FaultError.
func (s *file) pread(p []byte, off int64) (int, error) {
	want, eof, err := s.span(len(p), off)
	if err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, s.closedError()
	}
	done := 0
	for done < want {
		n, err := unix.Pread(s.fd, p[done:want], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, s.fault(off, int64(want), err)
		}
		if n == 0 {
			return done, s.fault(off, int64(want), nil)
		}
		done += n
	}
	if eof {
		return want, io.EOF
	}
	return want, nil
}

// Fd returns the descriptor.
func (s *preadFile) Fd() (uintptr, bool) { return uintptr(s.fd), true }

// Advise calls posix_fadvise.
func (s *preadFile) Advise(off, n int64, advice Advice) error {
	return s.fadvise(off, n, advice)
}

// Close closes the file. Reads in flight finish first.
func (s *preadFile) Close() error { return s.closeFile(nil) }
