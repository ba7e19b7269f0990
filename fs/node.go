package fs

import (
	"strconv"
	"strings"
	"sync"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

// node is what a request is about, made per request from its node ID (a
// value; nothing is kept per node the kernel knows): a static entry (the
// top level, .tensorfs/, the view directories, .safetensors/ and their
// files), or a node of the shared path tree as one place shows it.
//
// Node IDs: a static entry's is its inode number, 1 (the top) and up,
// below 2^32; a path node's is place<<32 | (slot+1) (pathNodeID), so the
// same directory or file in two places is two inodes, and every number
// depends only on the index.
type node struct {
	id    uint64
	name  string // as listed; "" when made from a node ID alone
	e     *entry // a static entry, or nil
	place place  // a path node's place
	dir   uint32 // a path directory's number
	isdir bool
	file  fileData // a regular file's
	r     *Root
}

func (n *node) isDir() bool { return n.isdir }

// pathPlace returns the place whose path tree directory n shows, and the
// directory's number: for a static directory its attached place (root,
// number 0), if any.
func (n *node) pathPlace() (place, uint32, bool) {
	if n.e != nil {
		if n.e.dir == nil || n.e.dir.view == 0 {
			return 0, 0, false
		}
		return n.e.dir.view, 0, true
	}
	if n.isSplitLevel() {
		return 0, 0, false // split.go
	}
	return n.place, n.dir, n.isdir
}

// staticNode returns the node of static entry e.
func (r *Root) staticNode(e *entry) node {
	return node{id: e.ino, name: e.name, e: e, isdir: e.dir != nil, file: e.file, r: r}
}

// pathNode returns the node of slot s in place p, called name.
func (r *Root) pathNode(p place, s uint32, name string) node {
	n := node{id: pathNodeID(p, s), name: name, place: p, r: r}
	ref := r.paths.slots[s]
	if ref&fileRef == 0 {
		n.isdir, n.dir = true, ref
		return n
	}
	n.file = r.fileIn(ref&^fileRef, p)
	n.file.size = r.fileSize(n.id, &n.file)
	return n
}

// placeIn returns the membership bit of place p, or 0 when p is not part
// of this tree (a view left out, a variant not served). A split variant
// (split.go) is its base place's, less what splitShows leaves out.
func (r *Root) placeIn(p place) uint8 {
	if p&^placeBase != 0 {
		if level, _ := splitOf(p); level != 3 {
			return 0
		}
	}
	return r.places[p&placeBase]
}

// shows reports whether place p shows slot s: its membership bit in,
// and what a split variant asks of it.
func (r *Root) shows(p place, s uint32, in uint8) bool {
	return r.paths.in(s)&in != 0 && r.splitShows(p, s)
}

// resolve returns the node of a node ID; ok is false for an ID that names
// nothing (never given out, or a slot its place does not show).
func (r *Root) resolve(id uint64) (node, bool) {
	if id == 0 {
		return node{}, false
	}
	if id <= uint64(len(r.static)) {
		return r.staticNode(r.static[id-1]), true
	}
	p, s := place(id>>32), uint32(id)-1
	if uint32(id) == 0 {
		return r.splitNode(p, "") // split.go
	}
	in := r.placeIn(p)
	if in == 0 || r.paths == nil || s >= uint32(len(r.paths.slots)) || !r.shows(p, s, in) {
		return node{}, false
	}
	return r.pathNode(p, s, ""), true
}

// lookup returns directory d's child called name.
func (r *Root) lookup(d *node, name string) (node, bool) {
	if e := d.e; e != nil {
		if c := e.child(name); c != nil {
			return r.staticNode(c), true
		}
	}
	if d.isSplitLevel() {
		return r.splitLookup(d, name) // split.go
	}
	p, dir, ok := d.pathPlace()
	if !ok {
		return node{}, false
	}
	pt, in := r.paths, r.placeIn(p)
	if p&placeBase != placeNPY {
		if s, ok := pt.childIn(dir, name, func(s uint32) bool { return r.shows(p, s, in) }); ok {
			return r.pathNode(p, s, name), true
		}
		return node{}, false
	}
	// .npy/: a directory by its name, a file by <name>.npy or <name>.npy%.
	if s, ok := pt.child(dir, name); ok && !pt.isFile(s) && r.shows(p, s, in) {
		return r.pathNode(p, s, name), true
	}
	base, pct := strings.CutSuffix(name, "%")
	base, ok = strings.CutSuffix(base, npySuffix)
	if !ok {
		return node{}, false
	}
	if s, ok := pt.childIn(dir, base, func(s uint32) bool { return pt.isFile(s) && pt.in(s)&in != 0 }); ok {
		if m := pt.in(s); (m&npyPercent != 0) == pct && r.splitShows(p, s) {
			return r.pathNode(p, s, name), true
		}
	}
	return node{}, false
}

// listing walks directory d's children from position off on (static
// entries first, then the path tree's children, each at a fixed position
// whether its place shows it or not, so that a listing resumes at any
// offset), calling fn with each child shown and its position plus one,
// until fn returns false. fn must not keep c, which is reused.
func (r *Root) listing(d *node, off uint64, fn func(c *node, next uint64) bool) {
	var nstatic uint64
	var c node // one for the whole listing: fn may not keep it
	if e := d.e; e != nil && e.dir != nil {
		ch := e.dir.children
		nstatic = uint64(len(ch))
		for i := off; i < nstatic; i++ {
			c = r.staticNode(ch[i])
			if !fn(&c, i+1) {
				return
			}
		}
	}
	if d.e != nil && d.e.dir != nil && d.e.dir.split != 0 {
		// .split/: the dimensions (split.go).
		for i := off; i < uint64(r.splitDims(d.e.dir.split)); i++ {
			c, _ = r.splitNode(splitPlace(d.e.dir.split, 1, view.Split{Dim: int(i)}), strconv.FormatUint(i, 10))
			if !fn(&c, i+1) {
				return
			}
		}
		return
	}
	p, dir, ok := d.pathPlace()
	if !ok {
		return
	}
	pt, in := r.paths, r.placeIn(p)
	lo, hi := pt.children(dir)
	start := lo
	if off > nstatic {
		start = lo + uint32(min(off-nstatic, uint64(hi-lo)))
	}
	for s := start; s < hi; s++ {
		if !r.shows(p, s, in) {
			continue
		}
		name := pt.slotName(s)
		if p&placeBase == placeNPY && pt.isFile(s) {
			name = pt.npyName(pt.slots[s] &^ fileRef)
		}
		c = r.pathNode(p, s, name)
		if !fn(&c, nstatic+uint64(s-lo)+1) {
			return
		}
	}
}

// subdirs returns how many directories directory d holds (its link count
// is two more).
func (r *Root) subdirs(d *node) uint32 {
	var n uint32
	if e := d.e; e != nil && e.dir != nil {
		n = e.dir.nsubdirs
		if e.dir.split != 0 {
			return uint32(r.splitDims(e.dir.split))
		}
	}
	p, dir, ok := d.pathPlace()
	if !ok {
		return n
	}
	pt, in := r.paths, r.placeIn(p)
	lo, hi := pt.children(dir)
	if hi-lo > bigDir {
		key := pathNodeID(p, dir)
		if v, ok := r.bigDirs.Load(key); ok {
			return n + v.(uint32)
		}
		defer func(n0 uint32) { r.bigDirs.Store(key, n-n0) }(n)
	}
	for s := lo; s < hi; s++ {
		if !pt.isFile(s) && r.shows(p, s, in) {
			n++
		}
	}
	return n
}

// bigDir is the size from which a directory's count of subdirectories is
// kept once counted (keyed by place and directory number), rather than
// counted at each GETATTR.
const bigDir = 4096

// fileIn describes tensor t's file in place p, but for its size
// (fileSize).
func (r *Root) fileIn(t uint32, p place) fileData {
	f := r.baseFileIn(t, p)
	if level, s := splitOf(p); level == 3 && !r.sliceFile(&f, s) { // split.go
		return fileData{}
	}
	return f
}

// baseFileIn is fileIn for p's base place.
func (r *Root) baseFileIn(t uint32, p place) fileData {
	tt := &r.idx.Tensors[t]
	if p&placeBase == placeNPY {
		dt, _ := view.NPYDType(tt)
		return fileData{kind: kindTensor, form: formNPY, t: tt, dtype: dt}
	}
	dt := r.placeDType[p&placeBase]
	if dt == dtype.Invalid || dt == tt.DType {
		f := fileData{kind: kindTensor, form: formDirect, t: tt, dtype: tt.DType}
		if !tt.Contiguous() {
			f.form = formNative
		}
		return f
	}
	return fileData{kind: kindTensor, form: formConverted, t: tt, dtype: dt}
}

// fileSize returns the size of tensor file f (node id): its stored size,
// its reader's once built, or what view.Sizeof says (they
// ran at NewRoot for the file to be in the tree, so they do not fail).
func (r *Root) fileSize(id uint64, f *fileData) int64 {
	if f.sliced() {
		return f.size // a part's, as sliceFile sized it (split.go)
	}
	if f.form == formDirect {
		return f.t.Size
	}
	if c := r.contents.load(id); c != nil && c.r != nil {
		return c.r.Size()
	}
	src := r.sources[f.t.Source]
	var size int64
	if form, ok := f.viewForm(); ok {
		size, _ = view.Sizeof(f.t, src, form)
	}
	return size
}

// contentsMap holds the contents (a view's reader) of path tree files,
// by node ID, from their first open or read on.
type contentsMap struct {
	mu sync.RWMutex
	m  map[uint64]*fileContents // GUARDED_BY(mu)
}

func (c *contentsMap) load(id uint64) *fileContents {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[id]
}

// store keeps v as id's contents unless it has some, and returns them.
func (c *contentsMap) store(id uint64, v *fileContents) (kept *fileContents, stored bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[id]; old != nil {
		return old, false
	}
	if c.m == nil {
		c.m = map[uint64]*fileContents{}
	}
	c.m[id] = v
	return v, true
}

// loadContents returns n's contents: a static file's, or a path file's
// reader once built; nil otherwise.
func (n *node) loadContents() *fileContents {
	if n.e != nil {
		return n.e.contents.Load()
	}
	return n.r.contents.load(n.id)
}

// storeContents sets n's contents unless it has some, and returns them.
func (n *node) storeContents(c *fileContents) (kept *fileContents, stored bool) {
	if n.e != nil {
		if n.e.contents.CompareAndSwap(nil, c) {
			return c, true
		}
		return n.e.contents.Load(), false
	}
	return n.r.contents.store(n.id, c)
}

// data returns the bytes of a static file.
func (n *node) data() []byte {
	if c := n.loadContents(); c != nil {
		return c.data
	}
	return nil
}

// virtual returns the virtualFile of a kindVirtual file.
func (n *node) virtual() virtualFile {
	if c := n.loadContents(); c != nil {
		return c.v
	}
	return nil
}

// children returns the children of directory n, as listed (tests and
// tools).
func (n *node) children() []*node {
	var out []*node
	if n.isdir {
		n.r.listing(n, 0, func(c *node, _ uint64) bool {
			cc := *c
			out = append(out, &cc)
			return true
		})
	}
	return out
}

// child returns directory n's child called name, or nil (tests and
// tools).
func (n *node) child(name string) *node {
	if !n.isdir {
		return nil
	}
	c, ok := n.r.lookup(n, name)
	if !ok {
		return nil
	}
	return &c
}

// lookupPath walks a slash-separated path from the top of the tree, for
// tests and tools; "" is the top.
func (r *Root) lookupPath(p string) *node {
	n := r.staticNode(r.top)
	e := &n
	if p == "" {
		return e
	}
	for _, c := range strings.Split(p, "/") {
		if e == nil || !e.isDir() {
			return nil
		}
		e = e.child(c)
	}
	return e
}
