package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/quant"
	"github.com/lazyweights/tensorfs/view"
)

// The mount as a model directory.
//
// When SOURCE is a model directory, its other files (Options.ExportFiles:
// config.json, generation_config.json, the tokenizer's files, the chat
// template...) sit in every tree a loader may be pointed at: the top
// level, .native/ and each float view's directory, beside that tree's
// tensors and model.safetensors (the tree's safetensors export, the same
// bytes as its .safetensors/model.safetensors), and in each .safetensors/
// directory beside the export. So from_pretrained(M), from_pretrained(
// M/.bf16), `vllm serve M` and llama.cpp's converter find a complete
// model where the checkpoint's own directory had one. A checkpoint
// without such files (a file, one object) gets none of it: its top level
// holds its tensors only. A file whose name starts with '.' (.gitattributes)
// is in the .safetensors/ directories only: beside the tensors, names
// starting with '.' are tensorfs's own (.tensorfs/, the views).
//
// A tensor whose top-level path component is one of those names (a
// tensor called config.json, or model.safetensors/x) moves to the first
// free NAME#N (index.UniqueNames, the rule for names that coincide), in
// every tree and in index.json; its name and xattrs are unchanged.
//
// The files are read on demand (a read of the mount reads the source's
// range), all but config.json in a converted tree: that one says the
// tree's dtype, "torch_dtype" and "dtype" (where the file has them, at
// its top level) being rewritten to the view's ("bfloat16", "float16",
// "float32", "float64"), and in a quantized checkpoint's converted trees
// it loses its quantization keys (export.go); it is read once, at
// NewRoot, up to maxConfigJSON bytes. One that cannot be read or is too
// large is left out of the converted trees with one log line; the other
// files, and the stored tree's config.json, are served unread.
//
// .files/ holds each file of the checkpoint as it is (every Sources entry
// that is a file, by its base name, NAME#N for a name taken twice), read
// lazily through the same path as a stored tensor: spliced from the
// source's descriptor, copied from a remote one, counted in stats.json
// and by the page cache accounting (a read of bytes no tensor covers, a
// header, counts too: a chunk may be dropped before its last tensor byte
// is served, which costs a read from disk, never a wrong byte). Never
// passed through (passthrough.go). `llama-cli -m M/.files/model.gguf`
// then runs on an hf:// or s3:// GGUF with nothing downloaded but what
// it reads.

// filesDir is the directory of the checkpoint's files as they are.
const filesDir = ".files"

// companion is a file of the model directory as a tree in some dtype
// shows it.
type companion struct {
	name string
	rd   view.Reader
}

// companions returns the model directory's files as a tree in dtype dt
// (dtype.Invalid: the stored dtypes) shows them, worked out once per
// dtype.
func (r *Root) companions(dt dtype.DType) []companion {
	if cs, ok := r.besideByDType[dt]; ok {
		return cs
	}
	var cs []companion
	q := r.idx.Quantization
	for _, f := range r.opts.ExportFiles {
		var rd view.Reader = sourceReader{f.Src}
		if dt != dtype.Invalid {
			switch {
			case quant.SchemeOnly(f.Name):
				if q != nil {
					// A converted tree holds the logical weights: a
					// loader must not dequantize them again.
					continue
				}
			case f.Name == "config.json":
				b, err := r.viewConfig(f.Src, dt)
				if err != nil && q != nil {
					r.logger.Printf("%s left out of the %s trees: %v", f.Name, dt, err)
					continue
				}
				if err != nil {
					r.logger.Printf("%s served unchanged in the %s trees (its dtype not rewritten): %v", f.Name, dt, err)
				} else {
					rd = bytesFile(b)
				}
			}
		}
		cs = append(cs, companion{f.Name, rd})
	}
	if r.besideByDType == nil {
		r.besideByDType = map[dtype.DType][]companion{}
	}
	r.besideByDType[dt] = cs
	return cs
}

// viewConfig returns config.json (src) as a tree converted to dt serves
// it: its dtype keys say dt and, for a quantized checkpoint, the keys
// naming the quantization are gone; every other byte as it is.
func (r *Root) viewConfig(src backing.Source, dt dtype.DType) ([]byte, error) {
	if r.configBytes == nil && r.configErr == nil {
		r.configBytes, r.configErr = readConfig(src)
	}
	if r.configErr != nil {
		return nil, r.configErr
	}
	b := r.configBytes
	var err error
	if q := r.idx.Quantization; q != nil {
		if b, err = unquantizedConfig(b, q.Scheme); err != nil {
			return nil, err
		}
	}
	name, ok := torchDType(dt)
	if !ok {
		return b, nil
	}
	for _, key := range []string{"torch_dtype", "dtype"} {
		if b, err = withValue(b, key, []byte(`"`+name+`"`)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// readConfig reads config.json whole, up to maxConfigJSON bytes.
func readConfig(src backing.Source) ([]byte, error) {
	if src.Size() > maxConfigJSON {
		return nil, fmt.Errorf("%d bytes (over %d)", src.Size(), maxConfigJSON)
	}
	b := make([]byte, src.Size())
	if n, err := src.ReadAt(b, 0); n != len(b) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// torchDType is PyTorch's name of a view dtype, as config.json spells it.
func torchDType(dt dtype.DType) (string, bool) {
	switch dt {
	case dtype.BF16:
		return "bfloat16", true
	case dtype.F16:
		return "float16", true
	case dtype.F32:
		return "float32", true
	case dtype.F64:
		return "float64", true
	}
	return "", false
}

// withValue returns the JSON object b with the value of every top-level
// member called key replaced by value (b as it is when it has none), the
// rest byte for byte.
func withValue(b []byte, key string, value []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var spans [][2]int64 // the values to replace, in order
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		if k == key {
			end := d.InputOffset()
			spans = append(spans, [2]int64{end - int64(len(v)), end})
		}
	}
	if _, err := d.Token(); err != nil { // the closing '}'
		return nil, err
	}
	if len(spans) == 0 {
		return b, nil
	}
	out := make([]byte, 0, len(b)+len(spans)*len(value))
	at := int64(0)
	for _, s := range spans {
		out = append(append(out, b[at:s[0]]...), value...)
		at = s[1]
	}
	return append(out, b[at:]...), nil
}

// modelNames returns the names the model directory's files take at the
// top of a tree (its files and model.safetensors), sorted; none when
// there are no such files.
func (r *Root) modelNames() []string {
	if len(r.opts.ExportFiles) == 0 {
		return nil
	}
	names := []string{exportName}
	for _, f := range r.opts.ExportFiles {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// moveClashing moves the tensors whose top-level path component is one of
// the model directory's names to NAME#N, the first N free among the
// top-level components: in a copy of the index, which r uses from then
// on (the caller's is not changed). Nothing is copied, and no set of
// components built, when no tensor clashes.
func (r *Root) moveClashing() {
	reserved := map[string]bool{}
	for _, n := range r.modelNames() {
		reserved[n] = true
	}
	if len(reserved) == 0 {
		return
	}
	ts := r.idx.Tensors
	clash := false
	for i := range ts {
		if reserved[topComponent(tensorPath(&ts[i]))] {
			clash = true
			break
		}
	}
	if !clash {
		return
	}
	// Take every name in use first, so that NAME#N is free of both.
	var u index.UniqueNames
	seen := map[string]bool{}
	for n := range reserved {
		u.Take(n)
	}
	var clashing []string
	for i := range ts {
		c := topComponent(tensorPath(&ts[i]))
		if seen[c] {
			continue
		}
		seen[c] = true
		if reserved[c] {
			clashing = append(clashing, c)
		} else {
			u.Take(c)
		}
	}
	sort.Strings(clashing)
	moved := map[string]string{}
	for _, c := range clashing {
		moved[c] = u.Take(c)
	}
	move := func(p string) string {
		c := topComponent(p)
		if to, ok := moved[c]; ok {
			return to + p[len(c):]
		}
		return p
	}
	idx := *r.idx
	idx.Tensors = slices.Clone(ts)
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		t.Path = move(tensorPath(t))
	}
	if q := idx.Quantization; q != nil {
		qc := *q
		qc.Weights = slices.Clone(q.Weights)
		for i := range qc.Weights {
			qc.Weights[i].Path = move(qc.Weights[i].Path)
		}
		idx.Quantization = &qc
	}
	for _, c := range clashing {
		r.logger.Printf("tensors under %q are at %q: %q is the model directory's file", c, moved[c], c)
	}
	r.idx = &idx
}

// topComponent is the first component of a slash-separated path.
func topComponent(p string) string {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

// modelFiles returns the entries a tree in dtype dt shows beside its
// tensors: the model directory's files and model.safetensors, the same
// file as in the tree's .safetensors/ directory x (none when x is nil:
// the export cannot be made); nothing without such files.
func (r *Root) modelFiles(dt dtype.DType, x *entry) []*entry {
	if len(r.opts.ExportFiles) == 0 {
		return nil
	}
	var out []*entry
	if x != nil {
		if m := x.child(exportName); m != nil {
			out = append(out, &entry{name: exportName, file: m.file})
		}
	}
	for _, c := range r.companions(dt) {
		if err := checkComponent(c.name); err != nil || c.name == exportName {
			continue // exportEntry said why
		}
		if strings.HasPrefix(c.name, ".") {
			continue // .gitattributes...: dot names are tensorfs's (.tensorfs/, the views); in .safetensors/ only
		}
		e := &entry{name: c.name, file: fileData{kind: kindExport, size: c.rd.Size()}}
		e.contents.Store(&fileContents{r: c.rd})
		out = append(out, e)
	}
	return out
}

// addFiles attaches .files/ to the top of the tree: each file of the
// checkpoint (not a member of one) as it is, served as a stored tensor
// that is the whole file (formDirect, no dtype: fileData.whole).
func (r *Root) addFiles(top *builder) {
	b := newBuilder(filesDir)
	var u index.UniqueNames
	for i, s := range r.idx.Sources {
		if s == "" || r.idx.Member(i) != nil {
			continue // a member of a file: the file is there
		}
		name := u.Take(sourceBase(s))
		size := r.sources[i].Size()
		t := &index.Tensor{Name: name, DType: dtype.U8, Shape: []int64{size}, Source: i, Size: size}
		if _, err := b.add(name, fileData{kind: kindTensor, form: formDirect, size: size, t: t}); err != nil {
			r.logger.Printf("%s left out of %s: %v", index.Printable(s), filesDir, err)
		}
	}
	top.attach(b.finish())
}

// sourceBase is the base name of a source: a path's last element, a
// URL's path's (without its query).
func sourceBase(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
		if j := strings.IndexAny(s, "?#"); j >= 0 {
			s = s[:j]
		}
	}
	return path.Base(strings.TrimRight(s, "/"))
}
