package backing

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestPageRange(t *testing.T) {
	const size = 10*4096 + 100 // the last page is partial
	b := &file{size: size}
	for _, c := range []struct {
		off, n        int64
		start, length int64
		ok            bool
	}{
		{0, 4096, 0, 4096, true},
		{0, 4095, 0, 0, false},          // no whole page
		{1, 2 * 4096, 4096, 4096, true}, // partial pages at both ends kept
		{4096, 3 * 4096, 4096, 3 * 4096, true},
		{9 * 4096, 4096 + 100, 9 * 4096, 2 * 4096, true}, // to the end: the partial last page too
		{0, 1 << 40, 0, 11 * 4096, true},                 // clamped
		{-4096, 2 * 4096, 0, 4096, true},
		{size, 10, 0, 0, false},
		{100, 0, 0, 0, false},
	} {
		start, length, ok := b.pageRange(c.off, c.n)
		if start != c.start || length != c.length || ok != c.ok {
			t.Errorf("pageRange(%d, %d) = %d, %d, %v; want %d, %d, %v", c.off, c.n, start, length, ok, c.start, c.length, c.ok)
		}
	}
}

// residentPages returns which pages of path are in the page cache
// (mincore on a mapping that is never touched).
func residentPages(t *testing.T, path string) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (st.Size()+4095)/4096)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// TestDropCache reads a file through each source that caches, drops
// an aligned 2 MiB range, and checks with mincore that exactly its pages
// left the page cache, and that the bytes still read back. (The kernel
// drops whole folios only, up to 2 MiB and aligned to their size, so a
// range is dropped exactly when it is 2 MiB-aligned: what fs asks for.)
func TestDropCache(t *testing.T) {
	const chunk = 2 << 20
	data := pattern(3*chunk+100, 11)
	for _, mode := range []Mode{Mmap, Pread} {
		t.Run(mode.String(), func(t *testing.T) {
			path := writeFile(t, data)
			if f, err := os.Open(path); err == nil {
				f.Sync() // written pages are dirty: fadvise drops clean ones only
				f.Close()
			}
			var st unix.Statfs_t
			if unix.Statfs(path, &st) == nil && st.Type == unix.TMPFS_MAGIC {
				t.Skip("the temp dir is tmpfs: its pages are memory, not a cache")
			}
			s := openMode(t, path, mode)
			buf := make([]byte, len(data))
			checkRead(t, s, data, 0, len(data), buf)
			for i, r := range residentPages(t, path) {
				if !r {
					t.Fatalf("page %d not resident after reading the whole file", i)
				}
			}
			d := s.(CacheDropper)
			if err := d.DropCache(chunk, chunk); err != nil {
				t.Fatal(err)
			}
			if err := d.DropCache(3*chunk, 100); err != nil { // the partial last page, at the end
				t.Fatal(err)
			}
			for i, r := range residentPages(t, path) {
				want := i < chunk/4096 || (i >= 2*chunk/4096 && i < 3*chunk/4096)
				if r != want {
					t.Errorf("page %d resident = %v after dropping [2 MiB, 4 MiB) and the tail, want %v", i, r, want)
				}
			}
			checkRead(t, s, data, 0, len(data), buf)
			if err := s.(CacheDropper).DropCache(1<<40, 5); err != nil {
				t.Errorf("DropCache past the end: %v", err)
			}
			s.Close()
			if err := s.(CacheDropper).DropCache(0, 4096); err == nil {
				t.Errorf("DropCache after Close: no error")
			}
		})
	}
	if _, ok := openMode(t, writeFile(t, data), Direct).(CacheDropper); ok {
		t.Errorf("a Direct source implements CacheDropper: it has no cache to drop")
	}
}
