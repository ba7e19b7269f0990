package view

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// MaxExportHeader is the largest safetensors header an export writes: the
// limit the safetensors library itself enforces when reading (100 MB).
const MaxExportHeader = 100_000_000

// Metadata keys an export adds to the source's own string metadata.
const (
	// ExportFormatKey is "format", which transformers requires ("pt");
	// set to "pt" only when the source has no such key.
	ExportFormatKey = "format"
	// ExportSourceFormatKey names the checkpoint format exported
	// ("pytorch", "gguf", ...).
	ExportSourceFormatKey = "tensorfs.source_format"
	// ExportSourceFilesKey lists the source's files (base names, in
	// index order) as a JSON array.
	ExportSourceFilesKey = "tensorfs.source_files"
	// ExportViewKey is the view dtype of a view's export ("F16", ...);
	// absent in the export of the stored dtypes.
	ExportViewKey = "tensorfs.view"
	// ExportRelabeledKey is a JSON object, present when some tensor is
	// exported with its stored bytes under another dtype and shape:
	// name -> {"dtype": stored dtype, "shape": stored shape}.
	ExportRelabeledKey = "tensorfs.relabeled"
)

// safetensorsDTypes are the dtypes the safetensors format has (the
// spellings index's safetensors parser accepts).
var safetensorsDTypes = map[dtype.DType]bool{
	dtype.Bool: true, dtype.U8: true, dtype.I8: true, dtype.F8E5M2: true,
	dtype.F8E4M3: true, dtype.F8E8M0: true, dtype.I16: true, dtype.U16: true,
	dtype.F16: true, dtype.BF16: true, dtype.I32: true, dtype.U32: true,
	dtype.F32: true, dtype.C64: true, dtype.F64: true, dtype.I64: true,
	dtype.U64: true, dtype.F4: true,
}

// ExportForm says how one tensor lands in a safetensors export in view
// dtype to (dtype.Invalid: the export of the stored dtypes):
//
//   - converted to to, where to is a view dtype and t has a view in it;
//   - else as stored, where safetensors has t's dtype;
//   - else converted to F32 (GGUF quantized types with a dequantizer);
//   - else its stored bytes relabeled (relabeled true): complex128 and
//     complex32 as F64 and F16 with a trailing dim of 2 (torch's
//     view_as_real), quantized blocks without a dequantizer as U8 with
//     the last dim counted in bytes ([size] for a scalar or a partial
//     block row).
//
// dt and shape are the tensor's dtype and shape in the export; conv is the
// dtype its reader converts to (dtype.Invalid: the stored bytes).
func ExportForm(t *index.Tensor, to dtype.DType) (dt dtype.DType, shape []int64, conv dtype.DType, relabeled bool) {
	switch {
	case to != dtype.Invalid && Convertible(t, to):
		return to, t.Shape, to, false
	case safetensorsDTypes[t.DType]:
		return t.DType, t.Shape, dtype.Invalid, false
	case Convertible(t, dtype.F32):
		return dtype.F32, t.Shape, dtype.F32, false
	}
	withLast := func(last int64) []int64 {
		s := slices.Clone(t.Shape)
		if len(s) == 0 {
			return []int64{last}
		}
		return append(s[:len(s)-1], last)
	}
	switch t.DType {
	case dtype.C128:
		return dtype.F64, append(slices.Clone(t.Shape), 2), dtype.Invalid, true
	case dtype.C32:
		return dtype.F16, append(slices.Clone(t.Shape), 2), dtype.Invalid, true
	}
	// A row's bytes: its blocks, and its meta for a type with row meta.
	if n := len(t.Shape); n > 0 {
		if row, ok := t.DType.TensorSize(t.Shape[n-1], t.Shape[n-1]); ok {
			return dtype.U8, withLast(row), dtype.Invalid, true
		}
	}
	return dtype.U8, []int64{t.Size}, dtype.Invalid, true
}

// exportPart is one tensor of an export.
type exportPart struct {
	t     *index.Tensor
	src   backing.Source
	name  string // name in the header: t.Name, or t.Path where the name is not UTF-8
	dt    dtype.DType
	shape []int64
	conv  dtype.DType // what the reader converts to (Invalid: stored bytes)
	align int64
	plan  readerPlan
	off   int64 // offset of the data in the file (header included)
	r     Reader
}

// Export is a checkpoint as one safetensors file: an 8-byte header
// length, the JSON header (space-padded to a multiple of 8 bytes), then
// every tensor's data, in an order that aligns each naturally, with no
// holes. It is computed once (NewExport) and read by range: the header
// from memory, the data through the same Readers as the tensor files
// (stored bytes, gathered strided tensors, conversions, dequantization).
// It is a Reader: safe for concurrent use, no allocation per read.
type Export struct {
	header []byte // length prefix, JSON, padding
	parts  []exportPart
	ends   []int64 // ends[i]: end of parts[i]'s data in the file
	size   int64
}

var _ Reader = (*Export)(nil)

// NewExport returns the safetensors export of idx, whose Sources[i] is
// read through srcs[i], in view dtype to (dtype.Invalid: the stored
// dtypes; see ExportForm for what lands in it). The tensors are those
// index.Tensor.Listed shows in that view. It fails when a tensor
// cannot be served (the checks New runs), when two tensors would have the
// same name in it, or when the header would exceed MaxExportHeader.
func NewExport(idx *index.Index, srcs []backing.Source, to dtype.DType) (*Export, error) {
	x, err := layoutExport(idx, srcs, to, false)
	if err != nil {
		return nil, err
	}
	for i := range x.parts {
		p := &x.parts[i]
		p.r = build(p.t, p.src, p.conv, p.plan)
	}
	return x, nil
}

// ExportSize returns the size of NewExport(idx, srcs, to), or the error
// it would fail with, without building the readers or the header (for
// stat): the header's bytes are counted, not kept.
func ExportSize(idx *index.Index, srcs []backing.Source, to dtype.DType) (int64, error) {
	x, err := layoutExport(idx, srcs, to, true)
	if err != nil {
		return 0, err
	}
	return x.size, nil
}

// layoutExport computes everything of an export but its readers, and
// its header's bytes when sizeOnly is false (otherwise only their count).
func layoutExport(idx *index.Index, srcs []backing.Source, to dtype.DType, sizeOnly bool) (*Export, error) {
	if idx == nil {
		return nil, errors.New("view: export: nil index")
	}
	if len(srcs) != len(idx.Sources) {
		return nil, fmt.Errorf("view: export: %d sources for an index of %d", len(srcs), len(idx.Sources))
	}
	if to != dtype.Invalid && !to.IsFloatView() {
		return nil, fmt.Errorf("view: export: %s is not a view dtype (want F32, F16, BF16 or F64)", to)
	}
	x := &Export{parts: make([]exportPart, 0, len(idx.Tensors))}
	relabeled := map[string]any{}
	renamed := false
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if !t.Listed(to != dtype.Invalid) {
			continue // a part in a converted export, a logical tensor in the native one
		}
		if t.Source < 0 || t.Source >= len(srcs) {
			return nil, fmt.Errorf("view: export: tensor %q: source %d out of range", t.Name, t.Source)
		}
		dt, shape, conv, rel := ExportForm(t, to)
		pl, err := plan(t, srcs[t.Source], conv)
		if err != nil {
			return nil, err
		}
		name := t.Name
		if name == "__metadata__" {
			return nil, fmt.Errorf("view: export: a tensor named __metadata__ cannot be in a safetensors file (the name is the header's metadata key)")
		}
		if !utf8.ValidString(name) {
			name = t.Path // reversible, valid UTF-8 (index.AssignPaths)
			renamed = true
		}
		n, _ := index.Elements(shape)
		if sz, ok := dt.ByteSize(n); !ok || sz != pl.size {
			return nil, fmt.Errorf("view: export: tensor %q: %d bytes as %s %v (internal error)", t.Name, pl.size, dt, shape)
		}
		if rel {
			st := t.Shape
			if st == nil {
				st = []int64{}
			}
			relabeled[name] = map[string]any{"dtype": t.DType.String(), "shape": st}
		}
		x.parts = append(x.parts, exportPart{t: t, src: srcs[t.Source], name: name, dt: dt, shape: shape, conv: conv, align: max(1, dt.ElemSize()), plan: pl})
	}
	// Data order: widest alignment first, then by name, so every
	// tensor's data starts at a multiple of its element size (each
	// tensor's size is a multiple of it, the data section starts at a
	// multiple of 8).
	sort.SliceStable(x.parts, func(i, j int) bool {
		a, b := &x.parts[i], &x.parts[j]
		if a.align != b.align {
			return a.align > b.align
		}
		return a.name < b.name
	})
	if renamed {
		// A name not valid UTF-8 is written as its path, which another
		// tensor may have as its name.
		seen := make(map[string]bool, len(x.parts))
		for i := range x.parts {
			if seen[x.parts[i].name] {
				return nil, fmt.Errorf("view: export: two tensors named %q", x.parts[i].name)
			}
			seen[x.parts[i].name] = true
		}
	}
	var h headerWriter = &bytes.Buffer{}
	if sizeOnly {
		h = &countWriter{}
	}
	pos, err := x.buildHeader(h, idx, to, relabeled)
	if err != nil {
		return nil, err
	}
	x.ends = make([]int64, len(x.parts))
	for i := range x.parts {
		x.parts[i].off = pos
		var ok bool
		if pos, ok = add(pos, x.parts[i].plan.size); !ok {
			return nil, errors.New("view: export: too large")
		}
		x.ends[i] = pos
	}
	x.size = pos
	return x, nil
}

// headerWriter is where buildHeader writes: a bytes.Buffer, or a
// countWriter when only the header's size is wanted.
type headerWriter interface {
	io.Writer
	io.ByteWriter
	io.StringWriter
	Len() int
}

// countWriter counts the bytes written to it.
type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error)       { c.n += len(p); return len(p), nil }
func (c *countWriter) WriteByte(byte) error              { c.n++; return nil }
func (c *countWriter) WriteString(s string) (int, error) { c.n += len(s); return len(s), nil }
func (c *countWriter) Len() int                          { return c.n }

// buildHeader renders the header into b: __metadata__ (the source's
// string metadata, less the torchao entries of the weights a converted
// export holds dequantized: stripDequantized, then tensorfs's keys), then
// each tensor in data order.
// It returns the header's size and, when b is a bytes.Buffer, sets
// x.header. Each name is encoded in one scratch buffer, so that a header
// only counted costs no memory per tensor.
func (x *Export) buildHeader(b headerWriter, idx *index.Index, to dtype.DType, relabeled map[string]any) (int64, error) {
	meta := map[string]string{}
	for k, v := range idx.Metadata {
		if s, ok := v.(string); ok && utf8.ValidString(k) && utf8.ValidString(s) {
			meta[k] = s
		}
	}
	if to != dtype.Invalid {
		stripDequantized(meta, idx)
	}
	if _, ok := meta[ExportFormatKey]; !ok {
		meta[ExportFormatKey] = "pt"
	}
	meta[ExportSourceFormatKey] = idx.Format
	files := make([]string, len(idx.Files()))
	for i, s := range idx.Files() {
		files[i] = filepath.Base(s)
		if !utf8.ValidString(files[i]) {
			files[i] = strconv.QuoteToASCII(files[i])
		}
	}
	meta[ExportSourceFilesKey] = string(jsonBytes(files))
	if to != dtype.Invalid {
		meta[ExportViewKey] = to.String()
	}
	if len(relabeled) > 0 {
		meta[ExportRelabeledKey] = string(jsonBytes(relabeled))
	}

	return writeHeader(b, meta, len(x.parts), func(i int) (string, dtype.DType, []int64, int64) {
		p := &x.parts[i]
		return p.name, p.dt, p.shape, p.plan.size
	}, true, func(h []byte) { x.header = h })
}

// jsonScratch encodes strings as compact JSON without HTML escaping, as
// jsonBytes does, into one buffer reused from call to call.
type jsonScratch struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// encode returns s as JSON, valid until the next call.
func (j *jsonScratch) encode(s string) []byte {
	if j.enc == nil {
		j.enc = json.NewEncoder(&j.buf)
		j.enc.SetEscapeHTML(false)
	}
	j.buf.Reset()
	if err := j.enc.Encode(s); err != nil {
		panic(err) // strings always encode
	}
	return bytes.TrimSuffix(j.buf.Bytes(), []byte("\n"))
}

// jsonBytes is v as compact JSON, without HTML escaping.
// torchAONamesKey is the __metadata__ key of a torchao checkpoint that
// lists its weights (quant.TorchAOKey), each described by an entry under
// its own name: its class, attributes and the stored parts (M._w_qdata,
// ...) it is flattened into (quant/torchao.go).
const torchAONamesKey = "tensor_names"

// stripDequantized removes from a converted view's export metadata the
// torchao entries of the weights the export holds dequantized, as plain
// tensors under their own names (index.RoleLogical), and their names from
// "tensor_names": torchao's loader (unflatten_tensor_state_dict, used by
// transformers) would otherwise rebuild each from parts the export does
// not hold. Every other entry is kept, plain tensors' included.
func stripDequantized(meta map[string]string, idx *index.Index) {
	list, ok := meta[torchAONamesKey]
	if !ok {
		return
	}
	drop := map[string]bool{}
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if _, ok := meta[t.Name]; ok && t.Role == index.RoleLogical && t.Name != torchAONamesKey {
			drop[t.Name] = true
			delete(meta, t.Name)
		}
	}
	if len(drop) == 0 {
		return
	}
	var names []string
	if json.Unmarshal([]byte(list), &names) != nil {
		return // not torchao's list (planning refused every weight then)
	}
	kept := make([]string, 0, len(names))
	for _, n := range names {
		if !drop[n] {
			kept = append(kept, n)
		}
	}
	meta[torchAONamesKey] = string(jsonBytes(kept))
}

func jsonBytes(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // strings, slices and maps of them always encode
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Size returns the export's size in bytes.
func (x *Export) Size() int64 { return x.size }

// HeaderSize returns the bytes before the first tensor's data: the
// length prefix, the JSON header and its padding.
func (x *Export) HeaderSize() int64 { return int64(len(x.header)) }

// Tensors returns the number of tensors in the export.
func (x *Export) Tensors() int { return len(x.parts) }

// ReadAt reads the export at off, with io.ReaderAt semantics (see Reader).
func (x *Export) ReadAt(p []byte, off int64) (int, error) {
	n, eof, err := clamp(len(p), off, x.size)
	if err != nil {
		return 0, err
	}
	p = p[:n]
	pos := off
	if hl := int64(len(x.header)); pos < hl {
		c := copy(p, x.header[pos:])
		pos += int64(c)
	}
	if pos < off+int64(n) {
		i := sort.Search(len(x.ends), func(i int) bool { return x.ends[i] > pos })
		for ; pos < off+int64(n); i++ {
			pt := &x.parts[i]
			dst := p[pos-off : min(int64(n), x.ends[i]-off)]
			if len(dst) == 0 {
				continue
			}
			m, err := pt.r.ReadAt(dst, pos-pt.off)
			if m < len(dst) {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, fmt.Errorf("view: export: %w", err)
			}
			pos += int64(m)
		}
	}
	if eof {
		return n, io.EOF
	}
	return n, nil
}

// minTiledRun is the shortest run of a tiled tensor's chunk that Segment
// hands out to be copied from its file: shorter ones cost a system call
// each.
const minTiledRun = 64 << 10

// Segment describes the part of the export that holds byte off: it ends
// at end; when that part is one contiguous range of a backing file (a
// tensor stored contiguously, served as stored), src is that file and
// srcOff the offset in it of byte off, so a caller may copy [off, end)
// straight from it (splice, copy_file_range). ok is false for the header
// and for data that must be read with ReadAt. off must be in [0, Size()).
// For a tensor gathered from other sources (backing.Gathered: one tiled
// from chunks), the part is one run: end may then lie before the tensor's end.
func (x *Export) Segment(off int64) (end int64, src backing.Source, srcOff int64, ok bool) {
	if off < int64(len(x.header)) {
		return int64(len(x.header)), nil, 0, false
	}
	i := sort.Search(len(x.ends), func(i int) bool { return x.ends[i] > off })
	if i >= len(x.parts) {
		return x.size, nil, 0, false
	}
	pt := &x.parts[i]
	if rg, isR := pt.r.(Ranger); isR {
		if s, base, ok := rg.FileRange(); ok {
			if tl, isT := s.(backing.Gathered); isT {
				// A tensor tiled from chunks (a distributed
				// checkpoint's): the run of one chunk's file.
				// Short runs (chunks along an inner dim) are
				// gathered by ReadAt instead.
				cs, at, n, ok := tl.Run(base + off - pt.off)
				src, isS := cs.(backing.Source)
				if !ok || !isS || n < minTiledRun {
					return x.ends[i], nil, 0, false
				}
				return min(x.ends[i], off+n), src, at, true
			}
			return x.ends[i], s, base + off - pt.off, true
		}
	}
	return x.ends[i], nil, 0, false
}

// Stored describes the tensor of the export that holds byte off: its
// data is [start, end) of the export and, when ok, the tensor is stored
// contiguously in src as [srcOff, srcOff+srcLen), which reading [start,
// end) in order reads in order too (as stored or converted): a caller
// may announce that range to a source that fetches ahead. ok is false
// for the header, a tensor stored otherwise (strided, byte-swapped) and
// one read as its parts' values (index.RoleLogical). off must be in [0,
// Size()).
func (x *Export) Stored(off int64) (start, end int64, src backing.Source, srcOff, srcLen int64, ok bool) {
	if off < int64(len(x.header)) {
		return 0, int64(len(x.header)), nil, 0, 0, false
	}
	i := sort.Search(len(x.ends), func(i int) bool { return x.ends[i] > off })
	if i >= len(x.parts) {
		return off, x.size, nil, 0, 0, false
	}
	pt := &x.parts[i]
	if !pt.t.Contiguous() || pt.t.Role == index.RoleLogical {
		return pt.off, x.ends[i], nil, 0, 0, false
	}
	return pt.off, x.ends[i], pt.src, pt.t.Offset, pt.t.Size, true
}
