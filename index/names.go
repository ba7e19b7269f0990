package index

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Tensor names to paths in the mounted tree.
//
// A name is split at every '/' into components; each component becomes one
// path component (directories, then the file), encoded as follows:
//
//  1. An empty component (a name that starts or ends with '/', or holds
//     "//", or is empty) becomes "%".
//  2. Otherwise, these bytes are written as '%' and two upper-case hex
//     digits: '%' itself (%25), control bytes 0x00-0x1F and 0x7F (NUL is
//     %00), every byte that is not part of valid UTF-8, and a '.' that is
//     the component's first byte (%2E). So "." is "%2E", ".." is "%2E.",
//     ".hidden" is "%2Ehidden", and no component starts with '.': paths that
//     start with '.' are kept for .tensorfs and the views (.f32, .npy, ...).
//     Everything else is kept as it is, so ordinary names are unchanged.
//  3. A tensor whose path is also a directory (tensors "a" and "a/b") gets
//     a '%' appended to its last component: "a%" is the file, "a/b" stays.
//     For the empty component this gives "%%".
//  4. A component longer than 255 bytes (251 for the file component, so
//     that the .npy view's "<path>.npy" fits too) is cut to at most 233
//     bytes, never inside an escape or a UTF-8 sequence, and "%~" and 16
//     hex digits of the SHA-256 of the whole encoded component are added.
//     This is the one step that cannot be undone from the path alone:
//     the name is in the xattr user.tensorfs.name and in index.json.
//
// Nothing else writes '%' into a path, and '%' in a name is always escaped,
// so the rule is reversible: PathToName(p) gives back the name for every
// path not cut by step 4, and refuses text that the rule never produces.
// Step 3 depends on the whole set of names, so AssignPaths applies it;
// NameToPath is steps 1, 2 and 4.

const (
	maxComponent     = 255               // NAME_MAX on Linux
	maxFileComponent = 255 - len(".npy") // room for the .npy view's suffix
	hashMarker       = "%~"              // starts the hash of a cut component
	hashDigits       = 16                // hex digits of SHA-256 kept
	cutLength        = maxFileComponent - len(hashMarker) - hashDigits
	upperHex         = "0123456789ABCDEF"
)

// escapeComponent applies steps 1 and 2 to one '/'-free component.
func escapeComponent(c string) string {
	if c == "" {
		return "%"
	}
	var b strings.Builder
	clean := true
	for i := 0; i < len(c); {
		r, size := utf8.DecodeRuneInString(c[i:])
		ch := c[i]
		if (r == utf8.RuneError && size == 1) || ch == '%' || ch < 0x20 || ch == 0x7f || (i == 0 && ch == '.') {
			if clean {
				b.Grow(len(c) + 8)
				b.WriteString(c[:i])
				clean = false
			}
			b.WriteByte('%')
			b.WriteByte(upperHex[ch>>4])
			b.WriteByte(upperHex[ch&15])
			i++
			continue
		}
		if !clean {
			b.WriteString(c[i : i+size])
		}
		i += size
	}
	if clean {
		return c
	}
	return b.String()
}

// cutComponent applies step 4 to an encoded component when it is longer
// than limit.
func cutComponent(enc string, limit int) string {
	if len(enc) <= limit {
		return enc
	}
	n := 0
	for n < len(enc) {
		step := 1
		if enc[n] == '%' {
			step = 3
		} else if _, size := utf8.DecodeRuneInString(enc[n:]); size > 1 {
			step = size
		}
		if n+step > cutLength {
			break
		}
		n += step
	}
	sum := sha256.Sum256([]byte(enc))
	return enc[:n] + hashMarker + hex.EncodeToString(sum[:])[:hashDigits]
}

// eachComponent calls f with every component of name's path by steps 1,
// 2 and 4, the last with step 3's '%' when isDir; f's last reports
// whether the component is the file's. It walks the name in place: no
// slice of its components is made.
func eachComponent(name string, isDir bool, f func(enc string, last, cut bool)) {
	for rest := name; ; {
		c, after, more := strings.Cut(rest, "/")
		enc := escapeComponent(c)
		limit := maxComponent
		if !more {
			if isDir {
				enc += "%"
			}
			limit = maxFileComponent
		}
		out := cutComponent(enc, limit)
		f(out, !more, len(out) != len(enc))
		if !more {
			return
		}
		rest = after
	}
}

// namePath returns the path of the tensor called name (isDir: its path is
// also a directory, step 3) and whether a component was cut (step 4). A
// name that the rule keeps as it is is returned itself, so that its path
// costs no memory of its own; any other path is allocated at its exact
// size.
func namePath(name string, isDir bool) (path string, cut bool) {
	size := 0
	eachComponent(name, isDir, func(enc string, last, c bool) {
		size += len(enc)
		if !last {
			size++
		}
		cut = cut || c
	})
	if size == len(name) && !isDir && !cut {
		// Steps 1 and 2 only lengthen a component they change, so a path
		// of the name's length is the name.
		return name, false
	}
	var b strings.Builder
	b.Grow(size)
	eachComponent(name, isDir, func(enc string, last, _ bool) {
		b.WriteString(enc)
		if !last {
			b.WriteByte('/')
		}
	})
	return b.String(), cut
}

// NameToPath returns the path of the tensor called name in the mounted tree
// by steps 1, 2 and 4 of the rule above: the path it has when it is not
// also a directory (step 3, which AssignPaths applies).
func NameToPath(name string) string {
	p, _ := namePath(name, false)
	return p
}

// PathToName returns the tensor name that path stands for, undoing the
// rule above (including step 3's '%' suffix). It fails on a component cut
// by step 4 (look the name up in the index instead) and on any text the
// rule never produces.
func PathToName(path string) (string, error) {
	parts := strings.Split(path, "/")
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('/')
		}
		name, err := unescapeComponent(p)
		if err != nil {
			return "", &FormatError{Offset: -1, Where: "path " + strconv.Quote(path), Msg: err.Error()}
		}
		b.WriteString(name)
	}
	return b.String(), nil
}

type pathError string

func (e pathError) Error() string { return string(e) }

// unescapeComponent undoes steps 1-3 for one component.
func unescapeComponent(p string) (string, error) {
	if strings.Contains(p, hashMarker) {
		return "", pathError("the component is cut to fit 255 bytes; the exact name is in the index and the xattr user.tensorfs.name")
	}
	if p == "%" || p == "%%" {
		return "", nil
	}
	if strings.HasSuffix(p, "%") {
		p = p[:len(p)-1] // step 3's suffix
	}
	if p == "" {
		return "", pathError("empty path component")
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			b.WriteByte(p[i])
			continue
		}
		if i+2 >= len(p) {
			return "", pathError("'%' not followed by two hex digits")
		}
		hi, lo := unhex(p[i+1]), unhex(p[i+2])
		if hi < 0 || lo < 0 {
			return "", pathError("'%' not followed by two upper-case hex digits")
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	name := b.String()
	if escapeComponent(name) != p {
		return "", pathError("not a path that tensorfs gives any name")
	}
	return name, nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// AssignPaths sets every tensor's Path by the rule above. It fails only
// when two tensors would get the same path, which takes duplicate names or
// a SHA-256 collision between cut components; two tensors of one name
// that are Twins (a part and a logical tensor, never listed together)
// share their path.
//
// Nothing is kept per directory or per component: beside the paths that
// differ from their names (a path equal to its name is the name's string),
// it keeps 4 bytes a tensor, and only when the tensors are not in name
// order (Load sorts them) or a component was cut. A tensor's path is a
// directory (step 3) when some name starts with its name and '/', which a
// binary search of the names in order finds; until step 4 cuts, the rule
// is one to one, so two paths are the same only when their names are.
// Deep names cost time and memory linear in their bytes.
func AssignPaths(idx *Index) error {
	ts := idx.Tensors
	// byName lists the tensors in name order, equal names in index
	// order; nil when the tensors are in name order already.
	var byName []int32
	if !slices.IsSortedFunc(ts, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) }) {
		byName = sortedOrder(len(ts), func(i int) string { return ts[i].Name })
	}
	at := func(k int) int {
		if byName == nil {
			return k
		}
		return int(byName[k])
	}
	name := func(k int) string { return ts[at(k)].Name }
	anyCut := false
	for k := range ts {
		t := &ts[at(k)]
		path, cut := namePath(t.Name, hasBelow(len(ts), k, t.Name, name))
		t.Path = path
		anyCut = anyCut || cut
	}
	if !anyCut {
		return firstSame(ts, at, name)
	}
	// Step 4 cut a component: check that the cut kept paths apart.
	byPath := sortedOrder(len(ts), func(i int) string { return ts[i].Path })
	path := func(k int) string { return ts[byPath[k]].Path }
	if err := firstSame(ts, func(k int) int { return int(byPath[k]) }, path); err != nil {
		return err
	}
	for i := range ts {
		p := ts[i].Path
		k, _ := slices.BinarySearchFunc(byPath, p, func(j int32, p string) int { return strings.Compare(ts[j].Path, p) })
		if hasBelow(len(ts), k, p, path) {
			return ErrorAt("", "tensor "+strconv.Quote(ts[i].Name),
				"path %q is also a directory after cutting long components", p)
		}
	}
	return nil
}

// firstSame returns the error for the first tensor, in index order, whose
// path an earlier tensor has, given the tensors in an order by a key that
// is the same exactly when the paths are (at(k) is the k-th tensor, key(k)
// its key), equal keys in index order; nil when there is none.
func firstSame(ts []Tensor, at func(int) int, key func(int) string) error {
	first, other := -1, 0
	for k := 1; k < len(ts); k++ {
		// The second of a run of equal keys: the first in index order
		// whose path is taken, by the run's first. A run of two twins
		// (a part and the logical tensor of its name) is no clash.
		if key(k) == key(k-1) && (k < 2 || key(k-2) != key(k)) && (first < 0 || at(k) < first) {
			if Twins(&ts[at(k)], &ts[at(k-1)]) && (k+1 >= len(ts) || key(k+1) != key(k)) {
				continue
			}
			first, other = at(k), at(k-1)
		}
	}
	if first < 0 {
		return nil
	}
	return ErrorAt("", "tensor "+strconv.Quote(ts[first].Name),
		"has the same path %q as tensor %s", ts[first].Path, strconv.Quote(ts[other].Name))
}

// sortedOrder returns 0..n-1 sorted by key, equal keys in index order.
func sortedOrder(n int, key func(int) string) []int32 {
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := strings.Compare(key(int(a)), key(int(b))); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

// hasBelow reports whether some key after position k of the n sorted by
// key (key(k) is s) starts with s and '/': the keys that do follow s+"/"
// directly in order, so a binary search for it finds the first.
func hasBelow(n, k int, s string, key func(int) string) bool {
	if k+1 < n && isBelow(key(k+1), s) { // the usual case: s's first child
		return true
	}
	lo := k + 1
	m := lo + sort.Search(n-lo, func(j int) bool { return compareSlash(key(lo+j), s) >= 0 })
	return m < n && isBelow(key(m), s)
}

// isBelow reports whether s starts with dir and '/'.
func isBelow(s, dir string) bool {
	return len(s) > len(dir) && s[len(dir)] == '/' && s[:len(dir)] == dir
}

// compareSlash compares s with dir+"/" (0 for any s that starts with it).
func compareSlash(s, dir string) int {
	if len(s) <= len(dir) {
		if c := strings.Compare(s, dir[:len(s)]); c != 0 {
			return c
		}
		return -1 // a prefix of dir, shorter than dir+"/"
	}
	if c := strings.Compare(s[:len(dir)], dir); c != 0 {
		return c
	}
	return cmp.Compare(s[len(dir)], '/')
}

// UniqueNames hands out distinct tensor names in the order asked: a name
// already taken gets the first free suffix #1, #2, ... (FORMATS.md's rule
// for names that coincide, as when a key holding '/' spells another
// path). Its zero value is ready to use.
type UniqueNames struct {
	taken map[string]bool
	next  map[string]int // first suffix worth trying, per name
}

// Take returns name, or name#N for the first N not yet taken.
func (u *UniqueNames) Take(name string) string {
	if u.taken == nil {
		u.taken, u.next = map[string]bool{}, map[string]int{}
	}
	if !u.taken[name] {
		u.taken[name] = true
		return name
	}
	for n := u.next[name] + 1; ; n++ {
		c := name + "#" + strconv.Itoa(n)
		if !u.taken[c] {
			u.taken[c] = true
			u.next[name] = n
			return c
		}
	}
}
