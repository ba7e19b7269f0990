package numpy

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// heapAfterGC is the heap in use once garbage is collected.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// An .npz of many deflated members costs no more at a long path than at
// a short one: a member's Sources entry does not repeat the file's path
// (issue 28: 100,000 members at a 3.8 KB path cost 950 MiB).
func TestSourcesDoNotRepeatPath(t *testing.T) {
	n := 10000
	if raceEnabled {
		n = 2000 // the same shape, a fifth of the members (50 s under -race)
	}
	ms := make([]ptMember, n)
	for i := range ms {
		ms[i] = ptMember{Name: fmt.Sprintf("w%d.npy", i), Data: npyExact(100), Deflate: true}
	}
	b := ptZip(t, ms...)
	long := "/" + strings.Repeat("d", 4095) + "/m.npz"
	heap := map[string]uint64{}
	for _, path := range []string{"/tmp/m.npz", long} {
		before := heapAfterGC()
		idx, err := ParseNPZ(ptMem(path, b))
		if err != nil {
			t.Fatal(err)
		}
		heap[path] = heapAfterGC() - before
		if len(idx.Members) != n || idx.SourceName(idx.Members[n-1].Source) != path+":"+idx.Members[n-1].Name {
			t.Fatalf("%d members, last named %q", len(idx.Members), idx.SourceName(idx.Members[n-1].Source))
		}
		runtime.KeepAlive(idx)
	}
	short := heap["/tmp/m.npz"]
	if grown := int64(heap[long]) - int64(short); grown > int64(n*4096/8) {
		t.Errorf("the index of %d members holds %d bytes at a 4 KB path, %d at a 10-byte one: %d more, want far less than %d (a path per member)", n, heap[long], short, grown, n*4096)
	} else {
		t.Logf("index of %d members: %d bytes at a 10-byte path, %d at a 4 KB path", n, short, heap[long])
	}
}
