package torch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index/pickle"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestTorchNeverDrops: every container path of the unpickler keeps every
// value, and entries whose names would coincide get #1, #2... (the name
// rule in torch_tree.go). Today's main lost the tensors of the first
// three rows silently.
func TestTorchNeverDrops(t *testing.T) {
	tensor := func(key string) []byte {
		return ptRebuild(ptTS{"", "FloatStorage", key, 4, 0, []int64{4}, []int64{1}, nil}, false)
	}
	p2 := []byte{pickle.OpPROTO, 2}
	dict := func(items ...[]byte) []byte { return ptCat([]byte{'}', '('}, ptCat(items...), []byte{'u'}) }
	obj := ptPkGlobal("__main__", "Optim")
	for _, c := range []struct {
		name   string
		pickle []byte
		want   []string
	}{
		{"tensor keys (old optimizer state)", ptCat(p2, dict(ptPkStr("state"), dict(
			tensor("0"), dict(ptPkStr("exp_avg"), tensor("2")),
			tensor("1"), dict(ptPkStr("exp_avg"), tensor("3"))))),
			[]string{"state/0/exp_avg", "state/1/exp_avg"}},
		{"tensor keys sharing a storage", ptCat(p2, dict(
			tensor("0"), dict(ptPkStr("v"), tensor("2")),
			tensor("0"), dict(ptPkStr("v"), tensor("3")))),
			[]string{"0#1/v", "0/v"}},
		{"same tensor object as key and value", ptCat(p2, dict(
			tensor("1"), []byte{'q', 1}, dict(ptPkStr("p"), []byte{'h', 1}))),
			[]string{"1/p"}},
		{"str and int keys that print the same", ptCat(p2, dict(ptPkStr("1"), tensor("0"), ptPkInt(1), tensor("1"))),
			[]string{"1", "1#1"}},
		{"repeated key", ptCat(p2, []byte{'}'}, ptPkStr("a"), tensor("0"), []byte{'s'}, ptPkStr("a"), tensor("1"), []byte{'s'}),
			[]string{"a", "a#1"}},
		{"suffix already taken", ptCat(p2, dict(ptPkStr("a"), tensor("0"), ptPkStr("a#1"), tensor("1"), ptPkStr("a"), tensor("2"))),
			[]string{"a", "a#1", "a#2"}},
		{"tuple keys holding tensors", ptCat(p2, dict(
			ptPkTuple(tensor("0"), ptPkInt(1)), ptPkStr("x"), ptPkTuple(tensor("1"), ptPkInt(1)), ptPkStr("y"))),
			nil},
		{"object attribute and argument", ptCat(p2, dict(ptPkStr("o"), ptCat(obj, ptPkTuple(tensor("0")), []byte{'R'},
			dict(ptPkStr("0"), tensor("1")), []byte{'b'}))),
			[]string{"o/0", "o/0#1"}},
		{"BUILD twice", ptCat(p2, dict(ptPkStr("o"), ptCat(obj, []byte{')', 'R'},
			dict(ptPkStr("w"), tensor("0")), []byte{'b'}, dict(ptPkStr("w"), tensor("1")), []byte{'b'}))),
			[]string{"o/w", "o/w#1"}},
		{"dict subclass state", ptCat(p2, dict(ptPkStr("d"), ptCat(ptPkGlobal("collections", "OrderedDict"), []byte{')', 'R'},
			dict(ptPkStr("w"), tensor("0")), []byte{'b'}, dict(ptPkStr("w"), tensor("1")), []byte{'b'}))),
			[]string{"d/w", "d/w#1"}},
		{"key holding a slash", ptCat(p2, dict(ptPkStr("a/b"), tensor("0"), ptPkStr("a"), dict(ptPkStr("b"), tensor("1")))),
			[]string{"a/b", "a/b#1"}},
		{"tensor attribute holding a tensor", ptCat(p2, dict(ptPkStr("p"), ptCat(ptPkGlobal("torch._utils", "_rebuild_parameter_with_state"),
			ptPkTuple(tensor("0"), []byte{pickle.OpNEWFALSE}, ptCat(ptPkGlobal("collections", "OrderedDict"), []byte(")R")), dict(ptPkStr("extra"), tensor("1"))), []byte{'R'}))),
			[]string{"p", "p#state/extra"}},
		{"NEWOBJ_EX keyword arguments", ptCat(p2, dict(ptPkStr("o"), ptCat(obj, []byte{')'}, dict(ptPkStr("w"), tensor("0")), []byte{pickle.OpNEWOBJ_EX}))),
			[]string{"o/w"}},
		{"set of tensors", ptCat(p2, dict(ptPkStr("s"), ptCat([]byte{pickle.OpEMPTY_SET, '('}, tensor("0"), tensor("1"), []byte{pickle.OpADDITEMS}))),
			[]string{"s/0", "s/1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			storages := []ptMember{{Name: "r/data.pkl", Data: append(c.pickle, '.')}}
			for _, k := range []string{"0", "1", "2", "3"} {
				storages = append(storages, ptMember{Name: "r/data/" + k, Data: ptF32(4)})
			}
			b := ptZip(t, storages...)
			idx, err := ptParse("/x/m.pt", b)
			if err != nil {
				t.Fatal(err)
			}
			ptCheckIndex(t, idx, "/x/m.pt", int64(len(b)))
			got := ptNames(idx)
			if c.want == nil { // keys are names, not entries: two metadata values
				if len(got) != 0 || len(idx.Metadata) != 2 {
					t.Fatalf("tensors %q, metadata %v, want two metadata values", got, idx.Metadata)
				}
				return
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("tensors %q, want %q", got, c.want)
			}
		})
	}
}

// TestTorchBuildRefused: BUILD giving state to a value that holds none
// (Python fails there too) refuses the file instead of losing the state.
func TestTorchBuildRefused(t *testing.T) {
	p := ptCat([]byte{pickle.OpPROTO, 2}, ptRebuild(ptTS{"", "FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, nil}, false),
		[]byte{'}', '('}, ptPkStr("w"), ptRebuild(ptTS{"", "FloatStorage", "1", 4, 0, []int64{4}, []int64{1}, nil}, false), []byte{'u', 'b', '.'})
	b := ptZip(t, ptMember{Name: "r/data.pkl", Data: p}, ptMember{Name: "r/data/0", Data: ptF32(4)}, ptMember{Name: "r/data/1", Data: ptF32(4)})
	_, err := ptParse("m.pt", b)
	ptErrContains(t, err, "m.pt: pickle BUILD gives state {\"w\": tensor(FloatStorage[4])} to a torch.Tensor, which takes (requires_grad, volatile, hooks), a legacy (storage, offset, size, stride) or a legacy Variable's 5 fields (at byte ")
	if strings.Contains(err.Error(), "*index.") {
		t.Errorf("a Go type name in %q", err)
	}
	// A legacy Variable state whose data is not a tensor fails in torch too.
	p = ptCat([]byte{pickle.OpPROTO, 2}, ptRebuild(ptTS{"", "FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, nil}, false),
		ptPkTuple(ptPkInt(1), []byte{'N'}, []byte{'N'}, []byte{pickle.OpNEWTRUE}, []byte{pickle.OpNEWFALSE}), []byte{'b', '.'})
	b = ptZip(t, ptMember{Name: "r/data.pkl", Data: p}, ptMember{Name: "r/data/0", Data: ptF32(4)})
	_, err = ptParse("m.pt", b)
	ptErrContains(t, err, "m.pt: pickle BUILD gives a legacy Variable state whose data is 1, not a tensor (at byte ")
}

// ptTensorKeysScript saves, with torch itself, an OpenNMT-style (2017)
// checkpoint: the model's state dict and a whole optimizer object whose
// state is a dict keyed by parameter tensors, three of them of one shape;
// in zip and legacy form (argv[1] is the output directory). It prints,
// per file, the sha256 of every tensor reachable as a value (dict values,
// list elements, object attributes), one per path, as tensorfs serves
// them.
const ptTensorKeysScript = `
import sys, os, json, hashlib, warnings
warnings.filterwarnings("ignore")
import torch
out = sys.argv[1]
g = torch.Generator().manual_seed(3)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model(torch.randn(2, 4, generator=g)).sum().backward()
opt.step()
class Optim:
    pass
o = Optim()
o.optimizer = opt
o.lr = 1e-3
ckpt = {"model": model.state_dict(), "optim": o, "epoch": 3}
def sha(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()
def walk(v, acc, seen):
    if isinstance(v, torch.Tensor):
        acc.append(sha(v)); return
    if id(v) in seen:
        return
    if isinstance(v, dict):
        for x in v.values(): walk(x, acc, seen | {id(v)})
    elif isinstance(v, (list, tuple, set)):
        for x in v: walk(x, acc, seen | {id(v)})
    elif isinstance(v, torch.optim.Optimizer):
        walk(v.__getstate__(), acc, seen | {id(v)})
    elif hasattr(v, "__dict__"):
        walk(vars(v), acc, seen | {id(v)})
res = {}
for name, kw in (("onmt.pt", {}), ("onmt_legacy.pt", {"_use_new_zipfile_serialization": False})):
    p = os.path.join(out, name)
    torch.save(ckpt, p, **kw)
    acc = []
    walk(ckpt, acc, frozenset())
    res[p] = sorted(acc)
print(json.dumps(res))
`

// TestTorchTensorKeysAgainstPython: every tensor value of an old
// optimizer checkpoint (state keyed by tensors, as in a 2017 OpenNMT
// checkpoint that lost 6 of 70 tensors to colliding names) is served, in
// zip and legacy form: the multiset of tensor bytes equals torch's.
func TestTorchTensorKeysAgainstPython(t *testing.T) {
	py := testenv.Python(t, "torch")
	stdout := ptReference(t, py, ptTensorKeysScript)
	var ref map[string][]string
	if err := json.Unmarshal(stdout, &ref); err != nil {
		t.Fatalf("python output: %v", err)
	}
	if len(ref) != 2 {
		t.Fatalf("python made %d files", len(ref))
	}
	for p, want := range ref {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := ptParse(p, data)
		if err != nil {
			t.Fatal(err)
		}
		ptCheckIndex(t, idx, p, int64(len(data)))
		var got []string
		for _, tn := range idx.Tensors {
			got = append(got, ptSHA(ptGather(t, data, tn)))
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d tensors served, torch has %d values (names %q)", filepath.Base(p), len(got), len(want), ptNames(idx))
		}
		t.Logf("%s: %d tensors, as torch", filepath.Base(p), len(got))
	}
}
