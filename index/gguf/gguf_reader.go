package gguf

// The GGUF header reader: a sequential window over the file whose reads
// are checked against the bytes left.

import (
	"fmt"
	"io"

	"github.com/lazyweights/tensorfs/index"
)

// ggufReader reads the header sequentially through a window of the file.
type ggufReader struct {
	f     index.File
	name  string
	size  int64
	pos   int64  // file offset of the next byte
	buf   []byte // file bytes [bufAt, bufAt+len(buf))
	bufAt int64
	raw   []byte // backing store of buf

	// what is being read, for a truncation error (formatted lazily):
	// "header", or what+idx and the key or tensor name once read
	what   string
	idx    uint64
	key    string
	hasKey bool
}

// at sets what is being read.
func (r *ggufReader) at(what string, idx uint64) {
	r.what, r.idx, r.key, r.hasKey = what, idx, "", false
}

// named adds the key or tensor name of the entry being read.
func (r *ggufReader) named(key string) { r.key, r.hasKey = key, true }

func (r *ggufReader) left() int64 { return r.size - r.pos }

// where names the key or tensor being read, for FormatError.Where.
func (r *ggufReader) where() string {
	switch {
	case !r.hasKey:
		return ""
	case r.what == "metadata entry":
		return "key " + ggufQuote(r.key)
	}
	return "tensor " + ggufQuote(r.key)
}

func (r *ggufReader) context() string {
	if r.what == "header" {
		return r.what
	}
	s := fmt.Sprintf("%s %d", r.what, r.idx)
	if r.hasKey && r.what == "metadata entry" {
		s += " (key " + ggufQuote(r.key) + ")"
	} else if r.hasKey {
		s += " (" + ggufQuote(r.key) + ")"
	}
	return s
}

// next returns the next n bytes, valid until the following call.
func (r *ggufReader) next(n int64) ([]byte, error) {
	if n < 0 || n > r.left() {
		return nil, index.Errorf(r.name, r.pos, "gguf: file truncated in %s: %d bytes needed, %d left (file is %d bytes)", r.context(), n, r.left(), r.size)
	}
	if r.pos >= r.bufAt && r.pos+n <= r.bufAt+int64(len(r.buf)) {
		s := r.buf[r.pos-r.bufAt:][:n]
		r.pos += n
		return s, nil
	}
	if n > int64(len(r.raw)) {
		// a long string: checked against the file's size above
		b := make([]byte, n)
		if err := r.readAt(b, r.pos); err != nil {
			return nil, err
		}
		r.pos += n
		return b, nil
	}
	m := min(int64(len(r.raw)), r.left())
	if err := r.readAt(r.raw[:m], r.pos); err != nil {
		return nil, err
	}
	r.buf, r.bufAt = r.raw[:m], r.pos
	s := r.buf[:n]
	r.pos += n
	return s, nil
}

func (r *ggufReader) readAt(b []byte, off int64) error {
	n, err := r.f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return index.Errorf(r.name, off, "gguf: cannot read %d bytes: %v", len(b), err)
}

func (r *ggufReader) u32() (uint32, error) {
	b, err := r.next(4)
	if err != nil {
		return 0, err
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24, nil
}

func (r *ggufReader) u64() (uint64, error) {
	b, err := r.next(8)
	if err != nil {
		return 0, err
	}
	return ggufLE64(b), nil
}

func ggufLE64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// str reads a string of at most maxLen bytes (0: bounded by the file only).
func (r *ggufReader) str(maxLen int64, what string) (string, error) {
	n, err := r.strLen(maxLen, what)
	if err != nil {
		return "", err
	}
	b, err := r.next(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// strLen reads a string's length, checked against maxLen (0: no limit)
// and the bytes left.
func (r *ggufReader) strLen(maxLen int64, what string) (int64, error) {
	at := r.pos
	n, err := r.u64()
	if err != nil {
		return 0, err
	}
	if n > uint64(r.left()) {
		return 0, &index.FormatError{File: r.name, Offset: at, Where: r.where(), Msg: fmt.Sprintf("gguf: %s length %d runs past the end of the file (%d bytes left)", what, n, r.left())}
	}
	if maxLen > 0 && n > uint64(maxLen) {
		return 0, &index.FormatError{File: r.name, Offset: at, Where: r.where(), Msg: fmt.Sprintf("gguf: %s length %d is over the limit of %d bytes", what, n, maxLen)}
	}
	return int64(n), nil
}

// skip moves past n bytes without reading them.
func (r *ggufReader) skip(n int64) error {
	if n < 0 || n > r.left() {
		return index.Errorf(r.name, r.pos, "gguf: file truncated in %s: %d bytes needed, %d left (file is %d bytes)", r.context(), n, r.left(), r.size)
	}
	r.pos += n
	return nil
}
