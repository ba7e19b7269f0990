package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing/s3/s3test"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// dcpCheckPy reads mounts of distributed checkpoints from another
// process and compares each with EXPECTED.json (what DCP's own reader
// assembles): every tensor file, its .npy, the safetensors export, the
// .f32 view of the 16-bit floats (bf16 widened by shifting, f16 by numpy),
// and .split/0/2/i and .split/1/2/i slices, each against numpy slicing of
// the whole. argv: EXPECTED.json CASE MOUNT triples; prints "checked CASE
// N" for each.
const dcpCheckPy = `
import hashlib, json, os, struct, sys
sha = lambda b: hashlib.sha256(b).hexdigest()
ES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "bool": 1, "float8_e4m3fn": 1, "float64": 8}

def take(raw, shape, es, dim, lo, hi):
    """Elements whose index along dim is in [lo, hi), row-major."""
    outer = 1
    for d in shape[:dim]:
        outer *= d
    inner = es
    for d in shape[dim + 1:]:
        inner *= d
    step = shape[dim] * inner
    return b"".join(raw[o * step + lo * inner:o * step + hi * inner] for o in range(outer))

def check(exp, case, mnt):
    c = json.load(open(exp))["cases"][case]
    st = open(os.path.join(mnt, ".safetensors", "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", st[:8])[0]
    hdr = json.loads(st[8:8 + n])
    checked = 0
    for t in c["tensors"]:
        key = "/".join(str(p) for p in t["path"])
        name = key.replace("%", "%25")  # the mounted path of a name with '%' (names.go)
        raw = open(os.path.join(mnt, name), "rb").read()
        assert sha(raw) == t["sha256"], (name, "file")
        assert json.loads(os.getxattr(os.path.join(mnt, name), "user.tensorfs.shape")) == t["shape"], name
        npy = open(os.path.join(mnt, ".npy", name + ".npy"), "rb").read()
        hl = struct.unpack("<H", npy[8:10])[0]
        if t["dtype"] in ("bfloat16", "float8_e4m3fn"):  # no NumPy dtype: float32
            assert npy[10 + hl:] == open(os.path.join(mnt, ".f32", name), "rb").read(), (name, "npy")
        else:
            assert sha(npy[10 + hl:]) == t["sha256"], (name, "npy")
        s, e = hdr[key]["data_offsets"]
        assert sha(st[8 + n + s:8 + n + e]) == t["sha256"], (name, "export")
        if t["dtype"] in ("bfloat16", "float16"):
            k = len(raw) // 2
            if t["dtype"] == "bfloat16":
                want = struct.pack("<%dI" % k, *[u << 16 for u in struct.unpack("<%dH" % k, raw)])
            else:
                want = struct.pack("<%df" % k, *struct.unpack("<%de" % k, raw))
            assert open(os.path.join(mnt, ".f32", name), "rb").read() == want, (name, "f32")
        for dim in range(min(2, len(t["shape"]))):
            d = t["shape"][dim]
            if d < 2:
                continue
            for part in range(2):
                p = os.path.join(mnt, ".split", str(dim), "2", str(part), name)
                lo, hi = (0, (d + 1) // 2) if part == 0 else ((d + 1) // 2, d)
                assert open(p, "rb").read() == take(raw, t["shape"], ES[t["dtype"]], dim, lo, hi), (name, "split", dim, part)
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

// TestDCPHostileMount: a DCP whose .distcp file was cut short mounts
// nothing: one line naming the file, exit 1; ls says the same.
func TestDCPHostileMount(t *testing.T) {
	needFUSE(t)
	src := testenv.Path(t, "modern/dcp_ws2")
	dir := t.TempDir()
	for _, f := range []string{".metadata", "__0_0.distcp", "__1_0.distcp"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "__1_0.distcp" {
			data = data[:len(data)/2]
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range [][]string{{"ls", dir}, {"mount", dir, filepath.Join(t.TempDir())}} {
		r := runTensorfs(t, cmd...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "past the file's end") || !strings.Contains(lines[0], filepath.Join(dir, ".metadata")) {
			t.Fatalf("%s: exit %d, stderr %q", cmd[0], r.code, r.stderr)
		}
	}
}

// TestDCPRemoteS3: a DCP under an S3 prefix loads, converts and mounts
// as the local directory does (its .metadata is found by listing).
func TestDCPRemoteS3(t *testing.T) {
	local := testenv.Path(t, "modern/dcp_ws4")
	srv := s3test.Start(t)
	srv.Bucket(t, "ckpt")
	for _, f := range []string{".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"} {
		srv.PutFile(t, "ckpt", "run1/step-100/"+f, filepath.Join(local, f))
	}
	env := srv.Env()
	want := runEnv(t, env, "load", "--quiet", "--sha256", local)
	got := runEnv(t, env, "load", "--quiet", "--sha256", "--part-size", "8KiB", "s3://ckpt/run1/step-100/")
	if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
		t.Fatalf("load --sha256 s3://ckpt/run1/step-100/: exit %d %s\nwant:\n%s\ngot:\n%s", got.code, got.stderr, want.stdout, got.stdout)
	}
	needFUSE(t)
	m := mountEnv(t, env, "s3://ckpt/run1/step-100/", "--part-size", "8KiB")
	lm := mount(t, local)
	for _, rel := range []string{"model/layers.0.feed_forward.w2.weight", "model/tok_embeddings.weight", ".f32/model/layers.0.attention.wo.weight", "model/freqs", ".safetensors/model.safetensors"} {
		w, err := os.ReadFile(lm.Path(rel))
		if err != nil {
			t.Fatal(err)
		}
		g, err := os.ReadFile(m.Path(rel))
		if err != nil || !bytes.Equal(g, w) {
			t.Fatalf("%s: %v, %d bytes; want the local mount's %d", rel, err, len(g), len(w))
		}
	}
}
