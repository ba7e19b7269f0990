package backing

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Reopen opens the file that s reads once more, in opts' mode: the very
// file s opened (its descriptor's inode, through /proc/self/fd), never
// whatever s's name names now, so a checkpoint replaced by rename after
// it was validated is not read in its place. The new source has s's name
// and s's size (the size validated); a file that shrank since is refused.
// s must be a local file (Open's, or a ForParsing view of one), else the
// error wraps ErrNotFile; closing either leaves the other open.
func Reopen(s Source, opts Options) (Source, error) {
	b, ok := Unwrap(s).(interface{ base() *file })
	if !ok {
		return nil, fmt.Errorf("backing: %s: %w", s.Name(), ErrNotFile)
	}
	f := b.base()
	// Shared: f's descriptor cannot be closed (and its number reused)
	// while it is opened again.
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return nil, f.closedError()
	}
	r, err := Open("/proc/self/fd/"+strconv.Itoa(f.fd), opts)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot open it again: %w", f.name, err)
	}
	rb := r.(interface{ base() *file }).base()
	rb.name = f.name
	if rb.size < f.size {
		r.Close()
		return nil, fmt.Errorf("%s: %w: %d bytes now, %d when it was validated", f.name, ErrFault, rb.size, f.size)
	}
	rb.size = f.size
	return r, nil
}

// ErrNotFile: Reopen of a source that is no local file (a member, a
// remote object, a source made of others).
var ErrNotFile = errors.New("not a local file, cannot be opened again")

// base gives Reopen the descriptor and size every mode shares.
func (b *file) base() *file { return b }
