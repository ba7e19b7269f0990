package backing

import (
	"bufio"
	"compress/flate"
	"container/list"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Deflated members: a source that is one deflate-compressed member of a
// zip file (an .npz written by numpy.savez_compressed), served inflated.
//
// A member is inflated once, on its first read, by that reader; readers
// that come meanwhile wait for it. The inflated bytes go to an
// InflateCache: into memory when the member is at most a quarter of the
// cache's memory limit, else into an unlinked temporary file in the
// cache's directory. Memory is bounded by the limit for all members of
// the process together: the least recently read members beyond it are
// moved (spilled) to files. Files are bounded by the disk limit: the
// least recently read ones beyond it are dropped, and inflated again on
// their next read. A member larger than the disk limit cannot be served
// and OpenMember refuses it; one that fits waits for room while the limit
// is taken by members being inflated or read (see reserveDisk), at most
// InflateOptions.Wait.
//
// After inflating, the size and the CRC-32 are checked against the zip's
// directory: the inflated bytes are served only when both match, and the
// stream is never inflated past the declared size (a zip bomb costs at
// most the declared size, which the caller has bounded). A member whose
// data is bad (corrupt deflate data, a size or CRC-32 mismatch) fails
// every read with that error, logged once; a failure to read the zip
// file or to write the cache file is not remembered: the next read tries
// again (and logs again).

// Defaults of InflateOptions.
const (
	// DefaultInflateMem is the memory for inflated members, all together.
	DefaultInflateMem = 256 << 20
	// DefaultInflateDisk is the disk for inflated members, all together,
	// and so the largest member that can be served.
	DefaultInflateDisk = 16 << 30
	// DefaultInflateWait bounds how long a member waits for room on
	// disk while other members are being inflated or read.
	DefaultInflateWait = 5 * time.Minute
)

// InflateOptions configure an InflateCache. Zero fields take the
// defaults; a negative MemLimit keeps nothing in memory.
type InflateOptions struct {
	MemLimit  int64  // bytes of inflated members in memory (DefaultInflateMem)
	DiskLimit int64  // bytes of inflated members in files (DefaultInflateDisk)
	Dir       string // where the files are made ("": os.TempDir())
	// Wait bounds how long inflating a member waits for room within
	// DiskLimit, taken by members being inflated or read meanwhile
	// (DefaultInflateWait).
	Wait time.Duration
	// Logf logs the one line said when a member cannot be inflated
	// (default log.Printf).
	Logf func(format string, args ...any)
}

// Member describes a deflated member of a zip file, as the zip's central
// directory gives it, or (Latin1) the bytes of a numpy array that a
// pickle holds as a Latin-1 str in UTF-8.
type Member struct {
	Name           string // the member's name in the zip (Latin1: the tensor's), for messages
	Offset         int64  // first byte of the compressed data in the file
	CompressedSize int64
	Size           int64 // inflated
	CRC32          uint32
	// Latin1: the CompressedSize bytes at Offset are UTF-8 of code points
	// below 256 (pickle protocol 2's _codecs.encode(str, "latin1")), each
	// one byte of the member; they must decode to exactly Size bytes. No
	// CRC-32: the encoding itself is checked, byte by byte.
	Latin1 bool
}

// what names m in messages.
func (m Member) what() string {
	if m.Latin1 {
		return "tensor " + strconv.Quote(m.Name)
	}
	return "member " + m.Name
}

// InflateCache holds the inflated members of the sources it opened. Safe
// for concurrent use.
type InflateCache struct {
	opts InflateOptions

	mu       sync.Mutex
	memUsed  int64     // GUARDED_BY(mu): members in memory and reservations
	diskUsed int64     // GUARDED_BY(mu): members in files and reservations
	mem      list.List // GUARDED_BY(mu): of *memberSource in memory, most recent first
	disk     list.List // GUARDED_BY(mu): of *memberSource in files, most recent first
	// changed is closed (and replaced) when room may have come: a
	// reservation released, a member placed or closed. GUARDED_BY(mu)
	changed chan struct{}

	inflations atomic.Int64
	spills     atomic.Int64
	drops      atomic.Int64
}

// NewInflateCache returns a cache with the given options.
func NewInflateCache(o InflateOptions) *InflateCache {
	if o.MemLimit == 0 {
		o.MemLimit = DefaultInflateMem
	}
	if o.MemLimit < 0 {
		o.MemLimit = 0
	}
	if o.DiskLimit <= 0 {
		o.DiskLimit = DefaultInflateDisk
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.Wait <= 0 {
		o.Wait = DefaultInflateWait
	}
	return &InflateCache{opts: o, changed: make(chan struct{})}
}

var defaultInflate atomic.Pointer[InflateCache]

// DefaultInflateCache is the process's cache, which index.Load opens
// deflated members with. SetInflateOptions replaces it.
func DefaultInflateCache() *InflateCache {
	if c := defaultInflate.Load(); c != nil {
		return c
	}
	defaultInflate.CompareAndSwap(nil, NewInflateCache(InflateOptions{}))
	return defaultInflate.Load()
}

// SetInflateOptions makes the default cache one with options o, for the
// members opened from then on.
func SetInflateOptions(o InflateOptions) { defaultInflate.Store(NewInflateCache(o)) }

// Options returns the cache's options, defaults filled in.
func (c *InflateCache) Options() InflateOptions { return c.opts }

// InflateStats counts what a cache did.
type InflateStats struct {
	Inflations int64 // members inflated (each attempt that succeeded)
	Spills     int64 // members moved from memory to a file
	Drops      int64 // files dropped for room
	MemBytes   int64 // in memory now (with reservations)
	DiskBytes  int64 // in files now (with reservations)
}

// Stats returns the counts so far.
func (c *InflateCache) Stats() InflateStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return InflateStats{Inflations: c.inflations.Load(), Spills: c.spills.Load(), Drops: c.drops.Load(), MemBytes: c.memUsed, DiskBytes: c.diskUsed}
}

// MemberFile is what a member is read from: the zip file.
type MemberFile interface {
	io.ReaderAt
	Name() string
}

// MemberError is the error of a member that cannot be served. It wraps
// ErrFault (EIO through FUSE) and the cause, if any.
type MemberError struct {
	File, Member string
	Latin1       bool // Member is a tensor's name (Member.Latin1)
	Msg          string
	Err          error
}

func (e *MemberError) Error() string {
	s := e.File + ": " + Member{Name: e.Member, Latin1: e.Latin1}.what() + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *MemberError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrFault, e.Err}
	}
	return []error{ErrFault}
}

// OpenMember returns the source of member m of file, inflated on first
// read. The source's Name is FILE:MEMBER and its Size m.Size; it reads
// file only while inflating and never closes it (file must stay open
// while the source is read). A member larger than the cache's disk limit
// is refused.
func (c *InflateCache) OpenMember(file MemberFile, m Member) (Source, error) {
	if m.Size < 0 || m.CompressedSize < 0 || m.Offset < 0 {
		return nil, &MemberError{File: file.Name(), Member: m.Name, Latin1: m.Latin1, Msg: "negative offset or size"}
	}
	if !c.inMemory(m.Size) && m.Size > c.opts.DiskLimit {
		return nil, &MemberError{File: file.Name(), Member: m.Name, Latin1: m.Latin1, Msg: fmt.Sprintf("inflates to %d bytes, more than the %d bytes of disk the cache of inflated members may use (tensorfs --inflate-disk)", m.Size, c.opts.DiskLimit)}
	}
	return &memberSource{c: c, file: file, m: m, name: file.Name() + ":" + m.Name}, nil
}

// inMemory reports whether a member of size bytes is inflated into
// memory: up to a quarter of the memory limit.
func (c *InflateCache) inMemory(size int64) bool { return size <= c.opts.MemLimit/4 }

// memberSource is one member. Its bytes are in mem or in file once
// inflated; readers hold mu shared while they copy.
type memberSource struct {
	c    *InflateCache
	file MemberFile
	m    Member
	name string

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

func (s *memberSource) Size() int64  { return s.m.Size }
func (s *memberSource) Name() string { return s.name }

// ReadAt inflates the member if it is not, then copies.
func (s *memberSource) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("backing: %s: read at negative offset %d", s.name, off)
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
			return 0, fmt.Errorf("backing: %s: %w", s.name, os.ErrClosed)
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
				return n, &MemberError{File: s.file.Name(), Member: s.m.Name, Latin1: s.m.Latin1, Msg: fmt.Sprintf("reading the inflated member's cache file (%d bytes at byte %d)", want, off), Err: err}
			}
			return s.done(n, want, len(p))
		}
		s.mu.RUnlock()
		if err := s.load(); err != nil {
			return 0, err
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

// load inflates the member, or waits for the inflation under way.
func (s *memberSource) load() error {
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
	if err != nil {
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
// cache's limits. bad reports an error in the member's data.
func (s *memberSource) inflate() (mem []byte, f *os.File, bad bool, err error) {
	c, m := s.c, s.m
	fail := func(bad bool, cause error, format string, args ...any) ([]byte, *os.File, bool, error) {
		return nil, nil, bad, &MemberError{File: s.file.Name(), Member: m.Name, Latin1: m.Latin1, Msg: fmt.Sprintf(format, args...), Err: cause}
	}
	inMem := c.inMemory(m.Size)
	var w io.Writer
	if inMem {
		c.reserveMem(m.Size)
		mem = make([]byte, m.Size)
		w = &sliceWriter{b: mem}
	} else {
		if err := c.reserveDisk(m.Size, true); err != nil {
			return fail(false, err, "cannot make room to inflate it")
		}
		if f, err = c.newFile(); err != nil {
			c.release(false, m.Size)
			return fail(false, err, "cannot make a file to inflate it into in %s", c.opts.Dir)
		}
		w = bufio.NewWriterSize(&fileWriter{f}, 1<<20)
	}
	undo := func() {
		c.release(inMem, m.Size)
		if f != nil {
			f.Close()
		}
	}
	src := &fileReader{r: io.NewSectionReader(s.file, m.Offset, m.CompressedSize)}
	if m.Latin1 {
		if err := latin1Decode(w, src, m); err != nil {
			undo()
			var re *readError
			var we *writeError
			switch {
			case errors.As(err, &re):
				return fail(false, re.err, "cannot read its Latin-1 str (%d bytes at byte %d)", m.CompressedSize, m.Offset)
			case errors.As(err, &we):
				return fail(false, we.err, "cannot write the decoded bytes to their cache file in %s", c.opts.Dir)
			}
			return fail(true, nil, "%v", err)
		}
		if bw, ok := w.(*bufio.Writer); ok {
			if err := bw.Flush(); err != nil {
				undo()
				return fail(false, err, "cannot write the decoded bytes to their cache file in %s", c.opts.Dir)
			}
		}
		c.inflations.Add(1)
		return mem, f, false, nil
	}
	zr := flate.NewReader(bufio.NewReaderSize(src, 1<<20))
	defer zr.Close()
	h := crc32.NewIEEE()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(zr, m.Size))
	var extra [1]byte
	if err == nil && n == m.Size {
		// Nothing may follow the declared size.
		var k int
		if k, err = zr.Read(extra[:]); k > 0 {
			undo()
			return fail(true, nil, "inflates to more than the %d bytes the zip directory declares", m.Size)
		}
		if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		undo()
		var re *readError
		if errors.As(err, &re) {
			return fail(false, re.err, "cannot read its compressed data (%d bytes at byte %d)", m.CompressedSize, m.Offset)
		}
		var we *writeError
		if errors.As(err, &we) {
			return fail(false, we.err, "cannot write the inflated member to its cache file in %s", c.opts.Dir)
		}
		var ce flate.CorruptInputError
		if errors.As(err, &ce) {
			return fail(true, nil, "the deflate data is corrupt at byte %d of it (the compressed data starts at byte %d of the file)", int64(ce), m.Offset)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(true, nil, "the deflate data ends early, after %d of the %d bytes the zip directory declares", n, m.Size)
		}
		return fail(true, err, "cannot inflate it")
	}
	if n != m.Size {
		undo()
		return fail(true, nil, "inflates to %d bytes, not the %d the zip directory declares", n, m.Size)
	}
	if bw, ok := w.(*bufio.Writer); ok {
		if err := bw.Flush(); err != nil {
			undo()
			return fail(false, err, "cannot write the inflated member to its cache file in %s", c.opts.Dir)
		}
	}
	if sum := h.Sum32(); sum != m.CRC32 {
		undo()
		return fail(true, nil, "CRC-32 of the inflated bytes is %08x, the zip directory says %08x", sum, m.CRC32)
	}
	c.inflations.Add(1)
	return mem, f, false, nil
}

// latin1Decode writes to w the bytes of the Latin-1 str whose UTF-8 src
// gives (m.CompressedSize bytes at m.Offset of the file): each code point
// below 256 is one byte. It refuses any other code point, invalid UTF-8,
// a character cut off, and a decoded length other than m.Size, saying at
// which byte of the file. Errors of src and w come back as they are
// (readError, writeError).
func latin1Decode(w io.Writer, src io.Reader, m Member) error {
	in := make([]byte, 1<<20)
	out := make([]byte, 0, len(in))
	var n, pos int64 // bytes decoded, bytes read
	lead := -1       // the lead byte waiting for its continuation, or -1
	for {
		k, err := src.Read(in)
		out = out[:0]
		for i, c := range in[:k] {
			switch {
			case lead >= 0:
				if c < 0x80 || c > 0xBF {
					return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) has invalid UTF-8 at byte %d", m.CompressedSize, m.Offset, m.Offset+pos+int64(i)-1)
				}
				out = append(out, byte(lead&3)<<6|c&0x3F)
				lead = -1
			case c < 0x80:
				out = append(out, c)
			case c == 0xC2 || c == 0xC3:
				lead = int(c)
			default:
				return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) has %s at byte %d", m.CompressedSize, m.Offset, latin1Bad(c), m.Offset+pos+int64(i))
			}
		}
		pos += int64(k)
		if n+int64(len(out)) > m.Size {
			return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) decodes to more than the array's %d bytes", m.CompressedSize, m.Offset, m.Size)
		}
		if len(out) > 0 {
			if _, werr := w.Write(out); werr != nil {
				return werr
			}
			n += int64(len(out))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	switch {
	case pos < m.CompressedSize:
		return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) ends early, after %d bytes (the file is shorter)", m.CompressedSize, m.Offset, pos)
	case lead >= 0:
		return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) ends inside a character at byte %d", m.CompressedSize, m.Offset, m.Offset+pos-1)
	case n != m.Size:
		return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) decodes to %d bytes, not the array's %d", m.CompressedSize, m.Offset, n, m.Size)
	}
	return nil
}

// latin1Bad says what byte c is where a Latin-1 character may start.
func latin1Bad(c byte) string {
	switch {
	case c >= 0xC4 && c <= 0xF4:
		return fmt.Sprintf("a code point above U+00FF, which is not Latin-1 (lead byte 0x%02X)", c)
	case c >= 0x80 && c <= 0xBF:
		return fmt.Sprintf("a stray continuation byte 0x%02X (invalid UTF-8)", c)
	}
	return fmt.Sprintf("byte 0x%02X (invalid UTF-8)", c)
}

type sliceWriter struct {
	b []byte
	n int
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	n := copy(w.b[w.n:], p)
	w.n += n
	if n < len(p) {
		return n, io.ErrShortWrite
	}
	return n, nil
}

// newFile makes an unlinked read-write file in the cache's directory.
func (c *InflateCache) newFile() (*os.File, error) {
	fd, err := unix.Open(c.opts.Dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), c.opts.Dir+"/(inflated member)"), nil
	}
	f, err := os.CreateTemp(c.opts.Dir, ".tensorfs-inflated-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// reserveMem counts size bytes of memory, spilling the least recently
// used members to files to stay within the limit.
func (c *InflateCache) reserveMem(size int64) {
	c.mu.Lock()
	c.memUsed += size
	victims := c.evict(&c.mem, &c.memUsed, c.opts.MemLimit)
	c.mu.Unlock()
	for _, v := range victims {
		c.spill(v)
	}
}

// evict takes least recently used members off l until *used <= limit
// (a member read since it was placed goes to the front instead) and
// returns them, their bytes no longer counted. REQUIRES c.mu.
func (c *InflateCache) evict(l *list.List, used *int64, limit int64) []*memberSource {
	var out []*memberSource
	for passes := l.Len(); *used > limit && l.Len() > 0; {
		e := l.Back()
		v := e.Value.(*memberSource)
		if last := v.lastUse.Load(); last != v.stamp && passes > 0 {
			v.stamp = last
			l.MoveToFront(e)
			passes--
			continue
		}
		l.Remove(e)
		v.elem = nil
		*used -= v.m.Size
		out = append(out, v)
	}
	return out
}

// place puts s, just inflated, at the front of its list.
func (c *InflateCache) place(s *memberSource, inMem bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := &c.disk
	if inMem {
		l = &c.mem
	}
	s.stamp = s.lastUse.Load()
	s.elem = l.PushFront(s)
	c.signal()
}

// release uncounts a reservation that was not placed.
func (c *InflateCache) release(inMem bool, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inMem {
		c.memUsed -= size
	} else {
		c.diskUsed -= size
	}
	c.signal()
}

// spill moves member v, taken off the memory list, to a file; where that
// cannot be done, its bytes are dropped (it is inflated again when read).
func (c *InflateCache) spill(v *memberSource) {
	v.mu.Lock()
	defer v.mu.Unlock()
	data := v.mem
	if data == nil || v.closed {
		return
	}
	v.mem = nil
	// No waiting here (a reservation is under way, and readers of v
	// wait on v.mu): without room now, the bytes are dropped.
	if err := c.reserveDisk(int64(len(data)), false); err != nil {
		return
	}
	f, err := c.newFile()
	if err == nil {
		if _, err = f.WriteAt(data, 0); err != nil {
			f.Close()
		}
	}
	if err != nil {
		c.release(false, int64(len(data)))
		return
	}
	v.cached = f
	c.spills.Add(1)
	c.place(v, false)
}

func (c *InflateCache) dropAll(victims []*memberSource) {
	for _, v := range victims {
		v.mu.Lock()
		if v.cached != nil {
			v.cached.Close()
			v.cached = nil
			c.drops.Add(1)
		}
		v.mu.Unlock()
	}
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
