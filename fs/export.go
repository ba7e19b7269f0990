package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/quant"
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
)

// ExportFile is a file served beside model.safetensors in every
// .safetensors/ directory and tree (modeldir.go): one of a Hugging Face
// model directory's other files (config.json, tokenizer files...),
// unchanged but for a converted tree's config.json.
type ExportFile struct {
	Name string         // file name: one path component
	Src  backing.Source // its bytes; owned by the caller
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
	for _, c := range r.companions(dt) { // modeldir.go
		if c.name == exportName {
			r.logger.Printf("%s left out of the safetensors export: the export's own name", c.name)
			continue
		}
		e, err := b.add(c.name, fileData{kind: kindExport, size: c.rd.Size()})
		if err != nil {
			r.logger.Printf("%s left out of the safetensors export: %v", c.name, err)
			continue
		}
		e.contents.Store(&fileContents{r: c.rd})
	}
	return b.finish()
}

// maxConfigJSON bounds the config.json an export rewrites.
const maxConfigJSON = 16 << 20

// unquantizedConfig returns config.json (b) without the keys that name
// a quantization of scheme (quant.ConfigKeys), every other byte as it
// is: the config.json of a converted tree, whose weights are the
// logical ones.
func unquantizedConfig(b []byte, scheme string) ([]byte, error) {
	var err error
	for _, key := range quant.ConfigKeys(scheme) {
		if b, err = withoutKey(b, key); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// withoutKey returns the JSON object b without its top-level member key
// (as it is when b has none), the rest byte for byte.
func withoutKey(b []byte, key string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	first := true
	for d.More() {
		start := d.InputOffset() // after '{' or the previous value
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		end := d.InputOffset()
		if k != key {
			first = false
			continue
		}
		if !first {
			// ", "key": value" goes, from the comma before it
			return slices.Concat(b[:start], b[end:]), nil
		}
		// the first member: it goes with the comma after it, if any
		rest := b[end:]
		if i := bytes.IndexByte(rest, ','); i >= 0 && d.More() {
			rest = rest[i+1:]
		}
		return slices.Concat(b[:start], rest), nil
	}
	return b, nil
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
// With a model directory's files, each of those trees shows them beside
// its tensors too, with model.safetensors (modeldir.go).
func (r *Root) addExports(top *builder) {
	e := r.exportEntry(r.opts.View)
	if e != nil {
		top.attach(e)
	}
	for _, m := range r.modelFiles(r.opts.View, e) {
		top.attach(m)
	}
	if d := top.attached(nativeDir); d != nil && d.isDir() {
		e := r.exportEntry(dtype.Invalid)
		if e != nil {
			insertChild(d, e)
		}
		for _, m := range r.modelFiles(dtype.Invalid, e) {
			insertChild(d, m)
		}
	}
	for _, fv := range floatViews {
		if d := top.attached(fv.dir); d != nil && d.isDir() {
			e := r.exportEntry(fv.dt)
			if e != nil {
				insertChild(d, e)
			}
			for _, m := range r.modelFiles(fv.dt, e) {
				insertChild(d, m)
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
	// model.safetensors beside a model directory's files is the same
	// export as in .safetensors/: built once (modeldir.go).
	if v, ok := r.exports.Load(e.file.dtype); ok {
		c, _ := e.storeContents(v.(*fileContents))
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
		r.exports.LoadOrStore(e.file.dtype, c)
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
				res, ok, err := r.spliced(s, fd, at, n) // read.go; counted once sent
				if err != nil {
					return nil, toErrno(err)
				}
				if ok {
					return res, 0
				}
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
