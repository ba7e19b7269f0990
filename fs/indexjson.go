package fs

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// listedTensor is one top-level tensor file, as index.json describes it.
type listedTensor struct {
	path string
	f    *fileData
}

// collect returns every tensor file under e, at paths prefixed by prefix,
// sorted by tensor name (then path).
func (r *Root) collect(e *entry, prefix string) []listedTensor {
	var out []listedTensor
	var walk func(e *entry, prefix string)
	walk = func(e *entry, prefix string) {
		for _, c := range e.children() {
			p := c.name
			if prefix != "" {
				p = prefix + "/" + c.name
			}
			if c.isDir() {
				walk(c, p)
			} else if c.file.kind == kindTensor {
				out = append(out, listedTensor{path: p, f: &c.file})
			}
		}
	}
	walk(e, prefix)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].f.t.Name != out[j].f.t.Name {
			return out[i].f.t.Name < out[j].f.t.Name
		}
		return out[i].path < out[j].path
	})
	return out
}

// indexJSON renders .tensorfs/index.json: the index.Document of the
// top-level tensors (format, sources, metadata, tensors in name order),
// with "view" added after "format" when the top level is a converted view
// (Options.View), and then "native" after "tensors": the stored tree under
// .native/, described the same way (every tensor, integers included, at
// paths starting ".native/"). Each tensor's dtype and size are those of its file, and
// source and offset are present where the file is one contiguous range of
// its source. It is indented with one tensor per line so that `head`
// shows the top.
func (r *Root) indexJSON(listed, native []listedTensor) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	field := func(name string, v any, last bool) error {
		buf.WriteString("  ")
		if err := enc.Encode(name); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		buf.WriteString(": ")
		if err := enc.Encode(v); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1)
		if !last {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
		return nil
	}
	buf.WriteString("{\n")
	if err := field("format", r.idx.Format, false); err != nil {
		return nil, err
	}
	if r.opts.View != dtype.Invalid {
		if err := field("view", r.opts.View.String(), false); err != nil {
			return nil, err
		}
	}
	sources := r.idx.Sources
	if sources == nil {
		sources = []string{}
	}
	if err := field("sources", sources, false); err != nil {
		return nil, err
	}
	md, err := index.RenderMetadata(r.idx.Metadata, index.MetadataJSONBudget)
	if err != nil {
		return nil, err
	}
	if err := field("metadata", json.RawMessage(md), false); err != nil {
		return nil, err
	}
	list := func(name string, items []listedTensor) error {
		buf.WriteString("  ")
		if err := enc.Encode(name); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1)
		buf.WriteString(": [")
		for i, l := range items {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString("\n    ")
			if err := enc.Encode(r.docOf(l)); err != nil {
				return err
			}
			buf.Truncate(buf.Len() - 1)
		}
		if len(items) > 0 {
			buf.WriteString("\n  ")
		}
		buf.WriteString("]")
		return nil
	}
	if err := list("tensors", listed); err != nil {
		return nil, err
	}
	if r.opts.View != dtype.Invalid {
		buf.WriteString(",\n")
		if err := list("native", native); err != nil {
			return nil, err
		}
	}
	buf.WriteString("\n}\n")
	// The buffer grew by doubling and the document is kept for the life
	// of the mount: keep an exact-size copy (a 10,000-tensor index is
	// 2 MiB, its buffer up to twice that).
	return bytes.Clone(buf.Bytes()), nil
}

func (r *Root) docOf(l listedTensor) index.DocTensor {
	f, t := l.f, l.f.t
	d := index.DocTensor{Name: t.Name, NameHex: index.NameHex(t.Name), Path: l.path, DType: f.dtype.Name(), Shape: t.Shape, Size: f.size}
	if d.Shape == nil {
		d.Shape = []int64{}
	}
	if f.form == formDirect {
		off := t.Offset
		d.Source, d.Offset = r.idx.Sources[t.Source], &off
	}
	return d
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
