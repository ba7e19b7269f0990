package integration

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/internal/testenv"
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
		testenv.SkipOrFail(t, fmt.Sprintf("cannot mount a small tmpfs for a full cache directory: %v", err))
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

// TestInflateReservationsWait: --inflate-disk reservations wait for room
// instead of failing. Members that each fit the budget but not together
// (four of 1 MiB, or two, each more than half the budget: the defaults'
// two 9 GiB members of a 16 GiB budget, in small) load with every byte
// right, and 200 parallel reads of them through a mount (from another
// process) get no EIO; only a member that can never fit is refused.
func TestInflateReservationsWait(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 20
	budget := []string{"--inflate-mem", "0", "--inflate-disk", "1536KiB"}
	for _, n := range []int{2, 4} {
		src := filepath.Join(dir, fmt.Sprintf("m%d.npz", n))
		arrays := writeDeflatedNPZ(t, src, n, size)
		want := ""
		for i, a := range arrays {
			want += fmt.Sprintf("%x  a%d\n", sha256.Sum256(a), i)
		}
		t.Run(fmt.Sprintf("load-%d", n), func(t *testing.T) {
			r := runTensorfs(t, append(append([]string{"load", "--quiet", "--sha256"}, budget...), src)...)
			if r.code != 0 || r.stdout != want {
				t.Fatalf("exit %d, stderr %q\nstdout:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
			}
		})
	}
	t.Run("mount-200-reads", func(t *testing.T) {
		src := filepath.Join(dir, "m4.npz")
		m := mount(t, src, budget...)
		out := runPy(t, `
import sys, os, hashlib
from concurrent.futures import ThreadPoolExecutor
mnt = sys.argv[1]
def read(i):
    name = "a%d" % (i % 4)
    try:
        with open(os.path.join(mnt, name), "rb") as f:
            return name, hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        return name, "error %s" % e.strerror
with ThreadPoolExecutor(200) as ex:
    res = list(ex.map(read, range(200)))
sums = {}
for name, h in res:
    sums.setdefault(name, {}).setdefault(h, 0)
    sums[name][h] += 1
for name in sorted(sums):
    for h, k in sorted(sums[name].items()):
        print(name, h, k)
`, m.Dir)
		want := ""
		arrays := [][]byte{pattern(size, 1), pattern(size, 2), pattern(size, 3), pattern(size, 4)}
		for i, a := range arrays {
			want += fmt.Sprintf("a%d %x 50\n", i, sha256.Sum256(a))
		}
		if out != want {
			log := m.Stderr()
			if len(log) > 2000 {
				log = log[:2000] + "..."
			}
			t.Fatalf("200 parallel reads (name, sha256 or error, count):\n%s\nwant:\n%s\nserver log:\n%s", out, want, log)
		}
	})
	t.Run("never-fits", func(t *testing.T) {
		checkOneLineError(t, runTensorfs(t, "ls", "--inflate-mem", "0", "--inflate-disk", "512KiB", filepath.Join(dir, "m2.npz")), 1,
			"more than the 524288 bytes of disk the cache of inflated members may use")
	})
}
