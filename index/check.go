package index

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// Check is a digest of bytes [Offset, Offset+Size) of the tensor's
// source that the checkpoint records: the CRC-32 (IEEE) a zip archive
// records for a stored member (an .npz member: its .npy header and the
// tensor's bytes), or the SHA-1 an ONNX tensor's external_data
// "checksum" records of exactly the tensor's bytes. A reader that reads
// the tensor whole verifies it (Verify, CheckStream); a partial read
// cannot.
type Check struct {
	// Member names what the digest covers in messages: the zip member's
	// name, or (SHA1) the external data file's location.
	Member       string
	Offset, Size int64
	CRC32        uint32
	// SHA1, when set, is the digest instead of CRC32 (20 bytes).
	SHA1 []byte
}

// IsSHA1 reports whether the digest is a SHA-1 (else a CRC-32).
func (c *Check) IsSHA1() bool { return c.SHA1 != nil }

// newHash returns the hash c's digest is made with.
func (c *Check) newHash() hash.Hash {
	if c.IsSHA1() {
		return sha1.New()
	}
	return crc32.NewIEEE()
}

// what names the checked bytes in messages.
func (c *Check) what() string {
	if c.IsSHA1() {
		return "external data in " + c.Member
	}
	return "member " + c.Member
}

// checkChunk is how much Verify reads at a time.
const checkChunk = 1 << 20

// Verify reads the checked bytes of t (when t.Check is set) from r, its
// source, and reports a mismatch of their digest as one line naming the
// member or data file and both digests (the caller names the file and
// tensor). Nothing is checked when t.Check is nil.
func (t *Tensor) Verify(r io.ReaderAt) error {
	c := t.Check
	if c == nil {
		return nil
	}
	buf := make([]byte, min(checkChunk, max(c.Size, 1)))
	h := c.newHash()
	for off := int64(0); off < c.Size; {
		n := int(min(int64(len(buf)), c.Size-off))
		got, err := r.ReadAt(buf[:n], c.Offset+off)
		if got < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%s: reading at byte %d: %v", c.what(), c.Offset+off+int64(got), err)
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	return c.mismatch(h)
}

func (c *Check) mismatch(h hash.Hash) error {
	got := h.Sum(nil)
	if c.IsSHA1() {
		if !bytes.Equal(got, c.SHA1) {
			return fmt.Errorf("%s: SHA-1 mismatch: the model's external_data checksum is %x, the tensor's bytes hash to %x", c.what(), c.SHA1, got)
		}
		return nil
	}
	if sum := binary.BigEndian.Uint32(got); sum != c.CRC32 {
		return fmt.Errorf("%s: Bad CRC-32: the zip records %08x, its bytes sum to %08x", c.what(), c.CRC32, sum)
	}
	return nil
}

// CheckStream verifies t's checked bytes while the tensor's pass in
// order: the bytes before the tensor's (an .npy header) are read from
// the source at the start, those after it at Done, the tensor's are
// given to Write as they are read.
type CheckStream struct {
	t    *Tensor
	r    io.ReaderAt
	h    hash.Hash
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
	s := &CheckStream{t: t, r: r, h: c.newHash()}
	if t.Contiguous() && t.Offset >= c.Offset && t.Offset+t.Size <= c.Offset+c.Size {
		s.ok = s.span(c.Offset, t.Offset-c.Offset)
	}
	return s
}

// span hashes [off, off+n) of the source.
func (s *CheckStream) span(off, n int64) bool {
	if n == 0 {
		return true
	}
	if n > checkChunk {
		return false // not an .npy header: Verify reads it all
	}
	buf := make([]byte, n)
	if got, _ := s.r.ReadAt(buf, off); int64(got) < n {
		return false // Verify reports it
	}
	s.h.Write(buf)
	return true
}

// Write hashes p, the tensor's bytes at off (relative to the tensor);
// bytes out of order make Done read the checked bytes again.
func (s *CheckStream) Write(p []byte, off int64) {
	if !s.ok || off != s.next {
		s.ok = false
		return
	}
	s.h.Write(p)
	s.next += int64(len(p))
}

// Done verifies the digest once the whole tensor has passed through
// Write, in order (otherwise it reads the checked bytes again).
func (s *CheckStream) Done() error {
	c, t := s.t.Check, s.t
	if s.ok && s.next == t.Size {
		end := t.Offset + t.Size
		if s.span(end, c.Offset+c.Size-end) {
			return c.mismatch(s.h)
		}
	}
	return t.Verify(s.r)
}
