package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// modelConfig is a config.json as transformers writes it (dtype keys
// in two spellings, a nested config with its own, odd spacing).
const modelConfig = `{
  "architectures": ["LlamaForCausalLM"],
  "torch_dtype" :  "float32",
  "text_config": {"torch_dtype": "float32"},
  "dtype": "float32",
  "vocab_size": 32
}
`

func modelFilesFor(config string) []ExportFile {
	return []ExportFile{
		{Name: "config.json", Src: &memSource{name: "config.json", data: []byte(config)}},
		{Name: "tokenizer.json", Src: &memSource{name: "tokenizer.json", data: []byte(`{"model": {}}`)}},
		{Name: "generation_config.json", Src: &memSource{data: []byte(`{"do_sample": false}`)}},
		{Name: ".tensorfs", Src: &memSource{data: []byte("a file of the model directory")}},
	}
}

// viewedConfig is modelConfig as a tree in dtype name says it.
func viewedConfig(name string) string {
	s := strings.Replace(modelConfig, `"torch_dtype" :  "float32"`, `"torch_dtype" :  "`+name+`"`, 1)
	return strings.Replace(s, `"dtype": "float32"`, `"dtype": "`+name+`"`, 1)
}

// TestModelDirectory: with a model directory's files, the top level,
// each float view and .native/ are model directories: the files beside
// the tensors and model.safetensors (the tree's export), config.json
// saying the tree's dtype (the top-level dtype keys only, every other
// byte kept); .safetensors/ likewise; .npy/ and a mount without such
// files get none of it.
func TestModelDirectory(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	for _, top := range []dtype.DType{dtype.Invalid, dtype.F16} {
		r := newRoot(t, idx, src, Options{View: top, ExportFiles: modelFilesFor(modelConfig)})
		trees := map[string]dtype.DType{"": top, ".bf16/": dtype.BF16, ".f16/": dtype.F16, ".f32/": dtype.F32, ".f64/": dtype.F64}
		if top != dtype.Invalid {
			trees[".native/"] = dtype.Invalid
		}
		for dir, dt := range trees {
			wantConfig := modelConfig
			if name, ok := torchDType(dt); ok {
				wantConfig = viewedConfig(name)
			}
			x, err := view.NewExport(idx, []backing.Source{src}, dt)
			if err != nil {
				t.Fatal(err)
			}
			export := make([]byte, x.Size())
			x.ReadAt(export, 0)
			for _, d := range []string{dir, dir + ".safetensors/"} {
				for _, name := range []string{"config.json", "tokenizer.json", "generation_config.json", "model.safetensors"} {
					e := r.lookupPath(d + name)
					if e == nil {
						t.Errorf("view %v: no %s%s", top, d, name)
						continue
					}
					got := readEntry(t, r, e, 7)
					switch name {
					case "config.json":
						if string(got) != wantConfig {
							t.Errorf("view %v: %sconfig.json =\n%s\nwant\n%s", top, d, got, wantConfig)
						}
					case "model.safetensors":
						if !bytes.Equal(got, export) {
							t.Errorf("view %v: %smodel.safetensors is not the %v export", top, d, dt)
						}
					case "tokenizer.json":
						if string(got) != `{"model": {}}` {
							t.Errorf("view %v: %s%s = %q", top, d, name, got)
						}
					}
				}
			}
		}
		if e := r.lookupPath(".npy/config.json"); e != nil {
			t.Errorf("view %v: .npy/ has config.json", top)
		}
		// A dot name is in .safetensors/ only, never in the place of
		// tensorfs's own directories.
		if e := r.lookupPath(".tensorfs/index.json"); e == nil {
			t.Errorf("view %v: the model directory's .tensorfs hides tensorfs's", top)
		}
		if e := r.lookupPath(".bf16/.safetensors/.tensorfs"); e == nil || e.isDir() {
			t.Errorf("view %v: .bf16/.safetensors/.tensorfs missing", top)
		}
		// The tensors are where they were.
		if e := r.lookupPath(".f32/model/embed"); e == nil || e.file.kind != kindTensor {
			t.Errorf("view %v: .f32/model/embed missing", top)
		}
	}
	// No model directory: the top level is the tensors only.
	r := newRoot(t, idx, src, Options{})
	for _, p := range []string{"model.safetensors", "config.json", ".bf16/model.safetensors"} {
		if r.lookupPath(p) != nil {
			t.Errorf("no model directory, yet %s", p)
		}
	}
	if !strings.Contains(strings.Join(names(r.lookupPath("")), ","), ".tensorfs,mask,model,position_ids,scale") {
		t.Errorf("top level %v", names(r.lookupPath("")))
	}
}

// TestModelDirectoryBadConfig: a config.json that is not JSON, or too
// large to rewrite, is served unchanged in the converted trees (one log
// line), and costs none of the other files; in a quantized checkpoint's
// converted trees it is left out (a loader would dequantize again).
func TestModelDirectoryBadConfig(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	var logged strings.Builder
	bad := "not json {"
	r := newRoot(t, idx, src, Options{ExportFiles: modelFilesFor(bad), Logger: log.New(&logged, "", 0)})
	for _, p := range []string{"config.json", ".bf16/config.json", ".bf16/.safetensors/config.json"} {
		if e := r.lookupPath(p); e == nil || string(readEntry(t, r, e, 4096)) != bad {
			t.Errorf("%s: not served unchanged", p)
		}
	}
	if r.lookupPath(".bf16/tokenizer.json") == nil {
		t.Error(".bf16/tokenizer.json missing")
	}
	if n := strings.Count(logged.String(), "config.json served unchanged in the BF16 trees"); n != 1 {
		t.Errorf("%d log lines for BF16:\n%s", n, logged.String())
	}
	// Too large: not read at all.
	huge := &sizedSource{size: maxConfigJSON + 1}
	files := []ExportFile{{Name: "config.json", Src: huge}}
	r = newRoot(t, idx, src, Options{ExportFiles: files})
	if e := r.lookupPath(".f16/config.json"); e == nil || e.file.size != maxConfigJSON+1 || huge.reads != 0 {
		t.Errorf("a %d-byte config.json: %v, %d reads at mount", huge.size, e, huge.reads)
	}
	// Quantized: left out of the converted trees only.
	q := *idx
	q.Quantization = &index.Quantization{Scheme: "fp8-block"}
	r = newRoot(t, &q, src, Options{ExportFiles: modelFilesFor(bad), Logger: quietLogger()})
	if r.lookupPath(".bf16/config.json") != nil || r.lookupPath(".bf16/.safetensors/config.json") != nil || r.lookupPath("config.json") == nil {
		t.Error("a quantized checkpoint's unreadable config.json: want it in the stored tree only")
	}
}

// sizedSource is a source of size bytes that counts its reads.
type sizedSource struct {
	size  int64
	reads int
}

func (s *sizedSource) ReadAt(p []byte, off int64) (int, error) { s.reads++; return len(p), nil }
func (s *sizedSource) Size() int64                             { return s.size }
func (s *sizedSource) Name() string                            { return "sized" }
func (s *sizedSource) Close() error                            { return nil }

// TestModelDirectoryClash: a tensor whose top-level component is a model
// directory file's name moves to NAME#N, the first N free, in every
// tree and in index.json; the caller's index is not changed.
func TestModelDirectoryClash(t *testing.T) {
	specs := []spec{
		{"config.json", dtype.F32, []int64{2}},
		{"config.json#1", dtype.F32, []int64{3}},
		{"model.safetensors/w", dtype.F16, []int64{4}},
		{"tok", dtype.F32, []int64{1}},
	}
	idx, src := fixture(t, specs)
	r := newRoot(t, idx, src, Options{ExportFiles: modelFilesFor(modelConfig)})
	want := map[string]string{ // name -> path
		"config.json":         "config.json#2",
		"config.json#1":       "config.json#1",
		"model.safetensors/w": "model.safetensors#1/w",
		"tok":                 "tok",
	}
	for i := range idx.Tensors {
		if idx.Tensors[i].Path != idx.Tensors[i].Name {
			t.Errorf("the caller's index changed: %q at %q", idx.Tensors[i].Name, idx.Tensors[i].Path)
		}
	}
	doc := parseIndex(t, r)
	for _, d := range doc.Tensors {
		if want[d.Name] != d.Path {
			t.Errorf("index.json: %q at %q, want %q", d.Name, d.Path, want[d.Name])
		}
	}
	for name, p := range want {
		for _, dir := range []string{"", ".f32/"} {
			e := r.lookupPath(dir + p)
			if e == nil || e.file.t == nil || e.file.t.Name != name {
				t.Errorf("%s%s is not tensor %q", dir, p, name)
			}
		}
	}
	if e := r.lookupPath("config.json"); e == nil || e.file.kind != kindExport {
		t.Error("config.json is not the model directory's")
	}
	if e := r.lookupPath("model.safetensors"); e == nil || e.isDir() {
		t.Error("model.safetensors is not the export")
	}
}

// TestModelDirectoryClashExtra: an extra directory's rendered files (the
// .cuda/index.json of a --gpu mount) see each tensor at its path in the
// tree, NAME#N for one moved there, not the index's path.
func TestModelDirectoryClashExtra(t *testing.T) {
	specs := []spec{
		{"config.json", dtype.F32, []int64{2}},
		{"model.safetensors/w", dtype.F16, []int64{4}},
		{"tok", dtype.F32, []int64{1}},
	}
	idx, src := fixture(t, specs)
	render := func(path func(string) string) (map[string][]byte, error) {
		var b strings.Builder
		for _, s := range specs {
			fmt.Fprintf(&b, "%s=%s\n", s.name, path(s.name))
		}
		fmt.Fprintf(&b, "nothing=%s\n", path("nothing"))
		return map[string][]byte{"index.json": []byte(b.String())}, nil
	}
	extra := []ExtraDir{{Name: ".cuda", Files: map[string][]byte{"other": []byte("x")}, Render: render}}
	r := newRoot(t, idx, src, Options{ExportFiles: modelFilesFor(modelConfig), Extra: extra})
	want := "config.json=config.json#1\nmodel.safetensors/w=model.safetensors#1/w\ntok=tok\nnothing=nothing\n"
	if got := readPath(t, r, ".cuda/index.json"); got != want {
		t.Errorf(".cuda/index.json:\n%s\nwant\n%s", got, want)
	}
	if got := readPath(t, r, ".cuda/other"); got != "x" {
		t.Errorf(".cuda/other: %q", got)
	}
}

// TestWithValue: only the top-level members called key change, every
// other byte is kept.
func TestWithValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"dtype":"float32"}`, `{"dtype":"bfloat16"}`},
		{`{ "a" : 1 ,"dtype" :	null }`, `{ "a" : 1 ,"dtype" :	"bfloat16" }`},
		{`{"x": {"dtype": "float32"}, "y": 2}`, `{"x": {"dtype": "float32"}, "y": 2}`},
		{`{"dtype": 1, "dtype": "f"}`, `{"dtype": "bfloat16", "dtype": "bfloat16"}`},
		{`{"dtype": [1, {"a": 2}]}`, `{"dtype": "bfloat16"}`},
		{"{}\n", "{}\n"},
	} {
		got, err := withValue([]byte(tc.in), "dtype", []byte(`"bfloat16"`))
		if err != nil || string(got) != tc.want {
			t.Errorf("withValue(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[1]`, `{"dtype": `, `{"a": 1`, ``} {
		if _, err := withValue([]byte(bad), "dtype", []byte(`"x"`)); err == nil {
			t.Errorf("withValue(%q): no error", bad)
		}
	}
}

// TestFilesDir: .files/ holds each checkpoint file as it is, read as a
// stored tensor that is the whole file (spliced from a file with a
// descriptor), with user.tensorfs.source only; a name taken twice gets
// NAME#1; members of a file are not there.
func TestFilesDir(t *testing.T) {
	r, _ := spliceFixture(t)
	whole, err := os.ReadFile(r.idx.Sources[0])
	if err != nil {
		t.Fatal(err)
	}
	e := r.lookupPath(".files/model.safetensors")
	if e == nil || !e.file.whole() || e.file.size != int64(len(whole)) {
		t.Fatalf(".files/model.safetensors: %+v", e)
	}
	if got := readEntry(t, r, e, 1<<20); !bytes.Equal(got, whole) {
		t.Error(".files/model.safetensors differs from the checkpoint file")
	}
	res, errno := r.read(e, make([]byte, 4096), 8192)
	if _, ok := res.(interface{ Seekable() (uintptr, int64, int) }); errno != 0 || !ok {
		t.Errorf("read of a checkpoint file with a descriptor: %T %v, want it spliced", res, errno)
	}
	if res != nil {
		res.Done()
	}
	if x := r.xattrs(e); len(x) != 1 || x[0] != [2]string{xattrSource, r.idx.Sources[0]} {
		t.Errorf("xattrs %v", x)
	}

	// Two files of one name, and a member.
	a := &memSource{name: "/a/model.gguf", data: []byte("first")}
	b := &memSource{name: "/b/model.gguf", data: []byte("second!")}
	idx := &index.Index{Format: "gguf", Sources: []string{"/a/model.gguf", "https://h/x/model.gguf?download=1", ""},
		Members: []index.Member{{Source: 2, File: 0, Name: "m"}}}
	r2, err := NewRoot(idx, []backing.Source{a, b, a}, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(r2.lookupPath(filesDir)), ","); got != "model.gguf,model.gguf#1" {
		t.Errorf(".files/: %s", got)
	}
	if got := string(readEntry(t, r2, r2.lookupPath(".files/model.gguf#1"), 3)); got != "second!" {
		t.Errorf(".files/model.gguf#1 = %q", got)
	}
}

func TestSourceBase(t *testing.T) {
	for in, want := range map[string]string{
		"/x/y/model.gguf": "model.gguf",
		"s3://bucket/dir/model-00001-of-00002.safetensors":   "model-00001-of-00002.safetensors",
		"https://huggingface.co/o/r/resolve/main/m.gguf?x=y": "m.gguf",
		"relative.bin": "relative.bin",
	} {
		if got := sourceBase(in); got != want {
			t.Errorf("sourceBase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestModelDirectoryMounted reads a model directory mount from a
// subprocess: the checkpoint file as it is from .files/, the export and
// config.json at the top level, and stats.json counts the reads of
// .files/ and of the export (not counted before); no FLUSH reaches the
// server on close (FOPEN_NOFLUSH), so that a process exiting with a file
// of a stopped server's mount open cannot hang in fuse_flush.
func TestModelDirectoryMounted(t *testing.T) {
	idx, mem := fixture(t, []spec{{"w", dtype.F32, []int64{300000}}})
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, mem.data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx.Sources = []string{path}
	src, err := backing.Open(path, backing.Options{Mode: backing.Mmap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	// Passthrough (as root) would leave .files/ to the kernel: no reads
	// to count.
	r := newRoot(t, idx, src, Options{ExportFiles: modelFilesFor(modelConfig), NoPassthrough: true})
	export := readEntry(t, r, r.lookupPath(".safetensors/model.safetensors"), 1<<20)
	dir := mountForTest(t, r)
	out := py(t, `
import hashlib, json, os, sys
m = sys.argv[1]
def stats():
    return json.load(open(os.path.join(m, '.tensorfs', 'stats.json')))
res = {'before': stats()}
res['file'] = hashlib.sha256(open(os.path.join(m, '.files', 'model.safetensors'), 'rb').read()).hexdigest()
res['after_file'] = stats()
res['export'] = hashlib.sha256(open(os.path.join(m, 'model.safetensors'), 'rb').read()).hexdigest()
res['after_export'] = stats()
res['config'] = open(os.path.join(m, '.bf16', 'config.json')).read()
res['top'] = sorted(os.listdir(m))
print(json.dumps(res))
`, dir)
	var res struct {
		Before      Stats    `json:"before"`
		AfterFile   Stats    `json:"after_file"`
		AfterExport Stats    `json:"after_export"`
		File        string   `json:"file"`
		Export      string   `json:"export"`
		Config      string   `json:"config"`
		Top         []string `json:"top"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.File != sha(mem.data) {
		t.Error(".files/model.safetensors read through the mount differs from the file")
	}
	if res.Export != sha(export) {
		t.Error("model.safetensors read through the mount differs from the export")
	}
	if got := res.AfterFile.Bytes - res.Before.Bytes; got != uint64(len(mem.data)) {
		t.Errorf("stats.json counted %d bytes for .files/model.safetensors, want %d", got, len(mem.data))
	}
	if got := res.AfterExport.Bytes - res.AfterFile.Bytes; got != uint64(len(export)) || res.AfterExport.Reads <= res.AfterFile.Reads {
		t.Errorf("stats.json counted %d bytes (%d reads) for the export, want %d", got, res.AfterExport.Reads-res.AfterFile.Reads, len(export))
	}
	if res.Config != viewedConfig("bfloat16") {
		t.Errorf(".bf16/config.json = %s", res.Config)
	}
	if got := strings.Join(res.Top, " "); !strings.Contains(got, "config.json generation_config.json model.safetensors tokenizer.json w") {
		t.Errorf("top level %s", got)
	}
	// None with FOPEN_NOFLUSH (Linux 5.16+); an older kernel sends one,
	// answered ENOSYS, and then none.
	if n := r.stats.flushes.Load(); n > 1 {
		t.Errorf("%d FLUSH requests: want none (FOPEN_NOFLUSH), or one (ENOSYS) on an old kernel", n)
	}
}

// TestMountRefusesSourceInside: a tree read from a file under its own
// mount point (--allow-non-empty over the model's directory) is refused
// before anything is mounted, naming the file; a link into it counts,
// and a file beside the mount point does not.
func TestMountRefusesSourceInside(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "m")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(mnt, "model.safetensors")
	link := filepath.Join(dir, "link.safetensors")
	os.WriteFile(inside, make([]byte, 64), 0o644)
	os.Symlink(inside, link)
	for _, tc := range []struct {
		source string
		files  []ExportFile
	}{
		{inside, nil},
		{link, nil},
		{filepath.Join(dir, "beside.safetensors"), []ExportFile{{Name: "config.json", Src: &memSource{name: filepath.Join(mnt, "config.json")}}}},
	} {
		idx := &index.Index{Format: "safetensors", Sources: []string{tc.source}}
		r := newRoot(t, idx, &memSource{name: tc.source, data: make([]byte, 64)}, Options{ExportFiles: tc.files})
		server, err := Mount(mnt, r, MountOptions{Logger: quietLogger()})
		if err == nil {
			server.Unmount()
			t.Fatalf("%s: mounted", tc.source)
		}
		if !strings.Contains(err.Error(), "is inside it") || !strings.Contains(err.Error(), mnt) {
			t.Errorf("%s: %v", tc.source, err)
		}
	}
	if err := newRoot(t, &index.Index{Format: "safetensors", Sources: []string{filepath.Join(dir, "x")}}, &memSource{data: make([]byte, 8)}, Options{}).checkOutside(mnt); err != nil {
		t.Errorf("a file beside the mount point: %v", err)
	}
}
