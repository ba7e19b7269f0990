package backing

import (
	"bufio"
	"container/list"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/lazyweights/tensorfs/index"
)

// A member's reader: inflating on first read (once, by that reader),
// checking the size and CRC-32 (and decoding a latin-1 member), and
// serving reads from memory or from its file.

// memberSource is one member. Its bytes are in mem or in file once
// inflated; readers hold mu shared while they copy.
type memberSource struct {
	c    *InflateCache
	file MemberFile
	m    Member

	mu      sync.RWMutex
	mem     []byte   // GUARDED_BY(mu)
	cached  *os.File // GUARDED_BY(mu)
	loading *attempt // GUARDED_BY(mu): the inflation under way
	bad     error    // GUARDED_BY(mu): the member's data is bad
	closed  bool     // GUARDED_BY(mu)

	elem    *list.Element // GUARDED_BY(c.mu): in c.mem or c.disk
	stamp   int64         // GUARDED_BY(c.mu): lastUse when last placed in its list
	lastUse atomic.Int64  // monoNow of the last read's start or end
	pins    atomic.Int32  // reads in progress: a file being read is not dropped
}

// attempt is one inflation; err is set before done is closed.
type attempt struct {
	done chan struct{}
	err  error
}

var _ Source = (*memberSource)(nil)

func (s *memberSource) Size() int64 { return s.m.Size }

// Name is "FILE:MEMBER", joined when asked (not held: 100,000 members
// would each hold a copy of the file's path).
func (s *memberSource) Name() string { return s.file.Name() + ":" + s.m.Name }

// ReadAt inflates the member if it is not, then copies.
func (s *memberSource) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("backing: %s: read at negative offset %d", s.Name(), off)
	}
	if off >= s.m.Size {
		return 0, io.EOF
	}
	want := len(p)
	if rest := s.m.Size - off; int64(want) > rest {
		want = int(rest)
	}
	if want == 0 {
		return 0, nil
	}
	s.pins.Add(1)
	defer s.unpin()
	s.lastUse.Store(monoNow())
	for {
		s.mu.RLock()
		switch {
		case s.closed:
			s.mu.RUnlock()
			return 0, fmt.Errorf("backing: %s: %w", s.Name(), os.ErrClosed)
		case s.bad != nil:
			err := s.bad
			s.mu.RUnlock()
			return 0, err
		case s.mem != nil:
			n := copy(p[:want], s.mem[off:])
			s.mu.RUnlock()
			return s.done(n, want, len(p))
		case s.cached != nil:
			n, err := s.cached.ReadAt(p[:want], off)
			s.mu.RUnlock()
			if n < want {
				return n, &MemberError{File: s.file.Name(), Member: s.m.Name, Codec: s.m.Codec, Msg: fmt.Sprintf("reading the inflated member's cache file (%d bytes at byte %d)", want, off), Err: err}
			}
			return s.done(n, want, len(p))
		}
		s.mu.RUnlock()
		if err := s.load(true); err != nil {
			return 0, err
		}
	}
}

// InflateNow decodes src, a member that InflateCache.OpenMember
// returned, if it is not decoded yet, and returns the error its reads
// would return instead of logging it: for a parser that reads the
// member while loading (a .keras zip's deflated model.weights.h5), whose
// error is the load's. Bad data is remembered as on a read. Any other
// source is left alone (nil).
func InflateNow(src Source) error {
	s, ok := src.(*memberSource)
	if !ok {
		return nil
	}
	for {
		s.mu.RLock()
		bad, done := s.bad, s.closed || s.mem != nil || s.cached != nil
		s.mu.RUnlock()
		if bad != nil {
			return bad
		}
		if done {
			return nil
		}
		if err := s.load(false); err != nil {
			return err
		}
	}
}

// done finishes a read of n bytes: it marks the member used and says
// io.EOF where the read ran past the end.
func (s *memberSource) done(n, want, asked int) (int, error) {
	s.lastUse.Store(monoNow())
	if want < asked {
		return n, io.EOF
	}
	return n, nil
}

// load inflates the member, or waits for the inflation under way; an
// error is logged when logged.
func (s *memberSource) load(logged bool) error {
	s.mu.Lock()
	switch {
	case s.closed || s.bad != nil || s.mem != nil || s.cached != nil:
		s.mu.Unlock()
		return nil // ReadAt looks again
	case s.loading != nil:
		a := s.loading
		s.mu.Unlock()
		<-a.done
		return a.err
	}
	a := &attempt{done: make(chan struct{})}
	s.loading = a
	s.mu.Unlock()

	mem, f, bad, err := s.inflate()
	s.mu.Lock()
	s.loading = nil
	if err == nil && s.closed {
		s.c.release(mem != nil, s.m.Size)
		if f != nil {
			f.Close()
		}
	} else if err == nil {
		s.mem, s.cached = mem, f
		s.c.place(s, mem != nil)
	} else if bad {
		s.bad = err
	}
	a.err = err
	close(a.done)
	s.mu.Unlock()
	if err != nil && logged {
		what := "this read fails with EIO; the next read tries again"
		if bad {
			what = "its reads fail with EIO"
		}
		s.c.opts.Logf("tensorfs: %v; %s", err, what)
	}
	return err
}

// readError marks an error of reading the zip file, which the next read
// may not meet again (flate passes it through as it is).
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }

// writeError marks an error of writing the cache file.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

type fileWriter struct{ f *os.File }

func (w *fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = &writeError{err}
	}
	return n, err
}

func (w *fileWriter) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.f.WriteAt(p, off)
	if err != nil {
		err = &writeError{err}
	}
	return n, err
}

type fileReader struct {
	r   io.Reader
	err error
}

func (f *fileReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF {
		f.err = err
		err = &readError{err}
	}
	return n, err
}

// inflate inflates the member into memory or a new file, within the
// cache's limits, by its codec (codec.go). bad reports an error in the
// member's data.
func (s *memberSource) inflate() (mem []byte, f *os.File, bad bool, err error) {
	c, m := s.c, s.m
	// A member of a member (a Latin-1 str in a deflated data.pkl) reads
	// the outer one while it is inflated: have that inflated first and
	// keep it (pinned) until done, so that this one's reservation never
	// waits for room the outer one needs, and count it as held.
	var held int64
	if outer, ok := s.file.(*memberSource); ok {
		outer.pins.Add(1)
		defer outer.unpin()
		if err := outer.load(true); err != nil {
			return s.failed(fail(false, err, "cannot inflate the member it is read from"))
		}
		if outer.c == c && !c.inMemory(outer.m.Size) {
			held = outer.m.Size
		}
	}
	d := &decoding{c: c, file: s.file, size: m.Size}
	inMem := c.inMemory(m.Size)
	if inMem {
		c.reserveMem(m.Size)
		mem = make([]byte, m.Size)
		sw := &sliceWriter{b: mem}
		d.w, d.at = sw, sw
	} else {
		if err := c.reserveDisk(m.Size, true, held); err != nil {
			return s.failed(fail(false, err, "cannot make room to inflate it"))
		}
		if f, err = c.newFile(); err != nil {
			c.release(false, m.Size)
			return s.failed(fail(false, err, "cannot make a file to inflate it into in %s", c.opts.Dir))
		}
		d.at = &fileWriter{f}
		d.w = bufio.NewWriterSize(&fileWriter{f}, 1<<20)
	}
	if fl := m.Codec.decode(d); fl != nil {
		c.release(inMem, m.Size)
		if f != nil {
			f.Close()
		}
		return s.failed(fl)
	}
	c.inflations.Add(1)
	return mem, f, false, nil
}

// failed returns inflate's results for fl: its MemberError.
func (s *memberSource) failed(fl *failure) ([]byte, *os.File, bool, error) {
	return nil, nil, fl.bad, &MemberError{File: s.file.Name(), Member: s.m.Name, Codec: s.m.Codec, Msg: fl.msg, Err: fl.err}
}

type sliceWriter struct {
	b []byte
	n int
}

func (w *sliceWriter) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(w.b)) || int64(len(p)) > int64(len(w.b))-off {
		return 0, io.ErrShortWrite
	}
	return copy(w.b[off:], p), nil
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	n := copy(w.b[w.n:], p)
	w.n += n
	if n < len(p) {
		return n, io.ErrShortWrite
	}
	return n, nil
}

// Close frees the member's memory or file. Reads after Close fail with
// an error wrapping os.ErrClosed. The zip file is not closed.
func (s *memberSource) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	mem, f := s.mem != nil, s.cached
	s.mem, s.cached = nil, nil
	s.mu.Unlock()
	if f != nil {
		f.Close()
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.elem != nil {
		if mem {
			c.mem.Remove(s.elem)
			c.memUsed -= s.m.Size
		} else {
			c.disk.Remove(s.elem)
			c.diskUsed -= s.m.Size
		}
		s.elem = nil
		c.signal()
	}
	return nil
}

// decodeWriter passes a Decode's bytes on to w, at most left of them: a
// decoder that writes more than the member's size is refused at the
// first byte over, so memory and disk stay within what was reserved. It
// is an index.DecodeTarget: the decoder may write its bytes at their
// offsets (WriteAt, within the member's size; a decoder uses Write or
// WriteAt, not both) and take working memory from the cache's memory
// budget (Scratch), released when Decode returns.
type decodeWriter struct {
	w       io.Writer
	at      io.WriterAt
	c       *InflateCache
	size    int64
	left    int64
	scratch int64 // bytes of Scratch reserved
}

var _ index.DecodeTarget = (*decodeWriter)(nil)

func (d *decodeWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > d.left {
		return 0, fmt.Errorf("decodes to more than its %d bytes", d.left)
	}
	n, err := d.w.Write(p)
	d.left -= int64(n)
	if err != nil {
		if _, ok := err.(*writeError); !ok {
			err = &writeError{err}
		}
	}
	return n, err
}

func (d *decodeWriter) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off > d.size || int64(len(p)) > d.size-off || int64(len(p)) > d.left {
		return 0, fmt.Errorf("decodes past its %d bytes", d.size)
	}
	n, err := d.at.WriteAt(p, off)
	d.left -= int64(n)
	if err != nil {
		if _, ok := err.(*writeError); !ok {
			err = &writeError{err}
		}
	}
	return n, err
}

// Scratch returns n bytes of working memory counted in the cache's
// memory budget (members in memory spilled to files to make room);
// more than the whole budget is an error.
func (d *decodeWriter) Scratch(n int64) ([]byte, error) {
	if n < 0 || n > d.c.opts.MemLimit-d.scratch {
		return nil, fmt.Errorf("decoding it takes %d bytes of memory, more than the %d the cache of decoded members may hold in memory (tensorfs --inflate-mem)", d.scratch+n, d.c.opts.MemLimit)
	}
	d.c.reserveMem(n)
	d.scratch += n
	d.c.scratchBytes.Add(n)
	return make([]byte, n), nil
}

// releaseScratch gives back what Scratch reserved.
func (d *decodeWriter) releaseScratch() {
	if d.scratch > 0 {
		d.c.release(true, d.scratch)
		d.scratch = 0
	}
}
