package index

import "fmt"

// MaxUnservedBytes caps what an Index's Unserved list holds (names,
// types, reasons and shapes, counted as they are kept): a model of
// 300,000 nameless initializers (600 KB) is a list of a few thousand
// entries and counts, not 300,000 entries and lines.
const MaxUnservedBytes = 1 << 20

// unservedEntryBytes is what an entry costs beside its strings and shape.
const unservedEntryBytes = 96

// UnservedList accumulates an Index's Unserved within MaxUnservedBytes.
// Once the list is full, an entry is counted in the More of the listed
// entry of its kind (the same Type and Why), or, when none of its kind
// is listed, of one last entry that counts the others. Every entry is
// counted once: Len is how many were added.
type UnservedList struct {
	list  []Unserved
	bytes int
	kinds map[[2]string]int // listed kinds: index into list of the first
	other int               // entries of kinds not listed, past the cap
	n     int
}

// Add adds u.
func (l *UnservedList) Add(u Unserved) {
	l.n++
	k := [2]string{u.Type, u.Why}
	cost := unservedEntryBytes + len(u.Name) + len(u.Type) + len(u.Why) + 8*len(u.Shape)
	if l.bytes+cost <= MaxUnservedBytes {
		l.bytes += cost
		if l.kinds == nil {
			l.kinds = map[[2]string]int{}
		}
		if _, ok := l.kinds[k]; !ok {
			l.kinds[k] = len(l.list)
		}
		l.list = append(l.list, u)
		return
	}
	if i, ok := l.kinds[k]; ok {
		l.list[i].More++
		return
	}
	l.other++
}

// Len is how many entries were added, listed or counted.
func (l *UnservedList) Len() int { return l.n }

// List returns the entries: those kept, then, when some were of kinds
// not kept, one entry that counts them.
func (l *UnservedList) List() []Unserved {
	if l.other == 0 {
		return l.list
	}
	return append(l.list, Unserved{Type: "various", Offset: -1, More: int64(l.other) - 1,
		Why: fmt.Sprintf("entries past the %d MiB the list of unserved entries holds", MaxUnservedBytes>>20)})
}
