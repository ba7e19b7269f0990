package fs

import (
	"bytes"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE passthrough.
//
// A file of the tree that is, byte for byte, a whole backing file from
// offset 0 to its end can be handed to the kernel to read itself (FUSE
// passthrough, Linux 6.9 and later, and only for a server with
// CAP_SYS_ADMIN, i.e. root): reads and mmap of it then go straight to the
// backing file, its page cache is the only copy, and the server sees no
// READ requests for it. The kernel reads the backing file at the same
// offset as the FUSE file, so only a file that starts at offset 0 of its
// backing file and has its size qualifies:
//
//   - a stored tensor that is a whole source (Offset 0, Size the file's);
//   - the .npy/ file of a tensor whose source is a .npy file this view
//     reproduces exactly (the same header, then the data unconverted), as
//     np.save writes it.
//
// Root.open answers such a file with a handle carrying the descriptor;
// rawFS.Open asks the kernel for a backing ID (Server.RegisterBackingFd,
// FUSE_DEV_IOC_BACKING_OPEN) and opens the file with FOPEN_PASSTHROUGH.
// Where the kernel refuses (too old, not root), passthrough stops for the
// mount and the file is served as usual. Options.NoPassthrough turns it
// off; so does direct I/O (Options.DirectIO), which has its own contract.
//
// An O_DIRECT open is served by the server (rawFS.Open), with
// FOPEN_DIRECT_IO: passthrough hands an O_DIRECT read to the backing file
// as it is, which refuses one off its block alignment (EINVAL), where
// every file of the tree reads at any offset and length. The kernel
// refuses an open that is not passed through while the inode has one
// that is (EIO), so an O_DIRECT open made while the file is open by
// passthrough is passed through as well, and has the backing file's
// alignment rule.

// backingIDs are the backing IDs of the files open by passthrough, per
// inode: the kernel binds an inode to its backing file on its first
// passthrough open, so every open of it gives the same ID, released
// (Server.UnregisterBackingFd) with its last open, as go-fuse's node API
// does.
type backingIDs struct {
	mu       sync.Mutex
	ids      map[uint64]*backingRef // by inode; GUARDED_BY(mu)
	disabled bool                   // the kernel refused once; GUARDED_BY(mu)
}

type backingRef struct {
	id   int32
	refs int
}

// backingServer is what registers backing files: *fuse.Server.
type backingServer interface {
	RegisterBackingFd(*fuse.BackingMap) (int32, syscall.Errno)
	UnregisterBackingFd(int32) syscall.Errno
}

// acquire returns the backing ID of inode ino, whose file is fd,
// registering it on the inode's first open; ok is false when passthrough
// is not available (the file is then served by the server).
func (b *backingIDs) acquire(s backingServer, ino uint64, fd int) (id int32, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.disabled || s == nil {
		return 0, false
	}
	if ref := b.ids[ino]; ref != nil {
		ref.refs++
		return ref.id, true
	}
	id, errno := s.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)})
	if errno != 0 {
		b.disabled = true // not root, or a kernel without passthrough
		return 0, false
	}
	if b.ids == nil {
		b.ids = map[uint64]*backingRef{}
	}
	b.ids[ino] = &backingRef{id: id, refs: 1}
	return id, true
}

// held reports whether inode ino has an open passed through now.
func (b *backingIDs) held(ino uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ids[ino] != nil
}

// release drops one open of inode ino, unregistering its backing ID with
// the last.
func (b *backingIDs) release(s backingServer, ino uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ref := b.ids[ino]
	if ref == nil {
		return
	}
	if ref.refs--; ref.refs == 0 {
		s.UnregisterBackingFd(ref.id)
		delete(b.ids, ino)
	}
}

// passthroughFd returns the descriptor of the backing file that tensor
// file e is exactly, or -1. The answer is worked out on the file's first
// open (a .npy file's header is compared) and kept.
func (r *Root) passthroughFd(e *node) int {
	if r.opts.NoPassthrough || e.file.kind != kindTensor || r.directIO.Load() {
		return -1
	}
	if e.file.whole() {
		// .files/: served by the server. Passthrough hands an O_DIRECT
		// read to the backing file as it is, which refuses one off its
		// block alignment (EINVAL), where every file of the tree reads
		// at any offset and length.
		return -1
	}
	if v, ok := r.passthrough.Load(e.id); ok {
		return v.(int)
	}
	fd := r.exactSource(e)
	r.passthrough.Store(e.id, fd)
	return fd
}

// exactSource returns the descriptor of e's source when e is that whole
// file byte for byte, or -1.
func (r *Root) exactSource(e *node) int {
	f := &e.file
	if f.sliced() {
		return -1 // a part (split.go)
	}
	src := r.sources[f.t.Source]
	fd := spliceFd(src)
	if fd < 0 || src.Size() != f.size || f.size == 0 {
		return -1
	}
	switch f.form {
	case formDirect:
		if f.t.Offset == 0 {
			return fd
		}
	case formNPY:
		// The view's header, then the stored bytes unconverted, must be
		// the file's: same dtype, contiguous little-endian data right
		// after a header of the same length and bytes.
		hl := f.t.Offset
		if f.dtype != f.t.DType || !f.t.Contiguous() || hl <= 0 || hl > 1<<20 || hl+f.t.Size != f.size {
			return -1
		}
		v, err := r.reader(e)
		if err != nil {
			return -1
		}
		ours, theirs := make([]byte, hl), make([]byte, hl)
		if n, _ := v.ReadAt(ours, 0); int64(n) != hl {
			return -1
		}
		if n, _ := src.ReadAt(theirs, 0); int64(n) != hl {
			return -1
		}
		if bytes.Equal(ours, theirs) {
			return fd
		}
	}
	return -1
}
