package index

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestWriteIndexJSON: index.json's text (a mount's, `ls --json`'s) is
// the document json.Marshal writes, indented with one tensor a line and
// HTML characters as they are; "native" is there whenever a view is,
// and the fields after the lists come in Document's order.
func TestWriteIndexJSON(t *testing.T) {
	off := int64(7)
	ts := []DocTensor{
		{Name: "A", Path: "A", DType: "F32", Shape: []int64{2, 2}, Size: 16, Chunks: []DocChunk{{Offsets: []int64{0, 0}, Shape: []int64{1, 2}, Source: "s:<0>", Offset: 3}}},
		{Name: "a<b>&c", Path: "a<b>&c", DType: "F32", Shape: []int64{2}, Size: 8, Source: "/x/<m>.safetensors", Offset: &off},
		{Name: "\ufffd\u2028", NameHex: "ffe280a8", Path: "%FF\u2028", DType: "BF16", Shape: []int64{}, Size: 2, Role: "part"},
	}
	meta := map[string]any{"k": "v <&>", "n": json.Number("12")}
	q := &Quantization{Scheme: "fp8-block", Weights: []QuantWeight{{Name: "w", Path: "w", Shape: []int64{2}, Parts: []string{"A"}}}}
	for _, d := range []Document{
		{Format: "safetensors", Sources: []string{"/x/<m>.safetensors"}, Metadata: meta, Tensors: ts},
		{Format: "safetensors", Sources: []string{}, Metadata: map[string]any{}, Tensors: []DocTensor{}},
		{Format: "gguf", View: "F32", Sources: []string{"/x/<m>.safetensors"}, Metadata: map[string]any{}, Tensors: ts[1:2], Native: ts},
		{Format: "gguf", View: "F32", Sources: []string{"a"}, Metadata: map[string]any{}, Tensors: []DocTensor{}},
		{Format: "dcp", Sources: []string{"a"}, Metadata: map[string]any{}, Tensors: ts[:1],
			Unserved: []DocUnserved{{Name: "u", Type: "ggml type 43", Why: "w<"}},
			Keys:     map[string]string{"A": "A.k"}, NotRead: map[string]string{"r": "why"}, Quantization: q},
	} {
		var got bytes.Buffer
		if err := d.WriteIndexJSON(&got); err != nil {
			t.Fatal(err)
		}
		text := got.String()
		// The value: json.Marshal's once compacted (HTML escaped as
		// json.Marshal escapes it).
		var compact bytes.Buffer
		if err := json.Compact(&compact, got.Bytes()); err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		var escaped bytes.Buffer
		json.HTMLEscape(&escaped, compact.Bytes())
		if d.View != "" && d.Native == nil {
			d.Native = []DocTensor{} // written as [] with a view
		}
		md, err := RenderMetadata(d.Metadata, MetadataJSONBudget)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(struct {
			Format       string            `json:"format"`
			View         string            `json:"view,omitempty"`
			Sources      []string          `json:"sources"`
			Metadata     json.RawMessage   `json:"metadata"`
			Tensors      []DocTensor       `json:"tensors"`
			Native       []DocTensor       `json:"native"`
			Unserved     []DocUnserved     `json:"unserved,omitempty"`
			Keys         map[string]string `json:"keys,omitempty"`
			NotRead      map[string]string `json:"not_read,omitempty"`
			Quantization *Quantization     `json:"quantization,omitempty"`
		}{d.Format, d.View, d.Sources, md, d.Tensors, d.Native, d.Unserved, d.Keys, d.NotRead, d.Quantization})
		if err != nil {
			t.Fatal(err)
		}
		if d.View == "" {
			want = bytes.Replace(want, []byte(`,"native":null`), nil, 1)
		}
		if !bytes.Equal(escaped.Bytes(), want) {
			t.Errorf("compacted\n got %s\nwant %s", escaped.Bytes(), want)
		}
		// The layout: a tensor a line, HTML as it is.
		lines := strings.Split(text, "\n")
		for _, dt := range append(append([]DocTensor{}, d.Tensors...), d.Native...) {
			var line bytes.Buffer
			if err := WriteDocTensor(&line, &dt); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, l := range lines {
				found = found || strings.TrimSuffix(l, ",") == "    "+line.String()
			}
			if !found {
				t.Errorf("no line %s in\n%s", line.String(), text)
			}
		}
		if !strings.HasPrefix(text, "{\n  \"format\": ") || !strings.HasSuffix(text, "\n}\n") || strings.Contains(text, `\u003c`) {
			t.Errorf("index.json:\n%s", text)
		}
		back, err := ParseDocument(got.Bytes())
		if err != nil {
			t.Fatalf("ParseDocument: %v\n%s", err, text)
		}
		if len(back.Tensors) != len(d.Tensors) || (len(d.Tensors) > 2 && back.Tensors[2].Role != "part") {
			t.Errorf("parsed back %+v", back.Tensors)
		}
	}
	var b bytes.Buffer
	d := Document{Format: "safetensors", Sources: []string{"/m"}, Metadata: map[string]any{"format": "pt"}, Tensors: ts[1:2]}
	if err := d.WriteIndexJSON(&b); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"format\": \"safetensors\",\n  \"sources\": [\"/m\"],\n  \"metadata\": {\"format\":\"pt\"},\n  \"tensors\": [\n" +
		`    {"name":"a<b>&c","path":"a<b>&c","dtype":"F32","shape":[2],"size":8,"source":"/x/<m>.safetensors","offset":7}` + "\n  ]\n}\n"
	if b.String() != want {
		t.Errorf("index.json\n got %q\nwant %q", b.String(), want)
	}
}

// TestDocumentRoles: a document says each tensor's role (a quantized
// weight's parts "part", a logical weight "logical", nothing for a
// stored tensor), and ParseDocument refuses a role it does not know.
func TestDocumentRoles(t *testing.T) {
	idx := &Index{Format: "safetensors", Sources: []string{"/m"}, Tensors: []Tensor{
		{Name: "b", Path: "b", DType: dtype.F32, Shape: []int64{1}, Size: 4},
		{Name: "w", Path: "w", DType: dtype.F32, Shape: []int64{4}, Size: 16, Source: 0, Role: RoleLogical},
		{Name: "w.q", Path: "w.q", DType: dtype.I8, Shape: []int64{4}, Offset: 4, Size: 4, Role: RolePart},
	}}
	d := idx.Document()
	if len(d.Tensors) != 2 || d.Tensors[0].Role != "" || d.Tensors[1].Role != "part" {
		t.Errorf("tensors %+v", d.Tensors)
	}
	if r := idx.DocTensorOf(&idx.Tensors[1]).Role; r != "logical" {
		t.Errorf("logical weight's role %q", r)
	}
	for _, text := range []func() ([]byte, error){d.JSON, func() ([]byte, error) {
		var b bytes.Buffer
		err := d.WriteIndexJSON(&b)
		return b.Bytes(), err
	}} {
		b, err := text()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"size":4,"source":"/m","offset":4,"role":"part"}`)) || bytes.Count(b, []byte(`"role"`)) != 1 {
			t.Errorf("document %s", b)
		}
		back, err := ParseDocument(b)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := ParseRole(back.Tensors[1].Role); !ok || r != RolePart {
			t.Errorf("parsed role %q", back.Tensors[1].Role)
		}
	}
	_, err := ParseDocument([]byte(`{"format":"x","sources":[],"metadata":{},"tensors":[{"name":"a","path":"a","dtype":"F32","shape":[1],"size":4,"role":"stored!"}]}`))
	if err == nil || err.Error() != `index.json: unknown role "stored!" (tensor "a")` {
		t.Errorf("unknown role: %v", err)
	}
}
