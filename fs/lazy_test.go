package fs

import (
	"bytes"
	"io"
	"log"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

// lazyFixture is basicSpecs with one tensor stored big-endian, so that
// every form (direct, native through a reader, converted, .npy) is in the
// tree.
func lazyFixture(t *testing.T, opts Options) (*Root, *memSource) {
	t.Helper()
	idx, src := fixture(t, basicSpecs)
	for i := range idx.Tensors {
		if idx.Tensors[i].Name == "model/layers.1/attn.weight" {
			idx.Tensors[i].BigEndian = true
		}
	}
	return newRoot(t, idx, src, opts), src
}

// tensorFiles returns every tensor file under e with its path.
func tensorFiles(e *node, prefix string, out map[string]*node) {
	for _, c := range e.children() {
		p := prefix + "/" + c.name
		if c.isDir() {
			tensorFiles(c, p, out)
		} else if c.file.kind == kindTensor {
			out[p] = c
		}
	}
}

// wantBytes is the whole file e should serve, from a reader view builds
// afresh.
func wantBytes(t *testing.T, e *node, src *memSource) []byte {
	t.Helper()
	f := &e.file
	var v view.Reader
	var err error
	switch f.form {
	case formDirect:
		return src.data[f.t.Offset : f.t.Offset+f.t.Size]
	case formNative:
		v, err = view.New(f.t, src, dtype.Invalid)
	case formConverted:
		v, err = view.New(f.t, src, f.dtype)
	case formNPY:
		v, err = view.NewNPY(f.t, src)
	}
	if err != nil {
		t.Fatalf("%s: %v", f.t.Name, err)
	}
	b := make([]byte, v.Size())
	if _, err := v.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatalf("%s: %v", f.t.Name, err)
	}
	return b
}

// TestLazyReaders: no view reader is built by NewRoot; each is built on
// its file's first read, and every file then serves exactly the bytes of
// view.New or view.NewNPY, of the size NewRoot gave it.
func TestLazyReaders(t *testing.T) {
	r, src := lazyFixture(t, Options{})
	files := map[string]*node{}
	tensorFiles(r.lookupPath(""), "", files)
	forms := map[tensorForm]int{}
	for p, e := range files {
		forms[e.file.form]++
		if c := e.loadContents(); c != nil {
			t.Errorf("%s: contents set at mount (%+v)", p, c)
		}
	}
	for _, f := range []tensorForm{formDirect, formNative, formConverted, formNPY} {
		if forms[f] == 0 {
			t.Fatalf("no %s file in the tree: %v", f, forms)
		}
	}
	for p, e := range files {
		want := wantBytes(t, e, src)
		if int64(len(want)) != e.file.size {
			t.Errorf("%s: size %d, the reader's %d", p, e.file.size, len(want))
		}
		checkReads(t, p, r, e, want)
		if c := e.loadContents(); (c != nil) != (e.file.form != formDirect) {
			t.Errorf("%s (%s): contents %+v after reads", p, e.file.form, c)
		}
	}
}

// TestLazyReaderConcurrent: many first reads of one file at once all get
// the right bytes, and one reader is kept (run with -race).
func TestLazyReaderConcurrent(t *testing.T) {
	for _, p := range []string{".f64/model/embed", ".npy/model/layers.0/attn.bias.npy", "model/layers.1/attn.weight"} {
		r, src := lazyFixture(t, Options{})
		e := r.lookupPath(p)
		if e == nil || e.file.form == formDirect {
			t.Fatalf("%s: %+v, want a file served by a reader", p, e)
		}
		want := wantBytes(t, e, src)
		const readers = 16
		var start, done sync.WaitGroup
		start.Add(1)
		got := make([][]byte, readers)
		errs := make([]syscall.Errno, readers)
		for i := range readers {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				dest := make([]byte, len(want)+10)
				res, errno := r.read(e, dest, 0)
				if errno == 0 {
					got[i], _ = res.Bytes(nil)
					got[i] = bytes.Clone(got[i])
				}
				errs[i] = errno
			}()
		}
		start.Done()
		done.Wait()
		for i := range readers {
			if errs[i] != 0 || !bytes.Equal(got[i], want) {
				t.Errorf("%s: reader %d: %v, %d bytes (want %d)", p, i, errs[i], len(got[i]), len(want))
			}
		}
		c := e.loadContents()
		if c == nil || c.r == nil {
			t.Fatalf("%s: no reader kept", p)
		}
		if v, err := r.reader(e); err != nil || v != c.r {
			t.Errorf("%s: reader changed after the first reads", p)
		}
	}
}

// TestLazyReaderError: a reader that cannot be built (here: its size
// disagrees with the file's, which NewRoot's checks make impossible) is
// EIO at open and read, logged once.
func TestLazyReaderError(t *testing.T) {
	var logs bytes.Buffer
	r, _ := lazyFixture(t, Options{Logger: log.New(&logs, "", 0)})
	e := r.lookupPath(".f64/model/embed")
	e.file.size += 8
	if _, _, errno := r.open(e, syscall.O_RDONLY); errno != syscall.EIO {
		t.Errorf("open: %v, want EIO", errno)
	}
	for range 3 {
		if _, errno := r.read(e, make([]byte, 64), 0); errno != syscall.EIO {
			t.Errorf("read: %v, want EIO", errno)
		}
	}
	if lines := strings.Count(logs.String(), "\n"); lines != 1 || !strings.Contains(logs.String(), "model/embed") {
		t.Errorf("log: %q, want one line about model/embed", logs.String())
	}
}

// TestViewReadNoAlloc: once a view's reader is built, its reads allocate
// nothing but the small reply wrapper.
func TestViewReadNoAlloc(t *testing.T) {
	r, _ := lazyFixture(t, Options{})
	for _, p := range []string{".f64/model/embed", ".npy/model/embed.npy", "model/layers.1/attn.weight"} {
		e := r.lookupPath(p)
		dest := make([]byte, 4096)
		if _, errno := r.read(e, dest, 0); errno != 0 {
			t.Fatalf("%s: %v", p, errno)
		}
		allocs := testing.AllocsPerRun(100, func() {
			res, _ := r.read(e, dest, 3)
			res.Done()
		})
		if allocs > 1 {
			t.Errorf("%s: %v allocations per read", p, allocs)
		}
	}
}

// TestEntrySize: a tree holds one entry per file of every view (60,000
// for a 10,000-tensor checkpoint), so an entry stays within the 64-byte
// size class.
func TestEntrySize(t *testing.T) {
	if s := unsafe.Sizeof(entry{}); s > 64 {
		t.Errorf("entry is %d bytes, want at most 64", s)
	}
}
