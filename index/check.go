package index

import (
	"fmt"
	"hash/crc32"
	"io"
)

// Check is the CRC-32 (IEEE) that a zip archive records for a stored
// member: the member is bytes [Offset, Offset+Size) of the tensor's
// source, its .npy header and the tensor's bytes. A reader that reads
// the tensor whole verifies it (Verify); a partial read cannot.
type Check struct {
	Member       string // the member's name in the zip
	Offset, Size int64
	CRC32        uint32
}

// checkChunk is how much Verify reads at a time.
const checkChunk = 1 << 20

// Verify reads the member of t (when t.Check is set) from r, its
// source, and reports a mismatch of its CRC-32 as one line naming the
// member (the caller names the file). Nothing is checked when t.Check
// is nil.
func (t *Tensor) Verify(r io.ReaderAt) error {
	c := t.Check
	if c == nil {
		return nil
	}
	buf := make([]byte, min(checkChunk, max(c.Size, 1)))
	var sum uint32
	for off := int64(0); off < c.Size; {
		n := int(min(int64(len(buf)), c.Size-off))
		got, err := r.ReadAt(buf[:n], c.Offset+off)
		if got < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("member %s: reading at byte %d: %v", c.Member, c.Offset+off+int64(got), err)
		}
		sum = crc32.Update(sum, crc32.IEEETable, buf[:n])
		off += int64(n)
	}
	return c.mismatch(sum)
}

func (c *Check) mismatch(sum uint32) error {
	if sum != c.CRC32 {
		return fmt.Errorf("member %s: Bad CRC-32: the zip records %08x, its bytes sum to %08x", c.Member, c.CRC32, sum)
	}
	return nil
}

// CheckStream verifies t's member while its bytes pass in order: the
// bytes before the tensor's (the .npy header) are read from the source
// at the start, those after it at Done, the tensor's are given to Write
// as they are read.
type CheckStream struct {
	t    *Tensor
	r    io.ReaderAt
	sum  uint32
	next int64 // the next byte of the tensor Write expects
	ok   bool  // every byte so far hashed in order
}

// NewCheckStream returns a CheckStream for t read from r; nil when t
// has no Check.
func NewCheckStream(t *Tensor, r io.ReaderAt) *CheckStream {
	c := t.Check
	if c == nil {
		return nil
	}
	s := &CheckStream{t: t, r: r}
	if t.Contiguous() && t.Offset >= c.Offset && t.Offset+t.Size <= c.Offset+c.Size {
		s.sum, s.ok = s.span(0, c.Offset, t.Offset-c.Offset)
	}
	return s
}

// span hashes [off, off+n) of the source onto sum.
func (s *CheckStream) span(sum uint32, off, n int64) (uint32, bool) {
	if n == 0 {
		return sum, true
	}
	if n > checkChunk {
		return sum, false // not an .npy header: Verify reads it all
	}
	buf := make([]byte, n)
	if got, _ := s.r.ReadAt(buf, off); int64(got) < n {
		return sum, false // Verify reports it
	}
	return crc32.Update(sum, crc32.IEEETable, buf), true
}

// Write hashes p, the tensor's bytes at off (relative to the tensor);
// bytes out of order make Done read the member again.
func (s *CheckStream) Write(p []byte, off int64) {
	if !s.ok || off != s.next {
		s.ok = false
		return
	}
	s.sum = crc32.Update(s.sum, crc32.IEEETable, p)
	s.next += int64(len(p))
}

// Done verifies the member once the whole tensor has passed through
// Write, in order (otherwise it reads the member again).
func (s *CheckStream) Done() error {
	c, t := s.t.Check, s.t
	if s.ok && s.next == t.Size {
		end := t.Offset + t.Size
		if sum, ok := s.span(s.sum, end, c.Offset+c.Size-end); ok {
			return c.mismatch(sum)
		}
	}
	return t.Verify(s.r)
}
