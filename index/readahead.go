package index

import "io"

// ReadAheadBlock is the block a ReadAhead file reads.
const ReadAheadBlock = 64 << 10

// ReadAhead wraps f for a parser that reads many small pieces in file
// order (a zip's local headers, the .npy headers of an .npz's members):
// a read of at most ReadAheadBlock/2 bytes is served from the block of
// f that holds it, read once (aligned, ReadAheadBlock bytes) and kept
// until a read leaves it; a larger read goes to f. An .npz of 300,000
// small members is a thousand reads of f, not a million. It is not safe
// for concurrent use.
func ReadAhead(f File) File {
	if _, ok := f.(*readAhead); ok {
		return f
	}
	return &readAhead{File: f, at: -1}
}

type readAhead struct {
	File
	buf   []byte // the block at at, n bytes of it read
	at    int64
	n     int
	err   error // the block read's error, where it ended early
	reads int64 // reads of f (tests count them)
}

func (r *readAhead) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > ReadAheadBlock/2 || off < 0 {
		r.reads++
		return r.File.ReadAt(p, off)
	}
	done := 0
	for done < len(p) {
		o := off + int64(done)
		if r.at < 0 || o < r.at || o >= r.at+int64(r.n) {
			if r.at == o&^(ReadAheadBlock-1) { // the block held ends before o
				return done, blockErr(r.err)
			}
			if r.buf == nil { // a small file's block is the file
				r.buf = make([]byte, min(ReadAheadBlock, max(r.File.Size(), 1)))
			}
			r.at = o &^ (ReadAheadBlock - 1)
			r.reads++
			r.n, r.err = r.File.ReadAt(r.buf, r.at)
			if o >= r.at+int64(r.n) { // the block ends before o
				return done, blockErr(r.err)
			}
		}
		done += copy(p[done:], r.buf[o-r.at:r.n])
	}
	return done, nil
}

// blockErr is what a read past a short block returns: its error, or
// io.EOF where the block read ended without one.
func blockErr(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}
