package fs

import (
	"context"
	"encoding/json"
	"strconv"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The go-fuse nodes are thin: each points at its constant entry, and
// children are created on Lookup with the entry's inode number, so the
// kernel sees stable numbers and memory grows only with what it looks at.

// dirNode is a directory of the tree.
type dirNode struct {
	gofs.Inode
	root *Root
	e    *entry
}

// fileNode is a regular file: a tensor, index.json, a metadata value or
// stats.json.
type fileNode struct {
	gofs.Inode
	root *Root
	e    *entry
}

var (
	_ = (gofs.NodeLookuper)((*dirNode)(nil))
	_ = (gofs.NodeOpendirHandler)((*dirNode)(nil))
	_ = (gofs.NodeGetattrer)((*dirNode)(nil))
	_ = (gofs.NodeStatfser)((*dirNode)(nil))

	_ = (gofs.NodeGetattrer)((*fileNode)(nil))
	_ = (gofs.NodeOpener)((*fileNode)(nil))
	_ = (gofs.NodeReader)((*fileNode)(nil))
	_ = (gofs.NodeGetxattrer)((*fileNode)(nil))
	_ = (gofs.NodeListxattrer)((*fileNode)(nil))
	_ = (gofs.NodeStatfser)((*fileNode)(nil))

	_ = (gofs.FileReaddirenter)((*dirHandle)(nil))
	_ = (gofs.FileSeekdirer)((*dirHandle)(nil))
)

// fillAttr sets every attribute of e (Getattr always sets Size).
func (r *Root) fillAttr(e *entry, a *fuse.Attr) {
	a.Ino = e.ino
	a.Owner = fuse.Owner{Uid: r.uid, Gid: r.gid}
	sec, nsec := uint64(r.mtime.Unix()), uint32(r.mtime.Nanosecond())
	a.Mtime, a.Mtimensec = sec, nsec
	a.Ctime, a.Ctimensec = sec, nsec
	a.Atime, a.Atimensec = sec, nsec
	a.Blksize = 1 << 20 // invites large reads (cat, cp and Python size buffers by it)
	if e.isDir() {
		a.Mode = dirMode
		a.Nlink = 2 + e.dir.nsubdirs
		return
	}
	a.Mode = fileMode
	a.Nlink = 1
	size := e.file.size
	if e.file.kind == kindStats {
		size = int64(len(r.statsJSON()))
	}
	a.Size = uint64(size)
	a.Blocks = (uint64(size) + 511) / 512
}

// newChild returns the Inode for child e of parent, filling out.
func (r *Root) newChild(ctx context.Context, parent *gofs.Inode, e *entry, out *fuse.EntryOut) *gofs.Inode {
	r.fillAttr(e, &out.Attr)
	if e.isDir() {
		return parent.NewInode(ctx, &dirNode{root: r, e: e}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: e.ino})
	}
	return parent.NewInode(ctx, &fileNode{root: r, e: e}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: e.ino})
}

// Lookup finds name among the sorted children.
func (n *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	c := n.e.child(name)
	if c == nil {
		return nil, syscall.ENOENT
	}
	return n.root.newChild(ctx, &n.Inode, c, out), 0
}

// OpendirHandle returns a handle listing the children in name order; the
// kernel may cache the listing (the tree never changes).
func (n *dirNode) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{dir: n}, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

func (n *dirNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.root.fillAttr(n.e, &out.Attr)
	return 0
}

func (n *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	n.root.statfs(out)
	return 0
}

// dirHandle is an open directory. go-fuse serialises calls on one handle.
type dirHandle struct {
	dir *dirNode
	pos int // index of the next child to list
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	ch := d.dir.e.children()
	if d.pos >= len(ch) {
		return nil, 0
	}
	c := ch[d.pos]
	d.pos++
	mode := uint32(syscall.S_IFREG)
	if c.isDir() {
		mode = syscall.S_IFDIR
	}
	return &fuse.DirEntry{Name: c.name, Ino: c.ino, Mode: mode, Off: uint64(d.pos)}, 0
}

// Seekdir moves to the entry after the one whose Off was off.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off > uint64(len(d.dir.e.children())) {
		return syscall.EINVAL
	}
	d.pos = int(off)
	return 0
}

func (n *fileNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.root.fillAttr(n.e, &out.Attr)
	if h, ok := f.(*statsHandle); ok {
		out.Size = uint64(len(h.data))
		out.Blocks = (out.Size + 511) / 512
	}
	return 0
}

func (n *fileNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	n.root.statfs(out)
	return 0
}

// statsHandle is an open stats.json: the counters as they were at open.
type statsHandle struct{ data []byte }

// Open refuses writing; every file's contents are fixed for the life of
// the mount (FOPEN_KEEP_CACHE) except stats.json, which is rendered at
// open and read without the page cache.
func (n *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	n.root.stats.opens.Add(1)
	if n.e.file.kind == kindStats {
		return &statsHandle{data: n.root.statsJSON()}, fuse.FOPEN_DIRECT_IO, 0
	}
	if f := &n.e.file; f.kind == kindTensor && f.form != formDirect {
		// A view's reader is built on first open (or read).
		if _, err := n.root.reader(n.e); err != nil {
			return nil, 0, toErrno(err)
		}
	}
	if fd := n.root.passthroughFd(n.e); fd >= 0 {
		return &passthroughHandle{fd: fd}, fuse.FOPEN_KEEP_CACHE, 0 // passthrough.go
	}
	if n.e.file.kind == kindTensor && n.root.directIO.Load() {
		return nil, fuse.FOPEN_DIRECT_IO, 0
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *fileNode) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h, ok := fh.(*statsHandle); ok {
		k := clamp(int64(len(h.data)), dest, off)
		if k == 0 {
			return fuse.ReadResultData(nil), 0
		}
		return fuse.ReadResultData(h.data[off : off+int64(k)]), 0
	}
	f := &n.e.file
	res, errno := n.root.read(n.e, dest, off)
	if f.kind == kindTensor {
		st := &n.root.stats
		if errno != 0 {
			st.errors.Add(1)
		} else {
			st.reads.Add(1)
			st.bytes.Add(uint64(res.Size()))
		}
	}
	return res, errno
}

// Extended attribute names.
const (
	xattrName   = "user.tensorfs.name"
	xattrDType  = "user.tensorfs.dtype"
	xattrShape  = "user.tensorfs.shape"
	xattrSource = "user.tensorfs.source"
	xattrOffset = "user.tensorfs.offset"
)

// xattrs returns the attributes of a tensor file in listing order: name,
// dtype (of the bytes this file serves), shape, and source and offset
// where the file is one contiguous range of its source.
func (r *Root) xattrs(f *fileData) [][2]string {
	if f.kind != kindTensor {
		return nil
	}
	shape, _ := json.Marshal(f.t.Shape)
	if f.t.Shape == nil {
		shape = []byte("[]")
	}
	a := [][2]string{
		{xattrName, f.t.Name},
		{xattrDType, f.dtype.String()},
		{xattrShape, string(shape)},
	}
	if f.form == formDirect {
		a = append(a, [2]string{xattrSource, r.idx.Sources[f.t.Source]}, [2]string{xattrOffset, strconv.FormatInt(f.t.Offset, 10)})
	}
	return a
}

// Getxattr copies the value into dest; with a dest too small (or empty,
// the size query) it returns the size and ERANGE, which go-fuse turns into
// the size reply.
func (n *fileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	for _, kv := range n.root.xattrs(&n.e.file) {
		if kv[0] == attr {
			if len(dest) < len(kv[1]) {
				return uint32(len(kv[1])), syscall.ERANGE
			}
			return uint32(copy(dest, kv[1])), 0
		}
	}
	return 0, syscall.ENODATA
}

// Listxattr lists the names, each NUL-terminated.
func (n *fileNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var list []byte
	for _, kv := range n.root.xattrs(&n.e.file) {
		list = append(list, kv[0]...)
		list = append(list, 0)
	}
	if len(dest) < len(list) {
		return uint32(len(list)), syscall.ERANGE
	}
	return uint32(copy(dest, list)), 0
}

// statfs describes the mount: the top level's tensor bytes in 4 KiB
// blocks, none free, one "inode" per node.
func (r *Root) statfs(out *fuse.StatfsOut) {
	const bsize = 4096
	out.Bsize = bsize
	out.Frsize = bsize
	out.Blocks = (uint64(r.bytes) + bsize - 1) / bsize
	out.Files = r.nodes
	out.NameLen = maxNameLen
}
