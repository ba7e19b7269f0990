package torch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// ptOldScript writes, into argv[1], checkpoints whose pickles are made the
// way torch 0.2/0.3 (2017) made them, in the legacy container (as torch
// 0.3 wrote it: magic, protocol, sys_info, main pickle, storage keys,
// storages) and in a zip: a tensor reduces to
// torch._utils._rebuild_tensor(storage, offset, size, stride); a
// Parameter or Variable to Parameter(data) / Variable(data) with BUILD
// state (requires_grad, volatile, backward_hooks), hooks None or an
// OrderedDict(); plus the other states torch's Tensor.__setstate__ takes:
// a legacy Variable's 5 fields and a legacy (storage, offset, size,
// stride). Then it loads each file with the installed torch and prints
// per file, per tensor name (tensorfs's rule), [dtype, shape, sha256 of
// the row-major bytes].
const ptOldScript = `
import sys, os, json, hashlib, collections, warnings
warnings.filterwarnings("ignore")
import torch
import torch.nn.parameter
import torch.autograd.variable

out = sys.argv[1]
g = torch.Generator().manual_seed(17)

class T03:
    """A tensor as torch 0.3 pickled it."""
    def __init__(self, t): self.t = t
    def __reduce_ex__(self, proto):
        t = self.t
        return (torch._utils._rebuild_tensor, (t.storage(), t.storage_offset(), tuple(t.size()), t.stride()))

class V03:
    """Variable.__reduce_ex__ of torch 0.3 (protocol > 1): type(self), (self.data,), state."""
    def __init__(self, cls, t, state): self.cls, self.t, self.state = cls, t, state
    def __reduce_ex__(self, proto):
        return (self.cls, (T03(self.t),), self.state)

P = torch.nn.parameter.Parameter
V = torch.autograd.variable.Variable
def param(*shape, hooks=None):
    return V03(P, torch.randn(*shape, generator=g), (True, False, hooks))

base = torch.randn(6, 5, generator=g)
other = torch.randn(4, 3, generator=g)
ckpt = {
    "model": collections.OrderedDict([
        ("encoder.embeddings.weight", param(7, 4)),
        ("encoder.rnn.weight_ih_l0", param(8, 4, hooks=collections.OrderedDict())),
        ("encoder.rnn.bias_ih_l0", param(8)),
        ("decoder.linear_out.weight", V03(P, base[1:4, 1:], (True, False, None))),
        ("decoder.t", V03(P, base.t(), (True, False, None))),
    ]),
    "generator": collections.OrderedDict([("0.weight", param(3, 4)), ("0.bias", param(3, hooks=collections.OrderedDict()))]),
    "variable": V03(V, torch.arange(5, dtype=torch.int64), (False, True, None)),
    "legacy_variable": V03(V, torch.zeros(2), (T03(torch.arange(4.0).view(2, 2)), None, None, False, False)),
    "legacy_set": V03(V, torch.zeros(1), (other.storage(), 3, (3, 3), (3, 1))),
    "plain": T03(torch.arange(6, dtype=torch.int32).view(2, 3)),
    "epoch": 13,
    "opt": {"lr": 1.0, "method": "sgd"},
}

made = []
for name, kw in (("onmt03_legacy.pt", {"_use_new_zipfile_serialization": False}),
                 ("onmt03_legacy_p1.pt", {"_use_new_zipfile_serialization": False, "pickle_protocol": 1}),
                 ("onmt03_zip.pt", {}),
                 ("onmt03_zip_p4.pt", {"pickle_protocol": 4})):
    p = os.path.join(out, name)
    torch.save(ckpt, p, **kw)
    made.append(p)
p = os.path.join(out, "param03.pt")
torch.save(param(2, 3), p, _use_new_zipfile_serialization=False)
made.append(p)

def sha(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()

def flat(v, path, res, base):
    name = "/".join(path) if path else base
    if isinstance(v, torch.Tensor):
        res[name] = [str(v.dtype)[6:], list(v.shape), sha(v)]
    elif isinstance(v, dict):
        for k, x in v.items():
            flat(x, path + [str(k)], res, base)

result = {}
for p in made:
    res = {}
    flat(torch.load(p), [], res, os.path.splitext(os.path.basename(p))[0])
    result[p] = res
print(json.dumps(result))
`

// ptRunRef runs a reference script (argv[1] is a fresh directory) that
// prints {file: {tensor name: [dtype, shape, sha256]}}.
func ptRunRef(t *testing.T, script string, modules ...string) map[string]map[string][]json.RawMessage {
	t.Helper()
	py := testenv.Python(t, modules...)
	stdout := ptReference(t, py, script)
	var ref map[string]map[string][]json.RawMessage
	if err := json.Unmarshal(stdout, &ref); err != nil {
		t.Fatalf("python output: %v", err)
	}
	return ref
}

// ptCompareRef parses each file of ref and checks that its tensors are
// exactly torch's (name, dtype, shape, bytes); it returns the index of
// each file and the number of tensors checked.
func ptCompareRef(t *testing.T, ref map[string]map[string][]json.RawMessage) (map[string]*index.Index, int) {
	t.Helper()
	paths := make([]string, 0, len(ref))
	for p := range ref {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	idxs := map[string]*index.Index{}
	n := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := ptParse(p, data)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		ptCheckIndex(t, idx, p, int64(len(data)))
		idxs[p] = idx
		got := map[string]index.Tensor{}
		for _, tn := range idx.Tensors {
			got[tn.Name] = tn
		}
		for name, want := range ref[p] {
			tn, ok := got[name]
			if !ok {
				t.Errorf("%s: tensor %q missing (have %v)", filepath.Base(p), name, ptNames(idx))
				continue
			}
			delete(got, name)
			var dt, sha string
			var shape []int64
			json.Unmarshal(want[0], &dt)
			json.Unmarshal(want[1], &shape)
			json.Unmarshal(want[2], &sha)
			if ptDTypeNames[dt] != tn.DType {
				t.Errorf("%s: %s: dtype %s, torch says %s", filepath.Base(p), name, tn.DType, dt)
			}
			if !reflect.DeepEqual(append([]int64{}, shape...), append([]int64{}, tn.Shape...)) {
				t.Errorf("%s: %s: shape %v, torch says %v", filepath.Base(p), name, tn.Shape, shape)
			}
			if h := ptSHA(npzGather(t, data, idx, tn)); h != sha {
				t.Errorf("%s: %s: bytes differ from torch's", filepath.Base(p), name)
			}
			n++
		}
		for name := range got {
			t.Errorf("%s: tensor %q that torch does not have", filepath.Base(p), name)
		}
	}
	return idxs, n
}

// TestTorch03Checkpoints: checkpoints pickled the way torch 0.2/0.3 did
// (Parameters and Variables with BUILD state (requires_grad, volatile,
// hooks), legacy Variable and set_ states), legacy and zip, serve every
// tensor torch.load gives, byte-exact. Before, the first Parameter
// refused the file ("BUILD gives state (True, False, None) to a
// *index.torchTensor").
func TestTorch03Checkpoints(t *testing.T) {
	ref := ptRunRef(t, ptOldScript, "torch")
	if len(ref) != 5 {
		t.Fatalf("python made %d files, want 5", len(ref))
	}
	idxs, n := ptCompareRef(t, ref)
	for p, idx := range idxs {
		if filepath.Base(p) == "param03.pt" {
			continue
		}
		if got := idx.Metadata["epoch"]; got != int64(13) {
			t.Errorf("%s: metadata epoch = %#v", filepath.Base(p), got)
		}
		if len(idx.Tensors) != 11 {
			t.Errorf("%s: %d tensors, want 11: %v", filepath.Base(p), len(idx.Tensors), ptNames(idx))
		}
	}
	t.Logf("%d tensors match torch in %d files", n, len(idxs))
}

// ptNumpyScript saves, with torch.save, checkpoints holding numpy arrays
// beside torch tensors: zip and legacy, pickle protocols 2 (torch.save's
// default: the bytes are _codecs.encode(str, "latin1")), 3 and 4; arrays
// of every numeric dtype, big-endian, Fortran order, 0-d, empty, object
// arrays; and the same pickled as numpy 2 does (numpy._core.multiarray).
// It loads each file with torch and prints, per file, each tensor and
// array that tensorfs must serve: [dtype, shape, sha256 of the row-major
// little-endian bytes].
const ptNumpyScript = `
import sys, os, json, hashlib, types, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch

out = sys.argv[1]
rng = np.random.default_rng(5)
arrays = {
    "f32": (rng.standard_normal((2, 3)) * 10).astype(np.float32),
    "f64_fortran": np.asfortranarray(rng.standard_normal((3, 4))),
    "i32_big": np.arange(-3, 5, dtype=">i4").reshape(2, 4),
    "u16": np.arange(6, dtype=np.uint16) * 300,
    "i64_scalar": np.array(-7, dtype=np.int64),
    "bool": np.array([True, False, True]),
    "c64": np.array([1 + 2j, -3.5j], dtype=np.complex64),
    "f16": np.arange(5, dtype=np.float16) / 3,
    "empty": np.zeros((0, 4), dtype=np.float32),
    "ascii_u8": np.array([[1, 2, 3], [65, 66, 127]], dtype=np.uint8),
    "i8": np.array([-1, 5, -128], dtype=np.int8),
}
ckpt = {"np": arrays, "objects": np.array([1, "two", 3.0], dtype=object),
        "rng": np.random.RandomState(3).get_state(), "t": torch.arange(4.0)}

# numpy 2 pickles name numpy._core.multiarray._reconstruct.
core = types.ModuleType("numpy._core")
mult = types.ModuleType("numpy._core.multiarray")
def _reconstruct(*a):
    return np.core.multiarray._reconstruct(*a)
_reconstruct.__module__, _reconstruct.__qualname__ = "numpy._core.multiarray", "_reconstruct"
mult._reconstruct = _reconstruct
core.multiarray = mult
sys.modules["numpy._core"], sys.modules["numpy._core.multiarray"] = core, mult
class NP2:
    def __init__(self, a): self.a = a
    def __reduce_ex__(self, proto):
        f, args, state = self.a.__reduce__()
        return (_reconstruct, args, state)

made = {}
for name, proto, kw in (("np_zip_p2.pt", 2, {}), ("np_zip_p3.pt", 3, {}), ("np_zip_p4.pt", 4, {}),
                        ("np_legacy_p2.pt", 2, {"_use_new_zipfile_serialization": False}),
                        ("np_legacy_p4.pt", 4, {"_use_new_zipfile_serialization": False})):
    p = os.path.join(out, name)
    torch.save(ckpt, p, pickle_protocol=proto, **kw)
    made[p] = proto
for name, kw in (("np2_zip_p4.pt", {}), ("np2_legacy_p3.pt", {"_use_new_zipfile_serialization": False})):
    p = os.path.join(out, name)
    torch.save({"a": NP2(arrays["f32"]), "b": NP2(arrays["f64_fortran"]), "c": NP2(arrays["i32_big"])}, p,
               pickle_protocol=4 if "p4" in name else 3, **kw)
    made[p] = 4

def le(a):
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes()

def flat(v, path, res, proto):
    name = "/".join(path)
    if isinstance(v, torch.Tensor):
        res[name] = [str(v.dtype)[6:], list(v.shape), hashlib.sha256(v.numpy().tobytes()).hexdigest()]
    elif isinstance(v, np.ndarray) and v.dtype != object:
        res[name] = [v.dtype.name, list(v.shape), hashlib.sha256(le(v)).hexdigest()]
    elif isinstance(v, dict):
        for k, x in v.items():
            flat(x, path + [str(k)], res, proto)
    elif isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.dtype == object):
        for i, x in enumerate(v):
            flat(x, path + [str(i)], res, proto)

result = {}
for p, proto in made.items():
    res = {}
    flat(torch.load(p), [], res, proto)
    result[p] = res
print(json.dumps(result))
`

// TestTorchNumpyArrays: numpy arrays saved with torch.save are tensors
// under their keys, byte-exact with what torch.load gives, wherever their
// bytes are a range of the file (protocol >= 3, or an all-ASCII Latin-1
// str in protocol 2; numpy 1 and numpy 2 pickles; zip and legacy), and
// from their Latin-1 str where it is UTF-8 in the pickle (protocol 2); an
// object array is its elements. Before, every array was only a repr in
// the metadata.
func TestTorchNumpyArrays(t *testing.T) {
	ref := ptRunRef(t, ptNumpyScript, "torch", "numpy")
	if len(ref) != 7 {
		t.Fatalf("python made %d files, want 7", len(ref))
	}
	idxs, n := ptCompareRef(t, ref)
	for p, idx := range idxs {
		base := filepath.Base(p)
		if base == "np_zip_p4.pt" || base == "np_legacy_p4.pt" {
			if len(idx.Tensors) != 13 { // 11 arrays, the RNG state's key array, t
				t.Errorf("%s: %d tensors, want 13: %v", base, len(idx.Tensors), ptNames(idx))
			}
			if got, _ := idx.Metadata["objects"].([]any); !reflect.DeepEqual(got, []any{int64(1), "two", 3.0}) {
				t.Errorf("%s: object array metadata %#v", base, idx.Metadata["objects"])
			}
		}
		if base == "np_zip_p2.pt" || base == "np_legacy_p2.pt" {
			// Protocol 2: every array is served, those with bytes >= 0x80
			// as Latin-1 members (TestTorchNumpyProtocol2).
			if len(idx.Tensors) != 13 || len(idx.Members) == 0 {
				t.Errorf("%s: %d tensors (want 13), %d members: %v", base, len(idx.Tensors), len(idx.Members), ptNames(idx))
			}
		}
	}
	t.Logf("%d tensors and arrays match torch.load in %d files", n, len(idxs))
}

// ptPkArray is a numpy array as ndarray.__reduce__ pickles it:
// _reconstruct(ndarray, (0,), b"b") then BUILD (1, shape, dtype, fortran,
// data), data the pickled raw data.
func ptPkArray(descr, order string, shape []int64, data []byte) []byte {
	dt := ptCat(ptPkGlobal("numpy", "dtype"), ptPkTuple(ptPkStr(descr), []byte{pickle.OpNEWFALSE}, []byte{pickle.OpNEWTRUE}), []byte{'R'},
		ptPkTuple(ptPkInt(3), ptPkStr(order), []byte{'N', 'N', 'N'}, ptPkInt(-1), ptPkInt(-1), ptPkInt(0)), []byte{'b'})
	return ptCat(ptPkGlobal("numpy.core.multiarray", "_reconstruct"),
		ptPkTuple(ptPkGlobal("numpy", "ndarray"), ptPkTuple(ptPkInt(0)), []byte{'C', 1, 'b'}), []byte{'R'},
		ptPkTuple(ptPkInt(1), ptPkInts(shape...), dt, []byte{pickle.OpNEWFALSE}, data), []byte{'b'})
}

// TestTorchNumpyArraysBad: an inline numpy array that cannot be what it
// says is refused with one line naming its key; the others are served.
func TestTorchNumpyArraysBad(t *testing.T) {
	short := func(n int) []byte { return append([]byte{'C', byte(n)}, make([]byte, n)...) }
	for _, c := range []struct {
		name string
		arr  []byte
		want string
	}{
		{"short data", ptPkArray("f4", "<", []int64{2, 3}, short(8)), `m.pt: numpy array: f4[2 3] needs 24 bytes, its data has 8 (tensor "a")`},
		{"string array", ptPkArray("U3", "<", []int64{2}, short(24)), `m.pt: numpy array: dtype "<U3" is a string array; it has no tensor dtype (tensor "a")`},
		{"record array", ptPkArray("V8", "|", []int64{2}, short(16)), `m.pt: numpy array: dtype "|V8" is a void/record array; it has no tensor dtype (tensor "a")`},
		{"data not bytes", ptPkArray("f4", "<", []int64{1}, ptPkInt(5)), `m.pt: numpy array: data is int, not bytes (tensor "a")`},
		{"negative dim", ptPkArray("f4", "<", []int64{-1}, short(4)), `m.pt: numpy array: shape (-1,) is not a tuple of sizes (tensor "a")`},
	} {
		p := ptCat([]byte{pickle.OpPROTO, 2, '}'}, ptPkStr("a"), c.arr, []byte{'s', '.'})
		b := ptZip(t, ptMember{Name: "r/data.pkl", Data: p})
		_, err := ptParse("m.pt", b)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v, want %s", c.name, err, c.want)
		}
	}
	// A good one: served from its range of the file.
	data := []byte{1, 0, 2, 0, 3, 0}
	p := ptCat([]byte{pickle.OpPROTO, 2, '}'}, ptPkStr("a"), ptPkArray("u2", ">", []int64{3}, append([]byte{'C', 6}, data...)), []byte{'s', '.'})
	b := ptZip(t, ptMember{Name: "r/data.pkl", Data: p})
	idx, err := ptParse("m.pt", b)
	if err != nil || len(idx.Tensors) != 1 {
		t.Fatalf("good array: %v %v", idx, err)
	}
	tn := idx.Tensors[0]
	if got := ptGather(t, b, tn); tn.Name != "a" || !tn.BigEndian || !reflect.DeepEqual(got, []byte{0, 1, 0, 2, 0, 3}) {
		t.Errorf("good array: %+v gathers %v", tn, got)
	}
}
