package fs

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// constFile is a virtualFile of fixed bytes with one xattr.
type constFile []byte

func (c constFile) Size() int64 { return int64(len(c)) }
func (c constFile) ReadAt(p []byte, off int64) (int, error) {
	if off == 3 {
		return 0, syscall.ENXIO // an errno is passed on
	}
	return copy(p, c[off:]), nil
}
func (c constFile) Xattrs() [][2]string { return [][2]string{{"user.test", "v"}} }

// brokenFile is a virtualFile whose reads come back short.
type brokenFile struct{}

func (brokenFile) Size() int64                           { return 10 }
func (brokenFile) ReadAt(p []byte, _ int64) (int, error) { return 1, errors.New("gone") }

// TestVirtualFile: a file kind added with builder.addVirtual is listed,
// sized, read and has its xattrs with no change to the FUSE glue.
func TestVirtualFile(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})
	b := newBuilder(".extra")
	if err := b.addVirtual("dir/const", constFile("hello, world")); err != nil {
		t.Fatal(err)
	}
	b.addVirtual("broken", brokenFile{})
	en := r.staticNode(b.finish())
	e := &en
	c := e.child("dir").child("const")
	var a fuse.Attr
	r.fillAttr(c, &a)
	if a.Size != 12 || a.Mode != fileMode {
		t.Errorf("attr %+v", a)
	}
	if got := readAll(t, r, c); string(got) != "hello, world" {
		t.Errorf("read %q", got)
	}
	if _, errno := r.read(c, make([]byte, 4), 3); errno != syscall.ENXIO {
		t.Errorf("errno from ReadAt: %v, want ENXIO", errno)
	}
	if _, errno := r.read(e.child("broken"), make([]byte, 4), 0); errno != syscall.EIO {
		t.Errorf("short virtual read: %v, want EIO", errno)
	}
	if v, errno := getxattr(r, c, "user.test", 8); v != "v" || errno != 0 {
		t.Errorf("xattr %q %v", v, errno)
	}
	if sz, _ := r.listxattr(e.child("broken"), nil); sz != 0 {
		t.Errorf("broken lists %d bytes of xattrs", sz)
	}
}

// TestRawFS drives the raw API glue directly: lookups (a missing name is
// a negative entry the kernel caches), attributes, listings resumed at
// any offset, xattrs, opens and reads, and node IDs it never gave.
func TestRawFS(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})
	fs := newRawFS(r)
	hdr := func(id uint64) *fuse.InHeader { return &fuse.InHeader{NodeId: id} }

	var out fuse.EntryOut
	if st := fs.Lookup(nil, hdr(1), "no-such", &out); st != fuse.OK || out.NodeId != 0 || out.EntryTimeout() != r.opts.Timeout {
		t.Errorf("negative lookup: %v, node %d, timeout %v", st, out.NodeId, out.EntryTimeout())
	}
	if st := fs.Lookup(nil, hdr(1), "model", &out); st != fuse.OK || out.NodeId != r.lookupPath("model").id || out.Mode != dirMode {
		t.Fatalf("lookup model: %v %+v", st, out)
	}
	model := out.NodeId
	if st := fs.Lookup(nil, hdr(model), "embed", &out); st != fuse.OK {
		t.Fatalf("lookup embed: %v", st)
	}
	embed := r.lookupPath("model/embed")
	if out.NodeId != embed.id || out.Size != uint64(embed.file.size) || out.AttrTimeout() != r.opts.Timeout {
		t.Errorf("embed entry %+v", out)
	}
	if st := fs.Lookup(nil, hdr(embed.id), "x", &out); st != fuse.Status(syscall.ENOTDIR) {
		t.Errorf("lookup in a file: %v", st)
	}
	for _, id := range []uint64{0, r.Nodes() + 1} {
		var ao fuse.AttrOut
		if st := fs.GetAttr(nil, &fuse.GetAttrIn{InHeader: *hdr(id)}, &ao); st != fuse.Status(syscall.ESTALE) {
			t.Errorf("getattr of node %d: %v", id, st)
		}
	}

	// A listing in pieces: a buffer of about one entry each time, resumed at the
	// offset the last entry gave.
	for _, plus := range []bool{false, true} {
		var names []string
		for off := uint64(0); ; {
			buf := make([]byte, 200)
			l := fuse.NewDirEntryList(buf, off)
			in := &fuse.ReadIn{InHeader: *hdr(1), Offset: off}
			var st fuse.Status
			if plus {
				st = fs.ReadDirPlus(nil, in, l)
			} else {
				st = fs.ReadDir(nil, in, l)
			}
			if st != fuse.OK {
				t.Fatal(st)
			}
			if l.Offset == off {
				break
			}
			n := int(l.Offset - off)
			for i := 0; i < n; i++ {
				names = append(names, r.lookupPath("").children()[int(off)+i].name)
			}
			off = l.Offset
		}
		if got, want := names, namesOf(r.lookupPath("")); !equal(got, want) {
			t.Errorf("plus=%v: listed %q, want %q", plus, got, want)
		}
	}

	// Open, read, release; writing is refused.
	var oo fuse.OpenOut
	if st := fs.Open(nil, &fuse.OpenIn{InHeader: *hdr(embed.id), Flags: syscall.O_RDWR}, &oo); st != fuse.Status(syscall.EROFS) {
		t.Errorf("open O_RDWR: %v", st)
	}
	if st := fs.Open(nil, &fuse.OpenIn{InHeader: *hdr(1)}, &oo); st != fuse.Status(syscall.EISDIR) {
		t.Errorf("open of a directory: %v", st)
	}
	stats := r.lookupPath(".tensorfs/stats.json")
	if st := fs.Open(nil, &fuse.OpenIn{InHeader: *hdr(stats.id)}, &oo); st != fuse.OK || oo.Fh == 0 || oo.OpenFlags&fuse.FOPEN_DIRECT_IO == 0 {
		t.Fatalf("open stats.json: %v %+v", st, oo)
	}
	var ao fuse.AttrOut
	fs.GetAttr(nil, &fuse.GetAttrIn{InHeader: *hdr(stats.id), Flags_: fuse.FUSE_GETATTR_FH, Fh_: oo.Fh}, &ao)
	buf := make([]byte, 1<<16)
	res, st := fs.Read(nil, &fuse.ReadIn{InHeader: *hdr(stats.id), Fh: oo.Fh, Size: uint32(len(buf))}, buf)
	if st != fuse.OK {
		t.Fatal(st)
	}
	data, _ := res.Bytes(buf)
	if uint64(len(data)) != ao.Size || !bytes.HasPrefix(data, []byte("{")) {
		t.Errorf("stats.json: %d bytes read, fstat says %d", len(data), ao.Size)
	}
	fs.Release(nil, &fuse.ReleaseIn{Fh: oo.Fh})
	if len(fs.handles) != 0 {
		t.Errorf("%d handles left after release", len(fs.handles))
	}

	// Xattrs: size query, then the value.
	sz, st := fs.GetXAttr(nil, hdr(embed.id), xattrName, nil)
	if st != fuse.Status(syscall.ERANGE) || int(sz) != len(embed.file.t.Name) {
		t.Errorf("xattr size query: %d %v", sz, st)
	}
	if _, st := fs.GetXAttr(nil, hdr(1), xattrName, make([]byte, 100)); st != fuse.Status(syscall.ENODATA) {
		t.Errorf("xattr of a directory: %v", st)
	}
	if st := fs.SetXAttr(nil, &fuse.SetXAttrIn{InHeader: *hdr(embed.id)}, "user.x", []byte("1")); st != fuse.Status(syscall.EROFS) {
		t.Errorf("setxattr: %v", st)
	}
	if st := fs.Mkdir(nil, &fuse.MkdirIn{InHeader: *hdr(1)}, "d", &out); st != fuse.Status(syscall.EROFS) {
		t.Errorf("mkdir: %v", st)
	}
	// Access: read yes, write EROFS, execute a file no (as a user).
	user := fuse.Caller{Owner: fuse.Owner{Uid: 12345, Gid: 12345}}
	for _, tc := range []struct {
		id   uint64
		mask uint32
		want fuse.Status
	}{
		{embed.id, 4, fuse.OK},
		{embed.id, 2, fuse.Status(syscall.EROFS)},
		{embed.id, 1, fuse.EACCES},
		{model, 5, fuse.OK},
	} {
		if st := fs.Access(nil, &fuse.AccessIn{InHeader: fuse.InHeader{NodeId: tc.id, Caller: user}, Mask: tc.mask}); st != tc.want {
			t.Errorf("access(%d, %o) = %v, want %v", tc.id, tc.mask, st, tc.want)
		}
	}
}

func namesOf(e *node) []string {
	var out []string
	for _, c := range e.children() {
		out = append(out, c.name)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
