package index

import (
	"fmt"
	"testing"
)

// TestUnservedList: entries past MaxUnservedBytes are counted in the
// listed entry of their kind, or, of a kind not listed, in one last
// entry; the list stays within the cap and counts every entry once.
func TestUnservedList(t *testing.T) {
	var l UnservedList
	const n = 200_000
	for i := 0; i < n; i++ {
		why := "nameless"
		if i%2 == 1 {
			why = fmt.Sprintf("reason %d", i) // a kind of its own each
		}
		l.Add(Unserved{Name: fmt.Sprintf("t%d", i), Type: "FLOAT", Why: why, Offset: -1})
	}
	list := l.List()
	total, bytes := int64(0), 0
	for _, u := range list[:len(list)-1] {
		total += 1 + u.More
		bytes += unservedEntryBytes + len(u.Name) + len(u.Type) + len(u.Why) + 8*len(u.Shape)
	}
	last := list[len(list)-1]
	total += 1 + last.More
	if l.Len() != n || total != n || bytes > MaxUnservedBytes || last.Type != "various" || len(list) > MaxUnservedBytes/unservedEntryBytes {
		t.Fatalf("%d entries standing for %d of %d (Len %d), %d bytes, last %+v", len(list), total, n, l.Len(), bytes, last)
	}
	if list[0].More != n/2-int64(countWhy(list, "nameless")) {
		t.Fatalf("the nameless entry counts %d more", list[0].More)
	}
}

func countWhy(list []Unserved, why string) int {
	k := 0
	for _, u := range list {
		if u.Why == why {
			k++
		}
	}
	return k
}
