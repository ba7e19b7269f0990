package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
	"golang.org/x/sys/unix"
)

// The rows of TestFormats (formats_table_test.go), one builder per
// format.

// fmtSafetensors: every real safetensors file of the shared test data,
// and a Hugging Face sharded directory written here (a weight map, two
// shards, a config.json beside them), each mounted and checked against
// an independent Python reader (pySafetensorsCheck); and modern/'s file
// (load and cat against EXPECTED.json: fmtModern).
func fmtSafetensors(t *testing.T, tmp string) fmtSpec {
	files := safetensorsFiles(t, testenv.Path(t, "safetensors"))
	if len(files) == 0 {
		testenv.SkipOrFail(t, "no safetensors files in the shared test data")
	}
	var srcs []fmtSrc
	for _, f := range files {
		srcs = append(srcs, fmtSrc{path: f, mount: &fmtMount{hook: func(t *testing.T, m *Mount) {
			runPy(t, pySafetensorsCheck, m.Dir, "-", f)
		}}})
	}

	dir := filepath.Join(tmp, "sharded")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shard1 := filepath.Join(dir, "model-00001-of-00002.safetensors")
	shard2 := filepath.Join(dir, "model-00002-of-00002.safetensors")
	writeSafetensors(t, shard1, []stTensor{
		{Name: "model.embed_tokens.weight", DType: "F32", Shape: []int64{16, 4}, Data: pattern(256, 1)},
		{Name: "model.layers.0.mlp.weight", DType: "BF16", Shape: []int64{4, 8}, Data: pattern(64, 2)},
	}, map[string]string{"format": "pt"})
	writeSafetensors(t, shard2, []stTensor{
		{Name: "model.layers.1.mlp.weight", DType: "BF16", Shape: []int64{4, 8}, Data: pattern(64, 3)},
		{Name: "lm_head.weight", DType: "F16", Shape: []int64{16, 4}, Data: pattern(128, 4)},
	}, map[string]string{"format": "pt"})
	wm := map[string]any{
		"metadata": map[string]any{"total_size": 512},
		"weight_map": map[string]string{
			"model.embed_tokens.weight": filepath.Base(shard1),
			"model.layers.0.mlp.weight": filepath.Base(shard1),
			"model.layers.1.mlp.weight": filepath.Base(shard2),
			"lm_head.weight":            filepath.Base(shard2),
		},
	}
	data, _ := json.Marshal(wm)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": ["Toy"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srcs = append(srcs, fmtSrc{path: dir, mount: &fmtMount{hook: func(t *testing.T, m *Mount) {
		runPy(t, pySafetensorsCheck, m.Dir, `{"total_size": 512, "format": "pt"}`, shard1, shard2)
	}}})
	return fmtSpec{srcs: append(srcs, fmtModern(t, "safetensors", nil)...)}
}

// fxSources turns a reference script's expectations into TestFormats
// checkpoints: every file in all must be checked through some source;
// each "refuse:" source is refused by `ls` in one line naming it; each
// "ok" source gives the reference's digests through `load --sha256` and
// is mounted and read by fxReadScript; those under made (the files the
// test wrote) also through `load --sha256 --dtype f32` (the reference's
// F32 conversion where a tensor has one) and `cat` of the first tensor.
// It returns the sources and how many are refused.
func fxSources(t *testing.T, e *fxExpect, made string, all []string) (srcs []fmtSrc, refused int) {
	t.Helper()
	for _, f := range all {
		src, ok := e.Covers[f]
		if !ok {
			t.Errorf("%s: not checked", f)
			continue
		}
		if _, ok := e.Files[src]; !ok {
			t.Errorf("%s: checked through %s, which has no expectation", f, src)
		}
	}
	var names []string
	for s := range e.Files {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		exp := e.Files[s].Expect
		if frag, ok := strings.CutPrefix(exp, "refuse:"); ok {
			srcs = append(srcs, fmtSrc{path: s, refuse: []string{s + ": ", frag}})
			refused++
			continue
		}
		if exp != "ok" {
			t.Fatalf("%s: expectation %q", s, exp)
		}
		want, f32 := map[string]string{}, map[string]string{}
		for n, tn := range e.Files[s].Tensors {
			want[n], f32[n] = tn.SHA, tn.SHA
			if v := tn.Views["f32"]; v != nil {
				f32[n] = *v
			}
		}
		src := fmtSrc{path: s, loads: []fmtLoad{{want: want}}, mount: &fmtMount{args: []string{s}}}
		if strings.HasPrefix(s, made+string(filepath.Separator)) {
			src.loads = append(src.loads, fmtLoad{flags: []string{"--dtype", "f32"}, want: f32})
			if len(want) > 0 {
				first := slices.Sorted(func(yield func(string) bool) {
					for n := range want {
						if !yield(n) {
							return
						}
					}
				})[0]
				src.cat = map[string]string{first: want[first]}
			}
		}
		srcs = append(srcs, src)
	}
	return srcs, refused
}

// fmtPyTorch: every PyTorch file of the shared test data (gopickle's grid
// of dtypes and protocols in zip and legacy form, mounted as one tree;
// candle's, mlverse's libtorch-written file, tch-rs's TorchScript
// archives), the generated fixtures and files written here with torch
// (views, tied weights, training checkpoints, whole modules, protocols
// 1-5 in zip and legacy form, a Python 2 pickle, every dtype, a bare
// tensor and storage, a sharded .bin checkpoint, a big-endian archive),
// against torch itself (fxTorchScript); torch 2.6's files of modern/
// (load and cat against EXPECTED.json). Malicious and unsupported files
// are refused with one line, and nothing of theirs runs: the extra
// checks a malicious pickle mounts nothing and cannot be cat or loaded.
func fmtPyTorch(t *testing.T, tmp string) fmtSpec {
	py := testenv.Python(t, "torch", "numpy")
	dir := testenv.Dir(t)
	inputs, all := fxSharedInputs(t, dir, "pytorch", "gopickle", "torch_*.pt", 100, "PyTorch")
	ref := filepath.Join(tmp, "expect.json")
	mustRun(t, py, append([]string{"-c", fxTorchScript, tmp, ref}, inputs...)...)
	e := fxReadExpect(t, ref)
	if e.Pwned {
		t.Fatal("the malicious fixture's payload ran in Python (generator bug)")
	}
	if n := len(e.Files[filepath.Join(tmp, "gopickle")].Tensors); n != 100 {
		t.Errorf("gopickle grid: %d tensors, want 100", n)
	}
	srcs, refused := fxSources(t, e, tmp, all)
	srcs = append(srcs, fmtModern(t, "torch", map[string]string{
		"torch26_module.pt:emb/weight": "_modules/emb/_parameters/weight",
		"torch26_module.pt:fc/bias":    "_modules/fc/_parameters/bias",
		"torch26_module.pt:fc/weight":  "_modules/fc/_parameters/weight",
		"torch26_module.pt:running":    "_buffers/running",
	})...)
	if refused < 7 {
		t.Errorf("only %d files refused: the fixtures did not exercise refusals", refused)
	}
	t.Logf("%d sources, %d refused", len(srcs), refused)
	return fmtSpec{srcs: srcs, script: fxReadScript, pre: []string{ref},
		report: func(t *testing.T, out string) { t.Logf("%s", out) },
		extra: func(t *testing.T) {
			evil := filepath.Join(tmp, "evil.pt")
			mnt := filepath.Join(t.TempDir(), "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			checkOneLineError(t, runTensorfs(t, "mount", evil, mnt), 1, evil+": refused global posix.system (at byte ")
			if mountedAt(mnt) {
				t.Errorf("%s is mounted", mnt)
			}
			checkOneLineError(t, runTensorfs(t, "cat", evil, "x"), 1, evil+": refused global posix.system")
			checkOneLineError(t, runTensorfs(t, "load", evil), 1, evil+": refused global posix.system")
			if _, err := os.Stat(filepath.Join(tmp, "PWNED")); err == nil {
				t.Fatal("a malicious pickle's payload ran")
			}
		}}
}

// fmtNumPy: every NumPy file of the shared test data (npyio's grid,
// mounted as one tree; numpy's own files, candle's, tch-rs's), the
// generated ones and files written here with numpy (formats 1.0, 2.0 and
// 3.0, C and Fortran order, big-endian, 0-d, empty, a Python 2 header,
// NaN and Inf, .npz with nested and positional names, np.savez_compressed
// files of all of those and a zip64 one), against numpy itself
// (fxNumpyScript); numpy 2.2's files of modern/ (load and cat against
// EXPECTED.json). Object, structured and string .npy files, and .npz
// files of no numeric member, are refused with one line; such members
// beside arrays are in the metadata, the arrays served.
func fmtNumPy(t *testing.T, tmp string) fmtSpec {
	py := testenv.Python(t, "numpy")
	dir := testenv.Dir(t)
	inputs, all := fxSharedInputs(t, dir, "numpy", "npyio", "np*.np[yz]", 50, "NumPy")
	ref := filepath.Join(tmp, "expect.json")
	mustRun(t, py, append([]string{"-c", fxNumpyScript, tmp, ref}, inputs...)...)
	e := fxReadExpect(t, ref)
	if n := len(e.Files[filepath.Join(tmp, "npyio")].Tensors); n < 80 {
		t.Errorf("npyio grid: %d arrays served, want at least 80", n)
	}
	srcs, refused := fxSources(t, e, tmp, all)
	srcs = append(srcs, fmtModern(t, "numpy", nil)...)
	if refused < 10 {
		t.Errorf("only %d files refused: the fixtures did not exercise refusals", refused)
	}
	t.Logf("%d sources, %d refused", len(srcs), refused)
	return fmtSpec{srcs: srcs, script: fxReadScript, pre: []string{ref},
		report: func(t *testing.T, out string) { t.Logf("%s", out) }}
}

// fmtTorchNumpyP2: numpy arrays saved with torch.save's default pickle
// protocol 2 (bytes as a Latin-1 str, UTF-8 in the pickle) and arrays in
// a deflated data.pkl, byte-identical with torch.load through ls, cat,
// load, the Go client (the extra) and a mount read by numpy in another
// process; a 48 MiB array read through a mount with --inflate-mem 4MiB is
// decoded into a cache file, the server's memory staying far below it. A
// str whose code point is above U+00FF refuses the file in one line
// naming the key and the byte.
func fmtTorchNumpyP2(t *testing.T, tmp string) fmtSpec {
	testenv.Python(t, "torch", "numpy")
	var ref map[string]map[string][]json.RawMessage
	if err := json.Unmarshal([]byte(runPy(t, testenv.TorchNumpyProtocol2Script, tmp, strconv.Itoa(48<<20))), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref) != 6 {
		t.Fatalf("python made %d files", len(ref))
	}
	shaOf := func(r []json.RawMessage) string {
		var s string
		json.Unmarshal(r[2], &s)
		return s
	}
	mounted := map[string]bool{"p2_zip.pt": true, "p2_legacy.pt": true, "np2_p2_zip.pt": true, "p2_deflated.pt": true}
	var srcs []fmtSrc
	for _, src := range slices.Sorted(func(yield func(string) bool) {
		for s := range ref {
			if !yield(s) {
				return
			}
		}
	}) {
		tensors := ref[src]
		want := map[string]string{}
		for n, r := range tensors {
			want[n] = shaOf(r)
		}
		s := fmtSrc{path: src, loads: []fmtLoad{{flags: []string{"--quiet"}, want: want}}}
		first := slices.Min(slices.Collect(func(yield func(string) bool) {
			for n := range want {
				if !yield(n) {
					return
				}
			}
		}))
		if _, ok := tensors["np/f32"]; ok {
			first = "np/f32"
			s.lsMatch = []string{regexp.QuoteMeta("np/f32          F32    [7,5]")}
		}
		s.cat = map[string]string{first: want[first]}
		if base := filepath.Base(src); mounted[base] {
			s.mount = &fmtMount{flags: []string{"--inflate-mem", "4MiB", "--cache-dir", filepath.Join(tmp, "cache-"+base)},
				hook: func(t *testing.T, m *Mount) { fmtTorchNumpyP2Mounted(t, m, base, tensors, shaOf) }}
			if err := os.Mkdir(filepath.Join(tmp, "cache-"+base), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		srcs = append(srcs, s)
	}
	return fmtSpec{srcs: srcs, extra: func(t *testing.T) {
		// The Go client, in this process.
		for _, s := range srcs {
			base := filepath.Base(s.path)
			c, err := client.Open(s.path)
			if err != nil {
				t.Fatalf("client %s: %v", base, err)
			}
			for n, sum := range s.loads[0].want {
				r, err := c.OpenTensor(n, 0)
				if err != nil {
					t.Errorf("client %s %s: %v", base, n, err)
					continue
				}
				b, err := io.ReadAll(r)
				r.Close()
				if err != nil || npzSHA(b) != sum {
					t.Errorf("client %s %s: %v, bytes differ from torch.load", base, n, err)
				}
			}
			c.Close()
		}
		// A code point above U+00FF in an array's str: one line naming
		// the key and the byte (Python's unpickler fails there too). The
		// file is not one of the mounted ones.
		bad := filepath.Join(tmp, "np2_p2_legacy.pt")
		b, err := os.ReadFile(bad)
		if err != nil {
			t.Fatal(err)
		}
		at := bytes.IndexFunc(b, func(r rune) bool { return r >= 0x80 && r < 0x100 })
		if at < 0 {
			t.Fatal("no non-ASCII Latin-1 character in the file")
		}
		b[at], b[at+1] = 0xc4, 0x80
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		checkOneLineError(t, runTensorfs(t, "ls", bad), 1, bad+`: numpy array: _codecs.encode(str, "latin1") of a str with code point U+0100, which is not Latin-1 (Python's unpickler fails on it too) (tensor "a", at byte `+strconv.Itoa(at)+")")
	}}
}

// fmtTorchNumpyP2Mounted reads a mount of a protocol-2 file with numpy
// (tnReadScript) and checks np/f32's xattrs (decoded: no source/offset)
// and, for p2_zip.pt, the server's peak memory.
func fmtTorchNumpyP2Mounted(t *testing.T, m *Mount, f string, ref map[string][]json.RawMessage, shaOf func([]json.RawMessage) string) {
	var got map[string][3]string
	if err := json.Unmarshal([]byte(runPy(t, tnReadScript, m.Dir)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ref) {
		t.Errorf("%s: %d tensors through the mount, want %d", f, len(got), len(ref))
	}
	for n, r := range ref {
		var dt string
		json.Unmarshal(r[0], &dt)
		if g := got[n]; g[0] != shaOf(r) || g[1] != shaOf(r) || g[2] != dt {
			t.Errorf("%s: %s through the mount: %v, want %s %s", f, n, g, shaOf(r), dt)
		}
	}
	if _, ok := ref["np/f32"]; ok {
		xs := make([]byte, 4096)
		n, err := unix.Listxattr(m.Path("np/f32"), xs)
		if err != nil || strings.Contains(string(xs[:max(n, 0)]), "user.tensorfs.source") {
			t.Errorf("%s: xattrs of np/f32: %q %v, want no source/offset", f, xs[:max(n, 0)], err)
		}
		v := make([]byte, 64)
		if n, err := unix.Getxattr(m.Path("np/f32"), "user.tensorfs.shape", v); err != nil || string(v[:n]) != "[7,5]" {
			t.Errorf("%s: shape xattr %q %v", f, v[:max(n, 0)], err)
		}
	}
	if f == "p2_zip.pt" {
		// 48 MiB decoded into a file in --cache-dir: the server's peak
		// memory stays far below its baseline plus the array.
		if hwm := procStatusKB(t, m.cmd.Process.Pid, "VmHWM"); hwm > 40<<10 {
			t.Errorf("server peak RSS %d KiB, want under 40 MiB (the array is 48 MiB)", hwm)
		} else {
			t.Logf("server peak RSS %d KiB reading a 48 MiB protocol-2 array with --inflate-mem 4MiB", hwm)
		}
	}
}

// fmtGGUF: the ggml-quantized files (gguf/quantized: raw blocks, xattrs
// and dequantized views against ggml's own .f32ref, reads at any offset;
// `load --dtype f32`, `cat` of the raw blocks, `ls`'s ggml dtype and
// row-major shape), llama.cpp's vocab files (no tensors, tens of
// thousands of array entries: every key/value), the negative files
// (refused by mount, one line), the file of every ggml type (gguf/types:
// the 25 types ggml's quantizer makes, against ggml's to_float; .split/
// parts of whole blocks and of rows, the safetensors export, `load
// --dtype f32` against types.json, and, the extra, `convert --dtype
// f16`), and a quantized model split here into three llama.cpp-style
// parts, mounted as the directory and as one part (either is the whole
// model as one tree, each tensor from its part). Mounts are read by
// fxGGUFScript, one report per mount.
func fmtGGUF(t *testing.T, tmp string) fmtSpec {
	testenv.Python(t, "numpy")
	dir := testenv.Dir(t)
	quant, _ := filepath.Glob(filepath.Join(dir, "gguf", "quantized", "*.gguf"))
	vocab, _ := filepath.Glob(filepath.Join(dir, "gguf", "llama.cpp", "*.gguf"))
	negative, _ := filepath.Glob(filepath.Join(dir, "gguf", "negative", "*.gguf"))
	if len(quant) < 12 || len(vocab) < 4 || len(negative) < 2 {
		testenv.SkipOrFail(t, "expected the shared GGUF test files under "+dir)
	}
	typesSrc := filepath.Join(testenv.Path(t, "gguf/types"), "types.gguf")
	typesRef := strings.TrimSuffix(typesSrc, ".gguf") + ".f32ref"
	if _, err := os.Stat(typesRef); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}

	var srcs []fmtSrc
	var checks []func(t *testing.T, r fxGGUFReport) // one per mount, in order
	const blk = "blk.0.ffn_up.weight"
	for _, q := range quant {
		kind := fxGGUFKind(q)
		f32, raw, size := fxGGUFDigests(t, q, blk)
		srcs = append(srcs, fmtSrc{path: q,
			loads:   []fmtLoad{{flags: []string{"--dtype", "f32"}, want: f32}},
			cat:     map[string]string{blk: raw},
			lsMatch: []string{`(?m)^` + regexp.QuoteMeta(blk) + ` +` + kind + ` +\[3,256\] +` + itoa(size) + `$`},
			mount:   &fmtMount{args: []string{q + ".f32ref", kind}}})
		checks = append(checks, func(t *testing.T, r fxGGUFReport) {
			if r.Tensors < 3 || r.Checks == 0 { // output_norm and the two blk tensors
				t.Errorf("%s: %d tensors, %d keys, %d checks", q, r.Tensors, r.Keys, r.Checks)
			}
		})
	}
	for _, v := range vocab {
		srcs = append(srcs, fmtSrc{path: v, mount: &fmtMount{args: []string{"-", "-"}}})
		checks = append(checks, func(t *testing.T, r fxGGUFReport) {
			if r.Keys < 16 {
				t.Errorf("%s: %d tensors, %d keys, %d checks", v, r.Tensors, r.Keys, r.Checks)
			}
		})
	}
	for _, n := range negative {
		srcs = append(srcs, fmtSrc{path: n, refuse: []string{n + ": gguf: "}, refuseBy: "mount"})
	}

	// The file of every ggml type.
	var doc struct {
		Tensors []struct {
			Name      string `json:"name"`
			SHA256F32 string `json:"sha256_f32"`
		} `json:"tensors"`
	}
	typesJSON := strings.TrimSuffix(typesSrc, ".gguf") + ".json"
	js, err := os.ReadFile(typesJSON)
	if err != nil || json.Unmarshal(js, &doc) != nil || len(doc.Tensors) != 25 {
		t.Fatalf("types.json: %v", err)
	}
	typesF32 := map[string]string{}
	for _, tn := range doc.Tensors {
		typesF32[tn.Name] = tn.SHA256F32
	}
	srcs = append(srcs, fmtSrc{path: typesSrc,
		loads: []fmtLoad{{flags: []string{"--dtype", "f32", "--quiet"}, want: typesF32}},
		mount: &fmtMount{args: []string{typesRef, "*"}, hook: func(t *testing.T, m *Mount) {
			if out := runPy(t, fxGGUFTypesScript, m.Dir, typesRef); strings.TrimSpace(out) != "ok 25" {
				t.Errorf("through the mount:\n%s", out)
			}
		}}})
	checks = append(checks, func(t *testing.T, r fxGGUFReport) {
		if r.Tensors != 25 || r.Checks < 25*4 {
			t.Errorf("%s: %d tensors, %d checks; want the 25 types", typesSrc, r.Tensors, r.Checks)
		}
	})

	// A model split into three parts, mounted as the directory and as
	// its second part.
	q4k := testenv.Path(t, "gguf/quantized/ollama-ggml-q4_k.gguf")
	splitDir, parts, total := fxGGUFSplit(t, q4k, filepath.Join(tmp, "split"))
	for _, p := range []string{splitDir, parts[1]} {
		srcs = append(srcs, fmtSrc{path: p, mount: &fmtMount{args: []string{q4k + ".f32ref", "Q4_K"}}})
		checks = append(checks, func(t *testing.T, r fxGGUFReport) {
			if len(r.Sources) != 3 || r.Tensors != total || r.Keys != 5 {
				t.Errorf("%s: sources %v, %d tensors, %d keys; want the 3 parts, %d tensors, 5 keys", p, r.Sources, r.Tensors, r.Keys, total)
				return
			}
			for i, s := range r.Sources {
				if filepath.Base(s) != filepath.Base(parts[i]) {
					t.Errorf("%s: sources %v, want the parts in order", p, r.Sources)
				}
			}
		})
	}

	return fmtSpec{srcs: srcs, script: fxGGUFScript,
		report: func(t *testing.T, out string) {
			reports := fxGGUFReports(t, out)
			if len(reports) != len(checks) {
				t.Fatalf("%d reports for %d mounts", len(reports), len(checks))
			}
			for i, r := range reports {
				checks[i](t, r)
			}
		},
		extra: func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "f16.safetensors")
			mustRun(t, tensorfsBinary(t), "convert", "--dtype", "f16", "--quiet", typesSrc, dst)
			if out := runPy(t, fxGGUFTypesF16Script, dst, typesRef, typesJSON); strings.TrimSpace(out) != "ok" {
				t.Errorf("tensorfs convert --dtype f16: these differ from ggml's rounded to F16: %s", out)
			}
		}}
}

// fxGGUFDigests parses the GGUF file at path and returns the sha256 of
// ggml's dequantization (path.f32ref, tensors in file order) of every
// tensor by name, and the sha256 and size of tensor blk's raw blocks.
func fxGGUFDigests(t *testing.T, path, blk string) (f32 map[string]string, raw string, size int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile(path + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := formats.ParseFile(fxMemFile{bytes.NewReader(data), path})
	if err != nil {
		t.Fatal(err)
	}
	ts := append([]index.Tensor(nil), idx.Tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
	f32 = map[string]string{}
	var pos int64
	for _, tn := range ts {
		n := 4 * tn.NumElements()
		if pos+n > int64(len(ref)) {
			t.Fatalf("%s: .f32ref is too short", path)
		}
		f32[tn.Name] = npzSHA(ref[pos : pos+n])
		pos += n
		if tn.Name == blk {
			raw, size = npzSHA(data[tn.Offset:tn.Offset+tn.Size]), tn.Size
		}
	}
	if raw == "" {
		t.Fatalf("%s: no %s", path, blk)
	}
	return f32, raw, size
}

// fxGGUFSplit splits the GGUF file at src into three llama.cpp-style
// parts in dir (the first tensor, the middle ones, the last) and returns
// dir, the parts in order and the number of tensors.
func fxGGUFSplit(t *testing.T, src, dir string) (string, []string, int) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	idx, err := formats.ParseFile(fxMemFile{bytes.NewReader(data), src})
	if err != nil {
		t.Fatal(err)
	}
	ts := append([]index.Tensor(nil), idx.Tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
	if len(ts) < 3 {
		t.Fatalf("%s: %d tensors", src, len(ts))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var parts []string
	cuts := []int{0, 1, len(ts) - 1, len(ts)}
	for no := 0; no < 3; no++ {
		p := filepath.Join(dir, "model-0000"+string(rune('1'+no))+"-of-00003.gguf")
		fxGGUFPart(t, p, no, 3, len(ts), ts[cuts[no]:cuts[no+1]], data)
		parts = append(parts, p)
	}
	return dir, parts, len(ts)
}

// fxGGUFTypesScript checks a mount of gguf/types/types.gguf: for each
// tensor, the .split/ parts of its raw blocks (columns in two, whole
// blocks; rows in three), a .f32/.split/ part against ggml's
// dequantization, and the safetensors export (F32, ggml's values).
// argv: mount, types.f32ref. Prints "ok N" or what differs.
const fxGGUFTypesScript = `
import os, sys, json, struct
import numpy as np
m, ref = sys.argv[1], sys.argv[2]
r = np.fromfile(ref, "<f4")
doc = json.load(open(os.path.join(m, ".tensorfs", "index.json")))
ts = sorted(doc["tensors"], key=lambda t: t["offset"])
st = open(os.path.join(m, ".safetensors", "model.safetensors"), "rb").read()
n = struct.unpack("<Q", st[:8])[0]
hdr = json.loads(st[8:8 + n])
bad, pos = [], 0
for t in ts:
    rows, cols = t["shape"]
    k = rows * cols
    rt = r[pos:pos + k].reshape(rows, cols)
    pos += k
    raw = open(os.path.join(m, t["path"]), "rb").read()
    rb = len(raw) // rows
    # raw blocks: columns split in two (whole blocks), rows in three
    half = open(os.path.join(m, ".split", "1", "2", "1", t["path"]), "rb").read()
    if half != b"".join(raw[i * rb + rb // 2:(i + 1) * rb] for i in range(rows)):
        bad.append("%s: .split/1/2/1 is not the rows' second halves" % t["name"])
    if open(os.path.join(m, ".split", "0", "3", "1", t["path"]), "rb").read() != raw[rb:2 * rb]:
        bad.append("%s: .split/0/3/1 is not row 1" % t["name"])
    f = open(os.path.join(m, ".f32", ".split", "1", "3", "2", t["path"]), "rb").read()
    if f != np.ascontiguousarray(rt[:, cols - cols // 3:]).tobytes():
        bad.append("%s: .f32/.split/1/3/2 differs from ggml's" % t["name"])
    h = hdr.get(t["name"])
    if h is None or h["dtype"] != "F32" or h["shape"] != t["shape"] or \
            st[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]] != rt.tobytes():
        bad.append("%s: safetensors export %s differs from ggml's" % (t["name"], h))
print("\n".join(bad) or "ok %d" % len(ts))
`

// fxGGUFTypesF16Script checks `tensorfs convert --dtype f16` of
// types.gguf: every tensor F16, ggml's dequantization rounded. argv: the
// converted file, types.f32ref, types.json. Prints "ok" or the tensors
// that differ.
const fxGGUFTypesF16Script = `
import sys, json, struct
import numpy as np
st, ref, meta = open(sys.argv[1], "rb").read(), np.fromfile(sys.argv[2], "<f4"), json.load(open(sys.argv[3]))
n = struct.unpack("<Q", st[:8])[0]
hdr, bad, pos = json.loads(st[8:8 + n]), [], 0
for t in meta["tensors"]:
    k = t["shape"][0] * t["shape"][1]
    h = hdr[t["name"]]
    if h["dtype"] != "F16" or st[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]] != ref[pos:pos + k].astype("<f2").tobytes():
        bad.append(t["name"])
    pos += k
print(" ".join(bad) or "ok")
`

// fmtDCPModern are the DCP cases of modern/EXPECTED.json (torch 2.6's
// dcp.save: one rank, threads, 2 and 4 ranks) with their tensor counts.
var fmtDCPModern = map[string]int{"dcp_single": 13, "dcp_threads": 13, "dcp_ws2": 17, "dcp_ws4": 17}

// formats2Pending are the formats2 DCP/HF cases tensorfs does not read
// yet, each with what its refusal says: the row checks the refusal is
// one line until the case is read, then the entry goes.
var formats2Pending = map[string]string{}

// fmtDCP: distributed checkpoints, as torch 2.6 writes them (modern/) and
// as torch 2.14 writes them in each layout (formats2/: zstd items,
// safetensors .distcp, the Hugging Face storage writer sharded,
// consolidated and single), against DCP's own reader (EXPECTED.json):
// `load --sha256` (every read path; formats2 without --io direct),
// `convert`, `cat` (formats2: every tensor; modern: one tiled along dim
// 1), and the mount (dcpCheckPy: every tensor file, .npy, the
// safetensors export, .f32 and .split; formats2: index.json lists a tiled
// tensor's chunks).
func fmtDCP(t *testing.T, tmp string) fmtSpec {
	modern := testenv.Path(t, "modern")
	mexpPath := filepath.Join(modern, "EXPECTED.json")
	if _, err := os.Stat(mexpPath); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	mexp := fmtReadExpected(t, mexpPath)
	if got := mexp.casesOf("dcp"); !slices.Equal(got, slices.Sorted(func(yield func(string) bool) {
		for c := range fmtDCPModern {
			if !yield(c) {
				return
			}
		}
	})) {
		t.Fatalf("DCP cases of %s: %v, want those of fmtDCPModern", mexpPath, got)
	}
	var srcs []fmtSrc
	for _, name := range mexp.casesOf("dcp") {
		want := mexp.digests(name)
		if len(want) != fmtDCPModern[name] {
			t.Fatalf("%s: %d tensors in %s, want %d", name, len(want), mexpPath, fmtDCPModern[name])
		}
		s := fmtSrc{path: filepath.Join(modern, name), loads: fmtLoads(want, nil, fmtReadPaths...), convert: want,
			mount: &fmtMount{args: []string{mexpPath, name}, want: "checked " + name + " " + itoa(int64(len(want)))}}
		if name == "dcp_ws4" {
			tn := "model/layers.0.attention.wo.weight"
			s.cat = map[string]string{tn: want[tn]}
		}
		srcs = append(srcs, s)
	}

	f2 := testenv.Path(t, "formats2")
	fexpPath := filepath.Join(f2, "EXPECTED.json")
	if _, err := os.Stat(fexpPath); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	fexp := fmtReadExpected(t, fexpPath)
	cases := fexp.casesOf("dcp", "hf")
	if len(cases) < 10 {
		t.Fatalf("%d DCP/HF cases in %s, want 10", len(cases), fexpPath)
	}
	for _, name := range cases {
		src := filepath.Join(f2, name)
		if why, ok := formats2Pending[name]; ok {
			srcs = append(srcs, fmtSrc{path: src, refuse: []string{why}, refuseBy: "load"})
			continue
		}
		want := fexp.digests(name)
		srcs = append(srcs, fmtSrc{path: src,
			loads:   fmtLoads(want, nil, nil, []string{"--io", "mmap"}, []string{"--parallel", "1", "--chunk", "4KiB"}),
			convert: want, cat: want,
			mount: &fmtMount{args: []string{fexpPath, name}, want: "checked " + name + " " + itoa(int64(len(want))),
				hook: func(t *testing.T, m *Mount) { fmtDCPChunks(t, m, name, src) }}})
	}
	return fmtSpec{srcs: srcs, script: dcpCheckPy}
}

// fmtDCPChunks checks index.json lists a tiled tensor's chunks (the
// formats2 cases of more than one rank tile some tensors; the others
// none).
func fmtDCPChunks(t *testing.T, m *Mount, name, src string) {
	js, err := os.ReadFile(m.Path(".tensorfs/index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tensors []struct {
			Name   string
			Chunks []struct {
				Offsets, Shape []int64
				Source         string
			}
		}
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	tiled := 0
	for _, dt := range doc.Tensors {
		if len(dt.Chunks) > 0 {
			tiled++
			if len(dt.Chunks) < 2 || !strings.HasPrefix(dt.Chunks[0].Source, src) {
				t.Errorf("%s: index.json: %s: chunks %+v", name, dt.Name, dt.Chunks)
			}
		}
	}
	if multi := strings.Contains(name, "ws") || name == "hf_sharded_ws2"; multi != (tiled > 0) && name != "hf_consolidated_ws2" {
		t.Errorf("%s: index.json: %d tiled tensors with chunks listed", name, tiled)
	}
}

// fmtFormats2 is the row of one kind of formats2 cases (onnx: onnx 1.20's
// own external-data writer in four layouts; h5: h5py in Keras 3's layout,
// contiguous and gzip-chunked), against the writer's own reader
// (EXPECTED.json): `ls`, `load --sha256` (every read path), `convert`,
// `cat` of every tensor, and the mount (f2CheckPy: every view).
func fmtFormats2(t *testing.T, kind string) fmtSpec {
	dir := testenv.Path(t, "formats2")
	expPath := filepath.Join(dir, "EXPECTED.json")
	if _, err := os.Stat(expPath); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	e := fmtReadExpected(t, expPath)
	cases := e.casesOf(kind)
	if len(cases) == 0 {
		t.Fatalf("no case of kind %s in %s", kind, expPath)
	}
	var srcs []fmtSrc
	for _, name := range cases {
		want := e.digests(name)
		srcs = append(srcs, fmtSrc{path: filepath.Join(dir, e.Cases[name].Source), ls: len(want),
			loads:   fmtLoads(want, []string{"--quiet"}, fmtReadPaths...),
			convert: want, cat: want,
			mount: &fmtMount{args: []string{expPath, name}, want: "checked " + name + " " + itoa(int64(len(want)))}})
	}
	return fmtSpec{srcs: srcs, script: f2CheckPy}
}

// fmtModern lists the cases of modern/EXPECTED.json of the given kind
// (files torch 2.6, numpy 2.2 and safetensors wrote, with digests from
// their own readers) as checkpoints whose `load --sha256` and `cat` of
// each tensor give those digests; rename maps the writer's name of a
// tensor to tensorfs's where they differ (a whole nn.Module pickled is
// served under its attribute paths, _modules/.../_parameters/...).
func fmtModern(t *testing.T, kind string, rename map[string]string) []fmtSrc {
	t.Helper()
	dir := testenv.Path(t, "modern")
	path := filepath.Join(dir, "EXPECTED.json")
	if _, err := os.Stat(path); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	e := fmtReadExpected(t, path)
	cases := e.casesOf(kind)
	if len(cases) == 0 {
		t.Fatalf("no case of kind %s in %s", kind, path)
	}
	var srcs []fmtSrc
	for _, c := range cases {
		want := map[string]string{}
		for n, sum := range e.digests(c) {
			if r, ok := rename[c+":"+n]; ok {
				n = r
			}
			want[n] = sum
		}
		srcs = append(srcs, fmtSrc{path: filepath.Join(dir, c), loads: []fmtLoad{{flags: []string{"--quiet"}, want: want}}, cat: want})
	}
	return srcs
}

// f2CheckPy reads mounts from another process and compares every view of
// every tensor with EXPECTED.json: the tensor file (and its shape
// xattr), its .npy (payload; bfloat16, which NumPy lacks, is float32
// there: compared with .f32), the safetensors export, the .f32 view of
// 16-bit floats (bf16 widened by shifting, f16 by struct's 'e'), and
// .split/0/2/i halves along dim 0. Paths come from the mount's own
// .tensorfs/index.json. argv: EXPECTED.json CASE MOUNT triples; prints
// "checked CASE N" for each.
const f2CheckPy = `
import hashlib, json, os, struct, sys
sha = lambda b: hashlib.sha256(b).hexdigest()
ES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
      "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1}
def check(exp, case, mnt):
    c = json.load(open(exp))["cases"][case]
    paths = {t["name"]: t["path"] for t in json.load(open(os.path.join(mnt, ".tensorfs", "index.json")))["tensors"]}
    st = open(os.path.join(mnt, ".safetensors", "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", st[:8])[0]
    hdr = json.loads(st[8:8 + n])
    checked = 0
    for t in c["tensors"]:
        name, path = t["name"], paths[t["name"]]
        raw = open(os.path.join(mnt, path), "rb").read()
        assert sha(raw) == t["sha256"], (name, "file")
        assert json.loads(os.getxattr(os.path.join(mnt, path), "user.tensorfs.shape")) == t["shape"], name
        npy = open(os.path.join(mnt, ".npy", path + ".npy"), "rb").read()
        hl = struct.unpack("<H", npy[8:10])[0]
        if t["dtype"] == "bfloat16":
            assert npy[10 + hl:] == open(os.path.join(mnt, ".f32", path), "rb").read(), (name, "npy")
        else:
            assert sha(npy[10 + hl:]) == t["sha256"], (name, "npy")
        s, e = hdr[name]["data_offsets"]
        assert sha(st[8 + n + s:8 + n + e]) == t["sha256"], (name, "export")
        if t["dtype"] in ("bfloat16", "float16"):
            k = len(raw) // 2
            if t["dtype"] == "bfloat16":
                want = struct.pack("<%dI" % k, *[u << 16 for u in struct.unpack("<%dH" % k, raw)])
            else:
                want = struct.pack("<%df" % k, *struct.unpack("<%de" % k, raw))
            assert open(os.path.join(mnt, ".f32", path), "rb").read() == want, (name, "f32")
        if t["shape"] and t["shape"][0] >= 2:
            d = t["shape"][0]
            row = len(raw) // d
            for part in range(2):
                lo, hi = (0, (d + 1) // 2) if part == 0 else ((d + 1) // 2, d)
                got = open(os.path.join(mnt, ".split", "0", "2", str(part), path), "rb").read()
                assert got == raw[lo * row:hi * row], (name, "split", part)
        checked += 1
    return checked
args, fail = sys.argv[1:], []
for i in range(0, len(args), 3):
    exp, case, mnt = args[i:i + 3]
    try:
        print("checked", case, check(exp, case, mnt))
    except AssertionError as e:
        fail.append("%s: %s" % (case, e))
if fail:
    sys.exit("\n".join(fail))
`
