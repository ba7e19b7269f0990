package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// memSource is a backing.Source over bytes.
type memSource struct {
	name string
	data []byte
	// short, when positive, makes every read return at most short bytes
	// and no error: a source that changed under the mount.
	short int
}

func (m *memSource) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if m.short > 0 && n > m.short {
		return m.short, nil
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (m *memSource) Size() int64  { return int64(len(m.data)) }
func (m *memSource) Name() string { return m.name }
func (m *memSource) Close() error { return nil }

// spec is one tensor of a generated fixture.
type spec struct {
	name  string
	dt    dtype.DType
	shape []int64
}

// fixture lays the tensors out back to back (after a 16-byte header, so
// offsets are not zero) in one memSource filled with a byte pattern, and
// returns the index (paths assigned) and the source.
func fixture(t testing.TB, specs []spec) (*index.Index, *memSource) {
	t.Helper()
	idx := &index.Index{Format: "safetensors", Sources: []string{"/ckpt/model.safetensors"},
		Metadata: map[string]any{"format": "pt", "n": 3}}
	off := int64(16)
	for _, s := range specs {
		n, _ := index.Elements(s.shape)
		size, ok := s.dt.ByteSize(n)
		if !ok {
			t.Fatalf("bad spec %v", s)
		}
		idx.Tensors = append(idx.Tensors, index.Tensor{Name: s.name, DType: s.dt, Shape: s.shape, Offset: off, Size: size})
		off += size
	}
	data := make([]byte, off)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	if err := index.AssignPaths(idx); err != nil {
		t.Fatal(err)
	}
	sortTensors(idx)
	return idx, &memSource{name: idx.Sources[0], data: data}
}

func sortTensors(idx *index.Index) {
	slices.SortFunc(idx.Tensors, func(a, b index.Tensor) int { return strings.Compare(a.Name, b.Name) })
}

func quietLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func newRoot(t testing.TB, idx *index.Index, src backing.Source, opts Options) *Root {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	r, err := NewRoot(idx, []backing.Source{src}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var basicSpecs = []spec{
	{"model/layers.0/attn.weight", dtype.F32, []int64{4, 8}},
	{"model/layers.0/attn.bias", dtype.BF16, []int64{8}},
	{"model/layers.1/attn.weight", dtype.F16, []int64{3, 5}},
	{"model/embed", dtype.F32, []int64{10, 4}},
	{"position_ids", dtype.I64, []int64{1, 7}},
	{"scale", dtype.F64, nil},
	{"mask", dtype.Bool, []int64{5}},
}

// names lists a directory entry's children.
func names(e *node) []string {
	var out []string
	for _, c := range e.children() {
		out = append(out, c.name)
	}
	return out
}

func TestTreeLayout(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})

	top := names(r.lookupPath(""))
	for _, want := range []string{".tensorfs", "mask", "model", "position_ids", "scale"} {
		if !contains(top, want) {
			t.Errorf("top level %v lacks %q", top, want)
		}
	}
	if got := names(r.lookupPath("model")); strings.Join(got, ",") != "embed,layers.0,layers.1" {
		t.Errorf("model/ = %v", got)
	}
	if got := names(r.lookupPath("model/layers.0")); strings.Join(got, ",") != "attn.bias,attn.weight" {
		t.Errorf("model/layers.0/ = %v", got)
	}
	if got := names(r.lookupPath(".tensorfs")); strings.Join(got, ",") != "index.json,metadata,stats.json" {
		t.Errorf(".tensorfs/ = %v", got)
	}
	if got := names(r.lookupPath(".tensorfs/metadata")); strings.Join(got, ",") != "format,n" {
		t.Errorf(".tensorfs/metadata/ = %v", got)
	}
	for i := range idx.Tensors {
		tt := &idx.Tensors[i]
		e := r.lookupPath(tt.Path)
		if e == nil || e.isDir() {
			t.Fatalf("%s: not a file in the tree", tt.Path)
		}
		if e.file.t != tt || e.file.size != tt.Size || e.file.form != formDirect {
			t.Errorf("%s: file %+v does not serve tensor %+v", tt.Path, e.file, tt)
		}
	}

	// Children sorted, inode numbers unique, one per node.
	seen := map[uint64]string{}
	var walk func(e *node, p string)
	walk = func(e *node, p string) {
		if prev, dup := seen[e.id]; dup {
			t.Errorf("inode %d used by %q and %q", e.id, prev, p)
		}
		seen[e.id] = p
		if e.name == splitDir {
			return // slices: looked up, not counted (split_test.go)
		}
		for i, c := range e.children() {
			if i > 0 && e.children()[i-1].name >= c.name {
				t.Errorf("%s: children not sorted: %q before %q", p, e.children()[i-1].name, c.name)
			}
			walk(c, p+"/"+c.name)
		}
	}
	walk(r.lookupPath(""), "")
	if r.lookupPath("").id != 1 || uint64(len(seen)) != r.Nodes() {
		t.Errorf("root ino %d, %d inodes for %d nodes", r.lookupPath("").id, len(seen), r.Nodes())
	}
	// Every node ID names its node again (static entries 1..n, path
	// nodes place<<32 | slot+1), and none was never given.
	for id, p := range seen {
		n, ok := r.resolve(id)
		if !ok || n.id != id || (n.e == nil) != (id > 1<<32) {
			t.Errorf("%s: node ID %#x resolves to %+v, %v", p, id, n, ok)
		}
	}
	for _, id := range []uint64{0, uint64(len(r.static)) + 1, 1 << 32, 99<<32 | 1, uint64(placeTop)<<32 | 1000, uint64(placeTop|1<<4)<<32 | 1} {
		if _, ok := r.resolve(id); ok {
			t.Errorf("node ID %#x resolves", id)
		}
	}

	// Deterministic: a second build numbers everything the same.
	idx2, src2 := fixture(t, basicSpecs)
	r2 := newRoot(t, idx2, src2, Options{})
	for i := range idx.Tensors {
		p := idx.Tensors[i].Path
		if a, b := r.lookupPath(p).id, r2.lookupPath(p).id; a != b {
			t.Errorf("%s: inode %d, then %d", p, a, b)
		}
	}

	// Attributes.
	var a fuse.Attr
	r.fillAttr(r.lookupPath("model"), &a)
	if a.Mode != syscall.S_IFDIR|0o555 || a.Nlink != 2+2 {
		t.Errorf("model/: mode %o nlink %d", a.Mode, a.Nlink)
	}
	e := r.lookupPath("model/embed")
	r.fillAttr(e, &a)
	if a.Mode != syscall.S_IFREG|0o444 || a.Size != 160 || a.Nlink != 1 || a.Ino != e.id || a.Blocks != 1 {
		t.Errorf("model/embed: %+v", a)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestViews checks which tensors each view holds against view.Convertible
// and view.NewNPY, whatever the view package accepts.
func TestViews(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})
	for _, fv := range floatViews {
		dir := r.lookupPath(fv.dir)
		n := 0
		for i := range idx.Tensors {
			tt := &idx.Tensors[i]
			want := tt.DType == fv.dt || view.Convertible(tt, fv.dt)
			var e *node
			if dir != nil {
				e = r.lookupPath(fv.dir + "/" + tt.Path)
			}
			if (e != nil) != want {
				t.Errorf("%s/%s present=%v, want %v", fv.dir, tt.Path, e != nil, want)
				continue
			}
			if e == nil {
				continue
			}
			n++
			if e.file.dtype != fv.dt {
				t.Errorf("%s/%s: dtype %s", fv.dir, tt.Path, e.file.dtype)
			}
			if sz, _ := fv.dt.ByteSize(tt.NumElements()); e.file.size != sz {
				t.Errorf("%s/%s: size %d, want %d", fv.dir, tt.Path, e.file.size, sz)
			}
		}
		if n == 0 && dir != nil {
			t.Errorf("%s present but empty", fv.dir)
		}
	}
	dir := r.lookupPath(npyDir)
	for i := range idx.Tensors {
		tt := &idx.Tensors[i]
		_, err := view.NewNPY(tt, src)
		var e *node
		if dir != nil {
			e = r.lookupPath(npyDir + "/" + tt.Path + npySuffix)
		}
		if (e != nil) != (err == nil) {
			t.Errorf(".npy/%s.npy present=%v, NewNPY error %v", tt.Path, e != nil, err)
		}
	}
	// The F32 tensor in .f32/ is the stored bytes, served directly.
	e := r.lookupPath(".f32/model/embed")
	if e == nil || e.file.form != formDirect {
		t.Errorf(".f32/model/embed: %+v, want the stored F32 bytes served directly", e)
	}
}

// TestViewTop checks mount --dtype: the top level is the view, the stored
// tree moves to .native/, index.json describes the top level.
func TestViewTop(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{View: dtype.F32})
	for i := range idx.Tensors {
		tt := &idx.Tensors[i]
		want := tt.DType == dtype.F32 || view.Convertible(tt, dtype.F32)
		if e := r.lookupPath(tt.Path); (e != nil) != want {
			t.Errorf("top %s present=%v want %v", tt.Path, e != nil, want)
		}
		if e := r.lookupPath(nativeDir + "/" + tt.Path); e == nil || e.file.dtype != tt.DType {
			t.Errorf(".native/%s missing or converted", tt.Path)
		}
	}
	doc := parseIndex(t, r)
	if got := docView(t, r); got != "F32" {
		t.Errorf(`index.json "view" = %q`, got)
	}
	for _, d := range doc.Tensors {
		if d.DType != "F32" {
			t.Errorf("index.json %s: dtype %s in an F32 top level", d.Name, d.DType)
		}
		if r.lookupPath(d.Path) == nil {
			t.Errorf("index.json path %q not in the tree", d.Path)
		}
	}
	// "native" describes .native/: the stored index, paths under .native/.
	want := idx.Document().Tensors
	if len(doc.Native) != len(want) {
		t.Fatalf("index.json native lists %d tensors, want %d", len(doc.Native), len(want))
	}
	for i, d := range doc.Native {
		w := want[i]
		w.Path = nativeDir + "/" + w.Path
		got, _ := json.Marshal(d)
		exp, _ := json.Marshal(w)
		if !bytes.Equal(got, exp) {
			t.Errorf("index.json native[%d] = %s, want %s", i, got, exp)
		}
		if e := r.lookupPath(d.Path); e == nil || e.file.size != d.Size {
			t.Errorf("index.json native path %q not in the tree with size %d", d.Path, d.Size)
		}
	}
	if _, err := NewRoot(idx, []backing.Source{src}, Options{View: dtype.I32, Logger: quietLogger()}); err == nil {
		t.Error("View I32 accepted")
	}
}

func parseIndex(t *testing.T, r *Root) *index.Document {
	t.Helper()
	e := r.lookupPath(".tensorfs/index.json")
	if e == nil {
		t.Fatal("no .tensorfs/index.json")
	}
	data := readAll(t, r, e)
	doc, err := index.ParseDocument(data)
	if err != nil {
		t.Fatalf("index.json: %v\n%s", err, data)
	}
	return doc
}

// readAll reads the whole regular file e as the mount would, in reads
// of 64 KiB.
func readAll(t testing.TB, r *Root, e *node) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		res, errno := r.read(e, buf, off)
		if errno != 0 {
			t.Fatalf("read %s at %d: %v", e.name, off, errno)
		}
		b, _ := res.Bytes(buf)
		if len(b) == 0 {
			return out
		}
		out = append(out, b...)
		off += int64(len(b))
	}
}

func docView(t *testing.T, r *Root) string {
	var v struct {
		View string `json:"view"`
	}
	if err := json.Unmarshal(readAll(t, r, r.lookupPath(".tensorfs/index.json")), &v); err != nil {
		t.Fatal(err)
	}
	return v.View
}

func TestIndexJSON(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})
	doc := parseIndex(t, r)
	want := idx.Document()
	got, _ := json.Marshal(doc)
	exp, _ := json.Marshal(want)
	if !bytes.Equal(got, exp) {
		t.Errorf("index.json differs from index.Document:\n got %s\nwant %s", got, exp)
	}
	if docView(t, r) != "" || doc.Native != nil {
		t.Error(`"view" or "native" set without Options.View`)
	}
	// One tensor per line, so head shows the start.
	data := readAll(t, r, r.lookupPath(".tensorfs/index.json"))
	if lines := bytes.Count(data, []byte("\n")); lines < len(idx.Tensors)+5 {
		t.Errorf("index.json has %d lines for %d tensors", lines, len(idx.Tensors))
	}
	// Metadata files.
	if got := readPath(t, r, ".tensorfs/metadata/format"); got != "pt" {
		t.Errorf("metadata/format = %q", got)
	}
	if got := readPath(t, r, ".tensorfs/metadata/n"); got != "3\n" {
		t.Errorf("metadata/n = %q", got)
	}
}

func TestEmptyIndex(t *testing.T) {
	idx := &index.Index{Format: "safetensors", Sources: []string{"/x"}}
	r := newRoot(t, idx, &memSource{name: "/x", data: make([]byte, 8)}, Options{})
	// Every view, each with the export of no tensors (a header).
	if got := strings.Join(names(r.lookupPath("")), ","); got != ".bf16,.f16,.f32,.f64,.files,.npy,.safetensors,.split,.tensorfs" {
		t.Errorf("top level of an empty index: %v", got)
	}
	doc := parseIndex(t, r)
	if len(doc.Tensors) != 0 || doc.Tensors == nil {
		t.Errorf("tensors %v", doc.Tensors)
	}
}

func TestBadPaths(t *testing.T) {
	long := strings.Repeat("x", 256)
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"a", "a/b"}, "both a file and a directory"},
		{[]string{"a/b", "a"}, "both a file and a directory"},
		{[]string{"a", "a"}, "same path"},
		{[]string{"a//b"}, "empty path component"},
		{[]string{"a/../b"}, `".."`},
		{[]string{"a/./b"}, `"."`},
		{[]string{long}, "over 255"},
		{[]string{"a\x00b"}, "NUL"},
		{[]string{".f32"}, "leading '.'"},
		{[]string{".tensorfs/index.json"}, "leading '.'"},
	} {
		idx := &index.Index{Format: "x", Sources: []string{"/x"}}
		for i, p := range tc.paths {
			idx.Tensors = append(idx.Tensors, index.Tensor{Name: fmt.Sprint("t", i), Path: p, DType: dtype.U8, Shape: []int64{1}, Size: 1})
		}
		_, err := NewRoot(idx, []backing.Source{&memSource{name: "/x", data: []byte{1}}}, Options{Logger: quietLogger()})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("paths %q: error %v, want %q", tc.paths, err, tc.want)
		}
	}
	// A range outside the source and a bad source number are refused.
	idx := &index.Index{Format: "x", Sources: []string{"/x"},
		Tensors: []index.Tensor{{Name: "t", Path: "t", DType: dtype.U8, Shape: []int64{4}, Offset: 2, Size: 4}}}
	if _, err := NewRoot(idx, []backing.Source{&memSource{name: "/x", data: make([]byte, 5)}}, Options{Logger: quietLogger()}); err == nil {
		t.Error("tensor past the end of its source accepted")
	}
	idx.Tensors[0].Source = 1
	if _, err := NewRoot(idx, []backing.Source{&memSource{name: "/x", data: make([]byte, 9)}}, Options{Logger: quietLogger()}); err == nil {
		t.Error("source out of range accepted")
	}
	if _, err := NewRoot(idx, nil, Options{}); err == nil {
		t.Error("sources/index mismatch accepted")
	}
}

// TestHardNames mounts the names of SPEC's mapping rule and checks every
// tensor is reachable at its path with its exact name.
func TestHardNames(t *testing.T) {
	specs := []spec{
		{"a", dtype.U8, []int64{1}},
		{"a/b", dtype.U8, []int64{2}},
		{"/lead", dtype.U8, []int64{3}},
		{"trail/", dtype.U8, []int64{4}},
		{"x//y", dtype.U8, []int64{5}},
		{"..", dtype.U8, []int64{6}},
		{"./.", dtype.U8, []int64{7}},
		{".hidden", dtype.U8, []int64{8}},
		{"nul\x00byte", dtype.U8, []int64{9}},
		{strings.Repeat("long", 100), dtype.U8, []int64{10}},
		{"dir/" + strings.Repeat("é", 200) + "/w", dtype.U8, []int64{11}},
		{"pct%41", dtype.U8, []int64{12}},
		{"", dtype.U8, []int64{13}},
		{"bad\xffutf8", dtype.U8, []int64{14}},
		{"bad\xfeutf8", dtype.U8, []int64{15}},
	}
	idx, src := fixture(t, specs)
	r := newRoot(t, idx, src, Options{})
	// index.json names every tensor exactly (name_hex for the names that
	// are not UTF-8).
	doc := parseIndex(t, r)
	for i, d := range doc.Tensors {
		if d.Name != idx.Tensors[i].Name || d.Path != idx.Tensors[i].Path {
			t.Errorf("index.json tensor %d: %q at %q, want %q at %q", i, d.Name, d.Path, idx.Tensors[i].Name, idx.Tensors[i].Path)
		}
	}
	for i := range idx.Tensors {
		tt := &idx.Tensors[i]
		e := r.lookupPath(tt.Path)
		if e == nil || e.isDir() || e.file.t.Name != tt.Name {
			t.Errorf("tensor %q: path %q does not lead to it", tt.Name, tt.Path)
			continue
		}
		v, errno := getxattr(r, e, xattrName, 1024)
		if errno != 0 || v != tt.Name {
			t.Errorf("tensor %q: xattr name %q (%v)", tt.Name, v, errno)
		}
		if e := r.lookupPath(npyDir + "/" + tt.Path + npySuffix); r.lookupPath(npyDir) != nil && e == nil {
			if _, err := view.NewNPY(tt, src); err == nil {
				t.Errorf("tensor %q: no .npy file", tt.Name)
			}
		}
	}
}

// TestNPYFileAlsoDirectory: tensors "q" and "q.npy/z" make q.npy both a
// file and a directory of the .npy view; the file is q.npy% (as rule 3 of
// the names rule does in the stored tree) and nothing is left out.
func TestNPYFileAlsoDirectory(t *testing.T) {
	idx, src := fixture(t, []spec{
		{"q", dtype.F32, []int64{2}},
		{"q.npy/z", dtype.F32, []int64{3}},
		{"q.npy/z.npy/w", dtype.U8, []int64{4}},
	})
	r := newRoot(t, idx, src, Options{})
	for path, name := range map[string]string{
		".npy/q.npy%":            "q",
		".npy/q.npy/z.npy%":      "q.npy/z",
		".npy/q.npy/z.npy/w.npy": "q.npy/z.npy/w",
	} {
		e := r.lookupPath(path)
		if e == nil || e.isDir() || e.file.t.Name != name {
			t.Errorf("%s: %+v, want the .npy file of %q", path, e, name)
		}
	}
	if e := r.lookupPath(".npy/q.npy"); e == nil || !e.isDir() {
		t.Errorf(".npy/q.npy is not the directory")
	}
	if r.dropped != 0 {
		t.Errorf("%d tensors left out of a view", r.dropped)
	}
}

func getxattr(r *Root, e *node, name string, size int) (string, syscall.Errno) {
	buf := make([]byte, size)
	got, errno := r.getxattr(e, name, buf)
	if errno != 0 {
		return "", errno
	}
	return string(buf[:got]), 0
}

func TestXattrs(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})
	tt := &idx.Tensors[0] // mask
	e := r.lookupPath(tt.Path)
	want := map[string]string{
		xattrName:   tt.Name,
		xattrDType:  "BOOL",
		xattrShape:  "[5]",
		xattrSource: "/ckpt/model.safetensors",
		xattrOffset: fmt.Sprint(tt.Offset),
	}
	for name, val := range want {
		// Size query: empty buffer gives the size (ERANGE, which go-fuse
		// turns into the size reply).
		sz, errno := r.getxattr(e, name, nil)
		if int(sz) != len(val) || (errno != 0 && errno != syscall.ERANGE) {
			t.Errorf("%s size query: %d, %v", name, sz, errno)
		}
		if len(val) > 1 {
			if _, errno := r.getxattr(e, name, make([]byte, len(val)-1)); errno != syscall.ERANGE {
				t.Errorf("%s with a short buffer: %v, want ERANGE", name, errno)
			}
		}
		if got, errno := getxattr(r, e, name, len(val)); got != val || errno != 0 {
			t.Errorf("%s = %q (%v), want %q", name, got, errno, val)
		}
	}
	if _, errno := r.getxattr(e, "user.other", make([]byte, 100)); errno != syscall.ENODATA {
		t.Errorf("unknown xattr: %v", errno)
	}
	sz, _ := r.listxattr(e, nil)
	list := make([]byte, sz)
	got, errno := r.listxattr(e, list)
	wantList := "user.tensorfs.name\x00user.tensorfs.dtype\x00user.tensorfs.shape\x00user.tensorfs.source\x00user.tensorfs.offset\x00"
	if errno != 0 || string(list[:got]) != wantList {
		t.Errorf("Listxattr = %q, %v", list[:got], errno)
	}
	if _, errno := r.listxattr(e, make([]byte, 3)); errno != syscall.ERANGE {
		t.Errorf("Listxattr short buffer: %v", errno)
	}
	// Scalar shape is [].
	if got, _ := getxattr(r, r.lookupPath("scale"), xattrShape, 10); got != "[]" {
		t.Errorf("scalar shape %q", got)
	}
	// Non-tensor files have none.
	if sz, _ := r.listxattr(r.lookupPath(".tensorfs/index.json"), nil); sz != 0 {
		t.Errorf("index.json lists %d bytes of xattrs", sz)
	}
}

func TestMetadataFileName(t *testing.T) {
	for key, want := range map[string]string{
		"format":          "format",
		"":                "%",
		"%":               "%25",
		"a/b":             "a%2Fb",
		".hidden":         "%2Ehidden",
		"a.b":             "a.b",
		"nul\x00":         "nul%00",
		"bad\xffutf8":     "bad%FFutf8",
		"general.name":    "general.name",
		"tokenizer.ggml.": "tokenizer.ggml.",
		"é":               "é",
	} {
		if got := MetadataFileName(key); got != want {
			t.Errorf("MetadataFileName(%q) = %q, want %q", key, got, want)
		}
	}
	// Distinct keys, distinct names.
	keys := []string{"", "%", "%25", "/", "%2F", ".", "%2E", "a", "a/", "a%2F"}
	seen := map[string]string{}
	for _, k := range keys {
		n := MetadataFileName(k)
		if prev, dup := seen[n]; dup {
			t.Errorf("keys %q and %q both map to %q", prev, k, n)
		}
		seen[n] = k
		if checkComponent(n) != nil || strings.HasPrefix(n, ".") {
			t.Errorf("key %q maps to unusable name %q", k, n)
		}
	}
}

func TestToErrno(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{io.EOF, syscall.EIO},
		{io.ErrUnexpectedEOF, syscall.EIO},
		{errors.New("x"), syscall.EIO},
		{fmt.Errorf("wrapped: %w", syscall.EINTR), syscall.EINTR},
		{&backing.FaultError{Name: "f", Err: syscall.EIO}, syscall.EIO},
		{&backing.FaultError{Name: "f"}, syscall.EIO},
		{fmt.Errorf("x: %w", backing.ErrFault), syscall.EIO},
		// A full --cache-dir is a fault of the server's reading: EIO,
		// never ENOSPC (issue 28); an interrupted one stays EINTR.
		{&backing.MemberError{File: "m.npz", Member: "a.npy", Msg: "cannot write", Err: &os.PathError{Op: "write", Path: "c", Err: syscall.ENOSPC}}, syscall.EIO},
		{fmt.Errorf("t: %w", &backing.FaultError{Name: "f", Err: syscall.ENOSPC, Now: -1}), syscall.EIO},
		{&backing.FaultError{Name: "f", Err: fmt.Errorf("x: %w", context.Canceled), Now: -1}, syscall.EINTR},
		{fmt.Errorf("x: %w", syscall.ENOMEM), syscall.ENOMEM},
		{os.ErrNotExist, syscall.ENOENT},
		{&os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, syscall.EACCES},
	} {
		if got := toErrno(tc.err); got != tc.want {
			t.Errorf("toErrno(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestStatsJSON(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})
	e := r.lookupPath(idx.Tensors[0].Path)
	dest := make([]byte, 100)
	if _, errno := r.readFile(e, nil, dest, 0); errno != 0 {
		t.Fatal(errno)
	}
	fh, flags, errno := r.open(r.lookupPath(".tensorfs/stats.json"), syscall.O_RDONLY)
	if errno != 0 || flags&fuse.FOPEN_DIRECT_IO == 0 {
		t.Fatalf("open stats.json: %v flags %x", errno, flags)
	}
	var s Stats
	if err := json.Unmarshal(fh.data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Reads != 1 || s.Bytes != 5 || s.Tensors != len(idx.Tensors) || s.Opens != 1 || s.Files != r.Files() {
		t.Errorf("stats %+v", s)
	}
	// Opening for writing fails.
	for _, fl := range []uint32{syscall.O_WRONLY, syscall.O_RDWR, syscall.O_RDONLY | syscall.O_TRUNC} {
		if _, _, errno := r.open(e, fl); errno != syscall.EROFS {
			t.Errorf("open flags %x: %v, want EROFS", fl, errno)
		}
	}
}

// TestSourceFiles builds trees over real files through backing.Open in
// every mode, so the splice descriptor path is covered too.
func TestSourceFiles(t *testing.T) {
	idx, mem := fixture(t, []spec{{"w", dtype.F32, []int64{3000}}, {"b", dtype.U8, []int64{13}}})
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, mem.data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx.Sources = []string{path}
	for _, mode := range []backing.Mode{backing.Mmap, backing.Pread} {
		for _, noSplice := range []bool{false, true} {
			src, err := backing.Open(path, backing.Options{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			r := newRoot(t, idx, src, Options{NoSplice: noSplice})
			for i := range idx.Tensors {
				tt := &idx.Tensors[i]
				checkReads(t, fmt.Sprintf("%v/nosplice=%v/%s", mode, noSplice, tt.Name), r, r.lookupPath(tt.Path),
					mem.data[tt.Offset:tt.Offset+tt.Size])
			}
			if fd := r.fds[0]; noSplice != (fd < 0) {
				t.Errorf("NoSplice %v but fd %d", noSplice, fd)
			}
			src.Close()
		}
	}
}

// checkReads reads f at a sweep of offsets and lengths and compares with
// want, the whole file.
func checkReads(t *testing.T, what string, r *Root, f *node, want []byte) {
	t.Helper()
	size := int64(len(want))
	offs := []int64{0, 1, 2, 3, 5, size / 2, size - 5, size - 1, size, size + 1, size + 4096, 1 << 40}
	lens := []int{0, 1, 2, 3, 7, 4096, 4097, len(want), len(want) + 10}
	buf := make([]byte, max(len(want)+100, 8192))
	for _, off := range offs {
		if off < 0 {
			continue
		}
		for _, n := range lens {
			dest := buf[:n]
			res, errno := r.read(f, dest, off)
			if errno != 0 {
				t.Fatalf("%s: read %d at %d: %v", what, n, off, errno)
			}
			got, st := res.Bytes(make([]byte, n))
			if !st.Ok() {
				t.Fatalf("%s: read %d at %d: result %v", what, n, off, st)
			}
			lo := min(off, size)
			hi := min(off+int64(n), size)
			if !bytes.Equal(got, want[lo:hi]) {
				t.Fatalf("%s: read %d at %d: %d bytes differ from the file's [%d, %d)", what, n, off, len(got), lo, hi)
			}
			res.Done()
		}
	}
	if _, errno := r.read(f, buf[:10], -1); errno != syscall.EINVAL {
		t.Errorf("%s: negative offset: %v", what, errno)
	}
}

func TestReads(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})
	for i := range idx.Tensors {
		tt := &idx.Tensors[i]
		checkReads(t, tt.Name, r, r.lookupPath(tt.Path), src.data[tt.Offset:tt.Offset+tt.Size])
	}
	ij := r.lookupPath(".tensorfs/index.json")
	want, err := r.indexJSON(r.index.lists[0], r.index.lists[1])
	if err != nil {
		t.Fatal(err)
	}
	checkReads(t, "index.json", r, ij, want)

	// A source that comes back short is EIO, not a short reply.
	src.short = 3
	if _, errno := r.read(r.lookupPath("model/embed"), make([]byte, 100), 0); errno != syscall.EIO {
		t.Errorf("short source read: %v, want EIO", errno)
	}
}

// TestReadNoAlloc checks that a copied read allocates nothing but the
// small reply wrapper.
func TestReadNoAlloc(t *testing.T) {
	idx, src := fixture(t, []spec{{"w", dtype.F32, []int64{1 << 16}}})
	r := newRoot(t, idx, src, Options{})
	f := r.lookupPath("w")
	dest := make([]byte, 128<<10)
	allocs := testing.AllocsPerRun(100, func() {
		res, _ := r.read(f, dest, 4096)
		res.Done()
	})
	if allocs > 1 {
		t.Errorf("%v allocations per read", allocs)
	}
}

// bigIndex returns an index of n tensors shaped like a transformer's
// (layers of a dozen tensors each) over one small source: every tensor
// is 16 bytes at its own offset.
func bigIndex(n int) (*index.Index, *memSource) {
	idx := &index.Index{Format: "safetensors", Sources: []string{"/ckpt/big.safetensors"}}
	kinds := []string{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
		"self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
		"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.bias"}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("model/layers.%d/%s", i/len(kinds), kinds[i%len(kinds)])
		idx.Tensors = append(idx.Tensors, index.Tensor{Name: name, DType: dtype.BF16, Shape: []int64{2, 4}, Offset: int64(i) * 16, Size: 16})
	}
	index.AssignPaths(idx)
	sortTensors(idx)
	return idx, &memSource{name: idx.Sources[0], data: make([]byte, n*16)}
}

func TestBigTree(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	idx, src := bigIndex(n)
	r := newRoot(t, idx, src, Options{})
	for i := 0; i < n; i += 97 {
		tt := &idx.Tensors[i]
		if e := r.lookupPath(tt.Path); e == nil || e.file.t != tt {
			t.Fatalf("%s missing", tt.Path)
		}
	}
	if got := len(parseIndex(t, r).Tensors); got != n {
		t.Errorf("index.json lists %d tensors", got)
	}
}

func BenchmarkNewRoot10k(b *testing.B) {
	idx, src := bigIndex(10000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRoot(idx, []backing.Source{src}, Options{Logger: quietLogger()}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewRoot1M(b *testing.B) {
	idx, src := bigIndex(1000000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRoot(idx, []backing.Source{src}, Options{Logger: quietLogger()}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteDoc: index.json's lines, written without reflection, are
// byte for byte what encoding/json writes, hard names included.
func TestWriteDoc(t *testing.T) {
	idx, src := fixture(t, []spec{
		{"plain.weight", dtype.BF16, []int64{2, 3}},
		{"quote\"back\\slash", dtype.F32, []int64{1}},
		{"ctl\x01\n\t<&>", dtype.U8, []int64{}},
		{"bad\xffutf8", dtype.U8, []int64{4}},
		{"é\u2028\u2029", dtype.F16, []int64{1, 1, 1}},
	})
	idx.Sources[0] = "/ckpt/dir \"q\"/m.safetensors"
	r := newRoot(t, idx, src, Options{})
	for _, it := range r.listFiles(placeTop) {
		var want, got bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r.docOf(placeNative, it)); err != nil {
			t.Fatal(err)
		}
		want.Truncate(want.Len() - 1)
		if err := r.writeDoc(&got, placeNative, it); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("writeDoc:\n got %s\nwant %s", got.String(), want.String())
		}
	}
}
