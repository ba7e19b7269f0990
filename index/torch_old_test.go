package index

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testdata"
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
	py := testdata.Python(t, modules...)
	cmd := exec.Command(py, "-c", script, t.TempDir())
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	stdout, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("python: %v\n%s", err, msg)
	}
	var ref map[string]map[string][]json.RawMessage
	if err := json.Unmarshal(stdout, &ref); err != nil {
		t.Fatalf("python output: %v", err)
	}
	return ref
}

// ptCompareRef parses each file of ref and checks that its tensors are
// exactly torch's (name, dtype, shape, bytes); it returns the index of
// each file and the number of tensors checked.
func ptCompareRef(t *testing.T, ref map[string]map[string][]json.RawMessage) (map[string]*Index, int) {
	t.Helper()
	paths := make([]string, 0, len(ref))
	for p := range ref {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	idxs := map[string]*Index{}
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
		got := map[string]Tensor{}
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
			if h := ptSHA(ptGather(t, data, tn)); h != sha {
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
