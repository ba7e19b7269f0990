package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The reference scripts and mount checkers of TestFormats's pytorch,
// numpy and gguf rows (formats_rows_test.go): the PyTorch and NumPy
// references come from torch and numpy themselves, run over the shared
// third-party files, the generated fixtures and files the scripts write;
// GGUF's from ggml's own dequantization (.f32ref). fxReadScript and
// fxGGUFScript read the mounts from Python subprocesses: every tensor's
// bytes, xattrs, converted views and .npy view. Also here: the tests of
// mount memory (TestMountMemoryFlat) and of unknown ggml type codes.
//
// To keep the number of mounts (and CI time) small, the two grids of
// one-array files (gopickle's and npyio's) are mounted as one directory
// each (symbolic links to their files: a directory of checkpoint files is
// served as one tree, each bare tensor under its file's name), and up to
// fxBatch servers run at once, checked by one reader process.

// fxBatch is how many servers run at once while one reader checks them.
const fxBatch = 12

// fxSharedInputs lists the shared test files of one format: all of
// dir/sub (at least atLeast, or the test data is missing) plus
// dir/generated/genGlob, and the Python script's inputs, which name the
// grid directory dir/sub/grid once ("grid:DIR") instead of file by file.
func fxSharedInputs(t *testing.T, dir, sub, grid, genGlob string, atLeast int, kind string) (inputs, all []string) {
	t.Helper()
	all = fxFiles(t, filepath.Join(dir, sub))
	if len(all) < atLeast {
		testenv.SkipOrFail(t, "expected the shared "+kind+" test files under "+dir)
	}
	gridDir := filepath.Join(dir, sub, grid)
	inputs = []string{"grid:" + gridDir}
	for _, f := range all {
		if filepath.Dir(f) != gridDir {
			inputs = append(inputs, f)
		}
	}
	gen, _ := filepath.Glob(filepath.Join(dir, "generated", genGlob))
	return append(inputs, gen...), append(all, gen...)
}

// fxFiles returns every regular file under dir, sorted.
func fxFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// fxExpect is what a reference script wrote: per source (a file or a
// directory to mount) "ok" with the tensors it must serve, or
// "refuse:<fragment>"; and for every input file, the source it is
// checked through.
type fxExpect struct {
	Files map[string]struct {
		Expect  string `json:"expect"`
		Tensors map[string]struct {
			SHA   string             `json:"sha"`
			Views map[string]*string `json:"views"`
		} `json:"tensors"`
	} `json:"files"`
	Covers map[string]string `json:"covers"`
	Pwned  bool              `json:"pwned"`
}

func fxReadExpect(t *testing.T, path string) *fxExpect {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var e fxExpect
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &e
}

// fxSource is a checkpoint to mount and the reader's arguments for it
// (the mount point is appended to them).
type fxSource struct {
	path string
	args []string
}

// fxCheckMounts mounts every source, fxBatch at a time, and runs script
// (with pre, then each source's args and mount point, as arguments) over
// each batch; the script exits non-zero on any mismatch. It returns the
// scripts' output.
func fxCheckMounts(t *testing.T, script string, pre []string, srcs []fxSource) string {
	t.Helper()
	var out strings.Builder
	for len(srcs) > 0 {
		n := min(fxBatch, len(srcs))
		batch := srcs[:n]
		srcs = srcs[n:]
		args := append([]string(nil), pre...)
		var ms []*Mount
		for _, s := range batch { // start them all, then wait: they come up together
			ms = append(ms, startMount(t, s.path))
		}
		for i, m := range ms {
			if err := m.waitReady(); err != nil {
				t.Fatal(err)
			}
			args = append(append(args, batch[i].args...), m.Dir)
		}
		out.WriteString(runPy(t, script, args...))
		for _, m := range ms {
			m.Unmount()
		}
	}
	return out.String()
}

// fxReadScript checks mounts against the expectations of a reference
// script. argv: EXPECT.json, then SOURCE MOUNTPOINT pairs. For every
// tensor the reference lists (and no other): the file's bytes and size,
// its xattrs, the index.json entry, the bytes at user.tensorfs.source /
// offset, the converted views (present exactly for float tensors, equal
// to the reference conversion where it gives one) and the .npy view
// (loaded with numpy, memory-mapped). The stored tree must hold exactly
// the index's paths. Prints how many tensors it checked.
const fxReadScript = `
import os, sys, json, hashlib
import numpy as np
exp = json.load(open(sys.argv[1]))["files"]
args = sys.argv[2:]
fail = []
n = 0
H = lambda b: hashlib.sha256(b).hexdigest()
def read(p):
    with open(p, "rb") as f:
        return f.read()
def xattrs(p):
    return {k: os.getxattr(p, k).decode("utf-8", "surrogateescape") for k in os.listxattr(p)}
for i in range(0, len(args), 2):
    src, mnt = args[i], args[i + 1]
    e = exp[src]
    def bad(msg):
        fail.append("%s: %s" % (src, msg))
    doc = json.loads(read(os.path.join(mnt, ".tensorfs", "index.json")))
    if doc["format"] != e["format"]:
        bad("format %r, want %r" % (doc["format"], e["format"]))
    got = {t["name"]: t for t in doc["tensors"]}
    want = e["tensors"]
    if set(got) != set(want):
        bad("tensors missing %s, unexpected %s" % (sorted(set(want) - set(got))[:8], sorted(set(got) - set(want))[:8]))
    tree = []
    for dp, dns, fns in os.walk(mnt):
        if dp == mnt:
            dns[:] = [d for d in dns if not d.startswith(".")]
        tree += [os.path.relpath(os.path.join(dp, f), mnt) for f in fns]
    if sorted(tree) != sorted(t["path"] for t in doc["tensors"]):
        bad("the stored tree is not the index's paths")
    for key, val in e.get("meta", {}).items():
        v = doc["metadata"]
        for k in key.split("/"):
            v = v[int(k)] if isinstance(v, list) else v.get(k)
        if v != val:
            bad("metadata %s = %r, want %r" % (key, v, val))
        top = key.split("/")[0]
        mf = read(os.path.join(mnt, ".tensorfs", "metadata", top))
        mv = doc["metadata"][top]
        if (mf.decode() if isinstance(mv, str) else json.loads(mf)) != mv:
            bad(".tensorfs/metadata/%s differs from index.json" % top)
    for name in sorted(set(got) & set(want)):
        t, w = got[name], want[name]
        p = os.path.join(mnt, t["path"])
        data = read(p)
        x = xattrs(p)
        n += 1
        if os.stat(p).st_size != len(data) or len(data) != t["size"]:
            bad("%s: st_size %d, read %d bytes, index size %d" % (name, os.stat(p).st_size, len(data), t["size"]))
        if H(data) != w["sha"]:
            bad("%s: bytes differ from the reference (%d bytes)" % (name, len(data)))
        if x.get("user.tensorfs.name") != name:
            bad("%s: user.tensorfs.name %r" % (name, x.get("user.tensorfs.name")))
        if x.get("user.tensorfs.dtype") != w["dtype"] or t["dtype"] != w["dtype"]:
            bad("%s: dtype %r (xattr), %r (index), want %r" % (name, x.get("user.tensorfs.dtype"), t["dtype"], w["dtype"]))
        if json.loads(x.get("user.tensorfs.shape", "null")) != w["shape"] or t["shape"] != w["shape"]:
            bad("%s: shape %r (xattr), %r (index), want %r" % (name, x.get("user.tensorfs.shape"), t["shape"], w["shape"]))
        if "user.tensorfs.source" in x:
            s, o = x["user.tensorfs.source"], int(x["user.tensorfs.offset"])
            with open(s, "rb") as f:
                f.seek(o)
                if f.read(len(data)) != data:
                    bad("%s: not the bytes at its user.tensorfs.source/offset" % name)
            if t.get("source") != s or t.get("offset") != o:
                bad("%s: index.json source/offset %r/%r, xattrs %r/%r" % (name, t.get("source"), t.get("offset"), s, o))
        elif w["contiguous"]:
            bad("%s: contiguous, but no user.tensorfs.source/offset" % name)
        for v in ("f32", "f16", "bf16", "f64"):
            q = os.path.join(mnt, "." + v, t["path"])
            has = os.path.exists(q)
            if v not in w["views"]:
                if has:
                    bad("%s: in .%s/ but not convertible" % (name, v))
                continue
            if not has:
                bad("%s: missing from .%s/" % (name, v))
                continue
            if w["views"][v] is not None and H(read(q)) != w["views"][v]:
                bad("%s: .%s/ differs from the reference conversion" % (name, v))
            if os.getxattr(q, "user.tensorfs.dtype") != v.upper().encode():
                bad("%s: .%s/ dtype xattr %r" % (name, v, os.getxattr(q, "user.tensorfs.dtype")))
        q = os.path.join(mnt, ".npy", t["path"] + ".npy")
        a = np.load(q, mmap_mode="r")
        if a.size > 0 and not isinstance(a, np.memmap):
            bad("%s: .npy view not memory-mapped" % name)
        wd, ws, wh = w["npy"]
        if a.dtype.str != wd or list(a.shape) != ws or H(np.ascontiguousarray(a).tobytes()) != wh:
            bad("%s: .npy view %s %s, want %s %s, or data differs" % (name, a.dtype.str, list(a.shape), wd, ws))
        del a
if fail:
    sys.stderr.write("\n".join(fail[:40]) + "\n")
    sys.exit(1)
print("%d tensors checked through %d mounts" % (n, len(args) // 2))
`

// fxTorchScript writes PyTorch fixtures into argv[1] and the expectations
// for them and for argv[3:] (files, directories, or "grid:DIR" for a
// directory of one-tensor files to mount as one tree) as JSON into argv[2].
// References come from torch itself: torch.load(weights_only=True), or
// the full loader for legacy files, whole modules and TorchScript (this
// Python is trusted; tensorfs never runs pickle). Names follow tensorfs's
// rule: keys joined with "/", sequence elements by index, object
// attributes by name, a bare tensor under its file's base name.
const fxTorchScript = `
import sys, os, json, hashlib, argparse, zipfile, warnings, io, struct, pickletools
warnings.filterwarnings("ignore")
import numpy as np
import torch
torch.set_num_threads(1)

out, refpath = sys.argv[1], sys.argv[2]
inputs = sys.argv[3:]
made = {}
given = {}
metas = {}

def save(name, obj, expect="ok", **kw):
    p = os.path.join(out, name)
    torch.save(obj, p, **kw)
    made[p] = expect
    return p
LEGACY = dict(_use_new_zipfile_serialization=False)

g = torch.Generator().manual_seed(11)
base = torch.randn(6, 8, generator=g)
big = torch.randn(700, 600, generator=g)
views = {
    "offset": base[2:], "transpose": base.t(), "step": base[:, ::3], "step2": base[1::2, 1::3],
    "expand": torch.arange(3.0).expand(4, 3), "expand0": torch.arange(2.0).view(2, 1).expand(2, 5),
    "channels_last": torch.randn(2, 3, 4, 5, generator=g).contiguous(memory_format=torch.channels_last),
    "scalar_view": base[1, 2], "row": base[3], "col": base[:, 5], "size1": base[1:2, :],
    "empty_view": base[:, :0], "permuted": torch.randn(2, 3, 4, generator=g).permute(2, 0, 1),
    # big enough to take many FUSE requests, gathered on read
    "big/whole": big, "big/transposed": big.t(), "big/cols": big[:, 100:400:3],
    "big/expand": big[5].expand(100, 600).t(), "big/half_t": big[:50].half().t(),
}
save("views.pt", views)
save("views_legacy.pt", views, **LEGACY)
w = torch.randn(3, 3, generator=g)
tied = {"encoder.weight": w, "decoder.weight": w, "flat": w.view(-1), "list": [w, w.t()]}
save("tied.pt", tied)
save("tied_legacy.pt", tied, **LEGACY)

model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model(torch.randn(5, 4, generator=g)).sum().backward()
opt.step()
ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 5,
        "args": argparse.Namespace(lr=0.001, name="run", layers=[4, 3, 2]), "shape": torch.Size([4, 3]),
        "device": torch.device("cpu")}
meta = {"epoch": 5, "args/name": "run", "args/lr": 0.001, "args/layers": [4, 3, 2], "shape": [4, 3],
        "optimizer/param_groups/0/lr": 0.001}
metas[save("train_ckpt.pth", ckpt)] = meta
metas[save("train_ckpt_legacy.tar", ckpt, **LEGACY)] = meta
save("whole_module.pt", model)
save("whole_module_legacy.pt", model, **LEGACY)

for p in (1, 2, 3, 4, 5):
    d = {"x": base[:2], "nested": {"y": torch.arange(5, dtype=torch.int16), 3: torch.ones(2, dtype=torch.bool)},
         "lst": [torch.zeros(1, dtype=torch.float64), (torch.tensor([1 + 2j]),)], "s": "text", "f": 1.5}
    save("proto%d.pt" % p, d, pickle_protocol=p)
    save("proto%d_legacy.pt" % p, d, pickle_protocol=p, **LEGACY)

# A Python 2 pickle: the legacy file of protocol 2 with every ASCII string
# written as Python 2 writes a str (SHORT_BINSTRING/BINSTRING), as torch
# under Python 2 wrote them.
def py2ify(pk):
    ops = list(pickletools.genops(pk))
    res = bytearray()
    for i, (op, arg, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else len(pk)
        if op.name in ("BINUNICODE", "SHORT_BINUNICODE") and arg.isascii():
            b = arg.encode()
            res += b"U" + bytes([len(b)]) + b if len(b) < 256 else b"T" + struct.pack("<i", len(b)) + b
        else:
            res += pk[pos:end]
    return bytes(res)
src = save("py2_src.pt", {"weight": base[1:4].t(), "bias": torch.arange(4, dtype=torch.float64), "name": "py2"},
           pickle_protocol=2, **LEGACY)
raw = open(src, "rb").read()
f = io.BytesIO(raw)
pickles = []
for _ in range(5):  # magic, protocol version, sys_info, the object, storage keys
    start = f.tell()
    for _ in pickletools.genops(f):
        pass
    pickles.append(raw[start:f.tell()])
rest = raw[f.tell():]
py2 = os.path.join(out, "py2_legacy.pt")
with open(py2, "wb") as fo:
    fo.write(b"".join(pickles[:2]) + b"".join(py2ify(pk) for pk in pickles[2:]) + rest)
made[py2] = "ok"

save("bare_param.pt", torch.nn.Parameter(torch.randn(2, 2, generator=g)))
save("bare_tensor.bin", big[:3].t())
save("tensor_list.pt", [torch.ones(2), torch.zeros(3, dtype=torch.int32)])
save("storage.pt", torch.arange(6, dtype=torch.int32).storage())
dts = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
       torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128]
dd = {str(dt)[6:]: (torch.randn(2, 3, generator=g) * 50).to(dt) for dt in dts}
save("dtypes.pt", dd)
save("dtypes_legacy.pt", dd, **LEGACY)
save("no_tensors.pt", {"note": "hyperparameters only", "lr": 0.5})

# A sharded checkpoint: pytorch_model-0000N-of-00002.bin and its index.
sh = os.path.join(out, "sharded")
os.mkdir(sh)
emb = torch.randn(10, 4, generator=g)
shards = {"pytorch_model-00001-of-00002.bin": {"model.embed.weight": emb, "model.layers.0.weight": torch.randn(4, 4, generator=g)},
          "pytorch_model-00002-of-00002.bin": {"model.layers.1.weight": torch.randn(4, 4, generator=g).t(), "lm_head.weight": emb[:, :2]}}
wm = {}
for fn, sd in shards.items():
    torch.save(sd, os.path.join(sh, fn))
    wm.update({k: fn for k in sd})
json.dump({"metadata": {"total_size": 1}, "weight_map": wm}, open(os.path.join(sh, "pytorch_model.bin.index.json"), "w"))
made[sh] = "ok"

# Big-endian archive: torch.save's zip with byteorder "big" and every
# storage byte-swapped; torch 1.13 cannot load it, so the reference is the
# tensors themselves.
be = {"f32": torch.randn(3, 2, generator=g), "i64": torch.arange(-3, 3), "bf16": torch.randn(4, generator=g).bfloat16(),
      "c64": torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64), "f16t": torch.randn(2, 3, generator=g).half().t()}
src = save("be_src.pt", be)
z = zipfile.ZipFile(src)
bep = os.path.join(out, "big_endian.pt")
with zipfile.ZipFile(bep, "w", zipfile.ZIP_STORED) as zo:
    import pickle as _p
    names = z.namelist()
    root = names[0].split("/")[0]
    keyunit = {}
    class U(_p.Unpickler):
        def find_class(self, mod, name):
            if mod == "torch._utils" and name == "_rebuild_tensor_v2":
                return lambda *a: None
            if mod == "collections" and name == "OrderedDict":
                return dict
            return (mod, name)
        def persistent_load(self, pid):
            keyunit[pid[2]] = {"FloatStorage": 4, "LongStorage": 8, "BFloat16Storage": 2, "ComplexFloatStorage": 4,
                               "HalfStorage": 2}[pid[1][1]]
    U(z.open(root + "/data.pkl")).load()
    for n in names:
        data = z.read(n)
        k = n[len(root) + len("/data/"):] if n.startswith(root + "/data/") else None
        if k in keyunit:
            u = keyunit[k]
            data = b"".join(data[i:i + u][::-1] for i in range(0, len(data), u))
        zo.writestr(n, data)
    zo.writestr(root + "/byteorder", b"big")
made[bep] = "ok"
given[bep] = (be, False)

# Refused: pickles that call globals (nothing may run), and tensor kinds
# tensorfs does not serve.
pwned = os.path.join(out, "PWNED")
class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > " + pwned,))
class Evil2:
    def __reduce__(self):
        return (eval, ("1+1",))
save("evil.pt", {"x": torch.ones(1), "e": Evil()}, expect="refuse:refused global posix.system")
save("evil_legacy.pt", {"x": torch.ones(1), "e": Evil()}, expect="refuse:refused global posix.system", **LEGACY)
save("evil_eval.pt", {"e": Evil2()}, expect="refuse:refused global __builtin__.eval")
save("evil_proto1.pt", [Evil()], expect="refuse:refused global posix.system", pickle_protocol=1)
save("evil_proto5.pt", {"e": Evil()}, expect="refuse:refused global posix.system", pickle_protocol=5)
save("quantized.pt", {"q": torch.quantize_per_tensor(torch.randn(4, generator=g), 0.1, 0, torch.qint8)},
     expect="refuse:quantized")
save("sparse.pt", {"s": torch.randn(3, 3, generator=g).to_sparse()}, expect="refuse:sparse tensor")
for p in ("py2_src.pt", "be_src.pt"):
    del made[os.path.join(out, p)]

DT = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
      torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
      torch.bool: "BOOL", torch.complex64: "C64", torch.complex128: "C128"}
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
H = lambda b: hashlib.sha256(b).hexdigest()
def raw(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()
def entry(t, native_order):
    t = t.detach()
    c = t.contiguous()
    e = {"dtype": DT[t.dtype], "shape": list(t.shape), "sha": H(raw(c)), "views": {},
         "contiguous": bool(native_order and t.is_contiguous() and t.numel() > 0)}
    if t.dtype in FLOATS:
        # torch narrows float64 through float32 (rounding twice): no reference there
        once = t.dtype != torch.float64
        e["views"] = {"f32": H(raw(c.float())), "f64": H(raw(c.double())),
                      "f16": H(raw(c.half())) if once else None, "bf16": H(raw(c.bfloat16())) if once else None}
    if t.dtype == torch.bfloat16:
        e["npy"] = ["<f4", e["shape"], e["views"]["f32"]]
    else:
        e["npy"] = [c.numpy().dtype.str, e["shape"], e["sha"]]
    return e

` + testenv.TorchFlattenPy + `
def leaf(t):
    return t

def load(p):
    try:
        return torch.load(p, map_location="cpu", weights_only=True)
    except Exception:
        return torch.load(p, map_location="cpu")
def stem(p):
    return os.path.splitext(os.path.basename(p))[0]

files, covers = {}, {}
def expect(p):
    if p in made and made[p] != "ok":
        return {"expect": made[p]}
    res = {}
    try:
        if p in given:
            flat(given[p][0], [], res, stem(p), frozenset())
        elif os.path.isdir(p):
            maps = [f for f in os.listdir(p) if f.endswith(".index.json")]
            wmap = json.load(open(os.path.join(p, maps[0])))["weight_map"]
            for fn in sorted(set(wmap.values())):
                flat(load(os.path.join(p, fn)), [], res, stem(fn), frozenset())
        else:
            flat(load(p), [], res, stem(p), frozenset())
    except Exception as ex:
        return {"expect": "refuse:"}
    native = p not in given or given[p][1]
    r = {"expect": "ok", "format": "pytorch", "tensors": {k: entry(v, native) for k, v in res.items()}}
    if p in metas:
        r["meta"] = metas[p]
    return r

for p in inputs:
    if p.startswith("grid:"):
        d = p[len("grid:"):]
        gd = os.path.join(out, os.path.basename(d))
        os.mkdir(gd)
        tensors = {}
        for fn in sorted(os.listdir(d)):
            f = os.path.join(d, fn)
            r = expect(f)
            if r["expect"] == "ok":
                os.symlink(f, os.path.join(gd, fn))
                tensors.update(r["tensors"])
                covers[f] = gd
            else:
                files[f] = r
                covers[f] = f
        files[gd] = {"expect": "ok", "format": "pytorch", "tensors": tensors}
    else:
        files[p] = expect(p)
        covers[p] = p
for p in made:
    files[p] = expect(p)
json.dump({"files": files, "covers": covers, "pwned": os.path.exists(pwned)}, open(refpath, "w"))
`

// fxNumpyScript writes NumPy fixtures into argv[1] and the expectations
// for them and for argv[3:] (files, or "grid:DIR": the .npy files of DIR
// that are served, mounted as one tree) as JSON into argv[2]. Array
// headers are read without unpickling; references come from np.load.
const fxNumpyScript = `
import sys, os, json, hashlib, zipfile, warnings
warnings.filterwarnings("ignore")
import numpy as np
out, refpath = sys.argv[1], sys.argv[2]
inputs = sys.argv[3:]
made = {}
def p(n, expect="ok"):
    made[os.path.join(out, n)] = expect
    return os.path.join(out, n)
def npy_raw(hdr, data):
    total = 10 + len(hdr) + 1
    hdr += " " * ((64 - total % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode("latin1") + data

rng = np.random.default_rng(5)
a = rng.standard_normal((3, 4)).astype("<f4")
np.save(p("v1.npy"), a)
with open(p("v2.npy"), "wb") as f:
    np.lib.format.write_array(f, a.astype("<f8"), version=(2, 0))
with open(p("v3.npy"), "wb") as f:
    np.lib.format.write_array(f, a, version=(3, 0))
np.save(p("fortran_3d.npy"), np.asfortranarray(rng.standard_normal((4, 3, 5))))
np.save(p("fortran_big.npy"), np.asfortranarray(rng.standard_normal((700, 600)).astype("<f4")))
np.save(p("fortran_col.npy"), np.asfortranarray(np.arange(6, dtype="<u4").reshape(6, 1)))
np.save(p("be_f4.npy"), a.astype(">f4"))
np.save(p("be_i8_fortran.npy"), np.asfortranarray(np.arange(-12, 12, dtype=">i8").reshape(4, 6)))
np.save(p("be_c16.npy"), (rng.standard_normal(3) + 1j).astype(">c16"))
np.save(p("be_f2_big.npy"), rng.standard_normal(300000).astype(">f2"))
np.save(p("scalar.npy"), np.array(2.5))
np.save(p("scalar_be_u2.npy"), np.array(513, dtype=">u2"))
np.save(p("empty.npy"), np.zeros((0, 3), "<f4"))
np.save(p("empty_fortran.npy"), np.asfortranarray(np.zeros((2, 0), "<i2")))
np.save(p("bool.npy"), rng.standard_normal(7) > 0)
np.save(p("u1.npy"), np.arange(256, dtype=np.uint8))
np.save(p("c8.npy"), (rng.standard_normal(4) - 2j).astype("<c8"))
np.save(p("nan_inf.npy"), np.array([np.nan, -np.inf, np.inf, -0.0, 1e-40, 70000.0, 65519.0, 3e38], "<f4"))
with open(p("py2_long.npy"), "wb") as f:
    f.write(npy_raw("{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }", np.arange(6, dtype="<i4").tobytes()))
np.savez(p("members.npz"), **{"layer/0/w": a, "layer/0/b": np.arange(3, dtype="<i2"), "be": a.astype(">f4"),
                              "f": np.asfortranarray(rng.standard_normal((3, 5)))})
np.savez(p("positional.npz"), a, np.arange(4))
np.savez_compressed(p("compressed.npz"), w=a)
np.savez_compressed(p("compressed_mixed.npz"), **{"empty": np.zeros((0, 3), "<f4"), "scalar": np.array(2.5), "fortran": np.asfortranarray(rng.standard_normal((30, 50)).astype(">f8")),
                    "be_i2": np.arange(-700, 700, dtype=">i2"), "bool": rng.standard_normal(333) > 0, "half": rng.standard_normal((40, 40)).astype("<f2"),
                    "layer/0/w": a, **{"many/%03d" % i: np.full(i + 1, i, dtype="<i4") for i in range(60)}})
with zipfile.ZipFile(p("compressed_zip64.npz"), "w", compression=zipfile.ZIP_DEFLATED) as z:
    for k, v in (("w", a), ("f", np.asfortranarray(rng.standard_normal((5, 7)).astype(">f4")))):
        with z.open(k + ".npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, v)
np.save(p("object.npy", "refuse:object array"), np.array([{}, 1], dtype=object), allow_pickle=True)
np.save(p("structured.npy", "refuse:structured dtype"), np.zeros(2, dtype=[("x", "<i4"), ("y", "<f4")]))
np.save(p("unicode.npy", "refuse:string array"), np.array(["ab", "c"]))
np.save(p("bytes.npy", "refuse:string array"), np.array([b"ab"]))
np.savez(p("struct_member.npz"), ok=a, rec=np.zeros(2, dtype=[("x", "<i4")]))  # rec: in the metadata, ok served
np.savez(p("strings_only.npz", "refuse:string array"), s=np.array(["ab"]), b=np.array([b"x"]))

SUP = {("b", 1), ("i", 1), ("i", 2), ("i", 4), ("i", 8), ("u", 1), ("u", 2), ("u", 4), ("u", 8),
       ("f", 2), ("f", 4), ("f", 8), ("c", 8), ("c", 16)}
def why(dt):
    if dt is BIG: return BIG
    if dt.names is not None: return "structured dtype"
    k = dt.kind
    if k == "O": return "object array"
    if k in "SU": return "string array"
    if k == "V": return "void/record"
    if k in "Mm": return "datetime array"
    if (k, dt.itemsize) not in SUP: return "is not supported"
    return None
BIG = "numpy reads at most 10000 characters"
def header_dtype(f):
    v = np.lib.format.read_magic(f)
    try:
        return np.lib.format._read_array_header(f, v)[2]
    except ValueError as e:
        if "max_header_size" in str(e): return BIG  # numpy.load refuses it too
        raise
DT = {"b1": "BOOL", "i1": "I8", "i2": "I16", "i4": "I32", "i8": "I64", "u1": "U8", "u2": "U16", "u4": "U32",
      "u8": "U64", "f2": "F16", "f4": "F32", "f8": "F64", "c8": "C64", "c16": "C128"}
H = lambda b: hashlib.sha256(b).hexdigest()
def le(a):
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a
def bf16(f):  # float32 to bfloat16, round to nearest even; a NaN keeps its sign and top payload, made quiet
    b = f.view("<u4").astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype("<u2")
    nan = np.isnan(f)
    r[nan] = ((b[nan] >> 16) | 0x40).astype("<u2")
    return r
def entry(a):
    l = le(a)
    e = {"dtype": DT[l.dtype.kind + str(l.dtype.itemsize)], "shape": list(a.shape), "sha": H(l.tobytes()), "views": {},
         "contiguous": bool(a.flags.c_contiguous and a.dtype.byteorder != ">" and a.size > 0)}
    if l.dtype.kind == "f":
        e["views"] = {"f32": H(l.astype("<f4").tobytes()), "f64": H(l.astype("<f8").tobytes()),
                      "f16": H(l.astype("<f2").tobytes()),
                      "bf16": H(bf16(l.astype("<f4")).tobytes()) if l.dtype.itemsize <= 4 else None}
    e["npy"] = [l.dtype.str, list(a.shape), e["sha"]]
    return e

def expect(f):
    if made.get(f, "ok") != "ok":
        return {"expect": made[f]}
    arrays = {}
    try:
        if f.endswith(".npz"):
            z = zipfile.ZipFile(f)
            others, first = set(), None  # members of no tensor dtype: in the metadata
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                w = why(header_dtype(z.open(info.filename)))
                if w:
                    others.add(info.filename[:-4])
                    first = first or w
            d = np.load(f)
            if first and len(others) == len([k for k in z.namelist() if k.endswith(".npy")]):
                return {"expect": "refuse:" + first}
            infos = {i.filename: i for i in z.infolist()}
            for k in d.files:
                if k in others:
                    continue
                arrays[k] = entry(d[k])
                if (infos.get(k + ".npy") or infos[k]).compress_type != zipfile.ZIP_STORED:
                    arrays[k]["contiguous"] = False  # inflated: no range of the file
        else:
            with open(f, "rb") as fh:
                w = why(header_dtype(fh))
            if w:
                return {"expect": "refuse:" + w}
            arrays[os.path.splitext(os.path.basename(f))[0]] = entry(np.load(f))
    except Exception as ex:
        return {"expect": "refuse:"}
    return {"expect": "ok", "format": "numpy", "tensors": arrays}

files, covers = {}, {}
for p in inputs:
    if p.startswith("grid:"):
        d = p[len("grid:"):]
        gd = os.path.join(out, os.path.basename(d))
        os.mkdir(gd)
        tensors = {}
        for fn in sorted(os.listdir(d)):
            f = os.path.join(d, fn)
            r = expect(f)
            if r["expect"] == "ok" and fn.endswith(".npy"):
                os.symlink(f, os.path.join(gd, fn))
                tensors.update(r["tensors"])
                covers[f] = gd
            else:
                files[f] = r
                covers[f] = f
        files[gd] = {"expect": "ok", "format": "numpy", "tensors": tensors}
    else:
        files[p] = expect(p)
        covers[p] = p
for f in made:
    files[f] = expect(f)
json.dump({"files": files, "covers": covers}, open(refpath, "w"))
`

// fxGGUFScript checks GGUF mounts. argv: REF KIND MOUNTPOINT triples.
// REF is ggml's own dequantization of every tensor in file order
// (little-endian float32; "-" for a file without tensors), KIND the ggml
// type of the blk.* tensors. Tensors are taken in file order (source, then
// offset); for each: the raw file equals the source bytes at its offset;
// xattrs agree with index.json; .f32/ equals REF bit for bit, .f16/ and
// .bf16/ equal it rounded to nearest even, .f64/ exactly, .npy/ loads as
// float32 (float16 for F16); and reads of .f32/ at any offset and length,
// mid-block and mid-element, with and without O_DIRECT, equal REF's
// bytes. Every key/value of the first source, parsed here independently,
// must be in index.json metadata and in .tensorfs/metadata/<key>. Prints
// one JSON line per mount.
const fxGGUFScript = `
import os, sys, json, struct, random
import numpy as np
args = sys.argv[1:]
fail = []
FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
def kvs(path):
    with open(path, "rb") as f:
        b = f.read()
    off = 24
    def rd(fmt):
        nonlocal off
        v = struct.unpack_from(fmt, b, off)[0]
        off += struct.calcsize(fmt)
        return v
    def rs():
        nonlocal off
        n = rd("<Q")
        off += n
        return b[off - n:off]
    def val(t):
        if t in FMT:
            return (t, rd(FMT[t]))
        if t == 8:
            return (t, rs())
        et, n = rd("<I"), rd("<Q")
        return (t, [val(et) for _ in range(n)])
    res = {}
    for _ in range(struct.unpack_from("<Q", b, 16)[0]):
        k = rs().decode()
        res[k] = val(rd("<I"))
    return res
def same(tv, js):
    t, v = tv
    if t == 9:
        return isinstance(js, list) and len(js) == len(v) and all(same(a, b) for a, b in zip(v, js))
    if t == 8:
        return js == v.decode("utf-8", "replace")
    if t == 7:
        return js is v
    if t in (6, 12):
        if isinstance(js, str):
            js = float(js)
        if isinstance(js, bool) or not isinstance(js, (int, float)):
            return False
        if v != v:
            return js != js
        f = "<f" if t == 6 else "<d"
        return struct.pack(f, js) == struct.pack(f, v)
    return type(js) is int and js == v
def mdname(k):
    if k == "":
        return "%"
    return "".join("%%%02X" % ord(c) if c in "%/\0" or (i == 0 and c == ".") else c for i, c in enumerate(k))
def read(p):
    with open(p, "rb") as f:
        return f.read()
def bf16(f):
    b = f.view("<u4").astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype("<u2")
    nan = np.isnan(f)
    r[nan] = ((b[nan] >> 16) | 0x40).astype("<u2")
    return r
for i in range(0, len(args), 3):
    ref, kind, mnt = args[i:i + 3]
    def bad(msg):
        fail.append("%s: %s" % (mnt, msg))
    doc = json.loads(read(os.path.join(mnt, ".tensorfs", "index.json")))
    if doc["format"] != "gguf":
        bad("format %r" % doc["format"])
    md = kvs(doc["sources"][0])
    if set(md) != set(doc["metadata"]):
        bad("metadata keys differ: %s" % sorted(set(md) ^ set(doc["metadata"]))[:8])
    for k, tv in md.items():
        if k in doc["metadata"] and not same(tv, doc["metadata"][k]):
            bad("index.json metadata %s differs from the file's" % k)
        mf = read(os.path.join(mnt, ".tensorfs", "metadata", mdname(k)))
        if not (mf == tv[1] if tv[0] == 8 else same(tv, json.loads(mf))):
            bad(".tensorfs/metadata/%s differs from the file's value" % mdname(k))
    ts = sorted(doc["tensors"], key=lambda t: (doc["sources"].index(t["source"]), t["offset"]))
    checks = 0
    if ref == "-":
        if ts:
            bad("%d tensors, want none" % len(ts))
        print(json.dumps({"mount": mnt, "sources": doc["sources"], "tensors": 0, "keys": len(md), "checks": 0}))
        continue
    r = np.frombuffer(read(ref), "<f4")
    pos = 0
    for t in ts:
        name, path = t["name"], t["path"]
        n = int(np.prod(t["shape"], dtype=np.int64))
        rt = r[pos:pos + n]
        pos += n
        p = os.path.join(mnt, path)
        data = read(p)
        x = {k: os.getxattr(p, k).decode() for k in os.listxattr(p)}
        with open(t["source"], "rb") as f:
            f.seek(t["offset"])
            if f.read(t["size"]) != data or len(data) != t["size"]:
                bad("%s: raw bytes are not the file's at offset %d" % (name, t["offset"]))
        if x.get("user.tensorfs.dtype") != t["dtype"] or json.loads(x.get("user.tensorfs.shape", "null")) != t["shape"] \
                or x.get("user.tensorfs.source") != t["source"] or x.get("user.tensorfs.offset") != str(t["offset"]) \
                or x.get("user.tensorfs.name") != name:
            bad("%s: xattrs %s disagree with index.json %s" % (name, x, t))
        if name.startswith("blk.") and kind != "*" and t["dtype"] != kind:
            bad("%s: dtype %s, want %s" % (name, t["dtype"], kind))
        if name == "blk.0.ffn_up.weight" and t["shape"] != [3, 256]:
            bad("%s: shape %s, want [3,256] (GGUF's dims reversed)" % (name, t["shape"]))
        want = {"f32": rt.tobytes(), "f16": rt.astype("<f2").tobytes(), "bf16": bf16(rt).tobytes(), "f64": rt.astype("<f8").tobytes()}
        for v, w in want.items():
            q = os.path.join(mnt, "." + v, path)
            if read(q) != w:
                bad("%s: .%s/ differs from ggml's dequantization%s" % (name, v, "" if v == "f32" else " rounded to " + v))
            checks += 1
        a = np.load(os.path.join(mnt, ".npy", path + ".npy"), mmap_mode="r")
        wa = rt.astype("<f2") if t["dtype"] == "F16" else rt
        if a.dtype != wa.dtype or list(a.shape) != t["shape"] or np.ascontiguousarray(a).tobytes() != wa.tobytes():
            bad("%s: .npy view %s %s differs" % (name, a.dtype, a.shape))
        del a
        q = os.path.join(mnt, ".f32", path)
        w = want["f32"]
        rnd = random.Random(n)
        pairs = [(4 * (256 * k + 131) + 1, 4099) for k in range(min(n // 256, 3))]
        pairs += [(rnd.randrange(len(w)), rnd.randrange(1, 70000)) for _ in range(25)] + [(len(w) - 3, 10), (len(w), 1)]
        for flags in (os.O_RDONLY, os.O_RDONLY | os.O_DIRECT):
            fd = os.open(q, flags)
            try:
                for off, ln in pairs:
                    if os.pread(fd, ln, off) != w[off:off + ln]:
                        bad("%s: .f32/ pread(%d, %d)%s differs" % (name, ln, off, " O_DIRECT" if flags & os.O_DIRECT else ""))
                    checks += 1
            finally:
                os.close(fd)
    if pos != len(r):
        bad("the reference has %d floats, the tensors %d" % (len(r), pos))
    print(json.dumps({"mount": mnt, "sources": doc["sources"], "tensors": len(ts), "keys": len(md), "checks": checks}))
if fail:
    sys.stderr.write("\n".join(fail[:40]) + "\n")
    sys.exit(1)
`

// fxGGUFReport is one line of fxGGUFScript's output.
type fxGGUFReport struct {
	Mount   string   `json:"mount"`
	Sources []string `json:"sources"`
	Tensors int      `json:"tensors"`
	Keys    int      `json:"keys"`
	Checks  int      `json:"checks"`
}

func fxGGUFReports(t *testing.T, out string) []fxGGUFReport {
	t.Helper()
	var rs []fxGGUFReport
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r fxGGUFReport
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("reader output %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// fxGGUFKind is the ggml type of the blk.* tensors of
// gguf/quantized/ollama-ggml-KIND.gguf.
func fxGGUFKind(path string) string {
	return strings.ToUpper(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ollama-ggml-"), ".gguf"))
}

// fxMemFile is an index.File over bytes.
type fxMemFile struct {
	*bytes.Reader
	name string
}

func (f fxMemFile) Name() string { return f.name }

// fxGGUFPart writes one part of a split GGUF v3 model holding ts (raw
// data from data, ggml types kept): general.architecture and the split.*
// keys as llama.cpp's gguf-split writes them.
func fxGGUFPart(t *testing.T, path string, no, count, total int, ts []index.Tensor, data []byte) {
	t.Helper()
	le32 := func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
	le64 := func(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
	str := func(b []byte, s string) []byte { return append(le64(b, uint64(len(s))), s...) }
	b := append([]byte("GGUF"), 3, 0, 0, 0)
	b = le64(b, uint64(len(ts)))
	b = le64(b, 5)
	b = le32(str(b, "general.architecture"), 8)
	b = str(b, "llama")
	b = le32(str(b, "general.alignment"), 4)
	b = le32(b, 32)
	b = le32(str(b, "split.no"), 2)
	b = binary.LittleEndian.AppendUint16(b, uint16(no))
	b = le32(str(b, "split.count"), 2)
	b = binary.LittleEndian.AppendUint16(b, uint16(count))
	b = le32(str(b, "split.tensors.count"), 5)
	b = le32(b, uint32(total))
	var body []byte
	for _, tn := range ts {
		b = str(b, tn.Name)
		b = le32(b, uint32(len(tn.Shape)))
		for i := len(tn.Shape) - 1; i >= 0; i-- {
			b = le64(b, uint64(tn.Shape[i]))
		}
		b = le32(b, uint32(tn.DType.Info().GGML))
		b = le64(b, uint64(len(body)))
		body = append(body, data[tn.Offset:tn.Offset+tn.Size]...)
		for len(body)%32 != 0 {
			body = append(body, 0)
		}
	}
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	if err := os.WriteFile(path, append(b, body...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fxHole in fxWriteSparse's parts is a run of that many zero bytes left
// as a hole in the file (no disk space, no page cache).
type fxHole int64

// fxWriteSparse writes parts ([]byte, string or fxHole) to path.
func fxWriteSparse(t *testing.T, path string, parts ...any) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for _, p := range parts {
		switch p := p.(type) {
		case []byte:
			_, err = f.WriteAt(p, off)
			off += int64(len(p))
		case string:
			_, err = f.WriteAt([]byte(p), off)
			off += int64(len(p))
		case fxHole:
			off += int64(p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// fxPkStr and fxPkInt are pickle opcodes for a str and a 32-bit int.
func fxPkStr(s string) string {
	return "X" + string(binary.LittleEndian.AppendUint32(nil, uint32(len(s)))) + s
}

func fxPkInt(n int64) string { return "J" + string(binary.LittleEndian.AppendUint32(nil, uint32(n))) }

// fxTorchPickle is torch.save's pickle (protocol 2) of {name: float32
// tensor of numel elements in storage key i}, legacy or zip-style
// persistent ids.
func fxTorchPickle(names []string, numel int64, legacy bool) string {
	s := "\x80\x02}("
	for i, n := range names {
		pid := "(" + fxPkStr("storage") + "ctorch\nFloatStorage\n" + fxPkStr(itoa(int64(i))) + fxPkStr("cpu") + fxPkInt(numel)
		if legacy {
			pid += "N"
		}
		s += fxPkStr(n) + "ctorch._utils\n_rebuild_tensor_v2\n(" + pid + "tQ" + fxPkInt(0) +
			"(" + fxPkInt(numel) + "t(" + fxPkInt(1) + "t\x89ccollections\nOrderedDict\n)RtR"
	}
	return s + "u."
}

// fxTorchZip lays out torch.save's zip (stored members, no zip64: the
// total must stay under 4 GiB) of the tensors: data.pkl, data/<i> as
// holes of 4*numel bytes, version.
func fxTorchZip(t *testing.T, path string, names []string, numel int64) {
	t.Helper()
	type member struct {
		name string
		data any // string or fxHole
		size int64
		off  int64
	}
	ms := []member{{name: "archive/data.pkl", data: fxTorchPickle(names, numel, false)}}
	for i := range names {
		ms = append(ms, member{name: "archive/data/" + itoa(int64(i)), data: fxHole(4 * numel)})
	}
	ms = append(ms, member{name: "archive/version", data: "3\n"})
	le16 := func(b []byte, v int) []byte { return binary.LittleEndian.AppendUint16(b, uint16(v)) }
	le32 := func(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint32(b, uint32(v)) }
	var parts []any
	var off int64
	for i := range ms {
		m := &ms[i]
		switch d := m.data.(type) {
		case string:
			m.size = int64(len(d))
		case fxHole:
			m.size = int64(d)
		}
		m.off = off
		h := le32(nil, 0x04034b50)
		h = le16(le16(le16(le16(le16(h, 20), 0), 0), 0), 0) // version, flags, stored, time, date
		h = le32(le32(le32(h, 0), m.size), m.size)          // crc (not checked), sizes
		h = le16(le16(h, len(m.name)), 0)
		h = append(h, m.name...)
		parts = append(parts, h, m.data)
		off += int64(len(h)) + m.size
	}
	var cd []byte
	for _, m := range ms {
		cd = le32(cd, 0x02014b50)
		cd = le16(le16(le16(le16(le16(le16(cd, 20), 20), 0), 0), 0), 0)
		cd = le32(le32(le32(cd, 0), m.size), m.size)
		cd = le16(le16(le16(le16(le16(cd, len(m.name)), 0), 0), 0), 0)
		cd = le32(le32(cd, 0), m.off)
		cd = append(cd, m.name...)
	}
	eocd := le32(nil, 0x06054b50)
	eocd = le16(le16(le16(le16(eocd, 0), 0), len(ms)), len(ms))
	eocd = le16(le32(le32(eocd, int64(len(cd))), off), 0)
	fxWriteSparse(t, path, append(parts, cd, eocd)...)
}

// fxTorchLegacy lays out torch.save's legacy format of the tensors: the
// magic number, protocol version and sys_info pickles, the object, the
// storage keys, then each storage as its element count and a hole.
func fxTorchLegacy(t *testing.T, path string, names []string, numel int64) {
	t.Helper()
	parts := []any{
		"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.",
		"\x80\x02M\xe9\x03.",
		"\x80\x02}(" + fxPkStr("protocol_version") + "M\xe9\x03" + fxPkStr("little_endian") + "\x88" +
			fxPkStr("type_sizes") + "}(" + fxPkStr("short") + "K\x02" + fxPkStr("int") + "K\x04" + fxPkStr("long") + "K\x04uu.",
		fxTorchPickle(names, numel, true),
	}
	keys := "\x80\x02("
	for i := range names {
		keys += fxPkStr(itoa(int64(i)))
	}
	parts = append(parts, keys+"l.")
	for range names {
		parts = append(parts, binary.LittleEndian.AppendUint64(nil, uint64(numel)), fxHole(4*numel))
	}
	fxWriteSparse(t, path, parts...)
}

// fxNPY lays out a .npy (format 1.0) of numel float32 as a hole.
func fxNPY(t *testing.T, path string, numel int64) {
	t.Helper()
	h := "{'descr': '<f4', 'fortran_order': False, 'shape': (" + itoa(numel) + ",), }"
	h += strings.Repeat(" ", 63-(10+len(h))%64) + "\n"
	fxWriteSparse(t, path, "\x93NUMPY\x01\x00", binary.LittleEndian.AppendUint16(nil, uint16(len(h))), h, fxHole(4*numel))
}

// fxGGUF lays out a GGUF v3 file of F32 tensors of numel elements each
// (dims [numel/256, 256]), their data as one hole.
func fxGGUF(t *testing.T, path string, names []string, numel int64) {
	t.Helper()
	le32 := func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
	le64 := func(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
	str := func(b []byte, s string) []byte { return append(le64(b, uint64(len(s))), s...) }
	b := append([]byte("GGUF"), 3, 0, 0, 0)
	b = le64(le64(b, uint64(len(names))), 1)
	b = str(le32(str(b, "general.architecture"), 8), "llama")
	for i, n := range names {
		b = le64(le64(le32(str(b, n), 2), 256), uint64(numel/256))
		b = le64(le32(b, 0), uint64(i)*uint64(4*numel))
	}
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	fxWriteSparse(t, path, b, fxHole(int64(len(names))*4*numel))
}

// fxServerMemory returns the server's RssAnon and VmHWM in bytes.
func fxServerMemory(t *testing.T, m *Mount) (anon, hwm int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + itoa(int64(m.cmd.Process.Pid)) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			var v int64
			for _, c := range f[1] {
				v = v*10 + int64(c-'0')
			}
			switch f[0] {
			case "RssAnon:":
				anon = v << 10
			case "VmHWM:":
				hwm = v << 10
			}
		}
	}
	if anon == 0 || hwm == 0 {
		t.Fatalf("no RssAnon/VmHWM in /proc/%d/status", m.cmd.Process.Pid)
	}
	return anon, hwm
}

// TestMountMemoryFlat: mounting a checkpoint costs memory in proportion
// to its tensors, not their bytes. The same tensors are mounted twice,
// 4 KiB and 3 GiB of data in all (the data a hole of a sparse file, so
// nothing is written), in each format; the server's anonymous memory and
// peak resident set must not grow with the data. A reader subprocess
// checks the end of the big files reads as zeros.
func TestMountMemoryFlat(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	names := []string{"layers.0.w", "layers.1.w", "layers.2.w", "lm_head.w"}
	const small, big = 256, 3 << 30 / 4 / 4 // float32 elements per tensor
	for _, c := range []struct {
		format string
		write  func(t *testing.T, path string, numel int64)
	}{
		{"pytorch zip", func(t *testing.T, p string, n int64) { fxTorchZip(t, p, names, n) }},
		{"pytorch legacy", func(t *testing.T, p string, n int64) { fxTorchLegacy(t, p, names, n) }},
		{"npy", func(t *testing.T, p string, n int64) { fxNPY(t, p, 4*n) }},
		{"gguf", func(t *testing.T, p string, n int64) { fxGGUF(t, p, names, n) }},
	} {
		t.Run(c.format, func(t *testing.T) {
			var anon, hwm [2]int64
			for i, n := range []int64{small, big} {
				p := filepath.Join(dir, strings.ReplaceAll(c.format, " ", "_")+itoa(n))
				c.write(t, p, n)
				m := mount(t, p)
				anon[i], hwm[i] = fxServerMemory(t, m)
				if i == 1 {
					out := runPy(t, `
import json, os, sys
m = sys.argv[1]
doc = json.load(open(os.path.join(m, ".tensorfs", "index.json")))
total = 0
for t in doc["tensors"]:
    p = os.path.join(m, t["path"])
    total += os.stat(p).st_size
    with open(p, "rb") as f:
        f.seek(-4096, 2)
        assert f.read() == bytes(4096), p
print(total)
`, m.Dir)
					if strings.TrimSpace(out) != itoa(4*4*n) {
						t.Errorf("the tensors hold %s bytes, want %d", out, 4*4*n)
					}
				}
				m.Unmount()
			}
			t.Logf("server after mount: %d KiB anonymous, %d KiB peak resident (4 KiB of tensors); %d KiB, %d KiB (3 GiB)",
				anon[0]>>10, hwm[0]>>10, anon[1]>>10, hwm[1]>>10)
			if anon[1] > anon[0]+16<<20 || hwm[1] > hwm[0]+32<<20 {
				t.Errorf("mounting 3 GiB of tensors took %d KiB anonymous, %d KiB peak resident; 4 KiB of the same tensors %d KiB, %d KiB",
					anon[1]>>10, hwm[1]>>10, anon[0]>>10, hwm[0]>>10)
			}
		})
	}
}

// TestGGUFUnknownTypeCode: a tensor of a ggml type code tensorfs does not
// know (77 here; 40-42 before this build knew them) never costs the file:
// the mount serves every other tensor (the IQ, TQ and Q8_1 ones in every
// view and .npy/) and lists it in index.json under "unserved" (name, type
// code, offset, why), logging one line; `tensorfs convert` names it and
// exits 1 without writing OUT; `tensorfs load --sha256` lists the others
// and exits 1 naming it.
func TestGGUFUnknownTypeCode(t *testing.T) {
	needFUSE(t)
	le32 := func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
	le64 := func(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
	str := func(b []byte, s string) []byte { return append(le64(b, uint64(len(s))), s...) }
	ts := []struct {
		name  string
		code  uint32 // ggml type
		dims  []uint64
		bytes int
	}{
		{"iq2_xxs", 16, []uint64{256, 2}, 2 * 66},
		{"future", 77, []uint64{32}, 40},
		{"tq2_0", 35, []uint64{256}, 66},
		{"q8_1", 9, []uint64{64, 3}, 6 * 36},
		{"f32", 0, []uint64{4}, 16},
	}
	b := append([]byte("GGUF"), 3, 0, 0, 0)
	b = le64(le64(b, uint64(len(ts))), 0)
	var data []byte
	futureOff := 0
	for _, tn := range ts {
		b = le32(str(b, tn.name), uint32(len(tn.dims)))
		for _, d := range tn.dims {
			b = le64(b, d)
		}
		if tn.name == "future" {
			futureOff = len(data)
		}
		b = le64(le32(b, tn.code), uint64(len(data)))
		data = append(data, pattern(tn.bytes, byte(len(data)))...)
		for len(data)%32 != 0 {
			data = append(data, 0)
		}
	}
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	futureOff += len(b)
	src := filepath.Join(t.TempDir(), "mixed.gguf")
	if err := os.WriteFile(src, append(b, data...), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mount(t, src)
	out := runPy(t, `
import os, sys, json
m = sys.argv[1]
res = []
for name in ("iq2_xxs", "tq2_0", "q8_1", "f32", "future"):
    p = os.path.join(m, name)
    if not os.path.exists(p):
        res.append("%s absent" % name)
        continue
    views = [v for v in (".f32", ".f16", ".bf16", ".f64") if os.path.exists(os.path.join(m, v, name))]
    npy = os.path.exists(os.path.join(m, ".npy", name + ".npy"))
    res.append("%s %s %s %d %s %s" % (name, os.getxattr(p, "user.tensorfs.dtype").decode(),
        os.getxattr(p, "user.tensorfs.shape").decode(), len(open(p, "rb").read()), ",".join(views) or "-", npy))
doc = json.load(open(os.path.join(m, ".tensorfs", "index.json")))
res.append(json.dumps(doc.get("unserved"), sort_keys=True))
res.append(" ".join(t["name"] for t in doc["tensors"]))
print("\n".join(res))
`, m.Dir)
	unserved := `[{"name": "future", "offset": ` + itoa(int64(futureOff)) + `, "shape": [32], "source": "` + src +
		`", "type": "ggml type 77", "why": "unknown ggml type code 77 (newer than this tensorfs: its block size, so the tensor's size, is not known)"}]`
	want := "iq2_xxs IQ2_XXS [2,256] 132 .f32,.f16,.bf16,.f64 True\n" +
		"tq2_0 TQ2_0 [256] 66 .f32,.f16,.bf16,.f64 True\n" +
		"q8_1 Q8_1 [3,64] 216 .f32,.f16,.bf16,.f64 True\n" +
		"f32 F32 [4] 16 .f32,.f16,.bf16,.f64 True\n" +
		"future absent\n" + unserved + "\n" +
		"f32 iq2_xxs q8_1 tq2_0\n"
	if out != want {
		t.Errorf("through the mount:\n%s\nwant:\n%s", out, want)
	}
	m.Unmount()
	if log := m.Stderr(); strings.Count(log, `tensor "future" (ggml type 77) is not served`) != 1 {
		t.Errorf("mount log: want one line for the unserved tensor:\n%s", log)
	}

	// convert: names it, exits 1, writes nothing.
	dst := filepath.Join(t.TempDir(), "out.safetensors")
	r := runTensorfs(t, "convert", "--dtype", "f16", src, dst)
	if r.code != 1 || !strings.Contains(r.stderr, `cannot write 1 tensor: "future" (ggml type 77); `+dst+` not written`) || r.stdout != "" {
		t.Errorf("convert: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("convert wrote %s (%v)", dst, err)
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), "*"))
	if len(matches) != 0 {
		t.Errorf("convert left %v", matches)
	}

	// load --sha256: every other tensor listed, then exit 1 naming it.
	r = runTensorfs(t, "load", "--sha256", "--dtype", "f32", "--quiet", src)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 1 || len(lines) != 4 || !strings.HasSuffix(lines[0], "  f32") || !strings.HasSuffix(lines[3], "  tq2_0") ||
		!strings.Contains(r.stderr, `tensor "future" (ggml type 77) is not served`) || !strings.Contains(r.stderr, `1 tensor not loaded: "future" (ggml type 77)`) {
		t.Errorf("load --sha256: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
