package fs

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/lazyweights/tensorfs/index"
)

// The path tree: the directories and files of the tensors' paths, built
// once and shared by every place that shows it (the top level, .native/,
// the four float views, .npy/). A place is not a copy: it is a few bits in
// the node ID, and what it shows of the tree is decided by a membership
// byte per file and per directory (which places hold the file, which have
// a file below the directory). See doc.go, "Tree".
//
// The tree is flat, in a few slices of integers, so that a directory costs
// 13 bytes and a file 5 (beside its tensor):
//
//   - directories are numbered in preorder (0 is the root) and files are
//     the tensors, by their index in index.Tensors;
//   - slots holds every node but the root, the children of each directory
//     together and in name order: directory d's are
//     slots[dirStart[d]:dirStart[d+1]], and a slot holds a directory's
//     number or fileRef|tensor. A slot's position is its node: the low 32
//     bits of its node ID, plus one;
//   - a directory's name is in names (each name followed by a NUL; a name
//     equal to the one before is not stored again), a file's is the last
//     component of its tensor's path.
type pathTree struct {
	tensors  []index.Tensor
	names    string   // directory names, each followed by a NUL
	dirName  []uint32 // per directory: offset of its name in names
	dirStart []uint32 // per directory, and one more: its first slot
	dirIn    []uint8  // per directory: the places with a file below it (in* bits)
	slots    []uint32 // directory number, or fileRef|tensor index
	fileIn   []uint8  // per tensor: the places that hold it (in* bits, npyPercent)
}

// fileRef marks a slot that holds a file (a tensor index).
const fileRef = 1 << 31

// maxPathNodes bounds the nodes of the path tree: slots are numbered in
// 32 bits, and a node ID's low 32 bits are a slot plus one.
const maxPathNodes = math.MaxUint32 - 1

// Membership bits: which places hold a file, or have a file below a
// directory. npyPercent is no place: it marks a file whose .npy/ name ends
// in ".npy%" (a sibling directory is called <name>.npy).
const (
	inStored uint8 = 1 << iota
	inBF16
	inF16
	inF32
	inF64
	inNPY
	npyPercent
)

// place is where the path tree is shown: the high 32 bits of a path
// node's node ID. Its low 4 bits are the base place (placeTop...placeNPY);
// the 28 above are 0 today and reserved for variants of a base place
// (tensor-parallel slices: see doc.go).
type place uint32

const (
	placeTop    place = iota + 1 // the top level: stored, or Options.View
	placeNative                  // .native/ (with Options.View)
	placeBF16
	placeF16
	placeF32
	placeF64
	placeNPY
	placeBase place = 0xf // the base place's bits
)

// pathNodeID returns the node ID of slot s seen in place p.
func pathNodeID(p place, s uint32) uint64 { return uint64(p)<<32 | uint64(s+1) }

// isFile reports whether slot s holds a file.
func (p *pathTree) isFile(s uint32) bool { return p.slots[s]&fileRef != 0 }

// dirName returns directory d's name.
func (p *pathTree) dirNameOf(d uint32) string {
	s := p.names[p.dirName[d]:]
	return s[:strings.IndexByte(s, 0)]
}

// fileName returns the file name of tensor t: the last component of its
// path.
func (p *pathTree) fileName(t uint32) string {
	path := tensorPath(&p.tensors[t])
	return path[strings.LastIndexByte(path, '/')+1:]
}

// slotName returns the name (in the stored tree) of the node in slot s.
func (p *pathTree) slotName(s uint32) string {
	ref := p.slots[s]
	if ref&fileRef != 0 {
		return p.fileName(ref &^ fileRef)
	}
	return p.dirNameOf(ref)
}

// in returns the membership bits of the node in slot s.
func (p *pathTree) in(s uint32) uint8 {
	ref := p.slots[s]
	if ref&fileRef != 0 {
		return p.fileIn[ref&^fileRef]
	}
	return p.dirIn[ref]
}

// children returns the slots of directory d's children: [lo, hi).
func (p *pathTree) children(d uint32) (lo, hi uint32) { return p.dirStart[d], p.dirStart[d+1] }

// child returns the slot of directory d's child called name, by binary
// search.
func (p *pathTree) child(d uint32, name string) (uint32, bool) {
	lo, hi := p.children(d)
	i := lo + uint32(sort.Search(int(hi-lo), func(i int) bool { return p.slotName(lo+uint32(i)) >= name }))
	if i < hi && p.slotName(i) == name {
		return i, true
	}
	return 0, false
}

// childIn is child for the node of that name that in shows (ok
// reports it): two files share a name when they are a part and the
// logical tensor of its name (index.Twins), which no place shows both.
func (p *pathTree) childIn(d uint32, name string, ok func(s uint32) bool) (uint32, bool) {
	s, found := p.child(d, name)
	if !found {
		return 0, false
	}
	_, hi := p.children(d)
	for ; s < hi && p.slotName(s) == name; s++ {
		if ok(s) {
			return s, true
		}
	}
	return 0, false
}

// childConcat is child for the name a+b, without making it.
func (p *pathTree) childConcat(d uint32, a, b string) (uint32, bool) {
	lo, hi := p.children(d)
	i := lo + uint32(sort.Search(int(hi-lo), func(i int) bool { return compareConcat(p.slotName(lo+uint32(i)), a, b) >= 0 }))
	if i < hi && compareConcat(p.slotName(i), a, b) == 0 {
		return i, true
	}
	return 0, false
}

// compareConcat compares s with a+b.
func compareConcat(s, a, b string) int {
	if len(s) <= len(a) {
		if c := strings.Compare(s, a[:len(s)]); c != 0 {
			return c
		}
		if len(s) == len(a) && b == "" {
			return 0
		}
		return -1 // a proper prefix of a+b
	}
	if c := strings.Compare(s[:len(a)], a); c != 0 {
		return c
	}
	return strings.Compare(s[len(a):], b)
}

// npyName returns the name of tensor t's file in .npy/: its name and
// ".npy", or ".npy%" when a sibling directory is called <name>.npy.
func (p *pathTree) npyName(t uint32) string {
	if p.fileIn[t]&npyPercent != 0 {
		return p.fileName(t) + npySuffix + "%"
	}
	return p.fileName(t) + npySuffix
}

// pathClash is a tensor whose path clashes with an earlier one's.
type pathClash struct {
	t   uint32
	err error
}

func (c *pathClash) Error() string { return c.err.Error() }

// walkPaths visits the tensors' paths in order (tensor indices sorted by
// comparePaths) with a stack of the open directories, and reports each
// new directory (its parent's number and its name; directories are
// numbered from 1 in the order reported, the root being 0) and each file
// (its directory's number and its tensor). It fails at the first path
// that clashes with an earlier one (a *pathClash): two files at one path
// (but for two index.Twins, which share it), or a file and a directory. Nothing is kept per prefix: it runs in time
// linear in the paths' bytes.
func walkPaths(tensors []index.Tensor, order []uint32, dir func(parent uint32, name string), file func(parent, t uint32)) error {
	type open struct {
		n        uint32 // its number
		name     string
		last     string // the name of its last child so far
		lastFile bool
		lastT    uint32 // the tensor of that child, when a file
	}
	stack := []open{{}}
	next := uint32(1)
	twinned := map[uint32]bool{} // the second of two twins, by tensor
	for _, ti := range order {
		rest, d := tensorPath(&tensors[ti]), 0
		for {
			j := strings.IndexByte(rest, '/')
			if j < 0 {
				break
			}
			c := rest[:j]
			rest = rest[j+1:]
			if d+1 < len(stack) && stack[d+1].name == c {
				d++
				continue
			}
			stack = stack[:d+1]
			top := &stack[d]
			if top.last == c { // a file: a directory would be stack[d+1]
				return &pathClash{ti, fmt.Errorf("%q is both a file and a directory", c)}
			}
			top.last, top.lastFile = c, false
			dir(top.n, c)
			stack = append(stack, open{n: next, name: c})
			next++
			d++
		}
		stack = stack[:d+1]
		top := &stack[d]
		if top.last == rest {
			if top.lastFile && index.Twins(&tensors[top.lastT], &tensors[ti]) && !twinned[top.lastT] {
				// a part and the logical tensor of its name: no
				// place shows both (index.Tensor.Listed)
				twinned[ti] = true
				file(top.n, ti)
				continue
			}
			if top.lastFile {
				return &pathClash{ti, errors.New("two files at the same path")}
			}
			return &pathClash{ti, fmt.Errorf("%q is both a file and a directory", rest)}
		}
		top.last, top.lastFile, top.lastT = rest, true, ti
		file(top.n, ti)
	}
	return nil
}

// buildPathTree builds the tree of every tensor's path (each already
// checked with checkPath), fileIn saying which places hold each. It fails
// with a *pathClash when two paths clash. npyDrop is called for each
// tensor left out of .npy/ because its .npy name would be too long.
func buildPathTree(tensors []index.Tensor, fileIn []uint8, npyDrop func(t uint32, err error)) (*pathTree, error) {
	if uint64(len(tensors)) >= fileRef {
		return nil, fmt.Errorf("%d tensors (at most %d)", len(tensors), fileRef-1)
	}
	order := pathOrder(tensors)

	// Count the directories and the bytes of their names.
	var ndirs, nameBytes uint64 = 1, 1 // the root, called ""
	last := ""
	err := walkPaths(tensors, order, func(_ uint32, name string) {
		ndirs++
		if name != last {
			nameBytes += uint64(len(name)) + 1
			last = name
		}
	}, func(uint32, uint32) {})
	if err != nil {
		return nil, err
	}
	if ndirs >= fileRef || ndirs-1+uint64(len(tensors)) > maxPathNodes || nameBytes > math.MaxUint32 {
		return nil, fmt.Errorf("%d directories and %d files (at most %d nodes)", ndirs, len(tensors), uint64(maxPathNodes))
	}

	// Name the directories and count each one's children.
	p := &pathTree{
		tensors:  tensors,
		dirName:  make([]uint32, ndirs),
		dirStart: make([]uint32, ndirs+1),
		dirIn:    make([]uint8, ndirs),
		slots:    make([]uint32, ndirs-1+uint64(len(tensors))),
		fileIn:   fileIn,
	}
	var names strings.Builder
	names.Grow(int(nameBytes))
	names.WriteByte(0)
	n, last, lastOff := uint32(1), "", uint32(0)
	walkPaths(tensors, order, func(parent uint32, name string) {
		p.dirStart[parent+1]++
		if name != last {
			lastOff = uint32(names.Len())
			names.WriteString(name)
			names.WriteByte(0)
			last = name
		}
		p.dirName[n] = lastOff
		n++
	}, func(parent, _ uint32) { p.dirStart[parent+1]++ })
	p.names = names.String()
	for d := 1; d < len(p.dirStart); d++ {
		p.dirStart[d] += p.dirStart[d-1]
	}

	// Fill the slots: dirStart[d] runs through d's slots, then is put
	// back.
	n = 1
	walkPaths(tensors, order, func(parent uint32, _ string) {
		p.slots[p.dirStart[parent]] = n
		p.dirStart[parent]++
		n++
	}, func(parent, t uint32) {
		p.slots[p.dirStart[parent]] = fileRef | t
		p.dirStart[parent]++
	})
	copy(p.dirStart[1:], p.dirStart[:ndirs])
	p.dirStart[0] = 0

	p.npyNames(uint32(ndirs), npyDrop)
	p.markDirs(int(ndirs))
	return p, nil
}

// pathOrder is the tensors' indexes in the order of their paths
// (comparePaths), ties by index.
func pathOrder(tensors []index.Tensor) []uint32 {
	order := make([]uint32, len(tensors))
	for i := range order {
		order[i] = uint32(i)
	}
	less := func(a, b uint32) int {
		if c := comparePaths(tensorPath(&tensors[a]), tensorPath(&tensors[b])); c != 0 {
			return c
		}
		return int(a) - int(b)
	}
	if !slices.IsSortedFunc(order, less) {
		slices.SortFunc(order, less)
	}
	return order
}

// npyNames sets the .npy/ names of the files of the ndirs directories:
// "<name>.npy%" where a sibling directory is called <name>.npy (rule 3
// of the names rule: no stored path ends in ".npy%"); a name too long is
// left out of .npy/ (npyDrop is told).
func (p *pathTree) npyNames(ndirs uint32, npyDrop func(t uint32, err error)) {
	for d := uint32(0); d < ndirs; d++ {
		lo, hi := p.children(d)
		for s := lo; s < hi; s++ {
			ref := p.slots[s]
			if ref&fileRef == 0 || p.fileIn[ref&^fileRef]&inNPY == 0 {
				continue
			}
			t := ref &^ fileRef
			name := p.fileName(t)
			l := len(name) + len(npySuffix)
			if c, ok := p.childConcat(d, name, npySuffix); ok && !p.isFile(c) {
				p.fileIn[t] |= npyPercent
				l++
			}
			if l > maxNameLen {
				p.fileIn[t] &^= inNPY | npyPercent
				npyDrop(t, fmt.Errorf("path component of %d bytes (over %d)", l, maxNameLen))
			}
		}
	}
}

// markDirs sets which places have a file below each of the ndirs
// directories: children are numbered after their parent.
func (p *pathTree) markDirs(ndirs int) {
	for d := ndirs - 1; d >= 0; d-- {
		var in uint8
		lo, hi := p.children(uint32(d))
		for s := lo; s < hi; s++ {
			in |= p.in(s)
		}
		p.dirIn[d] = in &^ npyPercent
	}
}

// count returns how many directories (the root not included) and files
// hold the membership bit in.
func (p *pathTree) count(in uint8) (dirs, files uint64) {
	for _, m := range p.dirIn[1:] {
		if m&in != 0 {
			dirs++
		}
	}
	for _, m := range p.fileIn {
		if m&in != 0 {
			files++
		}
	}
	return dirs, files
}
