package integration

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The safetensors export (.safetensors/model.safetensors in every tree)
// and `tensorfs convert`, through real mounts read from subprocesses.

// pyExportReader is an independent safetensors reader written for these
// tests (no safetensors package in Debian): it holds a file to the
// format's rules and tensorfs's stronger ones (data 8-byte aligned, each
// tensor naturally aligned) and loads tensors with torch.frombuffer, as a
// loader would.
const pyExportReader = `
import hashlib, json, os, struct, sys
import torch

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "I16": 16, "U16": 16,
        "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}
TORCH = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "F16": torch.float16,
         "BF16": torch.bfloat16, "I32": torch.int32, "F32": torch.float32, "F64": torch.float64, "I64": torch.int64}

def no_dups(pairs):
    d = {}
    for k, v in pairs:
        assert k not in d, "duplicate key %r" % k
        d[k] = v
    return d

def read_st(path):
    with open(path, "rb") as f:
        b = f.read()
    assert os.stat(path).st_size == len(b), "st_size %d, read %d" % (os.stat(path).st_size, len(b))
    (n,) = struct.unpack("<Q", b[:8])
    assert n <= 100_000_000 and 8 + n <= len(b) and (8 + n) % 8 == 0, "header length %d" % n
    h = b[8:8 + n]
    assert h[:1] == b"{" and h.rstrip(b" ").endswith(b"}"), "header framing"
    hdr = json.loads(h.decode("utf-8"), object_pairs_hook=no_dups)
    meta = hdr.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values())
    data, out, spans = b[8 + n:], {}, []
    for name, t in hdr.items():
        assert set(t) == {"dtype", "shape", "data_offsets"}
        s, e = t["data_offsets"]
        ne = 1
        for d in t["shape"]:
            assert isinstance(d, int) and d >= 0
            ne *= d
        bits = BITS[t["dtype"]]
        assert e - s == ne * bits // 8 and s % max(1, bits // 8) == 0, name
        spans.append((s, e))
        out[name] = (t["dtype"], t["shape"], data[s:e])
    pos = 0
    for s, e in sorted(spans):
        assert s == pos, "hole or overlap at %d" % s
        pos = e
    assert pos == len(data), "data ends at %d of %d" % (pos, len(data))
    return meta, out, hashlib.sha256(b).hexdigest()

def load(d):
    """What a loader does with a model directory: config.json, then every tensor."""
    cfg = json.load(open(os.path.join(d, "config.json")))
    meta, ts, _ = read_st(os.path.join(d, "model.safetensors"))
    assert meta.get("format") == "pt"
    return cfg, {k: torch.frombuffer(bytearray(v[2]), dtype=TORCH[v[0]]).reshape(v[1]) if v[2] else
                 torch.zeros(v[1], dtype=TORCH[v[0]]) for k, v in ts.items()}
`

// TestExportHFDirectory mounts a Hugging Face model directory built here
// (pytorch_model.bin with a tied weight, a transposed tensor, bf16, ints,
// bool; config and tokenizer files) twice, and checks every tree's
// .safetensors/: the directory's other files beside model.safetensors
// unchanged, the export valid, every tensor equal to the mount's own file
// in that tree and, loaded as a loader would, to torch's own tensors
// (converted by torch for the views); both mounts byte-identical; convert
// writes the same bytes; ls of the export lists what ls of the source does.
func TestExportHFDirectory(t *testing.T) {
	d := t.TempDir()
	runPy(t, `
import json, os, sys, torch
d = sys.argv[1]
torch.manual_seed(0)
emb = torch.randn(8, 4)
base = torch.randn(4, 6, dtype=torch.float16)
sd = {
    "model.embed.weight": emb,
    "lm_head.weight": emb,                          # tied: the same storage
    "model.layers.0.attn.weight": base.t()[1:5],    # strided, with an offset
    "model.layers.0.attn.bias": torch.randn(4).to(torch.bfloat16),
    "model.pos": torch.arange(6).reshape(1, 6),
    "model.mask": torch.tensor([True, False, True]),
    "model.scale": torch.tensor(0.5, dtype=torch.float64),
}
torch.save(sd, os.path.join(d, "pytorch_model.bin"))
files = {"config.json": {"model_type": "llama", "hidden_size": 4},
         "generation_config.json": {"max_length": 8},
         "tokenizer.json": {"version": "1.0", "model": {"vocab": {"a": 0}}},
         "tokenizer_config.json": {"model_max_length": 8},
         "special_tokens_map.json": {"eos_token": "</s>"}}
for k, v in files.items():
    json.dump(v, open(os.path.join(d, k), "w"))
open(os.path.join(d, "tokenizer.model"), "wb").write(bytes(range(256)))
os.mkdir(os.path.join(d, "sub"))
open(os.path.join(d, "sub", "ignored.txt"), "w").write("x")
`, d)
	m1 := mount(t, d)
	m2 := mount(t, d)
	m3 := mount(t, d, "--dtype", "f16")
	outDir := t.TempDir()
	stored := filepath.Join(outDir, "stored.safetensors")
	bf16 := filepath.Join(outDir, "bf16.safetensors")
	for _, c := range [][]string{{"convert", "--quiet", d, stored}, {"convert", "--quiet", "--dtype", "bf16", d, bf16}} {
		if r := runTensorfs(t, c...); r.code != 0 || r.stderr != "" {
			t.Fatalf("%v: exit %d: %s", c, r.code, r.stderr)
		}
	}
	out := runPy(t, pyExportReader+`
src, m1, m2, m3, stored, bf16 = sys.argv[1:7]
fails = []
def check(ok, msg):
    if not ok:
        fails.append(msg)
doc = json.load(open(os.path.join(m1, ".tensorfs", "index.json")))
others = sorted(f for f in os.listdir(src) if f != "pytorch_model.bin" and os.path.isfile(os.path.join(src, f)))
ref = torch.load(os.path.join(src, "pytorch_model.bin"))
hashes = {}
for view, dt in (("", None), (".f32", torch.float32), (".f16", torch.float16), (".bf16", torch.bfloat16), (".f64", torch.float64)):
    ed = os.path.join(m1, view, ".safetensors")
    check(sorted(os.listdir(ed)) == sorted(others + ["model.safetensors"]), "%s: lists %s" % (ed, sorted(os.listdir(ed))))
    for f in others:
        check(open(os.path.join(ed, f), "rb").read() == open(os.path.join(src, f), "rb").read(), "%s/%s differs from the source's" % (ed, f))
    meta, ts, h = read_st(os.path.join(ed, "model.safetensors"))
    hashes[view] = h
    check(read_st(os.path.join(m2, view, ".safetensors", "model.safetensors"))[2] == h, "%s: the two mounts' exports differ" % view)
    check(set(ts) == {t["name"] for t in doc["tensors"]}, "%s: names %s" % (view, sorted(ts)))
    check(meta.get("tensorfs.source_format") == "pytorch" and meta.get("tensorfs.source_files") == '["pytorch_model.bin"]', "%s: metadata %s" % (view, meta))
    for t in doc["tensors"]:
        p = os.path.join(m1, view, t["path"])
        if not os.path.exists(p):
            p = os.path.join(m1, t["path"])  # not in this view: as stored
        check(ts[t["name"]][2] == open(p, "rb").read(), "%s: %s differs from %s" % (view, t["name"], p))
    cfg, loaded = load(ed)
    check(cfg["model_type"] == "llama", "config")
    for name, want in ref.items():
        if dt is not None and want.is_floating_point():
            want = want.to(dt)
        got = loaded[name]
        check(got.dtype == want.dtype and list(got.shape) == list(want.shape) and torch.equal(got, want),
              "%s: %s loads as %s %s, torch has %s %s" % (view, name, got.dtype, list(got.shape), want.dtype, list(want.shape)))
check(read_st(stored)[2] == hashes[""], "convert differs from .safetensors/model.safetensors")
check(read_st(bf16)[2] == hashes[".bf16"], "convert --dtype bf16 differs from .bf16/.safetensors/model.safetensors")
check(read_st(os.path.join(m3, ".safetensors", "model.safetensors"))[2] == hashes[".f16"], "--dtype f16 mount: top-level export is not the F16 export")
check(read_st(os.path.join(m3, ".native", ".safetensors", "model.safetensors"))[2] == hashes[""], "--dtype f16 mount: .native export is not the stored export")
check(sorted(os.listdir(os.path.join(m3, ".native", ".safetensors"))) == sorted(others + ["model.safetensors"]), ".native/.safetensors listing")
print("\n".join(fails) if fails else "ok")
`, d, m1.Dir, m2.Dir, m3.Dir, stored, bf16)
	if strings.TrimSpace(out) != "ok" {
		t.Fatalf("export checks failed:\n%s", out)
	}
	checkLsSame(t, d, m1.Path(".safetensors/model.safetensors"), true)
}

// checkLsSame compares `tensorfs ls` of a source and of its export: the
// same lines, or with sameDType false the same names and shapes.
func checkLsSame(t *testing.T, src, export string, sameDType bool) {
	t.Helper()
	a, b := runTensorfs(t, "ls", src), runTensorfs(t, "ls", export)
	if a.code != 0 || b.code != 0 {
		t.Fatalf("ls: %s %s", a.stderr, b.stderr)
	}
	if !sameDType {
		cols := regexp.MustCompile(`(?m)^(\S+)\s+\S+\s+(\S+)\s+\S+$`)
		a.stdout, b.stdout = cols.ReplaceAllString(a.stdout, "$1 $2"), cols.ReplaceAllString(b.stdout, "$1 $2")
	}
	if a.stdout != b.stdout {
		t.Errorf("ls %s:\n%s\nls of its export:\n%s", src, a.stdout, b.stdout)
	}
}

// TestExportFormats: for a GGUF quantized file, a NumPy archive, a
// safetensors file and a split of shared test data, the mount's export
// is what convert writes, and ls of it lists the source's tensors
// (quantized ones as F32).
func TestExportFormats(t *testing.T) {
	dir := testenv.Dir(t)
	cases := []struct {
		rel       string
		sameDType bool
	}{
		{"gguf/quantized/ollama-ggml-q4_k.gguf", false},
		{"generated/npz_plain.npz", true},
		{"generated/torch_mixed_zip.pt", true},
		{"safetensors/candle/mel_filters.safetensors", true},
	}
	out := t.TempDir()
	var args []string
	for i, c := range cases {
		src := filepath.Join(dir, c.rel)
		if _, err := os.Stat(src); err != nil {
			testenv.SkipOrFail(t, "missing "+src)
		}
		m := mount(t, src)
		for _, dt := range []string{"", "f16"} {
			o := filepath.Join(out, fmt.Sprintf("%d%s.safetensors", i, dt))
			cmd := []string{"convert", "--quiet", src, o}
			exp := m.Path(".safetensors/model.safetensors")
			if dt != "" {
				cmd = []string{"convert", "--quiet", "--dtype", dt, src, o}
				exp = m.Path("." + dt + "/.safetensors/model.safetensors")
			}
			if r := runTensorfs(t, cmd...); r.code != 0 {
				t.Fatalf("%v: %s", cmd, r.stderr)
			}
			args = append(args, o, exp)
		}
		checkLsSame(t, src, m.Path(".safetensors/model.safetensors"), c.sameDType)
	}
	got := runPy(t, `
import sys
a = sys.argv[1:]
for i in range(0, len(a), 2):
    if open(a[i], "rb").read() != open(a[i + 1], "rb").read():
        print("convert %s differs from %s" % (a[i], a[i + 1]))
`, args...)
	if got != "" {
		t.Error(got)
	}
}

// bigSafetensors writes a sparse safetensors file of one F16 tensor of n
// elements (all zero bytes but the header).
func bigSafetensors(t *testing.T, path string, n int64) {
	t.Helper()
	hdr := fmt.Sprintf(`{"w":{"dtype":"F16","shape":[%d],"data_offsets":[0,%d]}}`, n, 2*n)
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))))
	f.WriteString(hdr)
	if err := f.Truncate(int64(8+len(hdr)) + 2*n); err != nil {
		t.Fatal(err)
	}
}

// TestConvertCLI: an existing OUT is refused without --force and
// replaced with it; OUT may not be a directory; usage errors; an
// interrupted convert leaves nothing in OUT's directory; memory stays
// bounded on a file larger than the bound.
func TestConvertCLI(t *testing.T) {
	src, _ := cliFixture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.safetensors")
	os.WriteFile(out, []byte("keep"), 0o644)
	checkOneLineError(t, runTensorfs(t, "convert", src, out), 1, "already exists")
	if b, _ := os.ReadFile(out); string(b) != "keep" {
		t.Fatalf("OUT changed without --force: %q", b)
	}
	if r := runTensorfs(t, "convert", "--force", "--quiet", src, out); r.code != 0 {
		t.Fatalf("convert --force: %s", r.stderr)
	}
	if b, _ := os.ReadFile(out); len(b) < 8 || string(b) == "keep" {
		t.Fatal("convert --force did not replace OUT")
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
		t.Errorf("OUT mode %v", st.Mode())
	}
	checkOneLineError(t, runTensorfs(t, "convert", src, dir), 1, "is a directory")
	checkOneLineError(t, runTensorfs(t, "convert", src), 2, "usage")
	checkOneLineError(t, runTensorfs(t, "convert", "--dtype", "i8", src, out+"2"), 2, "--dtype")
	checkOneLineError(t, runTensorfs(t, "convert", filepath.Join(dir, "missing"), out+"2"), 1, "missing")
	if _, err := os.Stat(out + "2"); err == nil {
		t.Error("a failed convert left OUT behind")
	}

	// Interrupted: a 1 GiB F16 tensor converted to F64 (4 GiB) is stopped
	// by SIGINT as soon as its temporary file is open.
	big := filepath.Join(t.TempDir(), "big.safetensors")
	bigSafetensors(t, big, 1<<29)
	odir := t.TempDir()
	cmd := exec.Command(tensorfsBinary(t), "convert", "--quiet", "--dtype", "f64", big, filepath.Join(odir, "x.safetensors"))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(cmdTimeout)
	for !hasFileOpenIn(cmd.Process.Pid, odir) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("convert never opened its temporary file")
		}
		select {
		case err := <-done:
			t.Fatalf("convert ended before it was interrupted: %v %s", err, stderr.String())
		case <-time.After(2 * time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := <-done
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("interrupted convert: %v, stderr %q", err, stderr.String())
	}
	if ents, _ := os.ReadDir(odir); len(ents) != 0 {
		t.Errorf("an interrupted convert left %v", ents)
	}

	// Memory: 256 MiB of F16 converted to F32 (512 MiB written).
	bigSafetensors(t, big, 1<<27)
	r := runTensorfs(t, "convert", "--dtype", "f32", big, filepath.Join(odir, "y.safetensors"))
	if r.code != 0 {
		t.Fatalf("convert: %s", r.stderr)
	}
	mm := regexp.MustCompile(`([0-9.]+) MiB resident \(VmHWM\)`).FindStringSubmatch(r.stderr)
	if mm == nil {
		t.Fatalf("no peak memory in %q", r.stderr)
	}
	if v, _ := strconv.ParseFloat(mm[1], 64); v > 256 {
		t.Errorf("convert peaked at %v MiB resident (bound 256)", v)
	}
	if st, err := os.Stat(filepath.Join(odir, "y.safetensors")); err != nil || st.Size() <= 4<<27 || st.Size() > 4<<27+4096 {
		t.Errorf("converted file: %v %v", st, err)
	}
}

// hasFileOpenIn reports whether process pid has a file of dir open (an
// O_TMPFILE shows as "dir/#N (deleted)").
func hasFileOpenIn(pid int, dir string) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, dir+"/") {
			return true
		}
	}
	return false
}

// TestConvertSpecialOut: an OUT that exists and is not a regular file (a
// named pipe, a device such as /dev/null) is refused even with --force,
// in one line, and left as it is: the rename that --force does would
// replace the device node with a regular file.
func TestConvertSpecialOut(t *testing.T) {
	src, _ := cliFixture(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	outs := map[string]os.FileMode{fifo: os.ModeNamedPipe}
	if os.Geteuid() == 0 {
		null := filepath.Join(dir, "null")
		if err := syscall.Mknod(null, syscall.S_IFCHR|0o644, 1<<8|3); err != nil { // /dev/null's major 1, minor 3
			t.Fatal(err)
		}
		outs[null] = os.ModeDevice | os.ModeCharDevice
	}
	for out, mode := range outs {
		checkOneLineError(t, runTensorfs(t, "convert", "--force", "--quiet", src, out), 1, out, "not a regular file")
		if st, err := os.Lstat(out); err != nil || st.Mode().Type() != mode {
			t.Errorf("%s after convert --force: %v %v, want type %v", out, st.Mode(), err, mode)
		}
	}
}

// TestConvertOutDirMissing: an OUT in a directory that does not exist is
// one line naming OUT as given, not the temporary file convert would have
// made beside it.
func TestConvertOutDirMissing(t *testing.T) {
	src, _ := cliFixture(t)
	out := filepath.Join(t.TempDir(), "missing", "out.safetensors")
	r := runTensorfs(t, "convert", "--quiet", src, out)
	checkOneLineError(t, r, 1, out+": ", "no such file or directory")
	if strings.Contains(r.stderr, ".tmp") {
		t.Errorf("the error names the temporary file: %q", r.stderr)
	}
}

// TestExportNothingToConvert: a checkpoint with no tensor to convert (a
// real NumPy file of int32, a directory holding a safetensors shard of
// integers and bool beside config files) or with no tensor at all (a
// vocab-only GGUF from llama.cpp) still has every view: .f32/ .f16/
// .bf16/ .f64/ each hold .safetensors/ with model.safetensors
// byte-identical to `tensorfs convert --dtype DT` and the model
// directory's other files beside it; .npy/ holds one file per tensor; a
// mount with --dtype has the view's export at the top and the stored one
// in .native/. Before, those directories were missing.
func TestExportNothingToConvert(t *testing.T) {
	hf := t.TempDir()
	writeSafetensors(t, filepath.Join(hf, "model.safetensors"), []stTensor{
		{Name: "input_ids", DType: "I64", Shape: []int64{2, 3}, Data: pattern(48, 1)},
		{Name: "model.mask", DType: "BOOL", Shape: []int64{4}, Data: []byte{1, 0, 1, 1}},
		{Name: "model.counts", DType: "U8", Shape: []int64{5}, Data: pattern(5, 2)},
	}, map[string]string{"format": "pt"})
	siblings := map[string]string{"config.json": `{"model_type": "bert"}`, "tokenizer.json": `{"version": "1.0"}`}
	for name, data := range siblings {
		if err := os.WriteFile(filepath.Join(hf, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		src     string
		tensors int
	}{
		{testenv.Path(t, "numpy/npyio/data_int32_2x3_corder.npy"), 1},
		{testenv.Path(t, "gguf/llama.cpp/ggml-vocab-gpt-2.gguf"), 0},
		{hf, 3},
	}
	out := t.TempDir()
	for i, c := range cases {
		if _, err := os.Stat(c.src); err != nil {
			testenv.SkipOrFail(t, "missing "+c.src)
		}
		convert := func(dt string) []byte {
			t.Helper()
			o := filepath.Join(out, fmt.Sprintf("%d%s.safetensors", i, dt))
			cmd := []string{"convert", "--quiet", c.src, o}
			if dt != "" {
				cmd = []string{"convert", "--quiet", "--dtype", dt, c.src, o}
			}
			if r := runTensorfs(t, cmd...); r.code != 0 {
				t.Fatalf("%v: %s", cmd, r.stderr)
			}
			b, err := os.ReadFile(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := testenv.CheckSafetensors(b); err != nil {
				t.Fatalf("%v: %v", cmd, err)
			}
			return b
		}
		want := map[string][]byte{"": convert("")}
		for _, dt := range []string{"f32", "f16", "bf16", "f64"} {
			want[dt] = convert(dt)
		}
		// exports lists the .safetensors/ directories of a mount and the
		// convert output each must equal.
		check := func(m *Mount, exports map[string]string) {
			t.Helper()
			for dir, dt := range exports {
				ents, err := os.ReadDir(m.Path(dir))
				if err != nil {
					t.Errorf("%s: %v", c.src, err)
					continue
				}
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				wantNames := "model.safetensors"
				if c.src == hf {
					wantNames = "config.json,model.safetensors,tokenizer.json"
					for name, data := range siblings {
						if b, err := os.ReadFile(m.Path(dir + "/" + name)); err != nil || string(b) != data {
							t.Errorf("%s: %s/%s = %q, %v", c.src, dir, name, b, err)
						}
					}
				}
				if got := strings.Join(names, ","); got != wantNames {
					t.Errorf("%s: %s/ lists %s, want %s", c.src, dir, got, wantNames)
				}
				b, err := os.ReadFile(m.Path(dir + "/model.safetensors"))
				if err != nil || string(b) != string(want[dt]) {
					t.Errorf("%s: %s/model.safetensors (%d bytes, %v) differs from convert --dtype %q (%d bytes)", c.src, dir, len(b), err, dt, len(want[dt]))
				}
			}
			ents, err := os.ReadDir(m.Path(".npy"))
			files := 0 // .npy/.split/ (tensor-parallel slices) is not a tensor
			for _, e := range ents {
				if !strings.HasPrefix(e.Name(), ".") {
					files++
				}
			}
			if err != nil || files != c.tensors {
				t.Errorf("%s: .npy/ has %d tensor entries, %v", c.src, files, err)
			}
		}
		m := mount(t, c.src)
		check(m, map[string]string{".safetensors": "", ".f32/.safetensors": "f32", ".f16/.safetensors": "f16",
			".bf16/.safetensors": "bf16", ".f64/.safetensors": "f64"})
		m.Unmount()
		m = mount(t, c.src, "--dtype", "f16")
		check(m, map[string]string{".safetensors": "f16", ".native/.safetensors": "", ".f32/.safetensors": "f32",
			".f16/.safetensors": "f16", ".bf16/.safetensors": "bf16", ".f64/.safetensors": "f64"})
		m.Unmount()
	}
}
