package fs

// The tree's static entries and what a regular file serves: entry,
// dirData, fileData, the tensor forms and the file contents, with the
// walks over a built tree (inode numbering).

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// entry is a static node of the tree: a directory (dir != nil) or a
// regular file that is not a tensor's (the top level and the view
// directories, .tensorfs/, .safetensors/ and what they hold). The tensors'
// directories and files are the shared path tree's (paths.go), which a
// static directory shows through its view.
type entry struct {
	name string
	ino  uint64
	dir  *dirData // nil for a regular file
	file fileData // regular files
	// contents: a static file's bytes, set by NewRoot; a view's reader,
	// built on first open or read (see Root.reader); nil otherwise. Set
	// once, never changed after.
	contents atomic.Pointer[fileContents]
}

// dirData is what a directory holds.
type dirData struct {
	children []*entry // sorted by name, unique
	nsubdirs uint32
	// view: the place whose path tree root this directory shows after
	// its children (0: none). Tensor paths never start with '.', static
	// names always do, so the two never clash.
	view place
	// private: mode 0500 (an ExtraDir's)
	private bool
	// split: .split/ of this base place (split.go); 0 otherwise
	split place
}

func (e *entry) isDir() bool { return e.dir != nil }

// children returns a directory's children (none for a file).
func (e *entry) children() []*entry {
	if e.dir == nil {
		return nil
	}
	return e.dir.children
}

// child returns the child called name, or nil.
func (e *entry) child(name string) *entry {
	ch := e.children()
	i := sort.Search(len(ch), func(i int) bool { return ch[i].name >= name })
	if i < len(ch) && ch[i].name == name {
		return ch[i]
	}
	return nil
}

type fileKind uint8

const (
	kindTensor  fileKind = iota + 1 // a tensor in some representation
	kindStatic                      // bytes fixed at mount (metadata values)
	kindStats                       // stats.json: rendered at each open
	kindVirtual                     // bytes made on demand by a virtualFile
)

// virtualFile is a regular file whose bytes are made on demand (a file
// assembled from ranges of others, a value rendered lazily): the way to
// add a new kind of file to the tree without touching the FUSE glue. Put
// one in a tree with builder.addVirtual. The tree is constant, so Size
// is fixed when the file is added; ReadAt is called with off in [0,
// Size) and a p no longer than what is left, concurrently, and must fill
// p (a short count is EIO; an error is EIO but for an errno, which is
// kept). Attributes and xattrs: see xattrser.
type virtualFile interface {
	Size() int64
	ReadAt(p []byte, off int64) (int, error)
}

// xattrser is a virtualFile with extended attributes: name and value
// pairs, in listing order. A virtualFile without it has none.
type xattrser interface {
	Xattrs() [][2]string
}

// fileData describes what a regular file serves, exactly (its size
// included) from NewRoot on; the bytes themselves are the entry's
// contents.
type fileData struct {
	kind fileKind
	// Tensors.
	form tensorForm
	// dtype of the served bytes (the view's, or stored); dtype.Invalid
	// for a file of the checkpoint as it is (.files/: whole)
	dtype dtype.DType
	// private: mode 0400 (an ExtraDir's files)
	private bool
	// part: for a part of t (split.go), the split variant of the place
	// that shows it; 0 for a whole tensor
	part place
	size int64
	t    *index.Tensor
}

// whole reports whether f is a file of the checkpoint as it is
// (.files/, modeldir.go): served as a tensor that is the whole source
// file, in no dtype.
func (f *fileData) whole() bool { return f.kind == kindTensor && f.dtype == dtype.Invalid }

// tensorForm is how a tensor file's bytes are made.
type tensorForm uint8

const (
	// formDirect: the file is [t.Offset, t.Offset+t.Size) of its source,
	// served without a view (spliced where the source has a descriptor).
	formDirect    tensorForm = iota + 1
	formNative               // view.Form{}: strided or big-endian, as stored
	formConverted            // view.Form{To: dtype}: converted to the file's dtype
	formNPY                  // view.Form{NPY: true}
)

// viewForm returns the view.Form whose reader (view.Open) serves f's
// bytes, its part's where f is one (a part served directly is read
// through the native view); ok is false for a whole file served without
// a view (formDirect).
func (f *fileData) viewForm() (form view.Form, ok bool) {
	if f.sliced() {
		s := f.split()
		form.Split = &s
	}
	switch f.form {
	case formDirect:
		return form, f.sliced()
	case formNative:
	case formConverted:
		form.To = f.dtype
	case formNPY:
		form.NPY = true
	default:
		return form, false
	}
	return form, true
}

func (f tensorForm) String() string {
	switch f {
	case formDirect:
		return "direct"
	case formNative:
		return "native"
	case formConverted:
		return "converted"
	case formNPY:
		return "npy"
	}
	return fmt.Sprintf("form(%d)", uint8(f))
}

// fileContents is what a file serves beyond its fileData: the bytes of a
// static file, or a tensor file's view.Reader once built (or why it could
// not be, which NewRoot's checks make impossible).
type fileContents struct {
	data []byte      // kindStatic
	v    virtualFile // kindVirtual
	r    view.Reader // tensors of every form but formDirect
	err  error
}

// checkComponent reports why c cannot be one path component.
func checkComponent(c string) error {
	switch {
	case c == "":
		return errors.New("empty path component")
	case c == "." || c == "..":
		return fmt.Errorf("path component %q", c)
	case len(c) > maxNameLen:
		return fmt.Errorf("path component of %d bytes (over %d)", len(c), maxNameLen)
	case strings.IndexByte(c, 0) >= 0:
		return errors.New("NUL in a path component")
	}
	return nil
}

// numberInodes gives every static entry its inode number: 1 for the
// root, then depth-first in name order, and returns the entries by number
// (entry ino is at ino-1). The numbers depend only on the tree.
func numberInodes(root *entry) []*entry {
	n := 0
	walkTree(root, func(*entry) { n++ })
	all := make([]*entry, 0, n)
	stack := []*entry{root}
	for len(stack) > 0 {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		all = append(all, e)
		e.ino = uint64(len(all))
		ch := e.children()
		for i := len(ch) - 1; i >= 0; i-- {
			stack = append(stack, ch[i])
		}
	}
	return all
}

// walkTree calls fn for root and every entry under it, in no set order,
// with a stack of its own (no recursion: trees can be deep).
func walkTree(root *entry, fn func(*entry)) {
	stack := []*entry{root}
	for len(stack) > 0 {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		fn(e)
		stack = append(stack, e.children()...)
	}
}
