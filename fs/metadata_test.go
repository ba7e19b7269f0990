package fs

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// readPath reads the whole file at p through Root.read, in 4 KiB reads.
func readPath(t testing.TB, r *Root, p string) string {
	t.Helper()
	e := r.lookupPath(p)
	if e == nil || e.isDir() {
		t.Fatalf("no file %s", p)
	}
	var out []byte
	buf := make([]byte, 4096)
	for off := int64(0); ; {
		res, errno := r.read(e, buf, off)
		if errno != 0 {
			t.Fatalf("%s at %d: %v", p, off, errno)
		}
		b, _ := res.Bytes(buf)
		if len(b) == 0 {
			break
		}
		out = append(out, b...)
		off += int64(len(b))
	}
	if int64(len(out)) != e.file.size {
		t.Fatalf("%s: read %d bytes of %d", p, len(out), e.file.size)
	}
	return string(out)
}

// TestMetadataFiles: each metadata value is a file of .tensorfs/metadata/
// served on demand: a string as it is, a FileValue as its bytes of the
// source, anything else as JSON; index.json elides the FileValue.
func TestMetadataFiles(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	long := strings.Repeat("k", 300)
	big := make([]any, 5000)
	for i := range big {
		big[i] = i
	}
	idx.Metadata = map[string]any{
		"general.name": "tiny <llama> & co",
		"n":            int64(3),
		"u8":           index.Uint8s{1, 2, 255},
		"a/b":          []any{"x", 1.5, nil, true},
		"big":          big,
		"lazy":         &index.FileValue{Offset: 16, Size: 40, Type: "array", ElemType: "uint8", Count: 40},
		"lazy.str":     &index.FileValue{Offset: 20, Size: 5, Type: "string"},
		long:           "no file",
	}
	r := newRoot(t, idx, src, Options{})
	bigJSON, _ := json.Marshal(big)
	for _, c := range []struct{ path, want string }{
		{"general.name", "tiny <llama> & co"},
		{"n", "3\n"},
		{"u8", "[1,2,255]\n"},
		{"a%2Fb", `["x",1.5,null,true]` + "\n"},
		{"big", string(bigJSON) + "\n"},
		{"lazy", string(src.data[16:56])},
		{"lazy.str", string(src.data[20:25])},
	} {
		p := ".tensorfs/metadata/" + c.path
		e := r.lookupPath(p)
		if e == nil {
			t.Errorf("no %s", p)
			continue
		}
		if e.file.kind != kindLazy || e.file.size != int64(len(c.want)) {
			t.Errorf("%s: kind %d size %d, want %d", p, e.file.kind, e.file.size, len(c.want))
		}
		if rv, ok := e.loadContents().r.(*renderedValue); ok && rv.data != nil {
			t.Errorf("%s rendered before it was read", p)
		}
		if got := readPath(t, r, p); got != c.want {
			t.Errorf("%s = %.100q, want %.100q", p, got, c.want)
		}
	}
	if n := len(r.lookupPath(".tensorfs/metadata").children()); n != 7 {
		t.Errorf("%d metadata files, want 7 (none for a key over 255 bytes)", n)
	}
	doc := parseIndex(t, r)
	want := map[string]any{index.ElidedKey: true, "type": "array", "element_type": "uint8", "count": json.Number("40"), "bytes": json.Number("40"), "encoding": "gguf", "path": ".tensorfs/metadata/lazy"}
	got, _ := doc.Metadata["lazy"].(map[string]any)
	if g, _ := json.Marshal(got); string(g) != mustJSON(want) {
		t.Errorf("index.json lazy = %s, want %s", g, mustJSON(want))
	}
	if doc.Metadata["general.name"] != "tiny <llama> & co" || doc.Metadata[long] != "no file" {
		t.Errorf("index.json metadata %v", doc.Metadata)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// zeroSource is a source of size zero bytes that holds nothing in memory.
type zeroSource struct{ size int64 }

func (z zeroSource) ReadAt(p []byte, off int64) (int, error) {
	if off >= z.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.size-off))
	clear(p[:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (z zeroSource) Size() int64  { return z.size }
func (z zeroSource) Name() string { return "/zero.gguf" }
func (z zeroSource) Close() error { return nil }

// TestMetadataLargeValueCost: a mount of a checkpoint whose metadata is a
// 16 GiB array left in its file costs no memory for it and a short
// index.json; its file reads the source.
func TestMetadataLargeValueCost(t *testing.T) {
	const n = 16 << 30
	idx := &index.Index{Format: "gguf", Sources: []string{"/zero.gguf"}, Metadata: map[string]any{
		"big": &index.FileValue{Offset: 64, Size: n, Type: "array", ElemType: "uint8", Count: n},
	}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := NewRoot(idx, []backing.Source{zeroSource{64 + n}}, Options{Logger: quietLogger()})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("NewRoot allocated %d bytes", alloc)
	}
	if data := r.lookupPath(".tensorfs/index.json").data(); len(data) > 400 {
		t.Errorf("index.json is %d bytes", len(data))
	}
	e := r.lookupPath(".tensorfs/metadata/big")
	if e == nil || e.file.size != n {
		t.Fatalf("metadata/big: %+v", e)
	}
	buf := bytes.Repeat([]byte{1}, 100)
	res, errno := r.read(e, buf, n-50)
	if b, _ := res.Bytes(buf); errno != 0 || len(b) != 50 || !bytes.Equal(b, make([]byte, 50)) {
		t.Fatalf("read at the end: %v %v", b, errno)
	}
}

// TestMetadataFileOutsideSource: a FileValue that does not fit its source
// (an index built wrongly) has no file, and the mount still works.
func TestMetadataFileOutsideSource(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	idx.Metadata = map[string]any{
		"past":   &index.FileValue{Offset: int64(len(src.data)) - 2, Size: 3, Type: "string"},
		"source": &index.FileValue{Source: 1, Size: 1, Type: "string"},
		"ok":     "yes",
	}
	r := newRoot(t, idx, src, Options{})
	if r.lookupPath(".tensorfs/metadata/past") != nil || r.lookupPath(".tensorfs/metadata/source") != nil {
		t.Error("a file for a value outside its source")
	}
	if got := readPath(t, r, ".tensorfs/metadata/ok"); got != "yes" {
		t.Errorf("ok = %q", got)
	}
}
