package fs

import (
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
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
	// directory (see export.go and source.Checkpoint.Beside) and, with
	// model.safetensors, beside the tensors at the top of each tree but
	// .npy/ (modeldir.go). config.json, if any, is read at NewRoot.
	ExportFiles []ExportFile

	// Extra are directories of fixed files that the command serves at the
	// top level beside the views (the .cuda/ of a --gpu mount); see
	// ExtraDir.
	Extra []ExtraDir
}

// ExtraDir is a directory of fixed files at the top of the tree. Its
// name starts with '.' (never a tensor path) and clashes with no other
// top-level entry. A Private one is mode 0500 and its files 0400: with a
// mount that is not --allow-other only its owner reaches the mount anyway,
// and the modes say so; others are 0555 and 0444 like the rest.
type ExtraDir struct {
	Name    string
	Files   map[string][]byte
	Private bool

	// Render, if set, makes more of the files when the tree is built,
	// given the path each tensor (by name) has in the tree: a tensor
	// moved to NAME#N because its name is a model directory file's
	// (modeldir.go) is found there, not at the index's path. The
	// .cuda/index.json of a --gpu mount is made so.
	Render func(path func(name string) string) (map[string][]byte, error)
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
	top    *entry
	static []*entry  // static entries by inode number - 1: their node IDs
	paths  *pathTree // the tensors' directories and files (paths.go)
	places [16]uint8 // per base place: its membership bit; 0: not shown
	// placeDType: per base place, the dtype its tensor files serve
	// (dtype.Invalid: the stored dtypes).
	placeDType [16]dtype.DType
	fds        []int  // per source: its descriptor to splice from, or -1
	nodes      uint64 // files and directories in the tree, every place's
	mtime      time.Time
	uid, gid   uint32
	files      uint64     // regular files
	bytes      int64      // bytes of the top-level tensors
	dropped    int        // tensors left out of views (clashes, view errors)
	index      *indexFile // .tensorfs/index.json

	// cache counts served bytes to drop the backing files' cached copy;
	// nil with Options.KeepBackingCache (cache.go).
	cache *cacheDrop

	// passthrough: per tensor file's node ID, the descriptor it is
	// served from by FUSE passthrough, or -1; decided on first open
	// (passthrough.go).
	passthrough sync.Map

	// contents: the readers of path tree files, built on first open or
	// read (Root.reader); bigDirs: the subdirectory counts of large path
	// directories, by place and number (node.go).
	contents contentsMap
	bigDirs  sync.Map
	// splitRanks: per base place, the largest rank below each path
	// directory, for .split/ (split.go), worked out on first use.
	splitRanks splitRanks

	// exports: per dtype, the *fileContents of its export once built,
	// shared by the files that serve it (export.go).
	exports sync.Map
	// besideByDType, configBytes, configErr: the model directory's
	// files as each dtype's trees show them, and config.json's bytes;
	// worked out by NewRoot, unchanged after (modeldir.go).
	besideByDType map[dtype.DType][]companion
	configBytes   []byte
	configErr     error

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
	r.moveClashing() // tensors named as a model directory's files: modeldir.go
	idx = r.idx

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
	// Tiled tensors count their reads on their chunks' files: cache.go.
	if err := r.countTiles(); err != nil {
		return nil, err
	}

	if err := r.buildPaths(); err != nil {
		return nil, err
	}

	// Every view exists, even with no tensor in it (a checkpoint of
	// integers has nothing to convert; one of no tensors has nothing at
	// all), so that its .safetensors/ export, which holds every tensor,
	// does too; .npy/ and, with Options.View, .native/ likewise. Inside a
	// view, a directory with nothing of it below is absent.
	top := newBuilder("", 8)
	if opts.View != dtype.Invalid {
		top.attach(viewDir(nativeDir, placeNative))
	}
	for i, fv := range floatViews {
		top.attach(viewDir(fv.dir, placeBF16+place(i)))
	}
	top.attach(viewDir(npyDir, placeNPY))
	r.addExports(top) // .safetensors/ in each tree (export.go)
	r.addFiles(top)   // .files/: modeldir.go

	listed := r.listFiles(placeTop) // what index.json describes: the top level
	var stored []uint32             // and, in a converted top level, .native/
	if r.places[placeNative] != 0 {
		stored = r.listFiles(placeNative)
	}
	var err error
	if r.index, err = r.newIndexFile(listed, stored); err != nil {
		return nil, fmt.Errorf("fs: index.json: %v", err)
	}
	top.attach(r.buildControl())
	if err := r.addExtra(top); err != nil {
		return nil, err
	}

	r.top = top.finish()
	r.top.dir.view = placeTop
	for _, e := range append([]*entry{r.top}, r.top.children()...) {
		if e.dir != nil && e.dir.view != 0 { // .split/ of each place: split.go
			insertChild(e, &entry{name: splitDir, dir: &dirData{split: e.dir.view}})
		}
	}
	r.static = numberInodes(r.top)
	r.count()
	for _, t := range listed {
		f := r.fileIn(t, placeTop)
		r.bytes += r.fileSize(0, &f)
	}
	return r, nil
}

// viewDir returns a static directory that shows place p's path tree.
func viewDir(name string, p place) *entry {
	return &entry{name: name, dir: &dirData{view: p}}
}

// count counts the tree's nodes and files: the static entries, and the
// path tree's nodes in every place that shows them.
func (r *Root) count() {
	r.nodes = uint64(len(r.static))
	for _, e := range r.static {
		if !e.isDir() {
			r.files++
		}
	}
	for _, in := range r.places {
		if in == 0 {
			continue
		}
		dirs, files := r.paths.count(in)
		r.nodes += dirs + files
		r.files += files
	}
}

// sourcesMtime returns the newest modification time of the source files,
// or now when none can be stat'ed.
func (r *Root) sourcesMtime() time.Time {
	var newest time.Time
	for _, s := range r.idx.Sources {
		if s == "" {
			continue // a member
		}
		if st, err := os.Stat(s); err == nil && st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	if newest.IsZero() {
		newest = time.Now()
	}
	return newest
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

// buildPaths checks every tensor's stored file and path, works out which
// places hold it (a tensor without a view in a dtype is left out of that
// view, with a log line), and builds the shared path tree. It fails when a
// stored tensor cannot be served or its path is unusable or clashes.
func (r *Root) buildPaths() error {
	tensors := r.idx.Tensors
	fail := func(i int, err error) error {
		t := &tensors[i]
		return fmt.Errorf("fs: tensor %q (path %q): %v", t.Name, tensorPath(t), err)
	}
	for i := range tensors {
		t := &tensors[i]
		p := tensorPath(t)
		_, err := r.storedFile(t)
		if err == nil {
			err = checkPath(p)
		}
		if err == nil {
			err = checkTopLevel(p)
		}
		if err != nil {
			return fail(i, err)
		}
	}
	in := make([]uint8, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		if t.Listed(false) { // the stored tree and .npy/
			in[i] = inStored
			if _, err := view.Sizeof(t, r.sources[t.Source], view.Form{NPY: true}); err == nil {
				in[i] |= inNPY
			} // else no .npy form (complex32, a quantized type without dequantizer...)
		}
		if t.Listed(true) { // the float views
			in[i] |= r.convertedIn(t)
		}
	}
	pt, err := buildPathTree(tensors, in, func(t uint32, err error) { r.drop(&tensors[t], "npy", err) })
	if c, ok := err.(*pathClash); ok {
		return fail(int(c.t), c.err)
	}
	if err != nil {
		return fmt.Errorf("fs: %v", err)
	}
	r.paths = pt
	// Every place is shown, even one with no file in it (its root is
	// then an empty directory, beside its .safetensors/ export).
	r.places[placeTop] = inStored
	r.placeDType[placeTop] = r.opts.View
	if r.opts.View != dtype.Invalid {
		r.places[placeTop] = inBF16 << viewIndex(r.opts.View)
		r.places[placeNative] = inStored
	}
	for k, fv := range floatViews {
		r.places[placeBF16+place(k)] = inBF16 << k
		r.placeDType[placeBF16+place(k)] = fv.dt
	}
	r.places[placeNPY] = inNPY
	return nil
}

// convertedIn returns the membership bits of the float views that show
// t (index.Tensor.Listed decides whether they list it at all), logging
// each view t cannot be served in.
func (r *Root) convertedIn(t *index.Tensor) uint8 {
	var in uint8
	for k, fv := range floatViews {
		_, ok, err := r.viewFile(t, fv.dt)
		if ok {
			in |= inBF16 << k
		} else if err != nil {
			r.drop(t, fv.dt.String(), err)
		}
	}
	return in
}

// viewIndex returns the position of dt among floatViews.
func viewIndex(dt dtype.DType) int {
	for k, fv := range floatViews {
		if fv.dt == dt {
			return k
		}
	}
	panic("fs: not a view dtype: " + dt.String())
}

// storedFile serves t as stored: directly from its source when it is one
// contiguous little-endian range, through view.Open otherwise (built on
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
	size, err := view.Sizeof(t, src, view.Form{})
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
	size, err := view.Sizeof(t, r.sources[t.Source], view.Form{To: dt})
	if err != nil {
		return fileData{}, false, err
	}
	return fileData{kind: kindTensor, form: formConverted, t: t, dtype: dt, size: size}, true, nil
}

func (r *Root) drop(t *index.Tensor, viewName string, err error) {
	r.dropped++
	r.logger.Printf("tensor %q left out of the %s view: %v", t.Name, viewName, err)
}

// addExtra attaches Options.Extra at the top of the tree.
func (r *Root) addExtra(top *builder) error {
	for _, x := range r.opts.Extra {
		if !strings.HasPrefix(x.Name, ".") || strings.Contains(x.Name, "/") || top.attached(x.Name) != nil {
			return fmt.Errorf("fs: extra directory %q: want a free top-level name starting with '.'", x.Name)
		}
		b := newBuilder(x.Name)
		files := x.Files
		if x.Render != nil {
			rendered, err := x.Render(r.pathOf())
			if err != nil {
				return fmt.Errorf("fs: extra directory %s: %v", x.Name, err)
			}
			files = maps.Clone(files)
			if files == nil {
				files = map[string][]byte{}
			}
			maps.Copy(files, rendered)
		}
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := b.addVirtual(n, bytesFile(files[n])); err != nil {
				return fmt.Errorf("fs: extra file %s/%s: %v", x.Name, n, err)
			}
		}
		e := b.finish()
		if x.Private {
			e.dir.private = true
			for _, c := range e.children() {
				c.file.private = true
			}
		}
		top.attach(e)
	}
	return nil
}

// pathOf returns the path in the tree of the tensor of each name (the
// index's, moved to NAME#N where it clashes with a model directory file:
// moveClashing), or the name itself for one that is no tensor.
func (r *Root) pathOf() func(name string) string {
	paths := make(map[string]string, len(r.idx.Tensors))
	for i := range r.idx.Tensors {
		t := &r.idx.Tensors[i]
		if _, ok := paths[t.Name]; !ok {
			paths[t.Name] = tensorPath(t)
		}
	}
	return func(name string) string {
		if p, ok := paths[name]; ok {
			return p
		}
		return name
	}
}

// bytesFile is a virtual file of fixed bytes (also a view.Reader).
type bytesFile []byte

func (b bytesFile) Size() int64 { return int64(len(b)) }

func (b bytesFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
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
