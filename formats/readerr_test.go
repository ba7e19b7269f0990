package formats

import (
	"errors"
	"io"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// memTree is a Tree of in-memory files in one directory "/d".
type memTree map[string][]byte

func (t memTree) IsDir(p string) (bool, error) {
	if p == "/d" {
		return true, nil
	}
	if _, ok := t[path.Base(p)]; ok {
		return false, nil
	}
	return false, errors.New(p + ": no such file")
}

func (t memTree) Files(dir string) ([]string, error) {
	var out []string
	for n := range t {
		out = append(out, path.Join(dir, n))
	}
	sort.Strings(out)
	return out, nil
}

// failingFile serves its bytes for the first ok reads, then fails every
// read with err; with once, it fails only its first read (a GET that
// failed once).
type failingFile struct {
	name string
	b    []byte
	ok   int
	err  error
	once bool
}

func (f *failingFile) Name() string { return f.name }
func (f *failingFile) Size() int64  { return int64(len(f.b)) }
func (f *failingFile) ReadAt(p []byte, off int64) (int, error) {
	if f.once {
		f.once = false
		return 0, f.err
	}
	if f.ok <= 0 {
		return 0, f.err
	}
	f.ok--
	if off >= int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestReadErrorIsNotNoCheckpoint: a file of a directory whose read fails
// (a remote GET refused, an I/O error) makes loading fail with that
// error, never "no checkpoint in the directory" nor a directory of
// another kind: the .metadata of a distributed checkpoint, a file being
// sniffed, and a file checked for a Git LFS pointer.
func TestReadErrorIsNotNoCheckpoint(t *testing.T) {
	boom := errors.New("https://hub.example/x: HTTP 401 GatedRepo: the token lacks access")
	for _, tc := range []struct {
		name string
		tree memTree
		fail string
		ok   int
		once bool
	}{
		{"dcp metadata", memTree{".metadata": []byte("\x80\x02ctorch.distributed.checkpoint.metadata\nMetadata\n"), "__0_0.distcp": []byte("x")}, ".metadata", 1 << 30, true},
		{"sniff", memTree{"model.safetensors": []byte("whatever")}, "model.safetensors", 0, false},
		{"lfs pointer", memTree{"notes.txt": []byte("plain text, not a checkpoint, long enough")}, "notes.txt", 1, false},
	} {
		failed := false // a once failure happened: the file reads from now on
		open := func(p string) (index.File, error) {
			b := tc.tree[path.Base(p)]
			f := &failingFile{name: p, b: b, ok: 1 << 30, err: boom}
			if path.Base(p) == tc.fail && !failed {
				f.ok, f.once = tc.ok, tc.once
				failed = tc.once
			}
			return f, nil
		}
		_, _, err := LoadTree("/d", tc.tree, open, Options{})
		if err == nil || !strings.Contains(err.Error(), boom.Error()) || strings.Contains(err.Error(), "no checkpoint") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want the read's error in one line", tc.name, err)
		}
	}
}
