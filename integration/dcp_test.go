package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testdata"
)

// dcpCheckPy reads a mount of a distributed checkpoint from another
// process and compares it with EXPECTED.json (what DCP's own reader
// assembles): every tensor file, its .npy, the safetensors export, the
// .f32 view of the 16-bit floats (bf16 widened by shifting, f16 by numpy),
// and .split/0/2/i and .split/1/2/i slices, each against numpy slicing of
// the whole. argv: mount, EXPECTED.json, case.
const dcpCheckPy = `
import hashlib, json, os, struct, sys
mnt, exp, case = sys.argv[1:4]
c = json.load(open(exp))["cases"][case]
sha = lambda b: hashlib.sha256(b).hexdigest()
ES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "bool": 1, "float8_e4m3fn": 1}
st = open(os.path.join(mnt, ".safetensors", "model.safetensors"), "rb").read()
n = struct.unpack("<Q", st[:8])[0]
hdr = json.loads(st[8:8 + n])

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

checked = 0
for t in c["tensors"]:
    name = "/".join(str(p) for p in t["path"])
    raw = open(os.path.join(mnt, name), "rb").read()
    assert sha(raw) == t["sha256"], (name, "file")
    assert json.loads(os.getxattr(os.path.join(mnt, name), "user.tensorfs.shape")) == t["shape"], name
    npy = open(os.path.join(mnt, ".npy", name + ".npy"), "rb").read()
    hl = struct.unpack("<H", npy[8:10])[0]
    if t["dtype"] in ("bfloat16", "float8_e4m3fn"):  # no NumPy dtype: float32
        assert npy[10 + hl:] == open(os.path.join(mnt, ".f32", name), "rb").read(), (name, "npy")
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
print("checked", checked)
`

func TestDCPThroughMount(t *testing.T) {
	needFUSE(t)
	dir := testdata.Path(t, "modern")
	exp := filepath.Join(dir, "EXPECTED.json")
	for _, c := range []struct {
		name    string
		tensors int
	}{{"dcp_single", 13}, {"dcp_threads", 13}, {"dcp_ws2", 17}, {"dcp_ws4", 17}} {
		t.Run(c.name, func(t *testing.T) {
			m := mount(t, filepath.Join(dir, c.name))
			defer m.Unmount()
			out := runPy(t, dcpCheckPy, m.Dir, exp, c.name)
			if want := "checked " + itoa(int64(c.tensors)); !strings.Contains(out, want) {
				t.Fatalf("python: %s, want %q", out, want)
			}
		})
	}
}
