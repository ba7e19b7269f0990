package index

// The implementation of the path rule (names.go) before it walked names in
// place, kept verbatim as the reference that TestAssignPathsSameAsBefore
// and FuzzAssignPathsSameAsBefore hold the new one to: the paths are a
// documented contract, byte for byte.

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// oldEscapeComponent applies steps 1 and 2 to one '/'-free component.
func oldEscapeComponent(c string) string {
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

// oldCutComponent applies step 4 to an encoded component when it is longer
// than limit.
func oldCutComponent(enc string, limit int) string {
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

// oldEncodeName splits name at '/' and escapes every component (steps 1, 2).
func oldEncodeName(name string) []string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = oldEscapeComponent(p)
	}
	return parts
}

// oldJoinCut applies step 4 to every component and joins them.
func oldJoinCut(parts []string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('/')
		}
		limit := maxComponent
		if i == len(parts)-1 {
			limit = maxFileComponent
		}
		b.WriteString(oldCutComponent(p, limit))
	}
	return b.String()
}

// oldAssignPaths sets every tensor's Path by the rule above. It fails only
// when two tensors would get the same path, which takes duplicate names or
// a SHA-256 collision between cut components.
func oldAssignPaths(idx *Index) error {
	enc := make([][]string, len(idx.Tensors))
	dirs := oldDirSet{}
	for i := range idx.Tensors {
		parts := oldEncodeName(idx.Tensors[i].Name)
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
	cutDirs := oldDirSet{}
	for i, parts := range enc {
		p := oldJoinCut(parts)
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

// oldDirSet is a set of directories, each a (parent, component) pair: a
// path's directories are added and looked up in time linear in its
// length, where a set of prefix strings hashes every prefix whole (the
// square of the depth: minutes for names 32,767 components deep).
type oldDirSet map[oldDirKey]int

type oldDirKey struct {
	parent int // 0 for the top
	name   string
}

// add puts every directory of the path parts (all of them directories).
func (s oldDirSet) add(parts []string) {
	id := 0
	for _, c := range parts {
		k := oldDirKey{id, c}
		next, ok := s[k]
		if !ok {
			next = len(s) + 1
			s[k] = next
		}
		id = next
	}
}

// has reports whether the path parts is a directory of s.
func (s oldDirSet) has(parts []string) bool {
	id := 0
	for _, c := range parts {
		next, ok := s[oldDirKey{id, c}]
		if !ok {
			return false
		}
		id = next
	}
	return len(parts) > 0
}
