package backing

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReopen: a source opened again in any mode reads the file first
// opened, after another file was renamed over its name; a file that
// shrank since is refused as a fault, a closed source as closed.
func TestReopen(t *testing.T) {
	for _, from := range []Mode{Mmap, Pread} {
		for _, to := range []Mode{Pread, Mmap} {
			t.Run(from.String()+"-"+to.String(), func(t *testing.T) {
				dir := t.TempDir()
				p, q := filepath.Join(dir, "a"), filepath.Join(dir, "b")
				want := bytes.Repeat([]byte("validated"), 1000)
				if err := os.WriteFile(p, want, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(q, bytes.Repeat([]byte("x"), 2*len(want)), 0o644); err != nil {
					t.Fatal(err)
				}
				s, err := Open(p, Options{Mode: from})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if err := os.Rename(q, p); err != nil {
					t.Fatal(err)
				}
				r, err := Reopen(ForParsing(s), Options{Mode: to})
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(want)+10)
				n, _ := r.ReadAt(got, 0)
				if r.Name() != p || r.Size() != int64(len(want)) || !bytes.Equal(got[:n], want) {
					t.Fatalf("reopened: name %s, size %d, %d bytes read, equal %v", r.Name(), r.Size(), n, bytes.Equal(got[:n], want))
				}
				r.Close()
				if _, err := s.ReadAt(got[:4], 0); err != nil {
					t.Fatalf("closing the reopened source closed the first: %v", err)
				}
			})
		}
	}
	t.Run("shrank", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "a")
		if err := os.WriteFile(p, make([]byte, 8192), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(p, Options{Mode: Pread})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := os.Truncate(p, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := Reopen(s, Options{Mode: Pread}); !errors.Is(err, ErrFault) {
			t.Fatalf("reopen of a shrunk file: %v, want ErrFault", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "a")
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(p, Options{Mode: Pread})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := Reopen(s, Options{Mode: Pread}); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("reopen of a closed source: %v", err)
		}
	})
}

// TestReopenNotFile: a source that is no local file says so with
// ErrNotFile, which the caller reads through as it is.
func TestReopenNotFile(t *testing.T) {
	f, ms := members(t, []byte("abc"))
	m, err := NewInflateCache(InflateOptions{Dir: t.TempDir()}).OpenMember(f, ms[0])
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := Reopen(m, Options{Mode: Pread}); !errors.Is(err, ErrNotFile) {
		t.Fatalf("reopen of a member: %v, want ErrNotFile", err)
	}
}
