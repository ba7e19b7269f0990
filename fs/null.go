package fs

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// NullFile is one file of a zero-work mount: its path ('/' makes
// directories) and size.
type NullFile struct {
	Path string
	Size int64
}

// MountNull mounts a read-only tree of files whose bytes are all zero
// and serves it: each READ is answered from one buffer held in memory,
// with no other work. It is the yardstick of `tensorfs bench`: the
// fastest a FUSE server can answer the same reads with the same request
// size (MaxWrite, by default what Mount uses when it splices), readahead
// window and page-cache mode (FOPEN_KEEP_CACHE). The tree also holds
// .tensorfs/index.json ("{}"), so that a caller waits for it as for a
// tensorfs mount.
func MountNull(mountpoint string, files []NullFile, mopts MountOptions) (*fuse.Server, error) {
	if err := CheckMountpoint(mountpoint); err != nil {
		return nil, err
	}
	maxWrite := mopts.MaxWrite
	if maxWrite <= 0 {
		maxWrite = MaxReadSize(true)
	}
	maxWrite = max(pageSize, min(maxWrite, MaxRequestSize(false)))
	maxWrite -= maxWrite % pageSize
	root := &nullDir{files: append([]NullFile{{Path: ".tensorfs/index.json", Size: 3}}, files...), zeros: make([]byte, maxWrite)}
	for _, f := range files {
		if f.Size < 0 || !validNullPath(f.Path) {
			return nil, fmt.Errorf("fs: null mount: bad file %q (%d bytes)", f.Path, f.Size)
		}
	}
	sec := DefaultTimeout
	opts := &gofs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:       mopts.AllowOther,
			Options:          []string{"ro"},
			MaxBackground:    mopts.MaxBackground,
			MaxWrite:         maxWrite,
			MaxReadAhead:     maxWrite,
			FsName:           "tensorfs-null",
			Name:             "tensorfs",
			Debug:            mopts.Debug,
			Logger:           mopts.Logger,
			DirectMount:      os.Geteuid() == 0,
			DirectMountFlags: syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV,
			DisableSplice:    true,
		},
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &sec,
		Logger:          mopts.Logger,
	}
	abs := resolveMountpoint(mountpoint)
	server, err := gofs.Mount(mountpoint, root, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot mount at %s: %v", mountpoint, strings.TrimSpace(err.Error()))
	}
	ra := mopts.ReadAheadKB
	if ra == 0 {
		ra = DefaultReadAheadRequests * maxWrite / 1024
	}
	if os.Geteuid() == 0 {
		setReadAhead(abs, ra) // as Mount does; others keep the kernel's
	}
	return server, nil
}

// validNullPath reports whether p is a relative path of plain names.
func validNullPath(p string) bool {
	if p == "" || path.Clean(p) != p || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "..") {
		return false
	}
	return true
}

// nullDir is the root of a null mount; it builds the tree in OnAdd.
type nullDir struct {
	gofs.Inode
	files []NullFile
	zeros []byte
}

var _ = (gofs.NodeOnAdder)((*nullDir)(nil))

func (d *nullDir) OnAdd(ctx context.Context) {
	for _, f := range d.files {
		dir := &d.Inode
		parts := strings.Split(f.Path, "/")
		for _, name := range parts[:len(parts)-1] {
			child := dir.GetChild(name)
			if child == nil {
				child = dir.NewPersistentInode(ctx, &gofs.Inode{}, gofs.StableAttr{Mode: syscall.S_IFDIR})
				dir.AddChild(name, child, false)
			}
			dir = child
		}
		var file gofs.InodeEmbedder = &nullFile{size: f.Size, zeros: d.zeros}
		if f.Path == ".tensorfs/index.json" {
			file = &gofs.MemRegularFile{Data: []byte("{}\n"), Attr: fuse.Attr{Mode: 0o444}}
		}
		dir.AddChild(parts[len(parts)-1], dir.NewPersistentInode(ctx, file, gofs.StableAttr{Mode: syscall.S_IFREG}), false)
	}
}

// nullFile is a file of zeros.
type nullFile struct {
	gofs.Inode
	size  int64
	zeros []byte
}

var (
	_ = (gofs.NodeGetattrer)((*nullFile)(nil))
	_ = (gofs.NodeOpener)((*nullFile)(nil))
	_ = (gofs.NodeReader)((*nullFile)(nil))
)

func (f *nullFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = fileMode
	out.Size = uint64(f.size)
	out.Blksize = 1 << 20
	out.Blocks = (uint64(f.size) + 511) / 512
	return 0
}

func (f *nullFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (f *nullFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n := min(clamp(f.size, dest, off), len(f.zeros))
	return fuse.ReadResultData(f.zeros[:n]), 0
}
