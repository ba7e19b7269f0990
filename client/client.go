package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/source"
	"github.com/lazyweights/tensorfs/view"
)

// TensorInfo describes one tensor as stored in the checkpoint. It is plain
// data: copying it is free and changing it changes nothing in the
// Checkpoint.
type TensorInfo struct {
	Index int         // position in Checkpoint.Tensors (index order: by name)
	Name  string      // exact name in the checkpoint
	Path  string      // path of its file in a mounted tree (relative to the mount point; to .native/ in a mount made with --dtype)
	DType dtype.DType // stored dtype
	Shape []int64     // row-major; empty for a scalar
	Size  int64       // bytes of the native (stored dtype, row-major, little-endian) representation
	// Source is the backing file holding the tensor, and Offset the byte
	// offset of its first byte there when the tensor is one contiguous
	// little-endian range of it; Offset is -1 otherwise.
	Source string
	Offset int64
	// Role says which listings hold it (Listed): stored, a part of a
	// logical tensor, or a logical tensor.
	Role index.Role
}

// Listed reports whether the tensors a reader of dtype to gets (Stream,
// Fill, TensorsIn) include t: AsStored lists every stored tensor, parts
// included; a view dtype lists the stored tensors that are not parts
// and the logical ones (index.Tensor.Listed).
func (t TensorInfo) Listed(to dtype.DType) bool {
	it := index.Tensor{Role: t.Role}
	return it.Listed(to != AsStored)
}

// NumElements returns the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 {
	n, _ := index.Elements(t.Shape)
	return n
}

// Checkpoint is an open checkpoint: a checkpoint file, a directory holding
// a sharded checkpoint, or a tensorfs mount point. All methods are safe for
// concurrent use; Close must not run concurrently with the others.
type Checkpoint struct {
	// Constant after Open.
	path    string
	format  string
	sources []string
	// metadata is the checkpoint's metadata as JSON values: from
	// index.json for a mount, built from idx.Metadata on first use
	// (metaOnce) for a direct checkpoint.
	metaOnce sync.Once
	metadata map[string]any
	tensors  []TensorInfo
	byName   map[string]int
	// byKey is the name of each of the checkpoint's own keys
	// (index.NamesByKey: a DCP's dotted keys), which lookup takes too.
	byKey map[string]string
	// keys are the checkpoint's own keys by name (index.Index.Keys).
	keys map[string]string
	// twin is the second tensor of a name that two have: a quantized
	// weight's logical tensor beside its stored part of that name
	// (index.Twins); lookup picks by the dtype asked for.
	twin     map[string]int
	unserved []Unserved

	// Direct (in-process) access; nil for a mount.
	idx   *index.Index
	files []backing.Source
	// dropMapped: the files are mapped (backing.Mmap), and Stream drops
	// the pages it has read from the mapping (madvise DONTNEED; the page
	// cache keeps them), so the resident set does not grow with the
	// checkpoint.
	dropMapped bool
	// remote: the files are remote sources (a scheme of source.Schemes).
	remote bool
	// loaded is what source.Load returned (its Sources are files),
	// for the files beside it (Beside); nil otherwise.
	loaded *source.Checkpoint

	// Mount access; "" for a direct checkpoint.
	mount string
	// nativeDir is where the stored tree is inside the mount: "" at the
	// top, ".native" in a mount made with --dtype (whose top level is a
	// converted view).
	nativeDir string

	closed bool // set by Close
}

// MountIndexPath is where a tensorfs mount publishes its index, relative
// to the mount point. Open recognises a mount by it.
const MountIndexPath = source.MountIndexPath

// Options configure OpenWith. The zero value is what Open uses.
type Options struct {
	// Backing says how the files of a checkpoint opened directly are
	// read. nil means backing.Pread: Stream reads each byte once into its
	// buffers, which pread does without page faults and without mapping
	// the file into the process. backing.Mmap also works (Stream then
	// drops the pages it has read from the mapping, so the resident set
	// stays bounded); backing.Direct bypasses the page cache. It does not
	// apply to a mount.
	Backing *backing.Options
	// Remote configures a remote path (a scheme of source.Schemes: s3://,
	// hf://, http(s)://, oci://...). nil means the defaults, which read
	// every scheme but s3://: that takes an S3 opener, Remote.S3 (backing/s3.Open), so
	// that only a program that asks for s3:// links the AWS SDK.
	Remote *source.RemoteOptions
}

// Open opens path: a checkpoint file, a directory holding a sharded
// checkpoint, or a tensorfs mount point (a directory holding
// .tensorfs/index.json). A checkpoint is parsed and validated completely
// before Open returns; nothing of its tensor data is read yet.
func Open(path string) (*Checkpoint, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, opts Options) (*Checkpoint, error) {
	if !source.IsRemote(path) && source.IsMount(path) {
		return openMount(path)
	}
	return openSource(path, opts)
}

// openSource opens a checkpoint file or directory, local or remote
// (source.Load). A remote one is parsed and validated through ranged
// GETs, and its tensors are then read through the remote sources' part
// cache (see backing/remote).
func openSource(path string, opts Options) (*Checkpoint, error) {
	so := source.Options{Backing: backing.Options{Mode: backing.Pread}}
	if opts.Backing != nil {
		so.Backing = *opts.Backing
	}
	if opts.Remote != nil {
		so.Remote = *opts.Remote
	}
	ck, err := source.Load(context.Background(), path, so)
	if err != nil {
		return nil, err
	}
	return FromSource(path, ck, so.Backing.Mode)
}

// FromSource wraps a checkpoint that source.Load has loaded, its local
// files read in mode, as a Checkpoint, which takes ownership of its
// sources (Close closes them). It is what Open does after loading: a
// command that loads a SOURCE itself (to log, check or mount it) reads
// it through the same Checkpoint.
func FromSource(path string, ck *source.Checkpoint, mode backing.Mode) (*Checkpoint, error) {
	c, err := FromIndex(path, ck.Index, ck.Sources)
	if err != nil {
		return nil, err
	}
	c.remote = ck.Remote != nil
	c.dropMapped = !c.remote && mode == backing.Mmap
	c.loaded = ck
	return c, nil
}

// Beside returns the files of the model directory beside the checkpoint
// (config.json, tokenizer files...), found one way for every SOURCE kind
// (source.Checkpoint.Beside); none for a mount or a Checkpoint made by
// FromIndex. Close closes them.
func (c *Checkpoint) Beside(ctx context.Context) ([]source.File, error) {
	if c.loaded == nil {
		return nil, nil
	}
	return c.loaded.Beside(ctx)
}

// FromIndex wraps an index that the caller has already loaded, with its
// open backing files (files[i] holds idx.Sources[i]), as a Checkpoint.
// The Checkpoint takes ownership of files: Close closes them. path is
// only used in messages.
func FromIndex(path string, idx *index.Index, files []backing.Source) (*Checkpoint, error) {
	if len(files) != len(idx.Sources) {
		return nil, fmt.Errorf("%s: %d backing files for %d sources", path, len(files), len(idx.Sources))
	}
	c := &Checkpoint{
		path:    path,
		format:  idx.Format,
		sources: idx.Files(),
		idx:     idx,
		files:   files,
		byKey:   index.NamesByKey(idx.Keys),
		keys:    idx.Keys,
	}
	for _, u := range idx.Unserved {
		src := ""
		if u.Source >= 0 && u.Source < len(idx.Sources) {
			src = idx.Sources[idx.FileOf(u.Source)]
		}
		c.unserved = append(c.unserved, Unserved{Name: u.Name, Type: u.Type, Shape: u.Shape, Source: src, Why: u.Why, More: u.More})
	}
	infos := make([]TensorInfo, len(idx.Tensors))
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if t.Source < 0 || t.Source >= len(files) {
			return nil, fmt.Errorf("%s: tensor %q: source %d out of range", path, t.Name, t.Source)
		}
		off, src := int64(-1), idx.Sources[t.Source]
		if m := idx.Member(t.Source); m != nil {
			src = idx.Sources[idx.FileOf(t.Source)] // a member: no range of the file
		} else if t.Contiguous() {
			off = t.Offset
		}
		infos[i] = TensorInfo{
			Name: t.Name, Path: t.Path, DType: t.DType, Shape: t.Shape, Size: t.Size,
			Source: src, Offset: off, Role: t.Role,
		}
	}
	if err := c.setTensors(infos); err != nil {
		return nil, err
	}
	return c, nil
}

// setTensors sorts infos into index order (by name, as formats.Load does),
// numbers them and builds the name lookup.
func (c *Checkpoint) setTensors(infos []TensorInfo) error {
	if c.idx == nil {
		sort.SliceStable(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	}
	c.byName = make(map[string]int, len(infos))
	for i := range infos {
		infos[i].Index = i
		if j, dup := c.byName[infos[i].Name]; dup {
			a, b := index.Tensor{Role: infos[j].Role}, index.Tensor{Role: infos[i].Role}
			if _, two := c.twin[infos[i].Name]; two || !index.Twins(&a, &b) {
				return fmt.Errorf("%s: tensor %q appears twice", c.path, infos[i].Name)
			}
			if c.twin == nil {
				c.twin = map[string]int{}
			}
			c.twin[infos[i].Name] = i
			continue
		}
		c.byName[infos[i].Name] = i
	}
	c.tensors = infos
	return nil
}

// Close releases the backing files; OpenTensor and Stream fail after it.
// Readers obtained from the Checkpoint must not be used after Close.
func (c *Checkpoint) Close() error {
	c.closed = true
	var first error
	for _, f := range c.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.files = nil
	if c.loaded != nil {
		c.loaded.Sources = nil // the files, closed above
		c.loaded.Close()       // the files beside it
		c.loaded = nil
	}
	return first
}

// Path returns the path Open was given.
func (c *Checkpoint) Path() string { return c.path }

// Format returns the checkpoint format ("safetensors", "pytorch", "gguf",
// "numpy", ...).
func (c *Checkpoint) Format() string { return c.format }

// IsMount reports whether the checkpoint is read through a tensorfs mount.
func (c *Checkpoint) IsMount() bool { return c.mount != "" }

// Sources returns the backing files.
func (c *Checkpoint) Sources() []string { return append([]string(nil), c.sources...) }

// Metadata returns the checkpoint's own metadata (safetensors
// __metadata__, GGUF key/values, ...) as .tensorfs/index.json has it, the
// same whether the checkpoint is opened directly or through a mount:
// values are string, bool, json.Number (integers stay exact), []any,
// map[string]any or nil. A GGUF float that is NaN or infinite is the
// string "NaN", "+Inf" or "-Inf". A large value (a GGUF string or array
// over index.MaxInlineMetadata bytes, or any value past
// index.MetadataJSONBudget) is an elision object, a map with
// "tensorfs.elided": true that says where a mount serves the whole value
// (README, "Large metadata values"). The map is shared: do not modify
// it.
func (c *Checkpoint) Metadata() map[string]any {
	c.metaOnce.Do(func() {
		if c.idx != nil { // a mount's metadata came as JSON values
			c.metadata = jsonValues(c.idx.Metadata)
		}
	})
	return c.metadata
}

// jsonValues returns m as encoding/json decodes what a mount's index.json
// holds for it (index.RenderMetadata: large values are elision objects)
// with UseNumber. An index's metadata always renders (a mount serves it
// as JSON); m itself is the fallback should it not.
func jsonValues(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	b, err := index.RenderMetadata(m, index.MetadataJSONBudget)
	if err != nil {
		return m
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return m
	}
	return out
}

// Notes returns what the checkpoint's parser left out of the tensors
// without failing, one line each naming the file (index.Index.Notes: the
// .npz members of no tensor dtype, which are in Metadata instead); nil
// for most checkpoints and for a mount (whose server logged them).
func (c *Checkpoint) Notes() []string {
	if c.idx == nil {
		return nil
	}
	return append([]string(nil), c.idx.Notes...)
}

// Unserved is an entry of the checkpoint that is not served: a tensor of
// a type this tensorfs does not know (index.Unserved), in name order. Its
// data cannot be read through the client.
type Unserved struct {
	Name   string
	Type   string  // as the format names it, e.g. "ggml type 43"
	Shape  []int64 // nil where not known
	Source string  // the file that holds it, "" where not known
	Why    string
	// More is how many entries like this one (the same Type and Why)
	// the checkpoint's list left out (index.MaxUnservedBytes): it stands
	// for 1+More.
	More int64
}

// Unserved returns what the checkpoint holds that is not served, in name
// order; nil for most checkpoints. A program that must have every tensor
// (a converter, a loader that checks every byte) fails on a non-empty list.
func (c *Checkpoint) Unserved() []Unserved { return append([]Unserved(nil), c.unserved...) }

// Tensors returns every tensor in index order (sorted by name). The slice
// is a copy; the Shape slices are shared and must not be modified.
func (c *Checkpoint) Tensors() []TensorInfo { return append([]TensorInfo(nil), c.tensors...) }

// TensorsIn returns the tensors a reader of dtype to gets (Listed), in
// index order: what Stream and Fill deliver with that DType and no
// Filter.
func (c *Checkpoint) TensorsIn(to dtype.DType) []TensorInfo {
	var out []TensorInfo
	for _, t := range c.tensors {
		if t.Listed(to) {
			out = append(out, t)
		}
	}
	return out
}

// Tensor returns the tensor with this exact name, as stored: for a
// quantized weight that keeps its stored name (block FP8's X.weight),
// its stored codes; TensorIn gives the one a dtype's readers get.
func (c *Checkpoint) Tensor(name string) (TensorInfo, bool) {
	return c.TensorIn(name, AsStored)
}

// TensorIn returns the tensor with this exact name that a reader of
// dtype to gets (Listed): where a quantized weight keeps its stored
// name, the stored codes for AsStored and the logical weight for a view
// dtype.
func (c *Checkpoint) TensorIn(name string, to dtype.DType) (TensorInfo, bool) {
	i, ok := c.lookup(name, to)
	if !ok {
		return TensorInfo{}, false
	}
	return c.tensors[i], true
}

// Key returns the checkpoint's own key of the tensor called name where
// its format keys entries by something else than the name tensorfs
// gives them (a distributed checkpoint's dotted "model.layers.0.w" for
// "model/layers.0.w": index.Index.Keys, index.json "keys"); ok is false
// for most checkpoints.
func (c *Checkpoint) Key(name string) (key string, ok bool) {
	key, ok = c.keys[name]
	return key, ok
}

// lookup returns the index of the tensor called name that a reader of
// dtype to gets (a view dtype: the converted listing; any other: the
// native one), the one of that name when only one has it. name may also
// be the checkpoint's own key of a tensor (index.Index.Keys: a DCP's
// dotted "model.layers.0.w" for "model/layers.0.w"); a name wins over a
// key. Every method that takes a tensor's name goes through it.
func (c *Checkpoint) lookup(name string, to dtype.DType) (int, bool) {
	i, ok := c.byName[name]
	if !ok {
		if name, ok = c.byKey[name]; !ok {
			return 0, false
		}
		if i, ok = c.byName[name]; !ok {
			return 0, false
		}
	}
	if j, two := c.twin[name]; two {
		if it := (index.Tensor{Role: c.tensors[i].Role}); !it.Listed(to.IsFloatView()) {
			return j, true
		}
	}
	return i, true
}

// TotalSize returns the sum of the native sizes of all tensors.
func (c *Checkpoint) TotalSize() int64 {
	var n int64
	for i := range c.tensors {
		n += c.tensors[i].Size
	}
	return n
}

// ErrNoTensor is returned (wrapped) for a tensor name the checkpoint does
// not have.
var ErrNoTensor = errors.New("client: no such tensor")

// ErrNotConvertible is returned (wrapped) by OpenTensor when a tensor has
// no view in the requested dtype (integers, bool, complex, quantized types
// without a dequantizer).
var ErrNotConvertible = errors.New("client: tensor has no view in that dtype")

// AsStored, given where a dtype is asked for (OpenTensor, Convertible,
// StreamOptions.DType), means the tensor's bytes as stored in the
// checkpoint, unconverted. It is dtype.Invalid under a name that says
// what it means here.
const AsStored = dtype.Invalid

// Convertible reports whether the tensor called name can be read
// converted to dtype to: always for AsStored and for its own dtype (both
// mean its stored bytes); for F64, F32, F16 and BF16 when it has a view in
// that dtype (floats and quantized types, not integers or bool). It is
// false for a name the checkpoint does not have. Like OpenTensor and
// ReadFloat32, it takes the tensor's name.
func (c *Checkpoint) Convertible(name string, to dtype.DType) bool {
	i, ok := c.lookup(name, to)
	if !ok {
		return false
	}
	return c.convertible(c.tensors[i], to)
}

func (c *Checkpoint) convertible(t TensorInfo, to dtype.DType) bool {
	if native(t, to) {
		return true
	}
	if !to.IsFloatView() {
		return false
	}
	if c.mount != "" {
		_, err := os.Stat(c.mountPath(t, to))
		return err == nil
	}
	return view.Convertible(&c.idx.Tensors[t.Index], to)
}

func native(t TensorInfo, to dtype.DType) bool { return to == AsStored || to == t.DType }

// OpenTensor returns a reader of the tensor called name, converted to to
// (AsStored or the stored dtype: the native bytes). Close it when
// done; for a checkpoint opened directly Close releases nothing, for a
// mount it closes the tensor's file.
func (c *Checkpoint) OpenTensor(name string, to dtype.DType) (*TensorReader, error) {
	i, ok := c.lookup(name, to)
	if !ok {
		return nil, &TensorError{Source: c.path, Name: name, Op: "open", Off: -1, Err: ErrNoTensor}
	}
	return c.openTensor(c.tensors[i], to)
}

func (c *Checkpoint) openTensor(t TensorInfo, to dtype.DType) (*TensorReader, error) {
	return c.openPart(t, to, nil)
}

// openPart opens tensor t in dtype to, whole (part nil) or part *part of
// it (split.go).
func (c *Checkpoint) openPart(t TensorInfo, to dtype.DType, part *Split) (*TensorReader, error) {
	if native(t, to) {
		to = t.DType
	} else if !to.IsFloatView() {
		return nil, &TensorError{Source: c.path, Name: t.Name, Op: "open", Off: -1,
			Err: fmt.Errorf("%w: %s is not a view dtype (want F64, F32, F16 or BF16)", ErrNotConvertible, to)}
	}
	if c.closed {
		return nil, &TensorError{Source: c.path, Name: t.Name, Op: "open", Off: -1, Err: os.ErrClosed}
	}
	r := &TensorReader{ck: c, info: t, dtype: to}
	var first, partSize int64
	var oneRange bool
	if part != nil {
		var err error
		first, partSize, oneRange, err = checkPart(t, to, *part)
		if err != nil {
			return nil, &TensorError{Source: c.path, Name: t.Name, Op: "open", Off: -1, Err: err}
		}
		sp := *part
		r.part = &sp
	}
	if c.mount != "" {
		f, err := backing.OpenRegular(c.mountPartPath(t, to, part), 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && part != nil && (native(t, to) || c.convertible(t, to)) {
				err = fmt.Errorf("%w: %v", ErrNoPart, err)
			} else if errors.Is(err, os.ErrNotExist) && !native(t, to) {
				err = fmt.Errorf("%w: no %s view of %s", ErrNotConvertible, to, t.DType)
			}
			return nil, &TensorError{Source: c.path, Name: t.Name, Op: "open", Off: -1, Err: err}
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, &TensorError{Source: c.path, Name: t.Name, Op: "open", Off: -1, Err: err}
		}
		r.ra, r.size, r.closer = f, st.Size(), f
		return r, nil
	}
	if c.files == nil {
		return nil, &TensorError{Source: c.path, Name: t.Name, Op: "open", Off: -1, Err: os.ErrClosed}
	}
	it := &c.idx.Tensors[t.Index]
	src := c.files[it.Source]
	if native(t, to) && it.Contiguous() && (part == nil || oneRange) {
		// The common case needs no view: a plain range of the source.
		r.ra, r.size = offsetReader{src, it.Offset}, it.Size
		if part != nil {
			r.ra, r.size, r.skip, r.ranged = offsetReader{src, it.Offset + first}, partSize, first, true
		}
		return r, nil
	}
	if !native(t, to) && !view.Convertible(it, to) {
		return nil, &TensorError{Source: c.path, Name: t.Name, Op: "open", Off: -1,
			Err: fmt.Errorf("%w: no %s view of %s", ErrNotConvertible, to, t.DType)}
	}
	form := view.Form{To: to, Split: part}
	if native(t, to) {
		form.To = dtype.Invalid
	}
	v, err := view.Open(it, src, form)
	if err != nil {
		return nil, &TensorError{Source: c.path, Name: t.Name, Op: "open", Off: -1, Err: err}
	}
	r.ra, r.size = v, v.Size()
	return r, nil
}

// offsetReader reads the range of a source that starts at off. Callers
// (TensorReader) clamp reads to the tensor's size first.
type offsetReader struct {
	src io.ReaderAt
	off int64
}

func (o offsetReader) ReadAt(p []byte, off int64) (int, error) { return o.src.ReadAt(p, o.off+off) }
