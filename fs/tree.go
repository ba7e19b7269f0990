package fs

import (
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// DefaultTimeout is the kernel's entry, attribute and negative-lookup cache
// time. The tree never changes while mounted, so it is long.
const DefaultTimeout = time.Hour

// Names of the hidden top-level directories.
const (
	controlDir  = ".tensorfs" // index.json, metadata/, stats.json
	metadataDir = "metadata"
	npyDir      = ".npy"
	nativeDir   = ".native" // only with Options.View: the stored tree
	npySuffix   = ".npy"
	maxNameLen  = 255 // bytes of one path component (NAME_MAX)
)

// floatViews are the converted views, one hidden directory each.
var floatViews = []struct {
	dir string
	dt  dtype.DType
}{
	{".bf16", dtype.BF16},
	{".f16", dtype.F16},
	{".f32", dtype.F32},
	{".f64", dtype.F64},
}

// Options configures the tree built by NewRoot.
type Options struct {
	// View, when it is F64, F32, F16 or BF16, makes the top level the
	// converted view in that dtype (mount --dtype): tensors that cannot be
	// converted are absent from it, the stored tree moves to .native/, and
	// index.json describes the top level (dtype and size of the view).
	// dtype.Invalid (the zero value) serves the stored dtypes.
	View dtype.DType

	// Timeout is the entry, attribute and negative-entry cache time handed
	// to the kernel; 0 means DefaultTimeout.
	Timeout time.Duration

	// NoSplice never hands the kernel a backing file descriptor to splice
	// from; every read is copied through a buffer.
	NoSplice bool

	// KeepBackingCache keeps the backing files' pages in the page cache
	// after serving them. By default a 2 MiB-aligned chunk of a backing
	// file is dropped from the page cache (posix_fadvise DONTNEED) once
	// every tensor byte in it has been served, since the mount's own page
	// cache then holds those bytes: one copy in memory instead of two.
	// Keep it for a checkpoint that is also read directly (not through the
	// mount). See cache.go.
	KeepBackingCache bool

	// NoPassthrough serves every file through the server. By default a
	// file that is a whole backing file byte for byte (see
	// passthrough.go) is handed to the kernel to read itself (FUSE
	// passthrough: Linux 6.9+, root).
	NoPassthrough bool

	// DirectIO opens tensor files with FOPEN_DIRECT_IO: every read(2) goes
	// to the server as it is (no readahead, no page cache of the mount,
	// so no second copy of the checkpoint in memory). Mount asks the
	// kernel for FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6 and later), so that
	// shared mmap keeps working; where it is not granted, files keep the
	// page cache (FOPEN_KEEP_CACHE) and Mount logs why.
	DirectIO bool

	// Logger receives one line per unexpected event (a panic while
	// serving, a tensor left out of a view). nil: standard error with the
	// "tensorfs: " prefix.
	Logger *log.Logger

	// UID and GID own every file; nil means the serving process's.
	UID, GID *uint32

	// ExportFiles go beside model.safetensors in every .safetensors/
	// directory (see export.go and ModelDirFiles).
	ExportFiles []ExportFile
}

// entry is one node of the constant tree: a directory (dir != nil) or a
// regular file. A tree holds one per file of every view, so it is kept to
// 64 bytes: what a directory alone needs is behind dir, a file's bytes or
// reader behind contents.
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
}

func (e *entry) isDir() bool { return e.dir != nil }

// children returns a directory's children (none for a file).
func (e *entry) children() []*entry {
	if e.dir == nil {
		return nil
	}
	return e.dir.children
}

// data returns the bytes of a static file.
func (e *entry) data() []byte {
	if c := e.contents.Load(); c != nil {
		return c.data
	}
	return nil
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
	form  tensorForm
	dtype dtype.DType // dtype of the served bytes (the view's, or stored)
	size  int64
	t     *index.Tensor
}

// tensorForm is how a tensor file's bytes are made.
type tensorForm uint8

const (
	// formDirect: the file is [t.Offset, t.Offset+t.Size) of its source,
	// served without a view (spliced where the source has a descriptor).
	formDirect    tensorForm = iota + 1
	formNative               // view.New(t, src, dtype.Invalid): strided or big-endian, as stored
	formConverted            // view.New(t, src, dtype): converted to the file's dtype
	formNPY                  // view.NewNPY(t, src)
)

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

// virtual returns the virtualFile of a kindVirtual file.
func (e *entry) virtual() virtualFile {
	if c := e.contents.Load(); c != nil {
		return c.v
	}
	return nil
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

// numberInodes gives every entry its inode number: 1 for the root, then
// depth-first in name order, and returns the entries by number (entry
// ino is at ino-1). The numbers depend only on the tree. The walk keeps
// its own stack: a tree can be tens of thousands of directories deep.
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

// Root is a mountable tensorfs tree: the constant tree built from one
// index, the sources it reads, and the live counters.
type Root struct {
	// Dependencies (owned by the caller, who closes the sources after the
	// server has stopped).
	idx     *index.Index
	sources []backing.Source
	opts    Options
	logger  *log.Logger

	// Constant after NewRoot.
	top      *entry
	inodes   []*entry // by inode number - 1: the kernel's node IDs
	fds      []int    // per source: its descriptor to splice from, or -1
	nodes    uint64   // entries in the tree
	mtime    time.Time
	uid, gid uint32
	files    uint64     // regular files
	bytes    int64      // bytes of the top-level tensors
	dropped  int        // tensors left out of views (clashes, view errors)
	index    *indexFile // .tensorfs/index.json

	// cache counts served bytes to drop the backing files' cached copy;
	// nil with Options.KeepBackingCache (cache.go).
	cache *cacheDrop

	// passthrough: per tensor entry, the descriptor it is served from by
	// FUSE passthrough, or -1; decided on first open (passthrough.go).
	passthrough sync.Map

	// Mutable.
	stats stats
	// directIO: Options.DirectIO, once Mount has seen that the kernel
	// lets direct-I/O files be mapped shared.
	directIO atomic.Bool
}

// NewRoot builds the whole tree for idx, whose Sources[i] is read through
// sources[i]. It fails when a tensor's path is unusable (see SPEC: the
// loader maps names to usable paths), when a stored tensor cannot be
// served, or when sources does not match idx.
func NewRoot(idx *index.Index, sources []backing.Source, opts Options) (*Root, error) {
	if idx == nil {
		return nil, errors.New("fs: nil index")
	}
	if len(sources) != len(idx.Sources) {
		return nil, fmt.Errorf("fs: %d sources for an index of %d", len(sources), len(idx.Sources))
	}
	if opts.View != dtype.Invalid && !opts.View.IsFloatView() {
		return nil, fmt.Errorf("fs: %s is not a view dtype (want F64, F32, F16 or BF16)", opts.View)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	r := &Root{idx: idx, sources: sources, opts: opts, logger: opts.Logger}
	if r.logger == nil {
		r.logger = log.New(os.Stderr, "tensorfs: ", 0)
	}
	r.uid, r.gid = uint32(os.Getuid()), uint32(os.Getgid())
	if opts.UID != nil {
		r.uid = *opts.UID
	}
	if opts.GID != nil {
		r.gid = *opts.GID
	}
	r.mtime = r.sourcesMtime()
	r.stats.start = time.Now()

	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if t.Source < 0 || t.Source >= len(sources) {
			return nil, fmt.Errorf("fs: tensor %q: source %d out of range", t.Name, t.Source)
		}
	}

	r.fds = make([]int, len(sources))
	for i, src := range sources {
		r.fds[i] = -1
		if !opts.NoSplice {
			r.fds[i] = spliceFd(src)
		}
	}

	r.cache = newCacheDrop(idx, sources, opts.KeepBackingCache) // cache.go

	// The stored tree. The views are built from its files, in its path
	// order, so that their builds find their paths sorted already.
	native, nativeFiles, err := r.buildNative("")
	if err != nil {
		return nil, err
	}

	top := newBuilder("", len(native.children())+8)
	var listed []listedTensor // what index.json describes: the top level
	var stored []listedTensor // and, in a converted top level, .native/
	if opts.View == dtype.Invalid {
		for _, c := range native.children() {
			top.attach(c) // children of the stored tree's root
		}
		listed = listFiles(nativeFiles, "")
	} else {
		v, files := r.buildView("", opts.View, nativeFiles)
		for _, c := range v.children() {
			top.attach(c)
		}
		listed = listFiles(files, "")
		// .native/ exists even when empty (a checkpoint of no
		// tensors): its .safetensors/ export does.
		native.name = nativeDir
		top.attach(native)
		stored = listFiles(nativeFiles, nativeDir)
	}
	// Every view exists, even with no tensor in it (a checkpoint of
	// integers has nothing to convert), so that its .safetensors/ export,
	// which holds every tensor, does too.
	for _, fv := range floatViews {
		v, _ := r.buildView(fv.dir, fv.dt, nativeFiles)
		top.attach(v)
	}
	top.attach(r.buildNPY(nativeFiles))
	r.addExports(top) // .safetensors/ in each tree (export.go)

	r.index, err = r.newIndexFile(listed, stored)
	if err != nil {
		return nil, fmt.Errorf("fs: index.json: %v", err)
	}
	top.attach(r.buildControl())

	r.top = top.finish()
	r.inodes = numberInodes(r.top)
	r.nodes = uint64(len(r.inodes))
	r.countFiles()
	for _, l := range listed {
		r.bytes += l.f.size
	}
	return r, nil
}

// sourcesMtime returns the newest modification time of the source files,
// or now when none can be stat'ed.
func (r *Root) sourcesMtime() time.Time {
	var newest time.Time
	for _, s := range r.idx.Sources {
		if st, err := os.Stat(s); err == nil && st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	if newest.IsZero() {
		newest = time.Now()
	}
	return newest
}

func (r *Root) countFiles() {
	for _, e := range r.inodes {
		if !e.isDir() {
			r.files++
		}
	}
}

// tensorPath returns where t lives in the stored tree: Path, or Name when
// the loader left Path unset.
func tensorPath(t *index.Tensor) string {
	if t.Path != "" {
		return t.Path
	}
	return t.Name
}

// checkTopLevel refuses a top-level name that could hide a control or
// view directory (they all start with '.').
func checkTopLevel(p string) error {
	if strings.HasPrefix(p, ".") {
		return errors.New("leading '.' (reserved for .tensorfs and the views)")
	}
	return nil
}

// buildNative builds the stored tree: every tensor, in its stored dtype.
// It returns the tree's files in path order.
func (r *Root) buildNative(name string) (*entry, []buildItem, error) {
	b := newBuilder(name, len(r.idx.Tensors))
	for i := range r.idx.Tensors {
		t := &r.idx.Tensors[i]
		p := tensorPath(t)
		f, err := r.storedFile(t)
		if err == nil {
			err = checkTopLevel(p)
		}
		if err == nil {
			_, err = b.add(p, f)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("fs: tensor %q (path %q): %v", t.Name, p, err)
		}
	}
	root := b.finish()
	if c := b.clashes(); len(c) > 0 {
		t := c[0].e.file.t
		return nil, nil, fmt.Errorf("fs: tensor %q (path %q): %v", t.Name, c[0].path, c[0].err)
	}
	return root, b.placed(), nil
}

// storedFile serves t as stored: directly from its source when it is one
// contiguous little-endian range, through view.New otherwise (built on
// first read; view.Size checks now everything New would).
func (r *Root) storedFile(t *index.Tensor) (fileData, error) {
	src := r.sources[t.Source]
	f := fileData{kind: kindTensor, t: t, dtype: t.DType}
	if t.Contiguous() {
		if t.Offset < 0 || t.Size < 0 || t.Offset > src.Size()-t.Size {
			return fileData{}, fmt.Errorf("range [%d, %d+%d) outside the %d-byte source", t.Offset, t.Offset, t.Size, src.Size())
		}
		f.form, f.size = formDirect, t.Size
		return f, nil
	}
	size, err := view.Size(t, src, dtype.Invalid)
	if err != nil {
		return fileData{}, err
	}
	f.form, f.size = formNative, size
	return f, nil
}

// viewFile serves t converted to dt, or stored when t already is dt. ok
// is false when t has no view in dt.
func (r *Root) viewFile(t *index.Tensor, dt dtype.DType) (f fileData, ok bool, err error) {
	if t.DType == dt {
		f, err = r.storedFile(t)
		return f, err == nil, err
	}
	if !view.Convertible(t, dt) {
		return fileData{}, false, nil
	}
	size, err := view.Size(t, r.sources[t.Source], dt)
	if err != nil {
		return fileData{}, false, err
	}
	return fileData{kind: kindTensor, form: formConverted, t: t, dtype: dt, size: size}, true, nil
}

// buildView builds the tree of every stored file's tensor that has a view
// in dt (an empty directory when none has), and returns its files.
func (r *Root) buildView(name string, dt dtype.DType, stored []buildItem) (*entry, []buildItem) {
	b := newBuilder(name, len(stored))
	for _, it := range stored {
		t := it.e.file.t
		f, ok, err := r.viewFile(t, dt)
		if ok {
			_, err = b.add(it.path, f)
		}
		if err != nil {
			r.drop(t, dt.String(), err)
		}
	}
	root := b.finish()
	for _, c := range b.clashes() {
		r.drop(c.e.file.t, dt.String(), c.err)
	}
	return root, b.placed()
}

// buildNPY builds .npy/: <path>.npy for every tensor view.NewNPY accepts
// (view.NPYSize says so without building the reader), from the stored
// tree's files; an empty directory when no tensor has one.
func (r *Root) buildNPY(stored []buildItem) *entry {
	b := newBuilder(npyDir, len(stored))
	for _, it := range stored {
		t := it.e.file.t
		size, err := view.NPYSize(t, r.sources[t.Source])
		if err != nil {
			continue // no .npy form (complex32, a quantized type without dequantizer...)
		}
		dt, _ := view.NPYDType(t)
		f := fileData{kind: kindTensor, form: formNPY, t: t, dtype: dt, size: size}
		// "<path>.npy" can be a directory of the view too: tensors "q"
		// and "q.npy/z" give the file q.npy and the directory q.npy/. As
		// in the stored tree (rule 3 of the names rule), the file then
		// gets a '%' appended: q.npy% (no stored path ends in ".npy%", so
		// it is taken by nothing else). The stored tree says whether
		// q.npy is a directory: a sibling of q's.
		p := it.path + npySuffix
		if c := it.parent.child(it.e.name + npySuffix); c != nil && c.isDir() {
			p += "%"
		}
		if _, err := b.add(p, f); err != nil {
			r.drop(t, "npy", err)
		}
	}
	root := b.finish()
	for _, c := range b.clashes() {
		r.drop(c.e.file.t, "npy", c.err)
	}
	return root
}

func (r *Root) drop(t *index.Tensor, viewName string, err error) {
	r.dropped++
	r.logger.Printf("tensor %q left out of the %s view: %v", t.Name, viewName, err)
}

// buildControl builds .tensorfs/: index.json, metadata/<key>, stats.json.
func (r *Root) buildControl() *entry {
	b := newBuilder(controlDir)
	b.addVirtual("index.json", r.index)
	b.add("stats.json", fileData{kind: kindStats})
	b.attach(r.buildMetadata()) // metadata.go
	return b.finish()
}

// MetadataFileName maps a metadata key to its file name under
// .tensorfs/metadata/: index.MetadataFileName.
func MetadataFileName(key string) string { return index.MetadataFileName(key) }

// lookupPath walks a slash-separated path from the top of the tree, for
// tests and tools; "" is the top.
func (r *Root) lookupPath(p string) *entry {
	e := r.top
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

// Stats returns a snapshot of the live counters.
func (r *Root) Stats() Stats { return r.stats.snapshot(r) }

// Files returns the number of regular files in the tree; Nodes the number
// of files and directories.
func (r *Root) Files() uint64 { return r.files }

// Nodes returns the number of files and directories in the tree.
func (r *Root) Nodes() uint64 { return r.nodes }

// mode bits of the tree's entries.
const (
	dirMode  = syscall.S_IFDIR | 0o555
	fileMode = syscall.S_IFREG | 0o444
)
