package fs

import (
	"bytes"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// spliceFixture is a 4 MiB BF16 tensor "w" in a safetensors file on
// disk, mapped (so that reads of it and of its export splice).
func spliceFixture(t *testing.T) (*Root, []byte) {
	t.Helper()
	idx, mem := fixture(t, []spec{{"w", dtype.BF16, []int64{2 << 20}}})
	for i := range mem.data {
		mem.data[i] = byte(i*7 + i>>13)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, mem.data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx.Sources = []string{path}
	src, err := backing.Open(path, backing.Options{Mode: backing.Mmap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return newRoot(t, idx, src, Options{}), mem.data
}

// TestLargeReadsCopied: a read that go-fuse could not splice (its reply
// and a spare page over the largest pipe) is copied, with the right
// bytes, instead of being handed over to fail there; the largest read
// that fits is still spliced. Reads of a stored tensor and of the
// export alike.
func TestLargeReadsCopied(t *testing.T) {
	r, data := spliceFixture(t)
	largest := maxSpliced - maxSpliced%pageSize
	for _, p := range []string{"w", ".safetensors/model.safetensors"} {
		e := r.lookupPath(p)
		if e == nil {
			t.Fatalf("%s: not in the tree", p)
		}
		// base is where the file's bytes are in data: the tensor's start,
		// or the export's (the file itself, whose header is not data's).
		base, off := int64(16), int64(4096)
		if p != "w" {
			base, off = 0, e.file.size-int64(3<<20)
		}
		for _, n := range []int{largest, 1 << 20, 2 << 20} {
			dest := make([]byte, n)
			res, errno := r.read(e, dest, off)
			if errno != 0 {
				t.Fatalf("%s: %d bytes: %v", p, n, errno)
			}
			_, spliced := res.(interface{ Seekable() (uintptr, int64, int) })
			if want := n <= maxSpliced; spliced != want {
				t.Errorf("%s: a read of %d bytes (pipes of %d): spliced %v, want %v", p, n, maxSpliced+pageSize+16, spliced, want)
			}
			got, _ := res.Bytes(make([]byte, n))
			res.Done()
			if p == "w" && !bytes.Equal(got, data[base+off:base+off+int64(n)]) {
				t.Errorf("%s: %d bytes at %d differ", p, n, off)
			}
			if len(got) != n {
				t.Errorf("%s: %d bytes of %d", p, len(got), n)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for go-fuse's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMountLogsNoTrySplice mounts a checkpoint that splices and reads it
// from a subprocess in reads of 1 MiB and more (buffered and O_DIRECT):
// the bytes are right and the server logs nothing, in particular no
// go-fuse "trySplice: splice: want N bytes, max pipe size M" line.
func TestMountLogsNoTrySplice(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.SkipOrFail(t, "no /dev/fuse: "+err.Error())
	}
	r, data := spliceFixture(t)
	var logs syncBuffer
	dir := t.TempDir()
	server, err := Mount(dir, r, MountOptions{Logger: log.New(&logs, "", 0)})
	if err != nil {
		testenv.SkipOrFail(t, "cannot mount FUSE here: "+err.Error())
	}
	defer server.Unmount()
	want := data[16:]
	for _, args := range [][]string{{"bs=1M"}, {"bs=2M"}, {"bs=4M", "iflag=direct"}, {"bs=1M", "iflag=direct"}} {
		out, err := exec.Command("dd", append([]string{"if=" + filepath.Join(dir, "w"), "status=none"}, args...)...).Output()
		if err != nil {
			t.Fatalf("dd %v: %v", args, err)
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("dd %v: %d bytes, not the tensor's %d", args, len(out), len(want))
		}
	}
	if err := server.Unmount(); err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); strings.Contains(s, "trySplice") || strings.TrimSpace(s) != "" {
		t.Fatalf("the server logged:\n%s", s)
	}
}
