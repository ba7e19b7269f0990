package index

import (
	"crypto/sha256"
	"encoding/hex"
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

// encodeName splits name at '/' and escapes every component (steps 1, 2).
func encodeName(name string) []string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = escapeComponent(p)
	}
	return parts
}

// joinCut applies step 4 to every component and joins them.
func joinCut(parts []string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('/')
		}
		limit := maxComponent
		if i == len(parts)-1 {
			limit = maxFileComponent
		}
		b.WriteString(cutComponent(p, limit))
	}
	return b.String()
}

// NameToPath returns the path of the tensor called name in the mounted tree
// by steps 1, 2 and 4 of the rule above: the path it has when it is not
// also a directory (step 3, which AssignPaths applies).
func NameToPath(name string) string {
	return joinCut(encodeName(name))
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
// a SHA-256 collision between cut components.
func AssignPaths(idx *Index) error {
	enc := make([][]string, len(idx.Tensors))
	dirs := dirSet{}
	for i := range idx.Tensors {
		parts := encodeName(idx.Tensors[i].Name)
		enc[i] = parts
		dirs.add(parts[:len(parts)-1])
	}
	// Step 3: files that are also directories.
	for i, parts := range enc {
		if dirs.has(parts) {
			parts[len(parts)-1] += "%"
		}
		enc[i] = parts
	}
	// Step 4, then check that the cut kept paths apart.
	paths := make(map[string]int, len(idx.Tensors))
	cutDirs := dirSet{}
	for i, parts := range enc {
		p := joinCut(parts)
		if j, dup := paths[p]; dup {
			return ErrorAt("", "tensor "+strconv.Quote(idx.Tensors[i].Name),
				"has the same path %q as tensor %s", p, strconv.Quote(idx.Tensors[j].Name))
		}
		paths[p] = i
		idx.Tensors[i].Path = p
		cut := strings.Split(p, "/")
		cutDirs.add(cut[:len(cut)-1])
	}
	for p, i := range paths {
		if cutDirs.has(strings.Split(p, "/")) {
			return ErrorAt("", "tensor "+strconv.Quote(idx.Tensors[i].Name),
				"path %q is also a directory after cutting long components", p)
		}
	}
	return nil
}

// dirSet is a set of directories, each a (parent, component) pair: a
// path's directories are added and looked up in time linear in its
// length, where a set of prefix strings hashes every prefix whole (the
// square of the depth: minutes for names 32,767 components deep).
type dirSet map[dirKey]int

type dirKey struct {
	parent int // 0 for the top
	name   string
}

// add puts every directory of the path parts (all of them directories).
func (s dirSet) add(parts []string) {
	id := 0
	for _, c := range parts {
		k := dirKey{id, c}
		next, ok := s[k]
		if !ok {
			next = len(s) + 1
			s[k] = next
		}
		id = next
	}
}

// has reports whether the path parts is a directory of s.
func (s dirSet) has(parts []string) bool {
	id := 0
	for _, c := range parts {
		next, ok := s[dirKey{id, c}]
		if !ok {
			return false
		}
		id = next
	}
	return len(parts) > 0
}
