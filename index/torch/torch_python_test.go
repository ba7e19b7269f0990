package torch

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// ptTorchScript generates torch fixtures into argv[1] (views, tied
// weights, training checkpoints with optimizer state and Namespace, whole
// modules, every pickle protocol in zip and legacy form, dtypes, a
// big-endian archive, refused and malicious files), then loads every file
// (argv[2:] and the generated ones) with torch itself and prints, per
// file, the expectation and per tensor name: dtype, shape and the sha256
// of the contiguous little-endian bytes. Names follow tensorfs's rule:
// keys joined with "/", sequence elements by index, object attributes by
// name, a bare tensor under the file's base name.
const ptTorchScript = `
import sys, os, json, hashlib, argparse, zipfile, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch

out = sys.argv[1]
files = sys.argv[2:]
made = {}      # path -> expectation ("ok" or "refuse:<substring>")
given = {}     # path -> object to take the reference from instead of torch.load

def save(name, obj, expect="ok", **kw):
    p = os.path.join(out, name)
    torch.save(obj, p, **kw)
    made[p] = expect
    return p

g = torch.Generator().manual_seed(7)
base = torch.randn(6, 8, generator=g)
views = {
    "offset": base[2:], "transpose": base.t(), "step": base[:, ::3], "step2": base[1::2, 1::3],
    "expand": torch.arange(3.0).expand(4, 3), "expand0": torch.arange(2.0).view(2, 1).expand(2, 5),
    "channels_last": torch.randn(2, 3, 4, 5, generator=g).contiguous(memory_format=torch.channels_last),
    "scalar_view": base[1, 2], "row": base[3], "col": base[:, 5], "size1": base[1:2, :],
    "empty_view": base[:, :0], "unsqueezed": base[:, 1].unsqueeze(0),
    "permuted": torch.randn(2, 3, 4, generator=g).permute(2, 0, 1),
}
save("views.pt", views)
save("views_legacy.pt", views, _use_new_zipfile_serialization=False)
w = torch.randn(3, 3, generator=g)
tied = {"encoder.weight": w, "decoder.weight": w, "flat": w.view(-1), "list": [w, w.t()]}
save("tied.pt", tied)
save("tied_legacy.pt", tied, _use_new_zipfile_serialization=False)

model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model(torch.randn(5, 4, generator=g)).sum().backward()
opt.step()
ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 5,
        "best": np.float64(0.25), "steps": np.int64(-3),
        "args": argparse.Namespace(lr=0.001, name="run", layers=[4, 3, 2]),
        "nan": float("nan"), "big": 2**70, "ratio": complex(1, 2)}
save("train_ckpt.pt", ckpt)
save("train_ckpt_legacy.pt", ckpt, _use_new_zipfile_serialization=False)
save("whole_module.pt", model)
save("whole_module_legacy.pt", model, _use_new_zipfile_serialization=False)

for p in (1, 2, 3, 4, 5):
    d = {"x": base[:2], "nested": {"y": torch.arange(5, dtype=torch.int16), 3: torch.ones(2, dtype=torch.bool)},
         "lst": [torch.zeros(1, dtype=torch.float64), (torch.tensor([1 + 2j]),)], "s": "text", "f": 1.5}
    save("proto%d.pt" % p, d, pickle_protocol=p)
    save("proto%d_legacy.pt" % p, d, pickle_protocol=p, _use_new_zipfile_serialization=False)

save("bare_param.pt", torch.nn.Parameter(torch.randn(2, 2, generator=g)))
save("tensor_list.pt", [torch.ones(2), torch.zeros(3, dtype=torch.int32)])
t = torch.randn(3, generator=g)
t.note = "hi"
save("tensor_with_attr.pt", {"t": t})
save("storage.pt", torch.arange(6, dtype=torch.int32).storage())
dts = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
       torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128]
save("dtypes.pt", {str(dt)[6:]: (torch.randn(2, 3, generator=g) * 50).to(dt) for dt in dts})
save("empty_dict.pt", {})
save("only_meta.pt", {"a": 1, "b": [1, 2.5, None], "c": {"d": True}})

# Big-endian archive: the zip of torch.save with byteorder "big" and every
# storage byte-swapped; torch 1.13 cannot load it, so the reference is the
# tensors themselves.
be = {"f32": torch.randn(3, 2, generator=g), "i64": torch.arange(-3, 3), "bf16": torch.randn(4, generator=g).bfloat16(),
      "c64": torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64), "u8": torch.arange(4, dtype=torch.uint8),
      "f16t": torch.randn(2, 3, generator=g).half().t()}
src = save("be_src.pt", be)
z = zipfile.ZipFile(src)
bep = os.path.join(out, "big_endian.pt")
with zipfile.ZipFile(bep, "w", zipfile.ZIP_STORED) as zo:
    import pickle as _p
    names = z.namelist()
    root = names[0].split("/")[0]
    # element unit per storage key, from the tensors' order in the pickle
    keyunit = {}
    class U(_p.Unpickler):
        def find_class(self, mod, name):
            if mod == "torch._utils" and name == "_rebuild_tensor_v2":
                return lambda *a: None
            if mod == "collections" and name == "OrderedDict":
                return dict
            return (mod, name)
        def persistent_load(self, pid):
            st = pid[1][1]
            keyunit[pid[2]] = {"FloatStorage": 4, "LongStorage": 8, "BFloat16Storage": 2, "ComplexFloatStorage": 4,
                               "ByteStorage": 1, "HalfStorage": 2}[st]
            return None
    U(z.open(root + "/data.pkl")).load()
    for n in names:
        data = z.read(n)
        k = n[len(root) + len("/data/"):] if n.startswith(root + "/data/") else None
        if k is not None and k in keyunit:
            u = keyunit[k]
            data = b"".join(data[i:i + u][::-1] for i in range(0, len(data), u))
        zo.writestr(n, data)
    zo.writestr(root + "/byteorder", b"big")
made[bep] = "ok"
given[bep] = be

# Refused files.
save("quantized.pt", {"q": torch.quantize_per_tensor(torch.randn(4, generator=g), 0.1, 0, torch.qint8)},
     expect="refuse:quantized")
save("sparse.pt", {"s": torch.randn(3, 3, generator=g).to_sparse()}, expect="refuse:sparse tensor")
pwned = os.path.join(out, "PWNED")
class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > " + pwned,))
class Evil2:
    def __reduce__(self):
        return (eval, ("1+1",))
save("evil.pt", {"x": torch.ones(1), "e": Evil()}, expect="refuse:refused global posix.system")
save("evil_legacy.pt", {"x": torch.ones(1), "e": Evil()}, expect="refuse:refused global posix.system",
     _use_new_zipfile_serialization=False)
save("evil_eval.pt", {"e": Evil2()}, expect="refuse:refused global __builtin__.eval: a builtin")
save("evil_proto1.pt", [Evil()], expect="refuse:refused global posix.system", pickle_protocol=1)

def sha(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        b = t.view(torch.int16).numpy().tobytes()
    else:
        b = t.numpy().tobytes()
    return hashlib.sha256(b).hexdigest()

` + testenv.TorchFlattenPy + `
def leaf(t):
    return [str(t.dtype)[6:], list(t.shape), sha(t)]

result = {}
for p in files + sorted(made):
    exp = made.get(p, "ok")
    r = {"expect": exp}
    if exp == "ok":
        obj = given[p] if p in given else torch.load(p, map_location="cpu")
        res = {}
        flat(obj, [], res, os.path.splitext(os.path.basename(p))[0], frozenset())
        r["tensors"] = res
    result[p] = r
print(json.dumps({"files": result, "pwned": os.path.exists(pwned)}))
`

type ptRef struct {
	Expect  string                       `json:"expect"`
	Tensors map[string][]json.RawMessage `json:"tensors"`
}

// TestTorchAgainstPython parses every PyTorch file of the shared test data
// and the fixtures generated above, and compares each tensor (name, dtype,
// shape, sha256 of the bytes gathered through Offset/Strides/BigEndian)
// with what torch itself loads. One Python run for all files.
func TestTorchAgainstPython(t *testing.T) {
	py := testenv.Python(t, "torch", "numpy")
	dir := testenv.Dir(t)
	files := ptSharedTorchFiles()
	if len(files) < 100 {
		testenv.SkipOrFail(t, "expected the shared PyTorch test files under "+dir)
	}
	stdout := ptReference(t, py, ptTorchScript)
	var ref struct {
		Files map[string]ptRef `json:"files"`
		Pwned bool             `json:"pwned"`
	}
	if err := json.Unmarshal(stdout, &ref); err != nil {
		t.Fatalf("python output: %v", err)
	}
	if ref.Pwned {
		t.Fatal("the malicious fixture's payload ran in Python (generator bug)")
	}
	paths := make([]string, 0, len(ref.Files))
	for p := range ref.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var nFiles, nTensors, nStrided, nRefused int
	for _, p := range paths {
		r := ref.Files[p]
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := ptParse(p, data)
		if want, ok := strings.CutPrefix(r.Expect, "refuse:"); ok {
			ptErrContains(t, err, filepath.Base(p)+": ", want)
			t.Logf("refused: %v", err)
			nRefused++
			continue
		}
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if idx.Format != "pytorch" {
			t.Errorf("%s: format %q", p, idx.Format)
		}
		ptCheckIndex(t, idx, p, int64(len(data)))
		nFiles++
		got := map[string]index.Tensor{}
		for _, tn := range idx.Tensors {
			got[tn.Name] = tn
		}
		for name, want := range r.Tensors {
			tn, ok := got[name]
			if !ok {
				t.Errorf("%s: tensor %q missing (have %v)", p, name, ptNames(idx))
				continue
			}
			delete(got, name)
			var dt string
			var shape []int64
			var sha string
			json.Unmarshal(want[0], &dt)
			json.Unmarshal(want[1], &shape)
			json.Unmarshal(want[2], &sha)
			if ptDTypeNames[dt] != tn.DType {
				t.Errorf("%s: %s: dtype %s, torch says %s", p, name, tn.DType, dt)
			}
			if !reflect.DeepEqual(append([]int64{}, shape...), append([]int64{}, tn.Shape...)) {
				t.Errorf("%s: %s: shape %v, torch says %v", p, name, tn.Shape, shape)
			}
			if h := ptSHA(ptGather(t, data, tn)); h != sha {
				t.Errorf("%s: %s: bytes differ from torch's (strides %v, offset %d, big-endian %v)", p, name, tn.Strides, tn.Offset, tn.BigEndian)
			}
			nTensors++
			if tn.Strides != nil {
				nStrided++
			}
		}
		for name := range got {
			t.Errorf("%s: tensor %q that torch does not have", p, name)
		}
		if strings.HasSuffix(p, "/train_ckpt.pt") || strings.HasSuffix(p, "/train_ckpt_legacy.pt") {
			ptCheckTrainMeta(t, p, idx.Metadata)
		}
	}
	if nStrided == 0 || nRefused < 6 {
		t.Errorf("fixtures did not exercise strided views (%d) or refusals (%d)", nStrided, nRefused)
	}
	t.Logf("%d files, %d tensors (%d strided) match torch; %d files refused as expected", nFiles, nTensors, nStrided, nRefused)
}

// ptCheckTrainMeta checks the non-tensor values of train_ckpt.pt.
func ptCheckTrainMeta(t *testing.T, p string, md map[string]any) {
	t.Helper()
	get := func(path ...string) any {
		var v any = md
		for _, k := range path {
			switch m := v.(type) {
			case map[string]any:
				v = m[k]
			case []any:
				i, err := strconv.Atoi(k)
				if err != nil || i >= len(m) {
					return nil
				}
				v = m[i]
			default:
				return nil
			}
		}
		return v
	}
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"epoch"}, int64(5)},
		{[]string{"best"}, 0.25},
		{[]string{"steps"}, int64(-3)},
		{[]string{"nan"}, "NaN"},
		{[]string{"big"}, json.Number("1180591620717411303424")},
		{[]string{"ratio"}, "(1.0+2j)"},
		{[]string{"args", "lr"}, 0.001},
		{[]string{"args", "name"}, "run"},
		{[]string{"args", "__class__"}, "argparse.Namespace"},
		{[]string{"args", "layers"}, []any{int64(4), int64(3), int64(2)}},
		{[]string{"optimizer", "param_groups", "0", "lr"}, 0.001},
		{[]string{"optimizer", "param_groups", "0", "params"}, []any{int64(0), int64(1), int64(2), int64(3)}},
	} {
		got := get(c.path...)
		if f, ok := got.(float64); ok && math.IsNaN(f) {
			t.Errorf("%s: metadata %v is a NaN float (not JSON-encodable)", p, c.path)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: metadata %v = %#v, want %#v", p, c.path, got, c.want)
		}
	}
}
