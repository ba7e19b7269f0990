package fs

import (
	"os/exec"
	"runtime"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
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
// on demand: a pointer and a path per tensor): the entry
// (64 bytes), its slot in its directory and in the inode table, and a
// directory's own few. Nothing grows with what the kernel looks up: the
// mount serves lookups from the tree's own inode numbers (raw.go).
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
	// 64 (entry) + 8 (inode table) + 8 (its directory's slot) = 80 per file,
	// plus 32 per directory; the race detector's allocator pads objects.
	limit := 120.0
	if raceEnabled {
		limit = 192
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
