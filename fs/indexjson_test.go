package fs

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// writeDoc writes docOf(p, t) as index.json's line holds it
// (index.WriteDocTensor).
func (r *Root) writeDoc(buf *bytes.Buffer, p place, t uint32) error {
	d := r.docOf(p, t)
	return index.WriteDocTensor(buf, &d)
}

// indexJSON renders the whole document in one go, as NewRoot did before
// index.json was served on demand: the reference indexFile must match.
func (r *Root) indexJSON(listed, native []uint32) ([]byte, error) {
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
	list := func(name string, p place, items []uint32) error {
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
			if err := r.writeDoc(&buf, p, l); err != nil {
				return err
			}
		}
		if len(items) > 0 {
			buf.WriteString("\n  ")
		}
		buf.WriteString("]")
		return nil
	}
	if err := list("tensors", placeTop, listed); err != nil {
		return nil, err
	}
	if r.opts.View != dtype.Invalid {
		buf.WriteString(",\n")
		if err := list("native", placeNative, native); err != nil {
			return nil, err
		}
	}
	buf.WriteString("\n}\n")
	// The buffer grew by doubling and the document is kept for the life
	// of the mount: keep an exact-size copy (a 10,000-tensor index is
	// 2 MiB, its buffer up to twice that).
	return bytes.Clone(buf.Bytes()), nil
}

// TestIndexFile: index.json read through the indexFile, whole and in
// pieces of every size around the marks, is the reference rendering.
func TestIndexFile(t *testing.T) {
	idx, src := bigIndex(500)
	for _, opts := range []Options{{}, {View: dtype.F32}} {
		r := newRoot(t, idx, src, opts)
		e := r.lookupPath(".tensorfs/index.json")
		f, _ := e.virtual().(*indexFile)
		if f == nil {
			t.Fatal("index.json is not an indexFile")
		}
		want, err := r.indexJSON(f.lists[0], f.lists[1])
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, r, e); !bytes.Equal(got, want) {
			t.Fatalf("view %v: index.json differs from the reference (%d vs %d bytes)", opts.View, len(got), len(want))
		}
		for _, size := range []int{1, 7, 4096, 100000} {
			for off := 0; off < len(want); off += len(want)/13 + 1 {
				p := make([]byte, size)
				n, err := f.ReadAt(p[:min(size, len(want)-off)], int64(off))
				if err != nil || !bytes.Equal(p[:n], want[off:off+n]) || n != min(size, len(want)-off) {
					t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", size, off, n, err)
				}
			}
		}
	}
}

// TestIndexFileIsLsJSON: the mount's index.json holds what `ls --json`
// prints (index.Document), field for field: the checkpoint's own keys
// (issue 41: the mount left "keys" out), what is unserved and not read.
func TestIndexFileIsLsJSON(t *testing.T) {
	idx, src := bigIndex(5)
	idx.Keys = map[string]string{idx.Tensors[0].Name: "model.layers.0.w", idx.Tensors[1].Name: "<b&c>"}
	idx.Unserved = []index.Unserved{{Name: "odd", Type: "ggml type 43", Offset: -1, Why: "a type tensorfs does not know"}}
	idx.NotRead = map[string]string{"r": "reformulated"}
	r := newRoot(t, idx, src, Options{})
	mount := readAll(t, r, r.lookupPath(".tensorfs/index.json"))
	ls, err := idx.Document().JSON()
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	if err := json.Unmarshal(mount, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ls, &b); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"keys", "unserved", "not_read"} {
		if _, ok := a[k]; !ok {
			t.Errorf("index.json has no %q", k)
		}
	}
	am, _ := json.Marshal(a)
	bm, _ := json.Marshal(b)
	if !bytes.Equal(am, bm) {
		t.Fatalf("index.json:\n%s\nls --json:\n%s", am, bm)
	}
}

// TestIndexFileIsWriteIndexJSON: without a view, the mount's index.json
// is index.Document.WriteIndexJSON's bytes (what `ls --json` prints),
// keys, unserved, not_read, chunks and roles included; with one, its
// top level gives the logical weight's role and .native/ the parts'.
func TestIndexFileIsWriteIndexJSON(t *testing.T) {
	big, bigSrc := bigIndex(5)
	big.Keys = map[string]string{big.Tensors[0].Name: "model.layers.0.w", big.Tensors[1].Name: "<b&c>"}
	big.Unserved = []index.Unserved{{Name: "odd", Type: "ggml type 43", Offset: -1, Why: "a type tensorfs does not know"}}
	big.NotRead = map[string]string{"r": "reformulated"}
	quant, quantSrc, _ := roleIndex(t)
	quant.Quantization = &index.Quantization{Scheme: "x", Weights: []index.QuantWeight{{Name: "X.weight", Path: "X.weight", Shape: []int64{2, 3}, Parts: []string{"X.weight_packed", "X.weight_scale"}}}}
	for _, c := range []struct {
		idx *index.Index
		src *memSource
	}{{big, bigSrc}, {quant, quantSrc}} {
		r := newRoot(t, c.idx, c.src, Options{})
		served := readAll(t, r, r.lookupPath(".tensorfs/index.json"))
		var ls bytes.Buffer
		if err := c.idx.Document().WriteIndexJSON(&ls); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(served, ls.Bytes()) {
			t.Errorf("index.json:\n%s\nls --json:\n%s", served, ls.Bytes())
		}
	}
	r := newRoot(t, quant, quantSrc, Options{View: dtype.BF16})
	doc, err := index.ParseDocument(readAll(t, r, r.lookupPath(".tensorfs/index.json")))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, d := range append(doc.Tensors, doc.Native...) {
		roles[d.Path] = d.Role
	}
	want := map[string]string{"X.bias": "", "X.weight": "logical", ".native/X.bias": "", ".native/X.weight_packed": "part", ".native/X.weight_scale": "part"}
	if !maps.Equal(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
}
