package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
)

// partFiles lists the part files under the cache directory dir (every
// regular file but the key).
func partFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && e.Name() != keyName {
			out = append(out, p)
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatalf("no part files in %s", dir)
	}
	return out
}

// readAll reads the whole object through a fresh client of st on dir,
// failing the test if the read does not end within a minute (a hang
// guard only: a correct cache never waits on anything).
func readAll(t *testing.T, st *memStore, opts Options) ([]byte, []string) {
	t.Helper()
	var mu sync.Mutex
	var logged []string
	opts.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, strings.TrimSpace(fmt.Sprintf(format, args...)))
	}
	c, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		buf []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := c.Open(context.Background(), "obj")
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer s.Close()
		buf := make([]byte, s.Size())
		_, err = s.ReadAt(buf, 0)
		done <- result{buf, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		mu.Lock()
		defer mu.Unlock()
		return r.buf, append([]string(nil), logged...)
	case <-time.After(time.Minute):
		t.Fatal("a read through the disk cache hangs")
	}
	return nil, nil
}

// TestDiskCacheHostile: parts changed in place, swapped for symbolic
// links to other files or for named pipes are never served (nor waited
// on): they are fetched again from the store, and one line is logged.
func TestDiskCacheHostile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attack func(t *testing.T, part string)
	}{
		{"changed in place", func(t *testing.T, part string) {
			f, err := os.OpenFile(part, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 1)
			f.ReadAt(b, 100)
			b[0] ^= 0xff
			f.WriteAt(b, 100)
		}},
		{"truncated", func(t *testing.T, part string) {
			st, _ := os.Stat(part)
			os.Truncate(part, st.Size()-1)
		}},
		{"symbolic link to another file", func(t *testing.T, part string) {
			st, _ := os.Stat(part)
			other := filepath.Join(t.TempDir(), "other")
			os.WriteFile(other, bytes.Repeat([]byte{0x55}, int(st.Size())), 0o600)
			os.Remove(part)
			if err := os.Symlink(other, part); err != nil {
				t.Fatal(err)
			}
		}},
		{"named pipe", func(t *testing.T, part string) {
			os.Remove(part)
			if err := syscall.Mkfifo(part, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{PartSize: 4096, Readahead: -1, CacheDir: dir, CacheSize: 1 << 20}
			st, s := newTest(t, 30000, opts)
			buf := make([]byte, 30000)
			if _, err := s.ReadAt(buf, 0); err != nil {
				t.Fatal(err)
			}
			s.Close()
			for _, p := range partFiles(t, dir) {
				tc.attack(t, p)
			}
			before := st.gets.Load()
			got, logged := readAll(t, st, opts)
			if !bytes.Equal(got, st.data) {
				t.Fatal("the disk cache served other bytes than the store's")
			}
			if st.gets.Load() == before {
				t.Error("nothing was fetched again")
			}
			if len(logged) != 1 {
				t.Errorf("logged %q, want one line", logged)
			}
			// The bad parts were replaced: the next client reads
			// everything from disk.
			before = st.gets.Load()
			if got, _ := readAll(t, st, opts); !bytes.Equal(got, st.data) {
				t.Fatal("bytes differ")
			}
			if g := st.gets.Load() - before; g != 0 {
				t.Errorf("%d GETs after the cache was mended", g)
			}
		})
	}
}

// TestDiskCacheDirRefused: a cache directory, or a directory or the key
// in it, that another user could write (or read, for the key) is
// refused with one line naming it, as ssh refuses its files.
func TestDiskCacheDirRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		root   bool // needs root (chown)
		attack func(t *testing.T, dir string)
		want   string
	}{
		{"cache dir writable by others", false, func(t *testing.T, dir string) {
			os.Chmod(dir, 0o777)
		}, "writable by others (mode 0777)"},
		{"cache dir writable by its group", false, func(t *testing.T, dir string) {
			os.Chmod(dir, 0o770)
		}, "writable by others (mode 0770)"},
		{"sticky like /tmp", false, func(t *testing.T, dir string) {
			os.Chmod(dir, os.ModeSticky|0o777)
		}, "writable by others (mode 1777)"},
		{"version dir writable by others", false, func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, diskCacheVersion), 0o777)
		}, "tensorfs-parts-v2: not private: writable by others"},
		{"part dir writable by others", false, func(t *testing.T, dir string) {
			os.Chmod(filepath.Dir(partFiles(t, dir)[0]), 0o757)
		}, "not private: writable by others (mode 0757)"},
		{"part dir a symbolic link", false, func(t *testing.T, dir string) {
			sub := filepath.Dir(partFiles(t, dir)[0])
			elsewhere := filepath.Join(t.TempDir(), "x")
			if err := os.Rename(sub, elsewhere); err != nil {
				t.Fatal(err)
			}
			os.Symlink(elsewhere, sub)
		}, "a symbolic link, not a directory"},
		{"key readable by others", false, func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, diskCacheVersion, keyName), 0o644)
		}, "key: not private"},
		{"key a symbolic link", false, func(t *testing.T, dir string) {
			k := filepath.Join(dir, diskCacheVersion, keyName)
			other := filepath.Join(t.TempDir(), "k")
			os.WriteFile(other, make([]byte, macLen), 0o600)
			os.Remove(k)
			os.Symlink(other, k)
		}, "key: not private: a symbolic link"},
		{"cache dir owned by another user", true, func(t *testing.T, dir string) {
			os.Chown(dir, 12345, 12345)
		}, "owned by user 12345"},
		{"part dir owned by another user", true, func(t *testing.T, dir string) {
			os.Chown(filepath.Dir(partFiles(t, dir)[0]), 12345, 12345)
		}, "owned by user 12345"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("needs root to give a directory to another user")
			}
			dir := filepath.Join(t.TempDir(), "cache")
			opts := Options{PartSize: 4096, Readahead: -1, CacheDir: dir, CacheSize: 1 << 20}
			_, s := newTest(t, 10000, opts)
			s.ReadAt(make([]byte, 10000), 0)
			s.Close()
			tc.attack(t, dir)
			_, err := New(&memStore{}, opts)
			if err == nil {
				t.Fatal("the cache directory was accepted")
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, dir) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming %s and saying %q", msg, dir, tc.want)
			}
			if !errors.Is(err, backing.ErrNotPrivate) {
				t.Errorf("error %v does not wrap backing.ErrNotPrivate", err)
			}
		})
	}
}

// TestDiskCacheOrigin: two stores serving the same key with the same
// size and validators but other bytes share no parts.
func TestDiskCacheOrigin(t *testing.T) {
	dir := t.TempDir()
	opts := Options{PartSize: 4096, Readahead: -1, CacheDir: dir, CacheSize: 1 << 20}
	a, _ := newTest(t, 30000, opts)
	a.origin = "a"
	got, _ := readAll(t, a, opts)
	if !bytes.Equal(got, a.data) {
		t.Fatal("bytes differ")
	}
	b := &memStore{data: bytes.Repeat([]byte{7}, len(a.data)), etag: a.etag, origin: "b"}
	if got, _ := readAll(t, b, opts); !bytes.Equal(got, b.data) {
		t.Fatal("the disk cache served one store's bytes for another's")
	}
	// And each is still served warm.
	before := a.gets.Load()
	if got, _ := readAll(t, a, opts); !bytes.Equal(got, a.data) || a.gets.Load() != before {
		t.Fatalf("store a: warm read wrong or sent %d GETs", a.gets.Load()-before)
	}
}
