package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRemoteCacheDirHostile: `load` of an HTTP source through a
// --cache-dir whose parts were changed in place or swapped for named
// pipes gives the server's bytes, exit 0 and one line about the cache,
// and never waits on a pipe; a --cache-dir that others can write is
// refused with one line, for a remote source and for a local one
// (inflated .npz members go there too).
func TestRemoteCacheDirHostile(t *testing.T) {
	dir := t.TempDir()
	const rel = "model.safetensors"
	writeSafetensors(t, filepath.Join(dir, rel), []stTensor{{Name: "w", DType: "F32", Shape: []int64{64, 256}, Data: pattern(64*256*4, 3)}}, nil)
	base := httpServer(t, dir)
	cache := filepath.Join(t.TempDir(), "cache")
	args := []string{"load", "--quiet", "--sha256", "--part-size", "8KiB", "--cache-dir", cache, base + "/" + rel}
	want := runTensorfs(t, "load", "--quiet", "--sha256", filepath.Join(dir, rel))
	if r := runTensorfs(t, args...); r.code != 0 || r.stdout != want.stdout {
		t.Fatalf("cold: exit %d %s", r.code, r.stderr)
	}
	var parts []string
	filepath.WalkDir(cache, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && e.Name() != "key" {
			parts = append(parts, p)
		}
		return nil
	})
	if len(parts) < 2 {
		t.Fatalf("%d parts in the cache", len(parts))
	}
	fifo := false
	for _, p := range parts {
		if !fifo && !strings.HasSuffix(p, ".0") { // part 0 is fetched at open: never read from disk
			fifo = true
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, _ := os.ReadFile(p)
		b[len(b)/3] ^= 0x40
		os.WriteFile(p, b, 0o600)
	}
	r := runTensorfs(t, args...)
	if r.code != 0 || r.stdout != want.stdout {
		t.Fatalf("hostile cache: exit %d, sums equal %v, %s", r.code, r.stdout == want.stdout, r.stderr)
	}
	if s := strings.TrimSpace(r.stderr); strings.Count(s, "\n") != 0 || !strings.Contains(s, "disk cache") {
		t.Errorf("stderr %q, want one line about the disk cache", s)
	}

	// Checked for a local SOURCE too: inflated .npz members go there.
	os.Chmod(cache, 0o777)
	for _, src := range []string{base + "/" + rel, filepath.Join(dir, rel)} {
		r := runTensorfs(t, "load", "--quiet", "--cache-dir", cache, src)
		s := strings.TrimSpace(r.stderr)
		if r.code != 1 || strings.Count(s, "\n") != 0 || !strings.Contains(s, cache+": not private: writable by others (mode 0777)") {
			t.Errorf("%s with a --cache-dir writable by others: exit %d, %q", src, r.code, s)
		}
	}
}
