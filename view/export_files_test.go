package view

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// loadSource loads a checkpoint as the CLI does; ok is false when
// tensorfs refuses it (the refusal is tested elsewhere).
func loadSource(t *testing.T, path string) (*index.Index, []backing.Source, bool) {
	t.Helper()
	idx, files, err := formats.Load(path, func(p string) (index.File, error) {
		s, err := backing.Open(p, backing.Options{Mode: backing.Pread})
		if err != nil {
			return nil, err
		}
		return backing.ForParsing(s), nil
	}, formats.Options{Inflate: backing.DefaultInflateCache()})
	if err != nil {
		return nil, nil, false
	}
	srcs := make([]backing.Source, len(files))
	for i, f := range files {
		srcs[i] = backing.Unwrap(f.(backing.Source))
	}
	t.Cleanup(func() {
		for _, s := range srcs {
			s.Close()
		}
	})
	return idx, srcs, true
}

// TestExportEveryFile exports every checkpoint of the shared test data
// (and a sharded directory made here) in the stored dtypes and in every
// view, and checks each export: valid by an independent Go reader
// (testenv.CheckSafetensors), every tensor equal to its file's bytes and
// to ggml's dequantization (.f32ref) for the quantized GGUF files; then
// an independent Python reader (written below) holds the stored and F16
// exports to the format's rules and compares every tensor with numpy,
// torch and the source safetensors files.
func TestExportEveryFile(t *testing.T) {
	dir := testenv.Dir(t)
	var sources []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, ".f32ref") && !strings.HasSuffix(p, ".json") && !strings.HasSuffix(p, ".tsv") {
			sources = append(sources, p)
		}
		return nil
	})
	sources = append(sources, shardedDir(t))
	out := t.TempDir()
	var pyArgs []string
	exported := 0
	for i, p := range sources {
		if raceEnabled && i%5 != 0 {
			continue // a sample under the race detector, which is slow at byte loops
		}
		idx, srcs, ok := loadSource(t, p)
		if !ok {
			continue
		}
		exported++
		rel, _ := filepath.Rel(dir, p)
		for _, to := range exportViews {
			f, data := checkExport(t, rel+" in "+exportDTypeName(to), idx, srcs, to)
			if to == dtype.F32 && strings.HasSuffix(p, ".gguf") {
				checkF32Ref(t, rel, p+".f32ref", idx, f)
			}
			if to == dtype.Invalid || to == dtype.F16 {
				x := filepath.Join(out, fmt.Sprintf("%03d-%s.safetensors", i, exportDTypeName(to)))
				if err := os.WriteFile(x, data, 0o644); err != nil {
					t.Fatal(err)
				}
				kind := "view"
				if to == dtype.Invalid {
					kind = "stored"
				}
				pyArgs = append(pyArgs, kind, x, p)
			}
		}
	}
	if exported < 150 && !raceEnabled {
		t.Fatalf("only %d of %d shared files exported", exported, len(sources))
	}
	if raceEnabled {
		return // the Python half checks bytes, not concurrency
	}
	py := testenv.Python(t, "numpy", "torch")
	script := filepath.Join(out, "check.py")
	if err := os.WriteFile(script, []byte(pyCheckExports+testenv.TorchFlattenPy+pyCheckExportsMain), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{script}, pyArgs...)...)
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python check: %v\n%s", err, res)
	}
	t.Logf("%d sources exported; python: %s", exported, bytes.TrimSpace(res))
}

func exportDTypeName(to dtype.DType) string {
	if to == dtype.Invalid {
		return "stored"
	}
	return to.String()
}

// checkF32Ref compares the F32 export of a GGUF file with ggml's own
// dequantization of every tensor (file order, float32), where the test
// data has one.
func checkF32Ref(t *testing.T, rel, refPath string, idx *index.Index, f *testenv.STFile) {
	t.Helper()
	ref, err := os.ReadFile(refPath)
	if err != nil {
		return // only the quantized files have references
	}
	ts := slices.Clone(idx.Tensors)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
	var got []byte
	for _, tt := range ts {
		st := f.Tensors[tt.Name]
		if st.DType != "F32" {
			t.Fatalf("%s: %s is %s in the F32 export", rel, tt.Name, st.DType)
		}
		got = append(got, st.Data...)
	}
	if !bytes.Equal(got, ref) {
		n := 0
		for i := 0; i+4 <= len(got) && i+4 <= len(ref); i += 4 {
			a := math.Float32frombits(binary.LittleEndian.Uint32(got[i:]))
			b := math.Float32frombits(binary.LittleEndian.Uint32(ref[i:]))
			if a != b && n < 3 {
				t.Errorf("%s: float %d: %v, ggml %v", rel, i/4, a, b)
				n++
			}
		}
		t.Errorf("%s: F32 export (%d bytes) differs from ggml's dequantization (%d bytes)", rel, len(got), len(ref))
	}
}

// shardedDir writes a sharded safetensors checkpoint (two shards and a
// weight map) and returns its directory.
func shardedDir(t *testing.T) string {
	d := t.TempDir()
	shard := func(name string, tensors map[string][]float32) {
		var hdr bytes.Buffer
		var data []byte
		hdr.WriteString(`{"__metadata__":{"format":"pt","shard":"` + name + `"}`)
		keys := make([]string, 0, len(tensors))
		for k := range tensors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := tensors[k]
			fmt.Fprintf(&hdr, `,%q:{"dtype":"F32","shape":[%d],"data_offsets":[%d,%d]}`, k, len(v), len(data), len(data)+4*len(v))
			for _, x := range v {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
			}
		}
		hdr.WriteByte('}')
		for hdr.Len()%8 != 0 {
			hdr.WriteByte(' ')
		}
		file := binary.LittleEndian.AppendUint64(nil, uint64(hdr.Len()))
		file = append(append(file, hdr.Bytes()...), data...)
		if err := os.WriteFile(filepath.Join(d, name), file, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shard("model-00001-of-00002.safetensors", map[string][]float32{"a.weight": {1, 2, 3}, "b.bias": {-1}})
	shard("model-00002-of-00002.safetensors", map[string][]float32{"c.weight": {0.5, 0.25}})
	wm, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 24}, "weight_map": map[string]string{
		"a.weight": "model-00001-of-00002.safetensors", "b.bias": "model-00001-of-00002.safetensors", "c.weight": "model-00002-of-00002.safetensors"}})
	if err := os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), wm, 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// pyCheckExports is an independent safetensors reader, holding a file to
// the format's rules (and, for an export, to tensorfs's stronger ones:
// data 8-byte aligned, each tensor naturally aligned), and the references.
const pyCheckExports = `
import glob, json, os, struct, sys, zipfile
import numpy as np
import torch

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "U16": 16,
        "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64, "F4": 4}

def no_dups(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % k)
        d[k] = v
    return d

def read_st(path, strict):
    with open(path, "rb") as f:
        b = f.read()
    assert len(b) >= 8, "no header length"
    (n,) = struct.unpack("<Q", b[:8])
    assert n <= 100_000_000 and 8 + n <= len(b), "header length %d" % n
    h = b[8:8 + n]
    assert h[:1] == b"{", "header does not start with {"
    text = h.decode("utf-8")
    stripped = text.rstrip(" ")
    hdr = json.loads(stripped, object_pairs_hook=no_dups)
    assert isinstance(hdr, dict)
    if strict:
        assert (8 + n) % 8 == 0, "data not 8-aligned"
    meta = hdr.pop("__metadata__", {})
    assert isinstance(meta, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()), "metadata"
    data = b[8 + n:]
    out, spans = {}, []
    for name, t in hdr.items():
        assert set(t) == {"dtype", "shape", "data_offsets"}, "%s: keys %s" % (name, sorted(t))
        bits = BITS[t["dtype"]]
        shape = t["shape"]
        assert all(isinstance(d, int) and d >= 0 for d in shape), name
        s, e = t["data_offsets"]
        ne = 1
        for d in shape:
            ne *= d
        assert (ne * bits) % 8 == 0 and e - s == ne * bits // 8, "%s: %d bytes for %s %s" % (name, e - s, t["dtype"], shape)
        if strict:
            assert s % max(1, bits // 8) == 0, "%s: misaligned at %d" % (name, s)
        spans.append((s, e, name))
        out[name] = (t["dtype"], shape, data[s:e])
    pos = 0
    for s, e, name in sorted(spans):
        assert s == pos, "%s: hole or overlap at %d (previous end %d)" % (name, s, pos)
        pos = e
    assert pos == len(data), "tensors end at %d of %d" % (pos, len(data))
    return meta, out
`

// pyCheckExportsMain compares each stored export with its source read by
// numpy, torch, or (safetensors) the reader above; view exports are held
// to the rules only (their values are checked against the tensor files in
// Go, and the files against torch and numpy by the integration tests).
const pyCheckExportsMain = `
def leaf(t):
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    if t.dtype == torch.complex32:
        return t.view(torch.int32).numpy().tobytes() if t.numel() else b""
    return t.numpy().tobytes()

def torch_ref(path):
    try:
        obj = torch.load(path, map_location="cpu")
    except Exception:
        try:
            obj = torch.jit.load(path, map_location="cpu")
        except Exception:
            return None
    res = {}
    flat(obj, [], res, os.path.splitext(os.path.basename(path))[0], frozenset())
    return res

def np_ref(path):
    try:
        if path.endswith(".npz") or zipfile.is_zipfile(path):
            z = np.load(path, allow_pickle=False)
            items = [(k, z[k]) for k in z.files]
        else:
            items = [(os.path.splitext(os.path.basename(path))[0], np.load(path, allow_pickle=False))]
    except Exception:
        return None
    # Members of no tensor dtype (strings, records) are in the metadata, not tensors.
    return {k: np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes() for k, a in items if a.dtype.names is None and a.dtype.kind in "biufc"}

def st_ref(path):
    if os.path.isdir(path):
        res = {}
        for p in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
            res.update({k: v[2] for k, v in read_st(p, False)[1].items()})
        return res
    return {k: v[2] for k, v in read_st(path, False)[1].items()}

a = sys.argv[1:]
checked = refs = compared = 0
fails = []
for i in range(0, len(a), 3):
    kind, exp, src = a[i:i + 3]
    try:
        meta, ts = read_st(exp, True)
    except Exception as e:
        fails.append("%s (%s of %s): invalid: %r" % (exp, kind, src, e))
        continue
    checked += 1
    assert meta.get("format") == "pt", meta
    if kind != "stored":
        continue
    with open(src, "rb") if os.path.isfile(src) else open(os.devnull, "rb") as f:
        head = f.read(16)
    if os.path.isdir(src) or head[8:9] == b"{":
        ref = st_ref(src)
    elif head.startswith(b"\x93NUMPY") or src.endswith(".npz"):
        ref = np_ref(src)
    elif src.endswith(".gguf"):
        ref = None
    else:
        ref = torch_ref(src)
    if ref is None:
        continue
    refs += 1
    for name, want in ref.items():
        if name not in ts:
            fails.append("%s: %s missing from the export" % (src, name))
            continue
        compared += 1
        if ts[name][2] != want:
            fails.append("%s: %s: export bytes differ from the reference (%s %s)" % (src, name, ts[name][0], ts[name][1]))
if fails:
    print("\n".join(fails[:20]))
    sys.exit(1)
print("%d exports valid, %d stored exports compared with a reference, %d tensors" % (checked, refs, compared))
`
