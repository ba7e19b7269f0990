package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The mount as a model directory (docs/TREE.md, "The mount as a model
// directory"), and each checkpoint file as it is under .files/.

// TestMountModelDirectory mounts a Hugging Face model directory (one
// safetensors file, config.json saying float32, tokenizer and generation
// files, a tensor called config.json) and checks, from a subprocess: the
// top level, .bf16/ and, in a --dtype f16 mount, the top level and
// .native/ are model directories (the files beside the tensors and
// model.safetensors, loaded as a loader loads them, in the tree's dtype);
// config.json says that dtype and keeps every other byte; the clashing
// tensor is at config.json#1; .files/ holds the checkpoint file byte for
// byte; stats.json counts the reads of the export.
func TestMountModelDirectory(t *testing.T) {
	d := t.TempDir()
	w := pattern(4096*4, 3)
	writeSafetensors(t, filepath.Join(d, "model.safetensors"), []stTensor{
		{Name: "model.embed.weight", DType: "F32", Shape: []int64{64, 64}, Data: w},
		{Name: "config.json", DType: "F32", Shape: []int64{4}, Data: pattern(16, 9)},
		{Name: "model.pos", DType: "I64", Shape: []int64{2}, Data: pattern(16, 1)},
	}, map[string]string{"format": "pt"})
	files := map[string]string{
		"config.json":             "{\n  \"model_type\": \"llama\",\n  \"torch_dtype\": \"float32\",\n  \"dtype\": \"float32\",\n  \"hidden_size\": 64\n}\n",
		"generation_config.json":  `{"max_length": 8}`,
		"tokenizer.json":          `{"version": "1.0", "model": {"vocab": {"a": 0}}}`,
		"tokenizer_config.json":   `{"model_max_length": 8}`,
		"special_tokens_map.json": `{"eos_token": "</s>"}`,
		"chat_template.jinja":     "{{ messages }}",
	}
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := mount(t, d)
	m16 := mount(t, d, "--dtype", "f16")
	out := runPy(t, pyExportReader+`
src, m, m16 = sys.argv[1:4]
fails = []
def check(ok, msg):
    if not ok:
        fails.append(msg)
others = sorted(f for f in os.listdir(src) if f != "model.safetensors")
cfg_src = open(os.path.join(src, "config.json")).read()
def stats():
    return json.load(open(os.path.join(m, ".tensorfs", "stats.json")))
before = stats()
exported = {}
for root, view, dt in ((m, "", None), (m, ".bf16", "bfloat16"), (m, ".f32", "float32"), (m16, "", "float16"), (m16, ".native", None)):
    d = os.path.join(root, view)
    names = set(os.listdir(d))
    check(set(others + ["model.safetensors"]) <= names, "%s: lists %s" % (d, sorted(names)))
    for f in others:
        got = open(os.path.join(d, f), "rb").read()
        want = open(os.path.join(src, f), "rb").read()
        if f == "config.json" and dt is not None:
            want = cfg_src.replace('"float32"', '"%s"' % dt).encode()
        check(got == want, "%s/%s: %r, want %r" % (d, f, got, want))
    b = open(os.path.join(d, "model.safetensors"), "rb").read()
    check(b == open(os.path.join(d, ".safetensors", "model.safetensors"), "rb").read(), "%s: model.safetensors is not .safetensors/model.safetensors" % d)
    exported[d] = len(b)
    cfg, loaded = load(d)
    want = {None: torch.float32, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dt]
    check(cfg.get("torch_dtype", "float32") == (dt or "float32"), "%s: config dtype %s" % (d, cfg.get("torch_dtype")))
    check(loaded["model.embed.weight"].dtype == want and list(loaded["model.embed.weight"].shape) == [64, 64], "%s: embed loads as %s" % (d, loaded["model.embed.weight"].dtype))
    check(loaded["model.pos"].dtype == torch.int64, "%s: model.pos is %s" % (d, loaded["model.pos"].dtype))
    check("config.json" in loaded, "%s: the tensor config.json is not in the export" % d)
after = stats()
doc = json.load(open(os.path.join(m, ".tensorfs", "index.json")))
paths = {t["name"]: t["path"] for t in doc["tensors"]}
check(paths.get("config.json") == "config.json#1", "index.json: tensor config.json at %s" % paths.get("config.json"))
check(len(open(os.path.join(m, "config.json#1"), "rb").read()) == 16 and os.path.isfile(os.path.join(m, ".bf16", "config.json#1")), "config.json#1")
check(os.getxattr(os.path.join(m, "config.json#1"), "user.tensorfs.name") == b"config.json", "xattr name of config.json#1")
check(open(os.path.join(m, ".files", "model.safetensors"), "rb").read() == open(os.path.join(src, "model.safetensors"), "rb").read(), ".files/model.safetensors differs from the source")
check(sorted(os.listdir(os.path.join(m, ".files"))) == ["model.safetensors"], ".files lists %s" % os.listdir(os.path.join(m, ".files")))
check(sorted(os.listdir(os.path.join(m, ".npy"))) == [".split", "config.json#1.npy", "model.embed.weight.npy", "model.pos.npy"], ".npy lists %s" % os.listdir(os.path.join(m, ".npy")))
mine = sum(v for k, v in exported.items() if k.startswith(m + "/") or k == m + "/")
check(after["bytes"] - before["bytes"] >= 2 * mine, "stats.json: %d bytes counted for %d read from the exports" % (after["bytes"] - before["bytes"], 2 * mine))
print("\n".join(fails) if fails else "ok")
`, d, m.Dir, m16.Dir)
	if strings.TrimSpace(out) != "ok" {
		t.Fatalf("model directory checks failed:\n%s", out)
	}
	if !strings.Contains(m.Stderr(), `tensors under "config.json" are at "config.json#1"`) {
		t.Errorf("no line for the moved tensor: %s", m.Stderr())
	}
	// The checkpoint file read back through .files/ is the checkpoint.
	checkLsSame(t, filepath.Join(d, "model.safetensors"), m.Path(".files/model.safetensors"), true)
}

// TestFilesGGUF: a GGUF file's mount has the file itself under .files/,
// byte for byte, and tensorfs reads it there as the same checkpoint (as
// llama.cpp would map it).
func TestFilesGGUF(t *testing.T) {
	src := testenv.Path(t, "gguf/quantized/ollama-ggml-q4_k.gguf")
	m := mount(t, src)
	got, err := os.ReadFile(m.Path(".files/ollama-ggml-q4_k.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf(".files/ollama-ggml-q4_k.gguf: %d bytes, differs from the %d-byte file", len(got), len(want))
	}
	checkLsSame(t, src, m.Path(".files/ollama-ggml-q4_k.gguf"), true)
	// Mapped, as llama.cpp maps a model.
	out := runPy(t, `
import hashlib, mmap, sys
with open(sys.argv[1], "rb") as f:
    mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    print(hashlib.sha256(mm[:]).hexdigest())
`, m.Path(".files/ollama-ggml-q4_k.gguf"))
	if strings.TrimSpace(out) != sha256Hex(want) {
		t.Errorf("mmap of .files/ollama-ggml-q4_k.gguf differs from the file")
	}
	if _, err := os.Stat(m.Path("config.json")); err == nil {
		t.Error("a GGUF file's mount has a config.json")
	}
}

// TestMountOverItsSource: mounting a model directory over itself
// (--allow-non-empty) is refused in one line naming the file, before
// anything is mounted: the mount would hide its own checkpoint, and
// index.json's path to it would name the mount's model.safetensors.
func TestMountOverItsSource(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), []stTensor{{Name: "w", DType: "U8", Shape: []int64{8}, Data: pattern(8, 1)}}, nil)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkOneLineError(t, runTensorfs(t, "mount", "--allow-non-empty", dir, dir), 1, "cannot mount at "+dir, "model.safetensors is inside it")
	if mountedAt(dir) {
		t.Fatal("mounted over its own source")
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
