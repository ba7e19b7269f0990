package fs

import (
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// rawFS serves a Root through go-fuse's raw API (fuse.RawFileSystem):
// the kernel's node ID of every file and directory is its inode number,
// an index into Root.inodes, so a request finds its entry in one slice
// lookup and the server keeps nothing per inode the kernel knows (no
// go-fuse Inode, no identity map, no lookup count: FORGET is a no-op).
// A mount's memory is the tree's, whatever the kernel walks.
//
// It is glue only: each request finds its entry and calls the Root's
// API-free methods (fillAttr, open, read, getxattr, listxattr, statfs),
// which tests call directly.
type rawFS struct {
	fuse.RawFileSystem // fuse.NewDefaultRawFileSystem: ENOSYS for the rest
	root               *Root
	// backer is set by Init (the *fuse.Server), before any request: what
	// a passthrough open registers its backing descriptor with
	// (passthrough.go). nil: no passthrough.
	backer  backingServer
	backing backingIDs

	mu      sync.Mutex
	handles map[uint64]*handle // open files with a handle; GUARDED_BY(mu)
	nextFh  uint64             // GUARDED_BY(mu)
}

// handle is an open file's own state: stats.json's snapshot, or the
// descriptor of a file served by passthrough (passthrough.go).
type handle struct {
	data        []byte
	passthrough bool
	fd          int    // with passthrough: the backing file
	ino         uint64 // with passthrough: the inode whose backing ID it holds
}

func newRawFS(r *Root) *rawFS {
	return &rawFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), root: r, handles: map[uint64]*handle{}}
}

var _ fuse.RawFileSystem = (*rawFS)(nil)

func (fs *rawFS) String() string { return "tensorfs" }

// Init is called by the server before it serves the first request.
func (fs *rawFS) Init(s *fuse.Server) { fs.backer = s }

// node returns the node of a kernel node ID; ok is false for an ID that
// names nothing.
func (fs *rawFS) node(id uint64) (node, bool) { return fs.root.resolve(id) }

// setEntry fills a lookup's reply for e.
func (fs *rawFS) setEntry(e *node, out *fuse.EntryOut) {
	out.NodeId = e.id
	out.Generation = 1
	fs.root.fillAttr(e, &out.Attr)
	out.SetEntryTimeout(fs.root.opts.Timeout)
	out.SetAttrTimeout(fs.root.opts.Timeout)
}

// Lookup finds name among the sorted children. A missing name is a
// negative entry the kernel keeps for the timeout (node ID 0, OK).
func (fs *rawFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	d, ok := fs.node(h.NodeId)
	switch {
	case !ok:
		return fuse.Status(syscall.ESTALE)
	case !d.isDir():
		return fuse.Status(syscall.ENOTDIR)
	}
	c, ok := fs.root.lookup(&d, name)
	if !ok {
		*out = fuse.EntryOut{}
		out.SetEntryTimeout(fs.root.opts.Timeout)
		return fuse.OK
	}
	fs.setEntry(&c, out)
	return fuse.OK
}

func (fs *rawFS) Forget(nodeid, nlookup uint64) {}

func (fs *rawFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	e, ok := fs.node(in.NodeId)
	if !ok {
		return fuse.Status(syscall.ESTALE)
	}
	fs.root.fillAttr(&e, &out.Attr)
	if in.Flags()&fuse.FUSE_GETATTR_FH != 0 {
		if h := fs.handle(in.Fh()); h != nil {
			out.Size = uint64(len(h.data))
			out.Blocks = (out.Size + 511) / 512
		}
	}
	out.SetTimeout(fs.root.opts.Timeout)
	return fuse.OK
}

// Access answers from the mode bits, as go-fuse's node API does; writes
// are refused (EROFS) by the kernel first on this read-only mount.
func (fs *rawFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	e, ok := fs.node(in.NodeId)
	if !ok {
		return fuse.Status(syscall.ESTALE)
	}
	if in.Mask&2 != 0 { // W_OK
		return fuse.Status(syscall.EROFS)
	}
	var a fuse.Attr
	fs.root.fillAttr(&e, &a)
	if !hasAccess(in.Caller.Uid, in.Caller.Gid, a.Uid, a.Gid, a.Mode, in.Mask) {
		return fuse.EACCES
	}
	return fuse.OK
}

// hasAccess checks mask (R_OK 4, W_OK 2, X_OK 1) against the mode bits
// that apply to the caller; root may do anything but execute a file
// without any x bit.
func hasAccess(uid, gid, fuid, fgid, mode, mask uint32) bool {
	if uid == 0 {
		return mask&1 == 0 || mode&0o111 != 0 || mode&syscall.S_IFDIR != 0
	}
	perm := mode & 0o7
	switch {
	case uid == fuid:
		perm = mode >> 6 & 0o7
	case gid == fgid:
		perm = mode >> 3 & 0o7
	}
	return perm&mask == mask
}

func (fs *rawFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	e, ok := fs.node(in.NodeId)
	switch {
	case !ok:
		return fuse.Status(syscall.ESTALE)
	case e.isDir():
		return fuse.Status(syscall.EISDIR)
	}
	h, flags, errno := fs.root.open(&e, in.Flags)
	if errno != 0 {
		return fuse.Status(errno)
	}
	out.OpenFlags = flags | fuse.FOPEN_NOFLUSH // see Flush
	if h != nil && h.passthrough && in.Flags&syscall.O_DIRECT != 0 && !fs.backing.held(e.id) {
		// O_DIRECT: served by the server (passthrough.go), with
		// FOPEN_DIRECT_IO so that the inode is not put in caching mode
		// and a later open of it can still be passed through.
		h = nil
		out.OpenFlags = (out.OpenFlags | fuse.FOPEN_DIRECT_IO) &^ fuse.FOPEN_KEEP_CACHE
	}
	if h != nil && h.passthrough {
		id, ok := fs.backing.acquire(fs.backer, e.id, h.fd)
		if !ok {
			return fuse.OK // served by the server after all
		}
		h.ino = e.id
		out.BackingID = id
		out.OpenFlags = (out.OpenFlags | fuse.FOPEN_PASSTHROUGH) &^ fuse.FOPEN_KEEP_CACHE
	}
	if h != nil {
		fs.mu.Lock()
		fs.nextFh++
		out.Fh = fs.nextFh
		fs.handles[out.Fh] = h
		fs.mu.Unlock()
	}
	return fuse.OK
}

// handle returns the handle of fh, or nil (0 is no handle).
func (fs *rawFS) handle(fh uint64) *handle {
	if fh == 0 {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.handles[fh]
}

// Flush is never needed: nothing is written. Every file is opened with
// FOPEN_NOFLUSH (Linux 5.16+), so that closing it sends no FLUSH, and a
// FLUSH that comes all the same (an older kernel) is answered ENOSYS,
// after which the kernel sends none for the mount. A FLUSH is the one
// request a close(2) waits for, uninterruptibly: a process exiting with a
// file of the mount open while its server is stopped or gone (the server
// itself, another tensorfs server backed by this mount's files) would
// hang in D state in fuse_flush until the connection is aborted
// (docs/RELIABILITY.md, "Issue 45: exit with a mount's file open").
func (fs *rawFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	fs.root.stats.flushes.Add(1)
	return fuse.ENOSYS
}

func (fs *rawFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	if in.Fh == 0 {
		return
	}
	fs.mu.Lock()
	h := fs.handles[in.Fh]
	delete(fs.handles, in.Fh)
	fs.mu.Unlock()
	if h != nil && h.passthrough {
		fs.backing.release(fs.backer, h.ino)
	}
}

func (fs *rawFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	e, ok := fs.node(in.NodeId)
	if !ok || e.isDir() {
		return nil, fuse.Status(syscall.EBADF)
	}
	dest := buf[:min(len(buf), int(in.Size))]
	res, errno := fs.root.readFile(&e, fs.handle(in.Fh), dest, int64(in.Offset))
	return res, fuse.Status(errno)
}

// OpenDir lets the kernel cache listings (the tree never changes).
func (fs *rawFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	e, ok := fs.node(in.NodeId)
	switch {
	case !ok:
		return fuse.Status(syscall.ESTALE)
	case !e.isDir():
		return fuse.Status(syscall.ENOTDIR)
	}
	out.OpenFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	return fuse.OK
}

// ReadDir lists the children from the offset on; an entry's offset is
// its position plus one, so a listing needs no handle state.
func (fs *rawFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(in, out, false)
}

// ReadDirPlus lists like ReadDir with each child's entry and attributes,
// saving the kernel a LOOKUP per child.
func (fs *rawFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(in, out, true)
}

func (fs *rawFS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	d, ok := fs.node(in.NodeId)
	if !ok || !d.isDir() {
		return fuse.Status(syscall.ENOTDIR)
	}
	fs.root.listing(&d, in.Offset, func(c *node, next uint64) bool {
		mode := uint32(syscall.S_IFREG)
		if c.isDir() {
			mode = syscall.S_IFDIR
		}
		de := fuse.DirEntry{Name: c.name, Ino: c.id, Mode: mode, Off: next}
		if !plus {
			return out.AddDirEntry(de)
		}
		eo := out.AddDirLookupEntry(de)
		if eo == nil {
			return false
		}
		fs.setEntry(c, eo)
		return true
	})
	return fuse.OK
}

func (fs *rawFS) ReleaseDir(in *fuse.ReleaseIn) {}

func (fs *rawFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	fs.root.statfs(out)
	return fuse.OK
}

func (fs *rawFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	e, ok := fs.node(h.NodeId)
	if !ok {
		return 0, fuse.Status(syscall.ESTALE)
	}
	n, errno := fs.root.getxattr(&e, attr, dest)
	return n, fuse.Status(errno)
}

func (fs *rawFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	e, ok := fs.node(h.NodeId)
	if !ok {
		return 0, fuse.Status(syscall.ESTALE)
	}
	n, errno := fs.root.listxattr(&e, dest)
	return n, fuse.Status(errno)
}

// The mount is read-only ("ro"), so the kernel refuses every change with
// EROFS before asking the server; these say the same should a request
// get through (go-fuse's defaults would say ENOSYS).

var erofs = fuse.Status(syscall.EROFS)

func (fs *rawFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return erofs
}
func (fs *rawFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return erofs
}
func (fs *rawFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return erofs
}
func (fs *rawFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return erofs
}
func (fs *rawFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return erofs
}
func (fs *rawFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return erofs
}
func (fs *rawFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	return erofs
}
func (fs *rawFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return erofs
}
func (fs *rawFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return erofs
}
func (fs *rawFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return erofs
}
func (fs *rawFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return erofs
}
func (fs *rawFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	return erofs
}
func (fs *rawFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return 0, erofs
}
func (fs *rawFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	return 0, erofs
}
func (fs *rawFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return erofs
}
func (fs *rawFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	return 0, erofs
}
