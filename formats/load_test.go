package formats

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// ldOpener opens files into memory and counts those not yet closed, so
// tests can check that Load closes everything on error.
type ldOpener struct {
	mu     sync.Mutex
	open   map[string]int
	fail   map[string]error // paths whose open fails
	opened []string
	fake   map[string]index.File // paths served by a given File
}

type ldFile struct {
	index.File
	o      *ldOpener
	path   string
	closed bool
}

func (f *ldFile) Close() error {
	f.o.mu.Lock()
	defer f.o.mu.Unlock()
	if f.closed {
		panic("closed twice: " + f.path)
	}
	f.closed = true
	f.o.open[f.path]--
	return nil
}

func newLdOpener() *ldOpener {
	return &ldOpener{open: map[string]int{}, fail: map[string]error{}, fake: map[string]index.File{}}
}

func (o *ldOpener) Open(path string) (index.File, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.fail[path]; err != nil {
		return nil, err
	}
	var f index.File
	if ff, ok := o.fake[path]; ok {
		f = ff
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f = stFile(path, data)
	}
	o.open[path]++
	o.opened = append(o.opened, path)
	return &ldFile{File: f, o: o, path: path}, nil
}

func (o *ldOpener) stillOpen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for p, n := range o.open {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s(%d)", p, n))
		}
	}
	return out
}

// ldLoad runs Load, checks the returned files against Sources and that
// nothing is left open, and closes the files.
func ldLoad(t *testing.T, path string, o *ldOpener) (*index.Index, error) {
	t.Helper()
	if o == nil {
		o = newLdOpener()
	}
	idx, files, err := Load(path, o.Open, testOptions)
	if err != nil {
		if idx != nil || files != nil {
			t.Errorf("Load failed but returned %v, %v", idx, files)
		}
		if open := o.stillOpen(); len(open) > 0 {
			t.Errorf("Load failed and left open: %v", open)
		}
		if strings.ContainsAny(err.Error(), "\n\r") {
			t.Errorf("error not one line: %q", err)
		}
		return nil, err
	}
	if len(files) != len(idx.Sources) {
		t.Fatalf("%d files for %d sources", len(files), len(idx.Sources))
	}
	for i, f := range files {
		if idx.Member(i) != nil {
			f.(interface{ Close() error }).Close() // a member's source, decoded or joined from the files
			continue
		}
		if abs, _ := filepath.Abs(f.Name()); abs != idx.Sources[i] {
			t.Errorf("files[%d] is %s, Sources[%d] is %s, want %s", i, f.Name(), i, idx.Sources[i], abs)
		}
		f.(*ldFile).Close()
	}
	if open := o.stillOpen(); len(open) > 0 {
		t.Errorf("Load left open files that it did not return: %v", open)
	}
	for i := range idx.Tensors {
		tn := &idx.Tensors[i]
		if i > 0 && idx.Tensors[i-1].Name >= tn.Name {
			t.Errorf("tensors not sorted: %q, %q", idx.Tensors[i-1].Name, tn.Name)
		}
		if tn.Path == "" {
			t.Errorf("tensor %q has no path", tn.Name)
		}
	}
	return idx, nil
}

func ldWrite(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func ldMap(t *testing.T, meta any, wm map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": meta, "weight_map": wm})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ldSharded writes a two-shard safetensors checkpoint with a weight map,
// plus files that are not part of it.
func ldSharded(t *testing.T) string {
	dir := t.TempDir()
	ldWrite(t, dir, "model-00001-of-00002.safetensors", stBuild(map[string]string{"format": "pt"}, true,
		stT{Name: "model.embed.weight", DType: "F32", Shape: []int{2, 2}, Bytes: 16}, stT{Name: "model.layers.0.w", DType: "BF16", Shape: []int{3}, Bytes: 6}))
	ldWrite(t, dir, "model-00002-of-00002.safetensors", stBuild(map[string]string{"format": "pt", "extra": "2"}, true,
		stT{Name: "lm_head.weight", DType: "F16", Shape: []int{2, 2}, Bytes: 8}, stT{Name: "model.layers.1.w", DType: "BF16", Shape: []int{3}, Bytes: 6}))
	ldWrite(t, dir, "model.safetensors.index.json", ldMap(t, map[string]any{"total_size": 36}, map[string]string{
		"model.embed.weight": "model-00001-of-00002.safetensors",
		"model.layers.0.w":   "model-00001-of-00002.safetensors",
		"lm_head.weight":     "model-00002-of-00002.safetensors",
		"model.layers.1.w":   "model-00002-of-00002.safetensors",
	}))
	ldWrite(t, dir, "README.md", []byte("# a model\n"))
	ldWrite(t, dir, "config.json", []byte(`{"architectures": ["X"]}`))
	// A checkpoint beside the shards that the weight map does not name
	// (Mistral repositories ship consolidated.safetensors this way).
	ldWrite(t, dir, "consolidated.safetensors", stBuild(nil, true, stT{Name: "model.embed.weight", DType: "F32", Shape: []int{1}, Bytes: 4}))
	return dir
}

func TestLoadSingleFile(t *testing.T) {
	dir := t.TempDir()
	p := ldWrite(t, dir, "m.safetensors", stBuild(map[string]string{"k": "v"}, true, stT{Name: "b", DType: "F32", Shape: []int{1}, Bytes: 4}, stT{Name: "a/x", DType: "U8", Shape: []int{2}, Bytes: 2}, stT{Name: "a", DType: "U8", Shape: nil, Bytes: 1}))
	idx, err := ldLoad(t, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if idx.Format != "safetensors" || !reflect.DeepEqual(idx.Sources, []string{p}) || !reflect.DeepEqual(idx.Metadata, map[string]any{"k": "v"}) {
		t.Errorf("index %+v", idx)
	}
	var paths []string
	for _, tn := range idx.Tensors {
		paths = append(paths, tn.Name+"="+tn.Path)
	}
	if want := []string{"a=a%", "a/x=a/x", "b=b"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("paths %v, want %v", paths, want)
	}
}

func TestLoadWeightMap(t *testing.T) {
	dir := ldSharded(t)
	for _, src := range []string{dir, filepath.Join(dir, "model.safetensors.index.json")} {
		idx, err := ldLoad(t, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		s1 := filepath.Join(dir, "model-00001-of-00002.safetensors")
		s2 := filepath.Join(dir, "model-00002-of-00002.safetensors")
		if !reflect.DeepEqual(idx.Sources, []string{s1, s2}) || idx.Format != "safetensors" {
			t.Errorf("sources %v format %s", idx.Sources, idx.Format)
		}
		var got []string
		for _, tn := range idx.Tensors {
			got = append(got, fmt.Sprintf("%s:%d", tn.Name, tn.Source))
		}
		want := []string{"lm_head.weight:1", "model.embed.weight:0", "model.layers.0.w:0", "model.layers.1.w:1"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tensors %v, want %v", got, want)
		}
		// The weight map's metadata first, then the shards' new keys.
		if idx.Metadata["format"] != "pt" || idx.Metadata["extra"] != "2" || fmt.Sprint(idx.Metadata["total_size"]) != "36" || len(idx.Metadata) != 3 {
			t.Errorf("metadata %v", idx.Metadata)
		}
		doc, err := idx.Document().JSON()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), `"total_size":36`) {
			t.Errorf("document %s", doc)
		}
	}
	// Given relative to the working directory, the sources are still
	// absolute: another process reads them from elsewhere.
	t.Chdir(filepath.Dir(dir))
	for _, src := range []string{filepath.Base(dir), filepath.Join(filepath.Base(dir), "model-00002-of-00002.safetensors")} {
		idx, err := ldLoad(t, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range idx.Sources {
			if !filepath.IsAbs(s) || filepath.Dir(s) != dir {
				t.Errorf("%s: source %q, want an absolute path in %s", src, s, dir)
			}
		}
	}
}

func TestLoadWeightMapChoice(t *testing.T) {
	// Both a safetensors and a PyTorch weight map: the safetensors one is
	// used (the .bin shards are not even there).
	dir := ldSharded(t)
	ldWrite(t, dir, "pytorch_model.bin.index.json", ldMap(t, nil, map[string]string{"x": "pytorch_model-00001-of-00002.bin"}))
	if _, err := ldLoad(t, dir, nil); err != nil {
		t.Fatal(err)
	}
	// The only *.safetensors.index.json wins over a PyTorch one.
	dir = t.TempDir()
	ldWrite(t, dir, "diffusion_pytorch_model.safetensors.index.json", ldMap(t, nil, map[string]string{"w": "sub/s.safetensors"}))
	ldWrite(t, dir, "diffusion_pytorch_model.bin.index.json", ldMap(t, nil, map[string]string{"w": "missing.bin"}))
	ldWrite(t, dir, "sub/s.safetensors", stBuild(nil, true, stT{Name: "w", DType: "F32", Shape: []int{1}, Bytes: 4}))
	idx, err := ldLoad(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if idx.Sources[0] != filepath.Join(dir, "sub", "s.safetensors") {
		t.Errorf("sources %v", idx.Sources)
	}
	// Two weight maps and no rule to choose.
	dir = t.TempDir()
	ldWrite(t, dir, "a.index.json", ldMap(t, nil, map[string]string{"w": "s.safetensors"}))
	ldWrite(t, dir, "b.index.json", ldMap(t, nil, map[string]string{"w": "s.safetensors"}))
	_, err = ldLoad(t, dir, nil)
	stCheckError(t, err, "holds several weight maps (a.index.json, b.index.json)")
}

func TestLoadWeightMapSymlinks(t *testing.T) {
	// A Hugging Face cache: snapshot files are links into ../../blobs.
	root := t.TempDir()
	blob := ldWrite(t, root, "blobs/1234", stBuild(nil, true, stT{Name: "w", DType: "F32", Shape: []int{1}, Bytes: 4}))
	mapBlob := ldWrite(t, root, "blobs/5678", ldMap(t, nil, map[string]string{"w": "model.safetensors"}))
	snap := filepath.Join(root, "snapshots", "abc")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"model.safetensors": blob, "model.safetensors.index.json": mapBlob} {
		rel, _ := filepath.Rel(snap, target)
		if err := os.Symlink(rel, filepath.Join(snap, link)); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("nowhere", filepath.Join(snap, "dangling"))
	idx, err := ldLoad(t, snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Tensors) != 1 || idx.Sources[0] != filepath.Join(snap, "model.safetensors") {
		t.Errorf("%+v", idx)
	}
	// Without the weight map, the link is found as a checkpoint file.
	os.Remove(filepath.Join(snap, "model.safetensors.index.json"))
	if _, err := ldLoad(t, snap, nil); err != nil {
		t.Fatal(err)
	}
}

func TestLoadWeightMapRefuses(t *testing.T) {
	shard := stBuild(nil, true, stT{Name: "a", DType: "F32", Shape: []int{1}, Bytes: 4}, stT{Name: "b", DType: "F32", Shape: []int{1}, Bytes: 4})
	shard2 := stBuild(nil, true, stT{Name: "c", DType: "U8", Shape: []int{1}, Bytes: 1})
	cases := []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"missing shard", map[string][]byte{
			"m.index.json":   ldMap(t, nil, map[string]string{"a": "s1.safetensors", "b": "s1.safetensors", "c": "gone.safetensors"}),
			"s1.safetensors": shard,
		}, `(shard "gone.safetensors")`},
		{"tensor not in its shard", map[string][]byte{
			"m.index.json":   ldMap(t, nil, map[string]string{"a": "s1.safetensors", "b": "s1.safetensors", "z": "s1.safetensors"}),
			"s1.safetensors": shard,
		}, `the weight map puts this tensor in shard s1.safetensors, which does not hold it (tensor "z")`},
		{"two missing tensors", map[string][]byte{
			"m.index.json":   ldMap(t, nil, map[string]string{"a": "s1.safetensors", "b": "s1.safetensors", "y": "s1.safetensors", "z": "s1.safetensors"}),
			"s1.safetensors": shard,
		}, `(and 1 more tensors) (tensor "y")`},
		{"tensor not in the map", map[string][]byte{
			"m.index.json":   ldMap(t, nil, map[string]string{"a": "s1.safetensors"}),
			"s1.safetensors": shard,
		}, `the shard holds a tensor that the weight map m.index.json does not list (tensor "b")`},
		{"tensor in another shard", map[string][]byte{
			"m.index.json":   ldMap(t, nil, map[string]string{"a": "s1.safetensors", "b": "s1.safetensors", "c": "s1.safetensors", "d": "s2.safetensors"}),
			"s1.safetensors": shard,
			"s2.safetensors": stBuild(nil, true, stT{Name: "c", DType: "U8", Shape: []int{1}, Bytes: 1}, stT{Name: "d", DType: "U8", Shape: []int{1}, Bytes: 1}),
		}, `the weight map m.index.json puts this tensor in shard s1.safetensors (tensor "c")`},
		{"bad shard", map[string][]byte{
			"m.index.json":   ldMap(t, nil, map[string]string{"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}),
			"s1.safetensors": shard,
			"s2.safetensors": shard2[:len(shard2)-1],
		}, `s2.safetensors: safetensors: data_offsets [0,1] run past the end of the data section (0 bytes)`},
		{"shard not a checkpoint", map[string][]byte{
			"m.index.json": ldMap(t, nil, map[string]string{"c": "README.md"}),
			"README.md":    []byte("hello"),
		}, `README.md: not a checkpoint tensorfs knows`},
		{"dot-dot shard", map[string][]byte{"m.index.json": ldMap(t, nil, map[string]string{"a": "../s1.safetensors"})}, `shard "../s1.safetensors" is not a relative path inside the directory`},
		{"inner dot-dot shard", map[string][]byte{"m.index.json": ldMap(t, nil, map[string]string{"a": "x/../../s"})}, `is not a relative path`},
		{"absolute shard", map[string][]byte{"m.index.json": ldMap(t, nil, map[string]string{"a": "/etc/passwd"})}, `shard "/etc/passwd" is not a relative path`},
		{"backslash shard", map[string][]byte{"m.index.json": ldMap(t, nil, map[string]string{"a": `..\s`})}, `is not a relative path`},
		{"dot shard", map[string][]byte{"m.index.json": ldMap(t, nil, map[string]string{"a": "./s"})}, `is not a relative path`},
		{"empty shard", map[string][]byte{"m.index.json": ldMap(t, nil, map[string]string{"a": ""})}, `shard "" is not a relative path`},
		{"NUL shard", map[string][]byte{"m.index.json": ldMap(t, nil, map[string]string{"a": "s\x00"})}, `is not a relative path`},
		{"duplicate tensor in map", map[string][]byte{"m.index.json": []byte(`{"weight_map":{"a":"s","a":"t"}}`)}, `weight map: weight_map: duplicate key "a"`},
		{"duplicate weight_map", map[string][]byte{"m.index.json": []byte(`{"weight_map":{"a":"s"},"weight_map":{}}`)}, `duplicate key "weight_map"`},
		{"no weight_map", map[string][]byte{"m.index.json": []byte(`{"metadata":{}}`)}, `no "weight_map" object`},
		{"empty weight_map", map[string][]byte{"m.index.json": []byte(`{"weight_map":{}}`)}, `lists no tensors`},
		{"weight_map array", map[string][]byte{"m.index.json": []byte(`{"weight_map":[]}`)}, `weight_map: want an object, found an array`},
		{"shard number", map[string][]byte{"m.index.json": []byte(`{"weight_map":{"a":1}}`)}, `weight_map "a": want a string, found a number`},
		{"metadata string", map[string][]byte{"m.index.json": []byte(`{"metadata":"x","weight_map":{"a":"s"}}`)}, `metadata: want an object, found a string`},
		{"invalid JSON", map[string][]byte{"m.index.json": []byte(`{"weight_map":{"a":"s"}`)}, `weight map: JSON ends early`},
		{"trailing JSON", map[string][]byte{"m.index.json": []byte(`{"weight_map":{"a":"s"}} {}`)}, `after the end of the JSON object`},
		{"not UTF-8", map[string][]byte{"m.index.json": []byte("{\"weight_map\":{\"a\xff\":\"s\"}}")}, `weight map: not valid UTF-8 (at byte 17)`},
		{"mixed formats", map[string][]byte{
			"m.index.json":   ldMap(t, nil, map[string]string{"a": "s1.safetensors", "b": "s1.safetensors", "g": "s2.gguf"}),
			"s1.safetensors": shard,
			"s2.gguf":        ldGGUF(-1, -1, ldGT{"g", []uint64{1}}),
		}, `mixes checkpoint formats: shard s1.safetensors is safetensors, shard s2.gguf is gguf`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range c.files {
				ldWrite(t, dir, name, data)
			}
			_, err := ldLoad(t, dir, nil)
			stCheckError(t, err, c.want)
		})
	}
}

// ldHugeFile is a File of a given size with no content: reading it fails
// the test.
type ldHugeFile struct {
	t    *testing.T
	size int64
}

func (h ldHugeFile) ReadAt(p []byte, off int64) (int, error) {
	h.t.Fatalf("read of %d bytes from a file that is over its cap", len(p))
	return 0, nil
}
func (h ldHugeFile) Size() int64  { return h.size }
func (h ldHugeFile) Name() string { return "huge.index.json" }

func TestLoadWeightMapCap(t *testing.T) {
	dir := t.TempDir()
	p := ldWrite(t, dir, "model.safetensors.index.json", []byte("{}"))
	o := newLdOpener()
	o.fake[p] = ldHugeFile{t, index.MaxIndexJSON + 1}
	_, err := ldLoad(t, dir, o)
	stCheckError(t, err, "weight map: 67108865 bytes is over the limit of 67108864")
}

func TestLoadClosesOnError(t *testing.T) {
	// The opener fails on the second shard: the first is closed.
	dir := ldSharded(t)
	o := newLdOpener()
	o.fail[filepath.Join(dir, "model-00002-of-00002.safetensors")] = errors.New("disk on fire")
	_, err := ldLoad(t, dir, o)
	stCheckError(t, err, "cannot open the shard: disk on fire")
	if len(o.opened) < 2 {
		t.Errorf("opened only %v", o.opened)
	}
	// A shard that fails to parse after others were parsed.
	dir = t.TempDir()
	ldWrite(t, dir, "a.safetensors", stBuild(nil, true, stT{Name: "a", DType: "U8", Shape: []int{1}, Bytes: 1}))
	ldWrite(t, dir, "b.safetensors", stBuild(nil, true, stT{Name: "b", DType: "U8", Shape: []int{1}, Bytes: 1}))
	ldWrite(t, dir, "c.safetensors", stRaw(`{"c":{}}`, nil))
	ldWrite(t, dir, "d.txt", []byte("not a checkpoint"))
	o = newLdOpener()
	_, err = ldLoad(t, dir, o)
	stCheckError(t, err, `c.safetensors: safetensors: tensor "c": missing dtype (at byte 9)`)
	// A source that does not exist.
	_, err = ldLoad(t, filepath.Join(dir, "nope"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing source: %v", err)
	}
}

func TestLoadDirectoryWithoutWeightMap(t *testing.T) {
	dir := t.TempDir()
	ldWrite(t, dir, "b.safetensors", stBuild(map[string]string{"format": "pt"}, true, stT{Name: "x.weight", DType: "F32", Shape: []int{2}, Bytes: 8}))
	ldWrite(t, dir, "a.safetensors", stBuild(map[string]string{"format": "pt", "a": "1"}, true, stT{Name: "y.weight", DType: "F32", Shape: []int{1}, Bytes: 4}, stT{Name: "z", DType: "U8", Shape: nil, Bytes: 1}))
	ldWrite(t, dir, "README.md", []byte("# README"))
	ldWrite(t, dir, "config.json", []byte(`{"a": 1}`))
	ldWrite(t, dir, "empty", nil)
	ldWrite(t, dir, "sub/c.safetensors", stBuild(nil, true, stT{Name: "ignored", DType: "F32", Shape: []int{1}, Bytes: 4}))
	idx, err := ldLoad(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")}
	if !reflect.DeepEqual(idx.Sources, want) {
		t.Errorf("sources %v, want %v", idx.Sources, want)
	}
	var got []string
	for _, tn := range idx.Tensors {
		got = append(got, fmt.Sprintf("%s:%d:%d", tn.Name, tn.Source, tn.Offset))
	}
	if len(got) != 3 || !strings.HasPrefix(got[0], "x.weight:1:") || !strings.HasPrefix(got[1], "y.weight:0:") || !strings.HasPrefix(got[2], "z:0:") {
		t.Errorf("tensors %v", got)
	}
	if !reflect.DeepEqual(idx.Metadata, map[string]any{"format": "pt", "a": "1"}) {
		t.Errorf("metadata %v", idx.Metadata)
	}
}

func TestLoadDirectoryRefuses(t *testing.T) {
	cases := []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"empty directory", nil, "no checkpoint in the directory (0 files looked at"},
		{"no checkpoint", map[string][]byte{"README.md": []byte("hi"), "config.json": []byte("{}")}, "no checkpoint in the directory (2 files looked at"},
		{"checkpoints in subdirectories only", map[string][]byte{
			"README.md":                            []byte("hi"),
			"base/model.safetensors":               stBuild(nil, true, stT{Name: "w", DType: "F32", Shape: []int{1}, Bytes: 4}),
			"docs/notes.txt":                       []byte("hi"),
			"sharded/model.safetensors.index.json": []byte("{}"),
			".cache/model.safetensors":             stBuild(nil, true, stT{Name: "w", DType: "F32", Shape: []int{1}, Bytes: 4}),
		}, "no checkpoint in the directory itself (1 file looked at), but in its subdirectories base/, sharded/: open one of them"},
		{"same tensor in two files", map[string][]byte{
			"a.safetensors": stBuild(nil, true, stT{Name: "w", DType: "F32", Shape: []int{1}, Bytes: 4}),
			"b.safetensors": stBuild(nil, true, stT{Name: "w", DType: "F32", Shape: []int{1}, Bytes: 4}, stT{Name: "v", DType: "F32", Shape: []int{1}, Bytes: 4}),
		}, `this tensor is also in`},
		{"mixed formats", map[string][]byte{
			"a.safetensors": stBuild(nil, true, stT{Name: "w", DType: "F32", Shape: []int{1}, Bytes: 4}),
			"b.gguf":        ldGGUF(-1, -1, ldGT{"g", []uint64{1}}),
		}, `mixes checkpoint formats: a.safetensors is safetensors, b.gguf is gguf`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range c.files {
				ldWrite(t, dir, name, data)
			}
			_, err := ldLoad(t, dir, nil)
			stCheckError(t, err, c.want)
		})
	}
}

func TestLoadRealFiles(t *testing.T) {
	for _, p := range stRealFiles(t) {
		idx, err := ldLoad(t, p, nil)
		if err != nil {
			t.Error(err)
			continue
		}
		if _, err := index.ParseDocument(mustJSON(t, idx.Document())); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// The three fluxml files hold the same tensors: as a directory of
	// shards they clash.
	_, err := ldLoad(t, testenv.Path(t, "safetensors/fluxml/non_sharded"), nil)
	stCheckError(t, err, "this tensor is also in")
}

func mustJSON(t *testing.T, d index.Document) []byte {
	t.Helper()
	b, err := d.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzWeightMap(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":36},"weight_map":{"a":"s1.safetensors","b":"sub/s2.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x","b":"/y"},"other":[1,2,{"z":null}]}`))
	f.Add([]byte(`{"weight_map":{"a":"s","a":"t"}}`))
	f.Add([]byte(`{"metadata":null,"weight_map":{"\u00e9":"x\\y"}}  `))
	f.Fuzz(func(t *testing.T, data []byte) {
		wm, err := parseWeightMap("fuzz.index.json", data)
		if err != nil {
			var fe *index.FormatError
			if !errors.As(err, &fe) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("bad error %T %q", err, err)
			}
			return
		}
		if len(wm.tensors) == 0 || len(wm.shards) == 0 {
			t.Fatalf("empty weight map accepted")
		}
		shards := map[string]bool{}
		for i, s := range wm.shards {
			if i > 0 && wm.shards[i-1] >= s {
				t.Fatalf("shards not sorted and distinct: %q", wm.shards)
			}
			for _, c := range strings.Split(s, "/") {
				if c == "" || c == "." || c == ".." || strings.ContainsAny(c, "\\\x00") {
					t.Fatalf("shard %q accepted", s)
				}
			}
			if !filepath.IsLocal(s) || filepath.IsAbs(s) || filepath.Clean(s) != s {
				t.Fatalf("shard %q leaves the directory", s)
			}
			shards[s] = true
		}
		for name, s := range wm.tensors {
			if !shards[s] {
				t.Fatalf("tensor %q in unlisted shard %q", name, s)
			}
		}
	})
}

// ldNPY writes a little-endian float32 .npy file of n elements.
func ldNPY(n int) []byte {
	h := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", n)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	b = append(b, h...)
	return append(b, make([]byte, 4*n)...)
}

func TestLoadDirectoryOfNPY(t *testing.T) {
	if _, err := ParseFile(stFile("probe.npy", ldNPY(1))); err != nil {
		t.Skipf("numpy parser not ready: %v", err)
	}
	dir := t.TempDir()
	ldWrite(t, dir, "weights.npy", ldNPY(3))
	ldWrite(t, dir, "bias.npy", ldNPY(2))
	ldWrite(t, dir, "notes.txt", []byte("x"))
	idx, err := ldLoad(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tn := range idx.Tensors {
		got = append(got, fmt.Sprintf("%s:%s:%v:%d", tn.Name, idx.Sources[tn.Source][len(dir)+1:], tn.Shape, tn.Size))
	}
	if want := []string{"bias:bias.npy:[2]:8", "weights:weights.npy:[3]:12"}; !reflect.DeepEqual(got, want) {
		t.Errorf("tensors %v, want %v", got, want)
	}
	// An .npy beside a safetensors file: two formats.
	ldWrite(t, dir, "model.safetensors", stBuild(nil, true, stT{Name: "w", DType: "F32", Shape: []int{1}, Bytes: 4}))
	_, err = ldLoad(t, dir, nil)
	stCheckError(t, err, "mixes checkpoint formats: bias.npy is numpy, model.safetensors is safetensors")
}

// TestLoadNotesNameTheFile: an .npz with a string member beside its
// arrays loads; the note the parser leaves says which file, and the
// member is in the metadata.
func TestLoadNotesNameTheFile(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, data := range map[string][]byte{"w.npy": ldNPY(2), "format.npy": ldNPYHeader("{'descr': '|S3', 'fortran_order': False, 'shape': (), }", []byte("csr"))} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.npz")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := ldLoad(t, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Tensors) != 1 || idx.Metadata["format"] != "csr" {
		t.Errorf("tensors %v, metadata %v", idx.Tensors, idx.Metadata)
	}
	if len(idx.Notes) != 1 || !strings.HasPrefix(idx.Notes[0], p+": 1 .npz member(s) of no tensor dtype") || !strings.Contains(idx.Notes[0], `"format" (|S3)`) {
		t.Errorf("notes %q", idx.Notes)
	}
}

// ldNPYHeader is a version 1.0 .npy of header h and data.
func ldNPYHeader(h string, data []byte) []byte {
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

// TestLoadPaddle: a .pdparams file loads; a pickle of a dict without
// numpy arrays is not claimed (the unknown-file line, and a directory
// skips it beside the checkpoint).
func TestLoadPaddle(t *testing.T) {
	fixtures := filepath.Join("..", "index", "paddle", "testdata")
	pd, err := os.ReadFile(filepath.Join(fixtures, "big_p2.pdparams"))
	if err != nil {
		t.Fatal(err)
	}
	ints, err := os.ReadFile(filepath.Join(fixtures, "ints_only.pkl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ldWrite(t, dir, "model.pdparams", pd)
	ldWrite(t, dir, "vocab.pkl", ints)
	for _, p := range []string{filepath.Join(dir, "model.pdparams"), dir} {
		idx, err := ldLoad(t, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if idx.Format != "paddle" || len(idx.Tensors) != 9 || len(idx.Members) == 0 {
			t.Errorf("%s: format %q, %d tensors, %d members", p, idx.Format, len(idx.Tensors), len(idx.Members))
		}
	}
	_, err = ldLoad(t, filepath.Join(dir, "vocab.pkl"), nil)
	stCheckError(t, err, "vocab.pkl: not a checkpoint tensorfs knows (want safetensors, PyTorch, GGUF, .npy, .npz, ONNX, HDF5 (Keras) or PaddlePaddle); it is a pickle of a dict without numpy arrays")
}

// TestLoadWeightMapUnserved: a shard's tensor that is listed unserved (a
// safetensors F6_E2M3) is held by its shard: the checkpoint loads with it
// in Unserved and the rest served (was: "the weight map puts this tensor
// in shard ..., which does not hold it").
func TestLoadWeightMapUnserved(t *testing.T) {
	dir := t.TempDir()
	ldWrite(t, dir, "model-00001-of-00002.safetensors", stBuild(nil, true,
		stT{Name: "a.weight", DType: "F32", Shape: []int{2}, Bytes: 8}, stT{Name: "a.f6", DType: "F6_E2M3", Shape: []int{4}, Bytes: 3}))
	ldWrite(t, dir, "model-00002-of-00002.safetensors", stBuild(nil, true, stT{Name: "b.weight", DType: "F16", Shape: []int{2}, Bytes: 4}))
	ldWrite(t, dir, "model.safetensors.index.json", ldMap(t, nil, map[string]string{
		"a.weight": "model-00001-of-00002.safetensors", "a.f6": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}))
	idx, err := ldLoad(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Tensors) != 2 || len(idx.Unserved) != 1 || idx.Unserved[0].Name != "a.f6" || idx.Unserved[0].Type != "F6_E2M3" {
		t.Errorf("tensors %d, unserved %+v", len(idx.Tensors), idx.Unserved)
	}
}
