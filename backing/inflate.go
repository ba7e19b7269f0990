package backing

import (
	"container/list"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"
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

// Member describes a member of a file that is served decoded: a zip's
// deflated member as its central directory gives it, a zstd stream's
// storage record, the bytes of a numpy array that a pickle holds as a
// Latin-1 str in UTF-8, a dataset that its format's decoder writes. Its
// Codec says which, where its bytes are and how they are checked
// (codec.go).
type Member struct {
	Name  string // the member's name in the zip (Latin1, Decoded: the tensor's), for messages
	Size  int64  // decoded
	Codec Codec
}

// what names m in messages, as its codec says.
func (m Member) what() string {
	if m.Codec == nil {
		return "member " + m.Name
	}
	return m.Codec.what(m.Name)
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
	// scratchBytes counts the working memory decoders took from the
	// memory budget (index.DecodeTarget.Scratch), in all.
	scratchBytes atomic.Int64
	spills       atomic.Int64
	drops        atomic.Int64
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

// DefaultInflateCache is the process's cache: source.Load passes it to
// formats.Load, which opens deflated members with it. SetInflateOptions replaces it.
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
	// ScratchBytes is the working memory decoders took from the memory
	// budget (index.DecodeTarget.Scratch), in all.
	ScratchBytes int64
}

// Stats returns the counts so far.
func (c *InflateCache) Stats() InflateStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return InflateStats{Inflations: c.inflations.Load(), Spills: c.spills.Load(), Drops: c.drops.Load(), MemBytes: c.memUsed, DiskBytes: c.diskUsed, ScratchBytes: c.scratchBytes.Load()}
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
	Codec        Codec // the member's, which names it (nil: "member NAME")
	Msg          string
	Err          error
}

func (e *MemberError) Error() string {
	s := e.File + ": " + Member{Name: e.Member, Codec: e.Codec}.what() + ": " + e.Msg
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
	if m.Codec == nil {
		return nil, &MemberError{File: file.Name(), Member: m.Name, Msg: "internal error: a member without its codec"}
	}
	if msg := m.Codec.check(); m.Size < 0 || msg != "" {
		if msg == "" {
			msg = negativeSize
		}
		return nil, &MemberError{File: file.Name(), Member: m.Name, Codec: m.Codec, Msg: msg}
	}
	if !c.inMemory(m.Size) && m.Size > c.opts.DiskLimit {
		return nil, &MemberError{File: file.Name(), Member: m.Name, Codec: m.Codec, Msg: fmt.Sprintf("inflates to %d bytes, more than the %d bytes of disk the cache of inflated members may use (tensorfs --inflate-disk)", m.Size, c.opts.DiskLimit)}
	}
	return &memberSource{c: c, file: file, m: m}, nil
}

// inMemory reports whether a member of size bytes is inflated into
// memory: up to a quarter of the memory limit.
func (c *InflateCache) inMemory(size int64) bool { return size <= c.opts.MemLimit/4 }
