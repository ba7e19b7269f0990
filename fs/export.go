package fs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// The safetensors export: every tree of tensors (the top level, .native/
// in a mount made with --dtype, and each converted view) gets a hidden
// directory .safetensors/ holding model.safetensors, the whole tree as
// one safetensors file (view.Export in the tree's dtype), and, beside it,
// the other regular files of a Hugging Face model directory
// (Options.ExportFiles), so that a loader pointed at the directory finds
// a complete model.
//
// The files are sized at NewRoot (view.ExportSize); the export itself is
// built on its first read. Reads of a range that lies inside one tensor
// stored contiguously in a source with a descriptor are spliced from it,
// as the tensor's own file is; everything else is read with
// view.Export.ReadAt into go-fuse's buffer. Either way the bytes read
// from a source count as served, as the tensor files' do (cache.go): the
// export is built over viewSource's wrappers, and a splice is answered
// with fdResult.

// kindExport is a file of a .safetensors/ directory: the export, or a
// file beside it (fileContents.r set at NewRoot).
const kindExport fileKind = 100

// Names of the export directory and file.
const (
	exportDir  = ".safetensors"
	exportName = "model.safetensors"
	// maxExportFiles caps the files taken from a model directory.
	maxExportFiles = 4096
)

// ExportFile is a file served unchanged beside model.safetensors in every
// .safetensors/ directory: one of a Hugging Face model directory's other
// files (config.json, tokenizer files...).
type ExportFile struct {
	Name string         // file name: one path component
	Src  backing.Source // its bytes; owned by the caller
}

// ModelDirFiles returns the files of a Hugging Face model directory that
// go beside model.safetensors: when source is a directory (or a
// *.index.json weight map, whose directory it stands for), every regular
// file in it (symbolic links followed, subdirectories ignored) that is
// neither one of idx's sources, nor a weight map (*.index.json), nor a
// checkpoint by content; nil for a checkpoint file or a source that is
// not a local path. The files are open
// (read with pread); the caller closes them with CloseExportFiles after
// the server has stopped.
func ModelDirFiles(source string, idx *index.Index) ([]ExportFile, error) {
	st, err := os.Stat(source)
	if err != nil {
		return nil, nil // not a local path (a remote source): no files
	}
	dir := source
	if !st.IsDir() {
		if !strings.HasSuffix(source, ".index.json") {
			return nil, nil
		}
		dir = filepath.Dir(source)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	isSource := map[string]bool{}
	for _, s := range idx.Sources {
		if s == "" {
			continue // a member
		}
		if abs, err := filepath.Abs(s); err == nil {
			isSource[abs] = true
		}
	}
	var out []ExportFile
	fail := func(err error) ([]ExportFile, error) {
		CloseExportFiles(out)
		return nil, err
	}
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(dir, name)
		if e.IsDir() || strings.HasSuffix(name, ".index.json") || name == exportName || checkComponent(name) != nil {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil && isSource[abs] {
			continue
		}
		if fst, err := os.Stat(p); err != nil || !fst.Mode().IsRegular() {
			continue // a dangling link, a subdirectory through a link, a device...
		}
		if len(out) >= maxExportFiles {
			return fail(fmt.Errorf("%s: more than %d files beside the checkpoint", dir, maxExportFiles))
		}
		src, err := backing.Open(p, backing.Options{Mode: backing.Pread})
		if err != nil {
			return fail(err)
		}
		head := make([]byte, index.SniffLen)
		n, _ := src.ReadAt(head, 0)
		if _, ok := formats.Detect(head[:n]); ok {
			src.Close() // a checkpoint the index does not use
			continue
		}
		out = append(out, ExportFile{Name: name, Src: src})
	}
	return out, nil
}

// CloseExportFiles closes the files ModelDirFiles opened.
func CloseExportFiles(files []ExportFile) {
	for _, f := range files {
		f.Src.Close()
	}
}

// exportEntry returns a .safetensors/ directory for the tree in dtype dt
// (dtype.Invalid: the stored dtypes), or nil, with a log line, when the
// export cannot be made.
func (r *Root) exportEntry(dt dtype.DType) *entry {
	size, err := view.ExportSize(r.idx, r.sources, dt)
	if err != nil {
		r.logger.Printf("no safetensors export in %s: %v", exportDTypeName(dt), err)
		return nil
	}
	b := newBuilder(exportDir)
	b.add(exportName, fileData{kind: kindExport, dtype: dt, size: size})
	for _, f := range r.opts.ExportFiles {
		e, err := b.add(f.Name, fileData{kind: kindExport, size: f.Src.Size()})
		if err != nil {
			r.logger.Printf("%s left out of the safetensors export: %v", f.Name, err)
			continue
		}
		e.contents.Store(&fileContents{r: sourceReader{f.Src}})
	}
	return b.finish()
}

func exportDTypeName(dt dtype.DType) string {
	if dt == dtype.Invalid {
		return "the stored dtypes"
	}
	return dt.String()
}

// addExports puts a .safetensors/ directory at the top of the tree being
// built (in Options.View, or the stored dtypes), in .native/ when there is
// one, and in each converted view's directory. NewRoot calls it once the
// views are attached, before finishing the tree.
func (r *Root) addExports(top *builder) {
	if e := r.exportEntry(r.opts.View); e != nil {
		top.attach(e)
	}
	if d := top.attached(nativeDir); d != nil && d.isDir() {
		if e := r.exportEntry(dtype.Invalid); e != nil {
			insertChild(d, e)
		}
	}
	for _, fv := range floatViews {
		if d := top.attached(fv.dir); d != nil && d.isDir() {
			if e := r.exportEntry(fv.dt); e != nil {
				insertChild(d, e)
			}
		}
	}
}

// insertChild puts c among the sorted children of the finished directory
// d, which has no child of that name (tensor paths never start with '.').
func insertChild(d, c *entry) {
	ch := d.dir.children
	i := sort.Search(len(ch), func(i int) bool { return ch[i].name >= c.name })
	if i < len(ch) && ch[i].name == c.name {
		return
	}
	d.dir.children = slices.Insert(ch, i, c)
	if c.isDir() {
		d.dir.nsubdirs++
	}
}

// sourceReader serves a whole backing file as a view.Reader.
type sourceReader struct{ src backing.Source }

func (s sourceReader) Size() int64 { return s.src.Size() }

func (s sourceReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, view.ErrNegativeOffset
	}
	return s.src.ReadAt(p, off)
}

// exportReader returns the reader of an export file: the file beside
// model.safetensors, or the export, built on first use (see reader).
func (r *Root) exportReader(e *node) (view.Reader, error) {
	if c := e.loadContents(); c != nil {
		return c.r, c.err
	}
	srcs := make([]backing.Source, len(r.sources))
	for i := range srcs {
		srcs[i] = r.viewSource(i) // counts served bytes: cache.go
	}
	x, err := view.NewExport(r.idx, srcs, e.file.dtype)
	c := &fileContents{err: err}
	if err == nil && x.Size() != e.file.size {
		err = fmt.Errorf("export of %d bytes for a file of %d", x.Size(), e.file.size)
		c.err = err
	}
	if err == nil {
		c.r = x
	}
	if c, stored := e.storeContents(c); !stored {
		return c.r, c.err
	} else if err != nil {
		r.logger.Printf("safetensors export in %s: %v", exportDTypeName(e.file.dtype), err)
	}
	return c.r, c.err
}

// exportFd returns the descriptor to splice a segment of the export from,
// src being the source Export.Segment named: for a source wrapped to count
// served bytes (viewSource), its index and the descriptor NewRoot took;
// else -1 and src's own descriptor (or -1 when it has none).
func (r *Root) exportFd(src backing.Source) (s, fd int) {
	if w, ok := src.(*servedSource); ok {
		return w.s, r.fds[w.s]
	}
	return -1, spliceFd(src)
}

// readExport serves [off, off+len(dest)) of an export file (clamped by
// read): spliced from the source when the range lies inside one tensor
// stored contiguously there, else copied into dest.
func (r *Root) readExport(e *node, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	v, err := r.exportReader(e)
	if err != nil {
		return nil, toErrno(err)
	}
	n := len(dest)
	if x, ok := v.(*view.Export); ok && !r.opts.NoSplice && n <= maxSpliced { // read.go
		if end, src, at, ok := x.Segment(off); ok && end >= off+int64(n) {
			if s, fd := r.exportFd(src); fd >= 0 {
				if err := checkExtent(fd, at+int64(n)); err != nil {
					return nil, toErrno(err)
				}
				if s < 0 {
					return fuse.ReadResultFd(uintptr(fd), at, n), 0
				}
				return r.fdResult(s, fd, at, n), 0 // counted once sent: cache.go
			}
		}
	}
	got, err := v.ReadAt(dest, off)
	if got == n {
		return fuse.ReadResultData(dest), 0
	}
	if err == nil || err == io.EOF {
		err = fmt.Errorf("short read: %d of %d bytes", got, n)
	}
	return nil, toErrno(err)
}
