package index

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/dtype"
)

func TestDocument(t *testing.T) {
	idx := &Index{
		Format:  "safetensors",
		Sources: []string{"/m/a.safetensors", "/m/b.safetensors"},
		Tensors: []Tensor{
			{Name: "b", Path: "b", DType: dtype.F32, Shape: []int64{2, 3}, Source: 1, Offset: 0, Size: 24},
			{Name: "a", Path: "a", DType: dtype.BF16, Shape: nil, Source: 0, Offset: 80, Size: 2},
			{Name: "c/strided", Path: "c/strided", DType: dtype.F64, Shape: []int64{2, 2}, Source: 0, Offset: 8, Size: 32, Strides: []int64{1, 2}},
			{Name: "d", Path: "d", DType: dtype.I16, Shape: []int64{1}, Source: 0, Offset: 8, Size: 2, BigEndian: true},
			{Name: "q", Path: "q", DType: dtype.Q4_0, Shape: []int64{1, 32}, Source: 1, Offset: 24, Size: 18},
		},
	}
	b, err := idx.Document().JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"format":"safetensors","sources":["/m/a.safetensors","/m/b.safetensors"],"metadata":{},"tensors":[` +
		`{"name":"a","path":"a","dtype":"BF16","shape":[],"size":2,"source":"/m/a.safetensors","offset":80},` +
		`{"name":"b","path":"b","dtype":"F32","shape":[2,3],"size":24,"source":"/m/b.safetensors","offset":0},` +
		`{"name":"c/strided","path":"c/strided","dtype":"F64","shape":[2,2],"size":32},` +
		`{"name":"d","path":"d","dtype":"I16","shape":[1],"size":2},` +
		`{"name":"q","path":"q","dtype":"Q4_0","shape":[1,32],"size":18,"source":"/m/b.safetensors","offset":24}]}` + "\n"
	if string(b) != want {
		t.Errorf("document\n got %s\nwant %s", b, want)
	}
	d, err := ParseDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Tensors) != 5 || d.Tensors[0].Offset == nil || *d.Tensors[1].Offset != 0 || d.Tensors[2].Offset != nil {
		t.Errorf("parsed %+v", d.Tensors)
	}
	again, _ := d.JSON()
	if string(again) != want {
		t.Errorf("round trip\n got %s\nwant %s", again, want)
	}

	// Metadata and empty checkpoints.
	idx = &Index{Format: "gguf", Sources: []string{"x"}, Metadata: map[string]any{"general.name": "m", "n": int64(3)}}
	b, _ = idx.Document().JSON()
	if string(b) != `{"format":"gguf","sources":["x"],"metadata":{"general.name":"m","n":3},"tensors":[]}`+"\n" {
		t.Errorf("got %s", b)
	}
	if _, err := ParseDocument(b); err != nil {
		t.Error(err)
	}
}

// TestDocumentNamesNotUTF8: names that JSON cannot carry round-trip
// exactly through name_hex (GGUF names are bytes).
func TestDocumentNamesNotUTF8(t *testing.T) {
	idx := &Index{Format: "gguf", Sources: []string{"/g"}, Tensors: []Tensor{
		{Name: "a\xfe", DType: dtype.U8, Shape: []int64{1}, Offset: 0, Size: 1},
		{Name: "a\xff", DType: dtype.U8, Shape: []int64{1}, Offset: 1, Size: 1},
		{Name: "b", DType: dtype.U8, Shape: []int64{1}, Offset: 2, Size: 1},
	}}
	if err := AssignPaths(idx); err != nil {
		t.Fatal(err)
	}
	b, err := idx.Document().JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"name":"a\ufffd","name_hex":"61fe","path":"a%FE"`) || strings.Count(string(b), "name_hex") != 2 {
		t.Errorf("document %s", b)
	}
	d, err := ParseDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, dt := range d.Tensors {
		if dt.Name != idx.Tensors[i].Name {
			t.Errorf("tensor %d: name %q, want %q", i, dt.Name, idx.Tensors[i].Name)
		}
	}
	tensor := func(s string) string {
		return `{"format":"gguf","sources":["f"],"metadata":{},"tensors":[` + s + `]}`
	}
	for _, bad := range []string{`"zz"`, `"61"`, `"c3a9"`} {
		_, err := ParseDocument([]byte(tensor(`{"name":"a","name_hex":` + bad + `,"path":"a","dtype":"U8","shape":[],"size":1}`)))
		checkError(t, err, "is not the hex of a name that is not UTF-8")
	}
}

func TestDocumentExtraFields(t *testing.T) {
	// A mount's index.json may carry more than Document; readers ignore it.
	ext := struct {
		Document
		Views []string `json:"views"`
	}{(&Index{Format: "numpy", Sources: []string{"a.npy"}}).Document(), []string{".f32", ".npy"}}
	b, err := json.Marshal(ext)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"views":[".f32",".npy"]`) || !strings.Contains(string(b), `"format":"numpy"`) {
		t.Errorf("embedded: %s", b)
	}
	if _, err := ParseDocument(b); err != nil {
		t.Error(err)
	}
}

func TestParseDocumentRefuses(t *testing.T) {
	tensor := func(s string) string {
		return `{"format":"safetensors","sources":["f"],"metadata":{},"tensors":[` + s + `]}`
	}
	cases := []struct{ doc, want string }{
		{`[]`, "not a tensorfs index document"},
		{`{"format":1}`, "not a tensorfs index document"},
		{`{"sources":[]}`, "missing format"},
		{tensor(`{"name":"a","path":"a","dtype":"F33","shape":[1],"size":4}`), `unknown dtype "F33"`},
		{tensor(`{"name":"a","path":"a","dtype":"F32","shape":[1],"size":5}`), `size 5 does not match F32 [1]`},
		{tensor(`{"name":"a","path":"a","dtype":"F32","shape":[-1],"size":0}`), `negative dimension`},
		{tensor(`{"name":"a","dtype":"F32","shape":[1],"size":4}`), `missing path`},
		{tensor(`{"name":"a","path":"a","dtype":"F32","shape":[1],"size":4,"source":"f"}`), `source and offset must come together`},
		{tensor(`{"name":"a","path":"a","dtype":"F32","shape":[1],"size":4,"offset":0}`), `source and offset must come together`},
		{tensor(`{"name":"a","path":"a","dtype":"F32","shape":[1],"size":4,"source":"g","offset":0}`), `source "g" is not in sources`},
		{tensor(`{"name":"a","path":"a","dtype":"F32","shape":[1],"size":4,"source":"f","offset":-4}`), `negative offset -4`},
		{tensor(`{"name":"b","path":"b","dtype":"U8","shape":[],"size":1},{"name":"a","path":"a","dtype":"U8","shape":[],"size":1}`), `not in strict name order`},
		{tensor(`{"name":"a","path":"a","dtype":"U8","shape":[],"size":1},{"name":"a","path":"a%","dtype":"U8","shape":[],"size":1}`), `not in strict name order`},
	}
	for _, c := range cases {
		_, err := ParseDocument([]byte(c.doc))
		checkError(t, err, c.want)
	}
	// A scalar's null shape reads as [].
	d, err := ParseDocument([]byte(tensor(`{"name":"a","path":"a","dtype":"U8","shape":null,"size":1}`)))
	if err != nil || d.Tensors[0].Shape == nil || len(d.Tensors[0].Shape) != 0 {
		t.Errorf("null shape: %v %+v", err, d)
	}
}

func TestJSONReader(t *testing.T) {
	cases := []struct {
		in   string
		want any    // decoded value, when ok
		err  string // error substring, when not
	}{
		{`{"a":[1,-2.5e+3,true,false,null,"x"],"b":{}}`, map[string]any{"a": []any{json.Number("1"), json.Number("-2.5e+3"), true, false, nil, "x"}, "b": map[string]any{}}, ""},
		{` [ ] `, []any{}, ""},
		{`"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"`, "\"\\/\b\f\n\r\té😀", ""},
		{`"\uD83D\uDE00"`, "😀", ""},
		{`0`, json.Number("0"), ""},
		{`{"a":1,"a":2}`, nil, `duplicate key "a" (at byte 7)`},
		{`"\ud800"`, nil, "unpaired UTF-16 surrogate (at byte 1)"},
		{`"\udc00\ud800"`, nil, "unpaired UTF-16 surrogate"},
		{`"\ud800\u0041"`, nil, "unpaired UTF-16 surrogate"},
		{`"\ud800x"`, nil, "unpaired UTF-16 surrogate"},
		{`"\u12"`, nil, `bad \u escape`},
		{`"\x"`, nil, `bad escape "\\x"`},
		{"\"\\\n", nil, `bad escape "\\\n"`},
		{"\"a\nb\"", nil, "control byte 0x0a in a string (at byte 2)"},
		{`"abc`, nil, "JSON ends early"},
		{`"ab\`, nil, "JSON ends early"},
		{`01`, nil, "invalid JSON"},
		{`1.`, nil, "want a digit after '.'"},
		{`1e`, nil, "want a digit in the exponent"},
		{`-`, nil, "JSON ends early (want a digit)"},
		{`+1`, nil, "want a value"},
		{`nul`, nil, `want "null"`},
		{`nullx`, nil, "invalid JSON"},
		{`[1,]`, nil, "invalid JSON: want a value, found ']'"},
		{`[1 2]`, nil, "want ',' or ']'"},
		{`{"a":1,}`, nil, "want a string key"},
		{`{"a" 1}`, nil, "want ':' after an object key, found '1' (at byte 5)"},
		{`{"a":1`, nil, "JSON ends early"},
		{`[`, nil, "JSON ends early"},
		{``, nil, "JSON ends early (want a value)"},
		{strings.Repeat("[", MaxNesting+1) + strings.Repeat("]", MaxNesting+1), nil, "nested deeper than 256"},
	}
	for _, c := range cases {
		r := NewJSONReader("f.json", "test", []byte(c.in), 0)
		v, err := r.Value("")
		if err == nil {
			err = r.End("")
		}
		if c.err != "" {
			checkError(t, err, c.err)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(v, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.in, v, c.want)
		}
	}
	// Nesting up to the cap is fine.
	r := NewJSONReader("f.json", "test", []byte(strings.Repeat("[", MaxNesting)+strings.Repeat("]", MaxNesting)), 0)
	if _, err := r.Value(""); err != nil {
		t.Error(err)
	}
}

// FuzzJSON checks JSONReader against encoding/json: what one accepts, the
// other accepts with the same value, except for what JSONReader refuses on
// purpose (duplicate keys, unpaired surrogates, deep nesting).
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e+3,true,false,null,"x\u00e9"],"b":{}}`, `{"a":1,"a":2}`, `"\ud800"`, `[1,2 ,3 ] `, `01`, `{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) {
			return // callers check UTF-8 first
		}
		r := NewJSONReader("f", "t", data, 0)
		got, err := r.Value("")
		if err == nil {
			err = r.End("")
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		valid := json.Valid(data)
		if valid {
			if derr := dec.Decode(&want); derr != nil {
				t.Fatalf("encoding/json: valid but %v", derr)
			}
		}
		switch {
		case err == nil && !valid:
			t.Fatalf("accepted %q, which encoding/json refuses", data)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("%q: got %#v, encoding/json %#v", data, got, want)
		case err != nil && valid:
			msg := err.Error()
			if !strings.Contains(msg, "duplicate key") && !strings.Contains(msg, "surrogate") && !strings.Contains(msg, "nested deeper") {
				t.Fatalf("refused valid JSON %q: %v", data, err)
			}
		}
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("error not one line: %q", err)
		}
	})
}

// TestDocumentWriteJSON: the document written a tensor at a time is
// json.Marshal's of the whole (the rendering before), byte for byte:
// optional fields present and absent, null and empty lists, HTML
// characters, U+2028, names not UTF-8, metadata to compact.
func TestDocumentWriteJSON(t *testing.T) {
	off := int64(7)
	ts := []DocTensor{
		{Name: "a<b>&c", Path: "a<b>&c", DType: "F32", Shape: []int64{2}, Size: 8, Source: "/x/<m>.safetensors", Offset: &off},
		{Name: "\ufffd\u2028", NameHex: "ff e2 80 a8", Path: "%FF\u2028", DType: "BF16", Shape: []int64{}, Size: 2},
		{Name: "z", Path: "z", DType: "I8", Shape: nil, Size: 1},
	}
	meta := map[string]any{"k": "v <&>", "n": json.Number("12"), "o": map[string]any{"a": []any{true, nil, "\u2029"}}}
	for _, d := range []Document{
		{Format: "safetensors", Sources: []string{"a"}, Metadata: map[string]any{}, Tensors: ts},
		{Format: "gguf", View: "F32", Sources: []string{}, Metadata: meta, Tensors: ts, Native: ts[:2]},
		{Format: "npz", View: "BF16", Sources: nil, Metadata: nil, Tensors: nil, Native: []DocTensor{}},
		{Format: "", Metadata: meta, Tensors: []DocTensor{}},
	} {
		md, err := RenderMetadata(d.Metadata, MetadataJSONBudget)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(struct {
			Format   string          `json:"format"`
			View     string          `json:"view,omitempty"`
			Sources  []string        `json:"sources"`
			Metadata json.RawMessage `json:"metadata"`
			Tensors  []DocTensor     `json:"tensors"`
			Native   []DocTensor     `json:"native,omitempty"`
		}{d.Format, d.View, d.Sources, md, d.Tensors, d.Native})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		var got bytes.Buffer
		if err := d.WriteJSON(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("WriteJSON\n got %s\nwant %s", got.Bytes(), want)
		}
		if j, err := d.JSON(); err != nil || !bytes.Equal(j, want) {
			t.Errorf("JSON\n got %s, %v\nwant %s", j, err, want)
		}
	}
}
