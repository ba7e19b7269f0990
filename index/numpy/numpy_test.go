package numpy

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// npyGoFixtures are .npy files crafted here in forms numpy reads but does
// not write itself today (Python 2 longs, double quotes, '=' order...).
func npyGoFixtures() map[string][]byte {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 1)
		}
		return b
	}
	return map[string][]byte{
		"go_py2_long.npy":       npyBuild("{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }", 1, seq(24)),
		"go_double_quotes.npy":  npyBuild(`{"descr":"<f8","fortran_order":True,"shape":(2,3)}`, 1, seq(48)),
		"go_native_order.npy":   npyBuild("{'descr': '=u2', 'fortran_order': False, 'shape': (5,), }", 1, seq(10)),
		"go_no_order.npy":       npyBuild("{'descr': 'i2', 'fortran_order': False, 'shape': (3,), }", 1, seq(6)),
		"go_key_order.npy":      npyBuild("{'shape': (2, 2, 2), 'fortran_order': True, 'descr': '|b1'}", 1, []byte{0, 1, 1, 0, 1, 1, 0, 0}),
		"go_be_c16_fortran.npy": npyBuild("{'descr': '>c16', 'fortran_order': True, 'shape': (2, 3), }", 1, seq(96)),
		"go_be_i2_fortran.npy":  npyBuild("{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3, 4), }", 1, seq(48)),
		"go_v2.npy":             npyBuild("{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", 2, seq(16)),
		"go_empty_fortran.npy":  npyBuild("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 3), }", 1, nil),
		"go_scalar_be.npy":      npyBuild("{'descr': '>f2', 'fortran_order': False, 'shape': (), }", 1, seq(2)),
	}
}

// npyScript writes more fixtures with numpy into argv[1] (format 3.0,
// npz with nested names, compressed and refused members, unsupported
// dtypes), then reads every file (argv[2:] and its own) and prints per
// file: the expectation and per array: dtype kind+size, shape, sha256 of
// the C-order little-endian bytes. Headers are read without unpickling.
const npyScript = `
import sys, os, json, hashlib, zipfile, io, warnings
warnings.filterwarnings("ignore")
import numpy as np
out = sys.argv[1]
files = sys.argv[2:]
made = []
rng = np.random.default_rng(3)
a = rng.standard_normal((3, 4)).astype("<f4")
def p(n): made.append(os.path.join(out, n)); return made[-1]
with open(p("v3.npy"), "wb") as f:
    np.lib.format.write_array(f, a, version=(3, 0))
np.save(p("be_f8_fortran.npy"), np.asfortranarray(rng.standard_normal((2, 3, 2)).astype(">f8")))
np.save(p("c16.npy"), (rng.standard_normal(3) + 1j).astype("<c16"))
np.save(p("u4_col.npy"), np.asfortranarray(np.arange(6, dtype="<u4").reshape(6, 1)))
np.save(p("longdouble.npy"), np.zeros(2, dtype=np.longdouble))
np.save(p("datetime.npy"), np.array(["2020-01-01"], dtype="M8[D]"))
np.save(p("bytes.npy"), np.array([b"ab"]))
np.savez(p("nested.npz"), **{"layer/0/w": a, "layer/0/b": np.arange(3, dtype="<i2"), "be": a.astype(">f4")})
np.savez_compressed(p("compressed.npz"), w=a)
mixed = {"empty": np.zeros((0, 3), "<f4"), "scalar": np.array(2.5), "fortran": np.asfortranarray(rng.standard_normal((3, 5)).astype(">f8")),
         "be_i2": np.arange(-7, 7, dtype=">i2"), "bool": rng.standard_normal(33) > 0, "half": rng.standard_normal((4, 4)).astype("<f2"),
         "c8": (rng.standard_normal(5) + 1j).astype(">c8"), "zeros": np.zeros(100000, "<f8")}
mixed.update({"many/%03d" % i: np.full(i + 1, i, dtype="<i4") for i in range(40)})
np.savez_compressed(p("compressed_mixed.npz"), **mixed)
with zipfile.ZipFile(p("mixed_methods.npz"), "w") as z:
    buf = io.BytesIO(); np.save(buf, a); z.writestr("stored.npy", buf.getvalue())
    z.writestr("deflated.npy", buf.getvalue(), compress_type=zipfile.ZIP_DEFLATED)
    z.writestr("noext", buf.getvalue(), compress_type=zipfile.ZIP_DEFLATED)
np.savez(p("struct_member.npz"), ok=a, rec=np.zeros(2, dtype=[("x", "<i4")]))
# scipy.sparse.save_npz's layout: format as |S3 beside the arrays.
np.savez(p("scipy_csr.npz"), indices=np.array([0, 2, 1], "<i4"), indptr=np.array([0, 2, 3], "<i4"),
         format=np.array(b"csr"), shape=np.array([2, 3]), data=np.array([1.0, 2.0, 3.0]))
golden = {"w": a, "classes": np.array(["cat", "dog", "\u00e9l\u00e8ve"]), "label": np.array("ok"),
          "grid": np.asfortranarray(np.array([["a", "bb", "c"], ["dd", "e", "ff"]], dtype=">U2")),
          "raw": np.array([b"\xff\x00z", b"q"]), "empty_s": np.zeros((0, 2), "S4"),
          "obj": np.array([{"k": 1}, None], dtype=object), "rec": np.zeros(3, dtype=[("x", "<i4"), ("y", "<f8")]),
          "when": np.array(["2020-01-01"], dtype="M8[D]"), "long_s": np.array(["x" * 70000])}
np.savez(p("golden_strings.npz"), **golden)
np.savez_compressed(p("golden_strings_compressed.npz"), **golden)
np.savez(p("only_strings.npz"), format=np.array(b"csr"), classes=np.array(["a", "b"]))
with zipfile.ZipFile(p("extra_member.npz"), "w") as z:
    buf = io.BytesIO(); np.save(buf, a); z.writestr("w.npy", buf.getvalue()); z.writestr("README.txt", "hello")

SUP = {("b", 1), ("i", 1), ("i", 2), ("i", 4), ("i", 8), ("u", 1), ("u", 2), ("u", 4), ("u", 8),
       ("f", 2), ("f", 4), ("f", 8), ("c", 8), ("c", 16)}
def why(dt):
    if dt.names is not None: return "structured dtype"
    k = dt.kind
    if k == "O": return "object array"
    if k in "SU": return "string array"
    if k == "V": return "void/record"
    if k in "Mm": return "datetime array"
    if (k, dt.itemsize) not in SUP: return "is not supported"
    return None
BIG = "numpy reads at most 10000 characters"
def header(f):
    v = np.lib.format.read_magic(f)
    try:
        shape, fo, dt = np.lib.format._read_array_header(f, v)
    except ValueError as e:
        if "max_header_size" in str(e): return BIG  # numpy.load refuses it too
        raise
    return dt
def sha(arr):
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return hashlib.sha256(arr.tobytes()).hexdigest()
def desc(arr):
    return [arr.dtype.kind + str(arr.dtype.itemsize), list(arr.shape), sha(arr)]
res = {}
for f in files + made:
    base = os.path.splitext(os.path.basename(f))[0]
    r = {"expect": "ok", "arrays": {}, "others": {}}
    if f.endswith(".npz"):
        z = zipfile.ZipFile(f)
        first, numeric, big = None, 0, None
        for info in z.infolist():
            if not info.filename.endswith(".npy"):
                continue
            dt = header(z.open(info.filename))
            if dt is BIG:
                big = "refuse:%s|(member %s, at byte" % (BIG, info.filename)
                break
            w = why(dt)
            if not w:
                numeric += 1
                continue
            first = first or "refuse:%s|(member %s, at byte" % (w, info.filename)
            name = info.filename[:-4]
            if dt.names is None and dt.kind in "SU" and dt.itemsize > 0 and info.file_size < 65536:
                v = np.load(f)[name].tolist()
                def text(x):
                    if isinstance(x, list): return [text(y) for y in x]
                    if isinstance(x, bytes):
                        try: return x.decode("utf-8")
                        except UnicodeDecodeError: return x.decode("latin-1")
                    return x
                r["others"][name] = text(v)
            else:
                d = np.lib.format.dtype_to_descr(dt)
                r["others"][name] = {"dtype": d if isinstance(d, str) else repr(d), "bytes": info.file_size}
        if big:
            r["expect"] = big
        elif numeric == 0 and first:
            r["expect"] = first
        else:
            d = np.load(f)
            for k in d.files:
                if k in r["others"]:
                    continue
                v = d[k]
                if isinstance(v, np.ndarray):  # members not named *.npy come back as bytes
                    r["arrays"][k] = desc(v)
    else:
        with open(f, "rb") as fh:
            h = header(fh)
            w = h if h is BIG else why(h)
        if w:
            r["expect"] = "refuse:" + w
        else:
            r["arrays"][base] = desc(np.load(f))
    res[f] = r
print(json.dumps(res))
`

var npyKinds = map[string]dtype.DType{
	"b1": dtype.Bool, "i1": dtype.I8, "i2": dtype.I16, "i4": dtype.I32, "i8": dtype.I64,
	"u1": dtype.U8, "u2": dtype.U16, "u4": dtype.U32, "u8": dtype.U64,
	"f2": dtype.F16, "f4": dtype.F32, "f8": dtype.F64, "c8": dtype.C64, "c16": dtype.C128,
}

// TestNumpyAgainstPython parses every .npy/.npz of the shared test data,
// the generated fixtures and the crafted ones, and compares each array
// (name, dtype, shape, sha256 of the gathered bytes) with numpy's reading.
func TestNumpyAgainstPython(t *testing.T) {
	py := testenv.Python(t, "numpy")
	dir := testenv.Dir(t)
	var files []string
	for _, g := range []string{"numpy/*/*.np[yz]", "generated/*.np[yz]"} {
		m, err := filepath.Glob(filepath.Join(dir, g))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 50 {
		testenv.SkipOrFail(t, "expected the shared NumPy test files under "+dir)
	}
	out := t.TempDir()
	for name, b := range npyGoFixtures() {
		p := filepath.Join(out, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	cmd := exec.Command(py, append([]string{"-c", npyScript, out}, files...)...)
	stdout, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("python: %v\n%s", err, msg)
	}
	var ref map[string]struct {
		Expect string                       `json:"expect"`
		Arrays map[string][]json.RawMessage `json:"arrays"`
		Others map[string]any               `json:"others"`
	}
	if err := json.Unmarshal(stdout, &ref); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, len(ref))
	for p := range ref {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var nFiles, nArrays, nStrided, nBig, nRefused, nDeflated, nOthers int
	for _, p := range paths {
		r := ref[p]
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := ptParse(p, data)
		if want, ok := strings.CutPrefix(r.Expect, "refuse:"); ok {
			ptErrContains(t, err, append([]string{filepath.Base(p) + ": "}, strings.Split(want, "|")...)...)
			nRefused++
			continue
		}
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		ptCheckIndex(t, idx, p, int64(len(data)))
		if idx.Format != "numpy" {
			t.Errorf("%s: format %q", p, idx.Format)
		}
		nFiles++
		npzCheckOthers(t, p, idx, r.Others)
		nOthers += len(r.Others)
		if len(idx.Tensors) != len(r.Arrays) {
			t.Errorf("%s: %v, numpy has %d arrays", p, ptNames(idx), len(r.Arrays))
		}
		for _, tn := range idx.Tensors {
			want, ok := r.Arrays[tn.Name]
			if !ok {
				t.Errorf("%s: array %q that numpy does not have", p, tn.Name)
				continue
			}
			var kind, sha string
			var shape []int64
			json.Unmarshal(want[0], &kind)
			json.Unmarshal(want[1], &shape)
			json.Unmarshal(want[2], &sha)
			if npyKinds[kind] != tn.DType || !reflect.DeepEqual(append([]int64{}, shape...), append([]int64{}, tn.Shape...)) {
				t.Errorf("%s: %s: %s %v, numpy says %s %v", p, tn.Name, tn.DType, tn.Shape, kind, shape)
			}
			if h := ptSHA(npzGather(t, data, idx, tn)); h != sha {
				t.Errorf("%s: %s: bytes differ from numpy's (strides %v, big-endian %v)", p, tn.Name, tn.Strides, tn.BigEndian)
			}
			nArrays++
			if idx.Member(tn.Source) != nil {
				nDeflated++
			}
			if tn.Strides != nil {
				nStrided++
			}
			if tn.BigEndian {
				nBig++
			}
		}
	}
	if nStrided == 0 || nBig == 0 || nRefused < 9 || nDeflated < 50 || nOthers < 20 {
		t.Errorf("fixtures did not exercise Fortran order (%d), big-endian (%d), refusals (%d), compressed members (%d) or members of no tensor dtype (%d)", nStrided, nBig, nRefused, nDeflated, nOthers)
	}
	t.Logf("%d files, %d arrays (%d Fortran, %d big-endian) match numpy; %d members of no tensor dtype in the metadata; %d files refused as expected", nFiles, nArrays, nStrided, nBig, nOthers, nRefused)
}

// npzCheckOthers compares the members of no tensor dtype that idx puts in
// its metadata with numpy's reading: a string array's values, the dtype
// and member size of anything else; and the one note naming them.
func npzCheckOthers(t *testing.T, p string, idx *index.Index, want map[string]any) {
	t.Helper()
	if len(want) == 0 {
		if len(idx.Notes) != 0 || len(idx.Metadata) != 0 {
			t.Errorf("%s: notes %q and metadata %v for a file of arrays only", p, idx.Notes, idx.Metadata)
		}
		return
	}
	if len(idx.Notes) != 1 || !strings.Contains(idx.Notes[0], fmt.Sprintf("%d .npz member(s) of no tensor dtype", len(want))) {
		t.Errorf("%s: notes %q, want one naming %d members", p, idx.Notes, len(want))
	}
	if len(idx.Metadata) != len(want) {
		t.Errorf("%s: metadata %v, numpy has %d members of no tensor dtype", p, idx.Metadata, len(want))
	}
	for name, w := range want {
		b, err := json.Marshal(idx.Metadata[name])
		if err != nil {
			t.Fatal(err)
		}
		var got any
		json.Unmarshal(b, &got)
		if wm, ok := w.(map[string]any); ok {
			gm, _ := got.(map[string]any)
			if gm == nil || gm["dtype"] != wm["dtype"] || gm["bytes"] != wm["bytes"] || gm["not_served"] == "" {
				t.Errorf("%s: member %s: %s, numpy says %v", p, name, b, w)
			}
			continue
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: member %s: %s, numpy says %v", p, name, b, w)
		}
	}
}

// TestNumpyGeneratedExpected checks generated/np_* against EXPECTED.json
// (no Python needed).
func TestNumpyGeneratedExpected(t *testing.T) {
	dir := testenv.Path(t, "generated")
	raw, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		testenv.SkipOrFail(t, "no EXPECTED.json: "+err.Error())
	}
	var exp struct {
		Numpy map[string]struct {
			Descr   string  `json:"descr"`
			Shape   []int64 `json:"shape"`
			Fortran bool    `json:"fortran"`
			SHA     *string `json:"sha256_c_order_le"`
		} `json:"numpy"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	for name, e := range exp.Numpy {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		idx, err := ptParse(name, data)
		if e.SHA == nil {
			ptErrContains(t, err, name+": ", "dtype")
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		tn := idx.Tensors[0]
		if tn.Name != strings.TrimSuffix(name, ".npy") || !reflect.DeepEqual(e.Shape, append([]int64{}, tn.Shape...)) {
			t.Errorf("%s: %s %v", name, tn.Name, tn.Shape)
		}
		if d, _, _ := DType(e.Descr); d != tn.DType || tn.BigEndian != (e.Descr[0] == '>') {
			t.Errorf("%s: %s big-endian %v, want %s", name, tn.DType, tn.BigEndian, e.Descr)
		}
		if e.Fortran != (tn.Strides != nil) {
			t.Errorf("%s: strides %v, fortran %v", name, tn.Strides, e.Fortran)
		}
		if ptSHA(ptGather(t, data, tn)) != *e.SHA {
			t.Errorf("%s: bytes differ", name)
		}
	}
	// The npz fixtures.
	data, err := os.ReadFile(filepath.Join(dir, "npz_plain.npz"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ptParse("npz_plain.npz", data)
	if err != nil {
		t.Fatal(err)
	}
	if got := ptNames(idx); !reflect.DeepEqual(got, []string{"be", "bias", "fortran", "weight"}) {
		t.Fatalf("%v", got)
	}
	w := ptSHA(ptGather(t, data, idx.Tensors[3]))
	for _, i := range []int{0, 2} {
		if ptSHA(ptGather(t, data, idx.Tensors[i])) != w {
			t.Errorf("%s differs from weight", idx.Tensors[i].Name)
		}
	}
	// The same arrays, deflated (np.savez_compressed): the same bytes.
	cdata, err := os.ReadFile(filepath.Join(dir, "npz_compressed.npz"))
	if err != nil {
		t.Fatal(err)
	}
	cidx, err := ptParse("npz_compressed.npz", cdata)
	if err != nil {
		t.Fatal(err)
	}
	ptCheckIndex(t, cidx, "npz_compressed.npz", int64(len(cdata)))
	if got := ptNames(cidx); !reflect.DeepEqual(got, ptNames(idx)) || len(cidx.Members) != 4 {
		t.Fatalf("%v, %d members", got, len(cidx.Members))
	}
	for i, tn := range cidx.Tensors {
		if cidx.Member(tn.Source) == nil || ptSHA(npzGather(t, cdata, cidx, tn)) != ptSHA(ptGather(t, data, idx.Tensors[i])) {
			t.Errorf("compressed %s differs from stored", tn.Name)
		}
	}
}

func TestNPYHeaders(t *testing.T) {
	f4 := func(hdr string) []byte { return npyBuild(hdr, 1, make([]byte, 64)) }
	good := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	if idx, err := ptParse("dir/a.b.npy", f4(good)); err != nil || idx.Tensors[0].Name != "a.b" || idx.Tensors[0].Offset != int64(len(f4(good))-64) {
		t.Fatalf("%v %+v", err, idx)
	}
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"call", f4("{'descr': __import__('os').system('id'), 'fortran_order': False, 'shape': (2,), }"), `"__import__" is not a literal`},
		{"name", f4("{'descr': float32, 'fortran_order': False, 'shape': (2,), }"), `"float32" is not a literal`},
		{"missing key", f4("{'descr': '<f4', 'shape': (2,), }"), `.npy header has no "fortran_order"`},
		{"extra key", f4("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"), `unexpected key "x"`},
		{"duplicate key", f4("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"), `dict key "descr" appears twice`},
		{"shape list", f4("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }"), "shape is [2], not a tuple"},
		{"shape paren int", f4("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }"), "shape is 2, not a tuple"},
		{"negative dim", f4("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"), "not a non-negative integer"},
		{"float dim", f4("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }"), "not a plain integer"},
		{"fortran not bool", f4("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }"), "fortran_order is 0, not True or False"},
		{"not a dict", f4("('<f4', False, (2,))"), ".npy header is not a dict"},
		{"unterminated", f4("{'descr': '<f4"), "not closed"},
		{"deep", f4("{'descr': " + strings.Repeat("(", index.MaxNesting+2)), "nests deeper"},
		{"object", f4("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"), `dtype "|O" is an object array (pickled Python objects)`},
		{"unicode", f4("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }"), "string array"},
		{"structured", f4("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }"), "structured dtype [('a', '<i4')] is not supported"},
		{"long double", f4("{'descr': '<f16', 'fortran_order': False, 'shape': (2,), }"), `dtype "<f16" is not supported`},
		{"datetime", f4("{'descr': '<M8[D]', 'fortran_order': False, 'shape': (2,), }"), "datetime"},
		{"data past end", f4("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 3), }"), "array data of 72 bytes runs past the end (64 bytes left)"},
		{"shape overflow", f4("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"), "overflows"},
		{"huge dim", f4("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,), }"), "not a non-negative integer"},
		{"too many dims", f4("{'descr': '<f8', 'fortran_order': False, 'shape': (" + strings.Repeat("1,", index.MaxDims+1) + "), }"), "dimensions"},
		{"version 4", append([]byte("\x93NUMPY\x04\x00"), make([]byte, 60)...), ".npy format version 4.0 is not supported"},
		{"version 1.1", append([]byte("\x93NUMPY\x01\x01"), make([]byte, 60)...), "version 1.1"},
		{"header past end", []byte("\x93NUMPY\x01\x00\xff\xff{}"), ".npy header of 65535 bytes runs past the end of the data (2 bytes left) (at byte 8)"},
		{"v2 header past end", []byte("\x93NUMPY\x02\x00\xff\xff\xff\xff{}"), ".npy header of 4294967295 bytes runs past the end"},
		{"short", []byte("\x93NUMPY\x01"), "too short"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseNPY(ptMem("a.npy", c.file))
			ptErrContains(t, err, "a.npy: ", c.want)
		})
	}
	b := f4(good)
	for n := 0; n < len(b); n++ {
		if idx, err := ParseNPY(ptMem("a.npy", b[:n])); err == nil {
			ptCheckIndex(t, idx, "a.npy", int64(n))
		}
	}
}

func TestNPZ(t *testing.T) {
	arr := npyBuild("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, ptF32(2))
	good := ptZip(t, ptMember{Name: "b.npy", Data: arr}, ptMember{Name: "notes.txt", Data: []byte("x")}, ptMember{Name: "a/c.npy", Data: arr},
		ptMember{Name: "noext", Data: arr}, ptMember{Name: "info.json", Data: []byte(`{"k": 1}`), Deflate: true},
		ptMember{Name: "z.npy", Data: arr, Deflate: true}, ptMember{Name: "zext", Data: arr, Deflate: true})
	idx, err := ptParse("m.npz", good)
	if err != nil {
		t.Fatal(err)
	}
	ptCheckIndex(t, idx, "m.npz", int64(len(good)))
	// A member without ".npy" that is an array (numpy.load reads it as
	// one) is served under its whole name; other members are not arrays.
	if got := ptNames(idx); !reflect.DeepEqual(got, []string{"a/c", "b", "noext", "z", "zext"}) {
		t.Fatalf("%v", got)
	}
	// Deflated members (np.savez_compressed) are sources of their own:
	// the tensor is at its offset in the inflated member.
	if len(idx.Members) != 2 || idx.SourceName(idx.Tensors[3].Source) != "m.npz:z.npy" || idx.Tensors[3].Offset != int64(len(arr)-8) {
		t.Fatalf("members %+v, sources %v, z %+v", idx.Members, idx.Sources, idx.Tensors[3])
	}
	for _, i := range []int{3, 4} {
		if !bytes.Equal(npzGather(t, good, idx, idx.Tensors[i]), ptF32(2)) {
			t.Errorf("%s: wrong bytes", idx.Tensors[i].Name)
		}
	}
	deflated := func(b []byte) []byte {
		var buf bytes.Buffer
		w, _ := flate.NewWriter(&buf, flate.BestCompression)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	raw := func(h zip.FileHeader, data []byte) ptRawMember { return ptRawMember{h, data} }
	hdr := func(name string, method uint16, flags uint16, csize, size int, crc uint32) zip.FileHeader {
		return zip.FileHeader{Name: name, Method: method, Flags: flags, CompressedSize64: uint64(csize), UncompressedSize64: uint64(size), CRC32: crc}
	}
	zarr := deflated(arr)
	for _, c := range []struct {
		name string
		m    ptRawMember
		want string
	}{
		{"bzip2", raw(hdr("x.npy", 12, 0, len(arr), len(arr), crc32.ChecksumIEEE(arr)), arr), "compressed with zip method 12; tensorfs inflates deflate (method 8, np.savez_compressed) and reads stored members (np.savez) (member x.npy)"},
		{"encrypted", raw(hdr("x.npy", 8, 1, len(zarr), len(arr), crc32.ChecksumIEEE(arr)), zarr), "encrypted; tensorfs cannot read it (member x.npy)"},
		{"zip bomb", raw(hdr("x.npy", 8, 0, len(zarr), 1<<40, crc32.ChecksumIEEE(arr)), zarr), "declares 1099511627776 bytes inflated from " + strconv.Itoa(len(zarr)) + " compressed bytes, more than deflate can produce (at most 1032 to 1): a zip bomb or a broken directory (member x.npy)"},
		{"corrupt header", raw(hdr("x.npy", 8, 0, 16, len(arr), 0), bytes.Repeat([]byte{0xff}, 16)), "cannot inflate its .npy header: flate: corrupt input before offset 1 (member x.npy, at byte"},
		{"short member", raw(hdr("x.npy", 8, 0, len(zarr), len(arr)-1, crc32.ChecksumIEEE(arr)), zarr), "array data of 8 bytes runs past the end (7 bytes left) (compressed member x.npy, inflated, at byte"},
		{"not npy", raw(hdr("x.npy", 8, 0, len(deflated([]byte("hello world"))), 11, 0), deflated([]byte("hello world"))), "not a .npy file (no \\x93NUMPY magic) (compressed member x.npy, inflated, at byte 0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseNPZ(ptMem("m.npz", ptZipRaw(t, c.m)))
			ptErrContains(t, err, "m.npz: ", c.want)
		})
	}
	for _, c := range []struct {
		name    string
		members []ptMember
		want    string
	}{
		{"only an object member", []ptMember{{Name: "o.npy", Data: npyBuild("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 1, nil)}},
			`object array (pickled Python objects); tensorfs never unpickles array data (member o.npy, at byte`},
		{"only string members", []ptMember{{Name: "s.npy", Data: npyBuild("{'descr': '|S3', 'fortran_order': False, 'shape': (), }", 1, []byte("csr"))}, {Name: "o.npy", Data: npyBuild("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 1, nil)}},
			`dtype "|S3" is a string array; it has no tensor dtype (member s.npy, at byte`},
		{"string member past the end", []ptMember{{Name: "w.npy", Data: arr}, {Name: "s.npy", Data: npyBuild("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", 1, []byte("csr"))}},
			`string array data of 2 <U3 elements runs past the end (3 bytes left) (member s.npy, at byte`},
		{"truncated member", []ptMember{{Name: "w.npy", Data: arr[:len(arr)-1]}}, "array data of 8 bytes runs past the end (7 bytes left) (member w.npy"},
		{"duplicate", []ptMember{{Name: "w.npy", Data: arr}, {Name: "w.npy", Data: arr}}, `another member is also array "w"`},
		{"same array name", []ptMember{{Name: "w.npy", Data: arr}, {Name: "w", Data: arr}}, `another member is also array "w"`},
		{"compressed duplicate", []ptMember{{Name: "w.npy", Data: arr}, {Name: "w", Data: arr, Deflate: true}}, `another member is also array "w"`},
		{"compressed bad member", []ptMember{{Name: "o.npy", Data: npyBuild("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 1, nil), Deflate: true}},
			`object array (pickled Python objects); tensorfs never unpickles array data (compressed member o.npy, inflated, at byte`},
		{"no arrays", []ptMember{{Name: "readme.npy.txt", Data: []byte("\x93NUMP")}}, "zip archive has no .npy members"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseNPZ(ptMem("m.npz", ptZip(t, c.members...)))
			ptErrContains(t, err, "m.npz: ", c.want)
		})
	}
	for n := 0; n < len(good); n++ {
		if idx, err := ParseNPZ(ptMem("m.npz", good[:n])); err == nil {
			ptCheckIndex(t, idx, "m.npz", int64(n))
		}
	}
}

func FuzzNPY(f *testing.F) {
	for _, b := range npyGoFixtures() {
		f.Add(b)
	}
	f.Add(npyBuild("{'descr': [('a', '<i4'), ('b', ('<f4', (2,)))], 'fortran_order': False, 'shape': (2,), }", 1, nil))
	for _, b := range ptSeedFiles("numpy/npyio/data_float32_2x3_*.npy", "numpy/tch-rs/bs.npy", "generated/np_f4_v2header.npy", "generated/np_i8_bigendian_fortran.npy") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ParseNPY(ptMem("f.npy", b))
		if err != nil {
			if _, ok := err.(*index.FormatError); !ok {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		ptCheckIndex(t, idx, "f.npy", int64(len(b)))
	})
}

func FuzzNPZ(f *testing.F) {
	arr := npyBuild("{'descr': '>f4', 'fortran_order': True, 'shape': (2, 2), }", 1, ptF32(4))
	f.Add(ptZip(f, ptMember{Name: "w.npy", Data: arr}, ptMember{Name: "x/y.npy", Data: arr}))
	f.Add(ptZip(f, ptMember{Name: "w.npy", Data: arr, Deflate: true}, ptMember{Name: "x", Data: arr, Deflate: true}, ptMember{Name: "s.npy", Data: arr}))
	for _, b := range ptSeedFiles("numpy/candle/test.npz", "numpy/npyio/*.npz", "generated/npz_plain.npz", "generated/npz_compressed.npz") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ParseNPZ(ptMem("f.npz", b))
		if err != nil {
			if _, ok := err.(*index.FormatError); !ok {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		ptCheckIndex(t, idx, "f.npz", int64(len(b)))
	})
}

// ptRawMember is a zip member written as it is (zip.Writer.CreateRaw):
// its header's method, flags, sizes and CRC-32 are not checked.
type ptRawMember struct {
	h    zip.FileHeader
	data []byte
}

func ptZipRaw(t testing.TB, members ...ptRawMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		h := m.h
		w, err := zw.CreateRaw(&h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(m.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
