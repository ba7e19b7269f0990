package fs

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// fileFixture writes data to a file and opens it in mode, with one
// contiguous F32 tensor "w" over bytes [16, len(data)).
func fileFixture(t *testing.T, data []byte, mode backing.Mode) (*index.Index, backing.Source) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ckpt.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := backing.Open(path, backing.Options{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	n := int64(len(data)-16) / 4
	idx := &index.Index{Format: "safetensors", Sources: []string{path},
		Tensors: []index.Tensor{{Name: "w", DType: dtype.F32, Shape: []int64{n}, Offset: 16, Size: 4 * n}}}
	if err := index.AssignPaths(idx); err != nil {
		t.Fatal(err)
	}
	return idx, src
}

// TestSplices: only tensor files served from a descriptor make the mount
// splice (and so cap MaxWrite below 1 MiB); index.json and the metadata
// files never do.
func TestSplices(t *testing.T) {
	idx, mem := fixture(t, basicSpecs)
	if r := newRoot(t, idx, mem, Options{}); r.splices() {
		t.Error("a tree with no descriptor splices")
	}
	data := make([]byte, 16+4096)
	idx, src := fileFixture(t, data, backing.Mmap)
	if r := newRoot(t, idx, src, Options{}); !r.splices() {
		t.Error("a mapped file with a descriptor does not splice")
	}
	if r := newRoot(t, idx, src, Options{NoSplice: true}); r.splices() {
		t.Error("NoSplice: the tree still splices")
	}
}

// TestMountTuning mounts with the default options and with DirectIO,
// and reads from a subprocess: the readahead window is raised (as root),
// and a direct-I/O file reads and maps to the same bytes.
func TestMountTuning(t *testing.T) {
	data := make([]byte, 16+3<<20)
	for i := range data {
		data[i] = byte(i*13 + i>>12)
	}
	for _, direct := range []bool{false, true} {
		idx, src := fileFixture(t, data, backing.Mmap)
		r := newRoot(t, idx, src, Options{DirectIO: direct})
		dir := mountForTest(t, r)
		if !direct && os.Geteuid() == 0 {
			m, ok := findMount(dir)
			if !ok {
				t.Fatalf("%s not in mountinfo", dir)
			}
			ra, err := os.ReadFile("/sys/class/bdi/" + m.dev + "/read_ahead_kb")
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultReadAheadRequests * MaxReadSize(r.splices()) / 1024
			if got, _ := strconv.Atoi(strings.TrimSpace(string(ra))); got != want {
				t.Errorf("read_ahead_kb = %d, want %d", got, want)
			}
		}
		if direct && !r.directIO.Load() {
			t.Log("this kernel cannot map direct-I/O files: the files keep the page cache")
		}
		out := py(t, `
import hashlib, mmap, sys
p = sys.argv[1]
with open(p, 'rb') as f:
    a = f.read()
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    b = m[:]
    c = m[12345:12345+70000]
    m.close()
with open(p, 'rb', buffering=0) as f:
    f.seek(777)
    d = f.read(5000)
print(hashlib.sha256(a).hexdigest(), hashlib.sha256(b).hexdigest(), hashlib.sha256(c).hexdigest(), hashlib.sha256(d).hexdigest())
`, filepath.Join(dir, "w"))
		w := data[16:]
		want := strings.Join([]string{sha(w), sha(w), sha(w[12345 : 12345+70000]), sha(w[777 : 777+5000])}, " ")
		if got := strings.TrimSpace(out); got != want {
			t.Errorf("direct I/O %v: read, mmap, mmap slice, pread hashes\n%s\nwant\n%s", direct, got, want)
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
