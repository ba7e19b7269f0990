package fs

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// builder assembles a tree of static entries (the top level, .tensorfs/,
// .safetensors/; the tensors' own directories are the path tree's,
// paths.go) in time and memory linear in the bytes of its paths: add only
// records each file and its path, and finish sorts them once (component
// by component) and builds every directory in one pass with a stack of
// the open directories, with no map and no prefix string per directory.
type builder struct {
	root    *entry
	items   []buildItem
	clashed []clash // after finish: the items left out
}

// buildItem is one file (or already finished subtree) to place.
type buildItem struct {
	path string
	e    *entry
	seq  int // order of add, so that the first of two equal paths wins
}

// clash is an item finish left out, and why.
type clash struct {
	buildItem
	err error
}

// newBuilder returns a builder for a tree called name; sizeHint is how
// many files it will likely get.
func newBuilder(name string, sizeHint ...int) *builder {
	b := &builder{root: &entry{name: name, dir: &dirData{}}}
	if len(sizeHint) > 0 {
		b.items = make([]buildItem, 0, sizeHint[0])
	}
	return b
}

// add puts a file described by f at the slash-separated path p, creating
// directories, and returns its entry. It fails when a component is
// unusable; a clash with another path (a file and a directory, or two
// files, at one path) is found by finish, which leaves the later path in
// the build order out (see clashes).
func (b *builder) add(p string, f fileData) (*entry, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	e := &entry{name: p[strings.LastIndexByte(p, '/')+1:], file: f}
	b.items = append(b.items, buildItem{path: p, e: e, seq: len(b.items)})
	return e, nil
}

// checkPath checks every component of p (checkComponent).
func checkPath(p string) error {
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return checkComponent(p)
		}
		if err := checkComponent(p[:i]); err != nil {
			return err
		}
		p = p[i+1:]
	}
}

// addStatic puts a file of fixed bytes at p (see add).
func (b *builder) addStatic(p string, data []byte) error {
	e, err := b.add(p, fileData{kind: kindStatic, size: int64(len(data))})
	if err == nil {
		e.contents.Store(&fileContents{data: data})
	}
	return err
}

// addVirtual puts a file whose bytes v makes on demand at p (see add).
func (b *builder) addVirtual(p string, v virtualFile) error {
	e, err := b.add(p, fileData{kind: kindVirtual, size: v.Size()})
	if err == nil {
		e.contents.Store(&fileContents{v: v})
	}
	return err
}

// attach puts an already finished entry (a file, or a subtree with its
// children sorted) at the top of the tree.
func (b *builder) attach(e *entry) {
	b.items = append(b.items, buildItem{path: e.name, e: e, seq: len(b.items)})
}

// attached returns the entry added or attached at the top level under
// name (before finish), or nil.
func (b *builder) attached(name string) *entry {
	for i := range b.items {
		if b.items[i].path == name {
			return b.items[i].e
		}
	}
	return nil
}

// empty reports whether nothing has been added.
func (b *builder) empty() bool { return len(b.items) == 0 }

// comparePaths orders slash-separated paths component by component, each
// component in byte order: as if '/' sorted before every other byte. So
// a directory's paths are contiguous and follow its own name at once,
// and the children of each directory come in name order.
func comparePaths(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	switch {
	case a[i] == '/':
		return -1
	case b[i] == '/':
		return 1
	}
	return cmp.Compare(a[i], b[i])
}

// finish builds the tree and returns its root: every directory's children
// sorted by name and unique. A path that clashes with an earlier one is
// left out (its item's err says why; see clashes).
func (b *builder) finish() *entry {
	slices.SortFunc(b.items, func(x, y buildItem) int {
		if c := comparePaths(x.path, y.path); c != 0 {
			return c
		}
		return cmp.Compare(x.seq, y.seq)
	})
	stack := []*entry{b.root} // the open directories, stack[i] at depth i
	for i := range b.items {
		it := &b.items[i]
		rest, d := it.path, 0
		var err error
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
			dir := stack[d]
			if last := lastChild(dir); last != nil && last.name == c {
				err = fmt.Errorf("%q is both a file and a directory", c)
				break
			}
			next := &entry{name: c, dir: &dirData{}}
			appendChild(dir, next)
			stack = append(stack, next)
			d++
		}
		if err != nil {
			b.clashed = append(b.clashed, clash{*it, err})
			continue
		}
		stack = stack[:d+1]
		dir := stack[d]
		if last := lastChild(dir); last != nil && last.name == it.e.name {
			err = fmt.Errorf("two files at the same path")
			if last.isDir() || it.e.isDir() {
				err = fmt.Errorf("%q is both a file and a directory", it.e.name)
			}
			b.clashed = append(b.clashed, clash{*it, err})
			continue
		}
		appendChild(dir, it.e)
	}
	// Children slices grew by appending: trim those with much spare
	// room (the tree lives as long as the mount).
	walkTree(b.root, func(e *entry) {
		if d := e.dir; d != nil && cap(d.children)-len(d.children) > len(d.children)/8 {
			d.children = slices.Clone(d.children)
		}
	})
	return b.root
}

// lastChild returns the last child added to directory d, or nil.
func lastChild(d *entry) *entry {
	if ch := d.dir.children; len(ch) > 0 {
		return ch[len(ch)-1]
	}
	return nil
}

func appendChild(d, c *entry) {
	d.dir.children = append(d.dir.children, c)
	if c.isDir() {
		d.dir.nsubdirs++
	}
}

// clashes returns the items finish left out, in path order, and why.
func (b *builder) clashes() []clash { return b.clashed }
