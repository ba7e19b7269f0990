package integration

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/internal/testdata"
)

// writeDeflatedNPZ writes at path an .npz of n deflated members (as
// np.savez_compressed writes them) named a0, a1, ..., each a uint8 array
// of size bytes, and returns each array's bytes.
func writeDeflatedNPZ(t *testing.T, path string, n, size int) [][]byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	arrays := make([][]byte, n)
	for i := range arrays {
		arrays[i] = pattern(size, byte(i+1))
		w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("a%d.npy", i), Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(hNPY(fmt.Sprintf("{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }", size), arrays[i]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return arrays
}

// TestInflateCacheDirFull: a member that cannot be inflated because
// --cache-dir is full fails its read with EIO, as every other read the
// server cannot serve does (and as the docs say), not ENOSPC, which
// read(2) never returns and which reads as the reader's own disk being
// full; the server logs one line naming the directory and the cause, and
// the next read tries again. The directory is a 64 KiB tmpfs.
func TestInflateCacheDirFull(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "m.npz")
	writeDeflatedNPZ(t, src, 1, 1<<20)
	cache := filepath.Join(dir, "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", cache, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		testdata.SkipOrFail(t, fmt.Sprintf("cannot mount a small tmpfs for a full cache directory: %v", err))
	}
	defer unix.Unmount(cache, unix.MNT_DETACH)

	m := mount(t, src, "--cache-dir", cache, "--inflate-mem", "0")
	for i := 0; i < 2; i++ {
		_, err := os.ReadFile(m.Path("a0"))
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("read %d of a member that does not fit the cache directory: %v, want EIO", i, err)
		}
	}
	m.Unmount()
	// Each read the kernel makes (one or more per ReadFile) tries again
	// and logs its line.
	if s := m.Stderr(); strings.Count(s, "no space left on device; this read fails with EIO") < 2 || !strings.Contains(s, "cache file in "+cache+": ") {
		t.Errorf("server log: %q, want a line per read naming %s and the full disk", s, cache)
	}
}
