package fs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
)

// npyFile is a version 1.0 .npy file as np.save writes it: the header
// dict padded with spaces so that the data starts at a multiple of 64.
func npyFile(dict string, data []byte) []byte {
	for (10+len(dict)+1)%64 != 0 {
		dict += " "
	}
	dict += "\n"
	h := append([]byte("\x93NUMPY\x01\x00"), byte(len(dict)), byte(len(dict)>>8))
	return append(append(h, dict...), data...)
}

// passRoot mounts (without mounting) the .npy file data through real
// sources, as the CLI does.
func passRoot(t *testing.T, data []byte, opts Options) *Root {
	t.Helper()
	p := filepath.Join(t.TempDir(), "w.npy")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx, files, err := formats.Load(p, func(p string) (index.File, error) {
		src, err := backing.Open(p, backing.Options{})
		if err != nil {
			return nil, err
		}
		return backing.ForParsing(src), nil
	}, formats.Options{Inflate: backing.DefaultInflateCache()})
	if err != nil {
		t.Fatal(err)
	}
	var sources []backing.Source
	for _, f := range files {
		src := backing.Unwrap(f.(backing.Source))
		t.Cleanup(func() { src.Close() })
		sources = append(sources, src)
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	r, err := NewRoot(idx, sources, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPassthroughFd checks which files are a whole backing file byte for
// byte: the .npy/ file of a .npy checkpoint np.save wrote, and nothing
// else (not the stored tensor, which starts after the header; not a .npy
// whose header this view would write differently; not with
// NoPassthrough).
func TestPassthroughFd(t *testing.T) {
	data := make([]byte, 4*48)
	for i := range data {
		data[i] = byte(i)
	}
	exact := npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (48,), }", data)
	// The same array with a header padded differently: the view's own
	// header would not match it.
	odd := npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (48,), }"+strings.Repeat(" ", 64), data)
	for _, c := range []struct {
		name    string
		file    []byte
		opts    Options
		wantNPY bool
	}{
		{"np.save", exact, Options{}, true},
		{"other header", odd, Options{}, false},
		{"NoPassthrough", exact, Options{NoPassthrough: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := passRoot(t, c.file, c.opts)
			files := map[string]*node{}
			tensorFiles(r.lookupPath(""), "", files)
			stored, npy := files["/w"], files["/.npy/w.npy"]
			if stored == nil || npy == nil {
				t.Fatalf("no /w or /.npy/w.npy in %v", files)
			}
			if fd := r.passthroughFd(stored); fd >= 0 {
				t.Errorf("stored tensor at offset %d: passthrough fd %d", stored.file.t.Offset, fd)
			}
			if fd := r.passthroughFd(npy); (fd >= 0) != c.wantNPY {
				t.Errorf(".npy/w.npy: passthrough fd %d, want passthrough %v", fd, c.wantNPY)
			}
			if f64 := files["/.f64/w"]; f64 != nil && r.passthroughFd(f64) >= 0 {
				t.Errorf(".f64/w (converted): passthrough")
			}
		})
	}
}

// fakeBacker records backing IDs as go-fuse's server would register them.
type fakeBacker struct {
	next       int32
	registered map[int32]int32 // id -> fd
	refuse     bool
}

func (f *fakeBacker) RegisterBackingFd(m *fuse.BackingMap) (int32, syscall.Errno) {
	if f.refuse {
		return 0, syscall.EPERM
	}
	f.next++
	f.registered[f.next] = m.Fd
	return f.next, 0
}

func (f *fakeBacker) UnregisterBackingFd(id int32) syscall.Errno {
	delete(f.registered, id)
	return 0
}

// TestPassthroughOpen: rawFS opens a passthrough file with its backing
// ID (one per inode, whatever the number of opens, released with the
// last) and without FOPEN_KEEP_CACHE; where the kernel refuses, the file
// is opened as usual, and passthrough is not tried again.
func TestPassthroughOpen(t *testing.T) {
	data := make([]byte, 4*48)
	r := passRoot(t, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (48,), }", data), Options{})
	files := map[string]*node{}
	tensorFiles(r.lookupPath(""), "", files)
	npy := files["/.npy/w.npy"]
	fs := newRawFS(r)
	fb := &fakeBacker{registered: map[int32]int32{}}
	fs.backer = fb
	open := func() fuse.OpenOut {
		var out fuse.OpenOut
		if st := fs.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: npy.id}}, &out); st != fuse.OK {
			t.Fatalf("open: %v", st)
		}
		return out
	}
	a, b := open(), open()
	if a.BackingID == 0 || a.BackingID != b.BackingID || a.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 || a.OpenFlags&fuse.FOPEN_KEEP_CACHE != 0 || len(fb.registered) != 1 {
		t.Fatalf("opens %+v, %+v; registered %v", a, b, fb.registered)
	}
	fs.Release(nil, &fuse.ReleaseIn{Fh: a.Fh})
	if len(fb.registered) != 1 {
		t.Errorf("backing ID released with one open left")
	}
	fs.Release(nil, &fuse.ReleaseIn{Fh: b.Fh})
	if len(fb.registered) != 0 || len(fs.handles) != 0 {
		t.Errorf("after the last release: registered %v, %d handles", fb.registered, len(fs.handles))
	}
	fb.refuse = true
	if c := open(); c.BackingID != 0 || c.OpenFlags&fuse.FOPEN_PASSTHROUGH != 0 || c.Fh != 0 {
		t.Errorf("refused passthrough: open %+v", c)
	}
	fb.refuse = false
	if c := open(); c.BackingID != 0 {
		t.Errorf("passthrough tried again after a refusal")
	}
}

// TestPassthroughOpenDirect: an O_DIRECT open of a passthrough file is
// served by the server, with FOPEN_DIRECT_IO (so the kernel leaves the
// inode free for a later passthrough open), unless the file is open by
// passthrough already, which the kernel requires of every other open.
func TestPassthroughOpenDirect(t *testing.T) {
	data := make([]byte, 4*48)
	r := passRoot(t, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (48,), }", data), Options{})
	files := map[string]*node{}
	tensorFiles(r.lookupPath(""), "", files)
	npy := files["/.npy/w.npy"]
	fs := newRawFS(r)
	fb := &fakeBacker{registered: map[int32]int32{}}
	fs.backer = fb
	open := func(flags uint32) fuse.OpenOut {
		var out fuse.OpenOut
		if st := fs.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: npy.id}, Flags: flags}, &out); st != fuse.OK {
			t.Fatalf("open: %v", st)
		}
		return out
	}
	d := open(syscall.O_DIRECT)
	if d.BackingID != 0 || d.OpenFlags&fuse.FOPEN_PASSTHROUGH != 0 || d.OpenFlags&fuse.FOPEN_DIRECT_IO == 0 || d.OpenFlags&fuse.FOPEN_KEEP_CACHE != 0 || d.Fh != 0 || len(fb.registered) != 0 {
		t.Fatalf("O_DIRECT open %+v; registered %v", d, fb.registered)
	}
	p := open(0)
	if p.BackingID == 0 || p.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 {
		t.Fatalf("plain open after an O_DIRECT one: %+v", p)
	}
	if d2 := open(syscall.O_DIRECT); d2.BackingID != p.BackingID || d2.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 {
		t.Errorf("O_DIRECT open while open by passthrough: %+v, want passed through too", d2)
	}
}
