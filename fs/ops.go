package fs

import (
	"encoding/json"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The operations of the mount, free of go-fuse's request plumbing (see
// raw.go): each takes the entry a request is about. Tests call them
// directly.

// fillAttr sets every attribute of e (Getattr always sets Size).
func (r *Root) fillAttr(e *node, a *fuse.Attr) {
	a.Ino = e.id
	a.Owner = fuse.Owner{Uid: r.uid, Gid: r.gid}
	sec, nsec := uint64(r.mtime.Unix()), uint32(r.mtime.Nanosecond())
	a.Mtime, a.Mtimensec = sec, nsec
	a.Ctime, a.Ctimensec = sec, nsec
	a.Atime, a.Atimensec = sec, nsec
	a.Blksize = 1 << 20 // invites large reads (cat, cp and Python size buffers by it)
	if e.isDir() {
		a.Mode = dirMode
		if e.e != nil && e.e.dir != nil && e.e.dir.private {
			a.Mode = syscall.S_IFDIR | 0o500
		}
		a.Nlink = 2 + r.subdirs(e)
		return
	}
	a.Mode = fileMode
	if e.file.private {
		a.Mode = syscall.S_IFREG | 0o400
	}
	a.Nlink = 1
	size := e.file.size
	if e.file.kind == kindStats {
		size = int64(len(r.statsJSON()))
	}
	a.Size = uint64(size)
	a.Blocks = (uint64(size) + 511) / 512
}

// open opens regular file e with the open(2) flags given: it refuses
// writing, counts the open, and returns the FOPEN_ flags for the kernel
// and the file's handle state, if it has any. Every file's contents are
// fixed for the life of the mount (FOPEN_KEEP_CACHE) except stats.json,
// rendered at open into its handle and read without the page cache.
func (r *Root) open(e *node, flags uint32) (*handle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	r.stats.opens.Add(1)
	f := &e.file
	if f.kind == kindStats {
		return &handle{data: r.statsJSON()}, fuse.FOPEN_DIRECT_IO, 0
	}
	if f.kind == kindTensor && f.form != formDirect {
		// A view's reader is built on first open (or read).
		if _, err := r.reader(e); err != nil {
			return nil, 0, toErrno(err)
		}
	}
	if fd := r.passthroughFd(e); fd >= 0 {
		return &handle{passthrough: true, fd: fd}, fuse.FOPEN_KEEP_CACHE, 0 // passthrough.go
	}
	if f.kind == kindTensor && r.directIO.Load() {
		return nil, fuse.FOPEN_DIRECT_IO, 0
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

// readFile answers a READ of e opened with h (nil when it has no handle)
// and counts it when e is a tensor file (.files/ included) or a file of
// a .safetensors/ directory or a model directory.
func (r *Root) readFile(e *node, h *handle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e.file.kind == kindStats {
		if h == nil { // read without an open (cannot happen): a snapshot
			h = &handle{data: r.statsJSON()}
		}
		k := clamp(int64(len(h.data)), dest, off)
		if k == 0 {
			return fuse.ReadResultData(nil), 0
		}
		return fuse.ReadResultData(h.data[off : off+int64(k)]), 0
	}
	res, errno := r.read(e, dest, off)
	if k := e.file.kind; k == kindTensor || k == kindExport {
		st := &r.stats
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
	xattrSplit  = "user.tensorfs.split"
)

// xattrs returns the attributes of e in listing order. A tensor file has
// name, dtype (of the bytes this file serves), shape, and source and
// offset where the file is one contiguous range of its source; a virtual
// file those its Xattrs gives; other entries none.
func (r *Root) xattrs(e *node) [][2]string {
	f := &e.file
	switch {
	case e.isDir():
		return nil
	case f.kind == kindVirtual:
		if x, ok := e.virtual().(xattrser); ok {
			return x.Xattrs()
		}
		return nil
	case f.kind != kindTensor:
		return nil
	case f.whole(): // a checkpoint file as it is (.files/): where it is
		return [][2]string{{xattrSource, r.idx.SourceName(f.t.Source)}}
	}
	sh := f.t.Shape
	if f.sliced() {
		sh = f.split().SliceShape(sh)
	}
	shape, _ := json.Marshal(sh)
	if sh == nil {
		shape = []byte("[]")
	}
	a := [][2]string{
		{xattrName, f.t.Name},
		{xattrDType, f.dtype.String()},
		{xattrShape, string(shape)},
	}
	if f.form == formDirect && r.idx.Member(f.t.Source) == nil { // not a compressed member
		a = append(a, [2]string{xattrSource, r.idx.SourceName(f.t.Source)}, [2]string{xattrOffset, strconv.FormatInt(f.t.Offset+f.skip(), 10)})
	}
	if f.sliced() {
		a = append(a, [2]string{xattrSplit, splitXattr(f)})
	}
	return a
}

// getxattr copies the value into dest; with a dest too small (or empty,
// the size query) it returns the size and ERANGE, which go-fuse turns into
// the size reply.
func (r *Root) getxattr(e *node, attr string, dest []byte) (uint32, syscall.Errno) {
	for _, kv := range r.xattrs(e) {
		if kv[0] == attr {
			if len(dest) < len(kv[1]) {
				return uint32(len(kv[1])), syscall.ERANGE
			}
			return uint32(copy(dest, kv[1])), 0
		}
	}
	return 0, syscall.ENODATA
}

// listxattr lists the names, each NUL-terminated (ERANGE and the size
// when dest is too small, as getxattr).
func (r *Root) listxattr(e *node, dest []byte) (uint32, syscall.Errno) {
	var list []byte
	for _, kv := range r.xattrs(e) {
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
