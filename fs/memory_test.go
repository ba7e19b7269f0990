package fs

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestTreeMemoryPerEntry bounds what the mounted tree keeps per file and
// directory (every view's included, and index.json, which is rendered
// on demand: a tensor index per tensor): one path tree shared by the six
// places that show it, a file's slot (4 bytes) and membership byte, a
// directory's 13 bytes, so a few bytes a node seen in all six (it was
// 64-byte entries per view, and 90 bytes a node). Nothing grows with what
// the kernel looks up: the mount serves lookups from node IDs (raw.go).
func TestTreeMemoryPerEntry(t *testing.T) {
	n := 20000
	if testing.Short() || raceEnabled {
		n = 5000
	}
	idx, src := bigIndex(n)
	before := heapInUse()
	r, err := NewRoot(idx, []backing.Source{src}, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	after := heapInUse()
	tree := int64(after) - int64(before)
	per := float64(tree) / float64(r.Nodes())
	t.Logf("%d tensors: %d nodes, tree %d bytes (%.1f per node), index.json %d bytes (rendered on demand)", n, r.Nodes(), tree, per, r.index.Size())
	// 5 bytes a file and 13 a directory, each seen in six places, and
	// index.json's 4 bytes a tensor; the race detector's allocator pads
	// objects.
	limit := 16.0
	if raceEnabled {
		limit = 32
	}
	if per > limit {
		t.Errorf("%.1f bytes per node, want at most %.0f", per, limit)
	}
	runtime.KeepAlive(r)
}

// TestMountMemoryPerLookup: the server keeps nothing per inode the
// kernel looks up (go-fuse's node API kept about 430 bytes in several
// objects each, for as long as the kernel held the inode). A walk of
// every file and directory (find -ls, from a subprocess) leaves the
// server's heap with the objects a walk of the top level left it with.
// Live objects are counted rather than bytes: the server's request
// buffers (a MiB each, up to one per CPU, 16 at most) are a few objects
// but megabytes.
func TestMountMemoryPerLookup(t *testing.T) {
	n := 5000
	if raceEnabled {
		n = 1000
	}
	idx, src := bigIndex(n)
	r := newRoot(t, idx, src, Options{})
	dir := mountForTest(t, r)
	find := func(args ...string) {
		t.Helper()
		out, err := exec.Command("find", append([]string{dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("find: %v\n%s", err, out)
		}
	}
	find("-maxdepth", "1", "-ls")
	before := heapStats()
	find("-ls")
	after := heapStats()
	objects := float64(int64(after.HeapObjects)-int64(before.HeapObjects)) / float64(r.Nodes())
	t.Logf("%d nodes walked: heap %+d bytes, %+d objects (%.3f per node)", r.Nodes(),
		int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(after.HeapObjects)-int64(before.HeapObjects), objects)
	if objects > 0.25 {
		t.Errorf("%.3f heap objects per node looked up kept by the server, want at most 0.25", objects)
	}
}

// heapStats returns the memory statistics after a full collection.
func heapStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// writeDeepSafetensors writes a safetensors file of n BF16 tensors whose
// names are depth components deep, each its own chain of directories
// ("k/a/a/.../a"), and returns its path and the size of its header.
func writeDeepSafetensors(t *testing.T, n, depth int) (string, int64) {
	t.Helper()
	var h strings.Builder
	chain := strings.Repeat("/a", depth-1)
	h.WriteByte('{')
	for k := 0; k < n; k++ {
		if k > 0 {
			h.WriteByte(',')
		}
		fmt.Fprintf(&h, `"%d%s":{"dtype":"BF16","shape":[2],"data_offsets":[%d,%d]}`, k, chain, 4*k, 4*k+4)
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	data := binary.LittleEndian.AppendUint64(nil, uint64(h.Len()))
	data = append(append(data, h.String()...), make([]byte, 4*n)...)
	p := filepath.Join(t.TempDir(), "deep.safetensors")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, int64(h.Len())
}

// TestDeepNamesMemory: the mounted tree of deep names costs at most 8
// times the header's bytes. Its directories are built once, in one tree
// that every view shows (a view is a few bits of the node ID and a
// membership byte per node, not a copy): 400 names 2,000 components deep
// (a 1.6 MB header) made six trees of 800,000 directories each before:
// 539 MB, 332 times the header (now 10.5 MB, 6.4 times).
func TestDeepNamesMemory(t *testing.T) {
	const n, depth = 400, 2000
	p, header := writeDeepSafetensors(t, n, depth)
	idx, files, err := formats.Load(p, func(p string) (index.File, error) {
		src, err := backing.Open(p, backing.Options{Mode: backing.Pread})
		if err != nil {
			return nil, err
		}
		return backing.ForParsing(src), nil
	}, formats.Options{Inflate: backing.DefaultInflateCache()})
	if err != nil {
		t.Fatal(err)
	}
	src := backing.Unwrap(files[0].(backing.Source))
	defer src.Close()
	before := heapInUse()
	r, err := NewRoot(idx, []backing.Source{src}, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	tree := int64(heapInUse()) - int64(before)
	t.Logf("%d names %d deep: header %d bytes, %d nodes in every view, tree %d bytes (%.2f times the header)", n, depth, header, r.Nodes(), tree, float64(tree)/float64(header))
	// Every view holds every directory: six trees' worth of nodes.
	if want := uint64(6 * n * depth); r.Nodes() < want || r.Nodes() > want+30 {
		t.Errorf("%d nodes, want about %d", r.Nodes(), want)
	}
	for _, v := range []string{"", ".bf16/", ".f32/", ".npy/"} {
		k := n - 1
		path := fmt.Sprintf("%s%d%s", v, k, strings.Repeat("/a", depth-1))
		if v == ".npy/" {
			path += npySuffix
		}
		if e := r.lookupPath(path); e == nil || e.isDir() || e.file.t.Name != fmt.Sprintf("%d%s", k, strings.Repeat("/a", depth-1)) {
			t.Errorf("%s: not the tensor's file", path)
		}
	}
	if tree > 8*header {
		t.Errorf("tree of %d bytes for a header of %d: over 8 times", tree, header)
	}
	runtime.KeepAlive(r)
}
