package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// membersScript writes, with numpy and torch, into argv[1]: scipy.npz
// (scipy.sparse.save_npz's layout: format as |S3 beside the arrays),
// golden.npz (arrays, <U class names and an object array), strings.npz
// (no numeric member) and deflated.pt (a torch.save zip rewritten with
// every member deflated, as non-Python writers store it). It prints the
// sha256 of each array's C-order little-endian bytes, per file.
const membersScript = `
import sys, os, json, hashlib, zipfile
import numpy as np, torch
out = sys.argv[1]
def sha(a):
    a = np.array(a, order="C")
    return hashlib.sha256(a.astype(a.dtype.newbyteorder("<")).tobytes()).hexdigest()
res = {}
csr = {"indices": np.array([0, 2, 1], "<i4"), "indptr": np.array([0, 2, 3], "<i4"), "shape": np.array([2, 3]), "data": np.array([1.0, 2.0, 3.0])}
np.savez(os.path.join(out, "scipy.npz"), format=np.array(b"csr"), **csr)
res["scipy.npz"] = {k: sha(v) for k, v in csr.items()}
g = {"logits": np.linspace(0, 1, 12, dtype="<f4").reshape(3, 4)}
np.savez_compressed(os.path.join(out, "golden.npz"), classes=np.array(["cat", "dog"]), objs=np.array([{"a": 1}], dtype=object), **g)
res["golden.npz"] = {k: sha(v) for k, v in g.items()}
np.savez(os.path.join(out, "strings.npz"), classes=np.array(["cat", "dog"]))
sd = {"w": torch.randn(64, 33, generator=torch.Generator().manual_seed(1)), "i": torch.arange(100)}
torch.save(sd, os.path.join(out, "plain.pt"))
with zipfile.ZipFile(os.path.join(out, "plain.pt")) as zi, zipfile.ZipFile(os.path.join(out, "deflated.pt"), "w", zipfile.ZIP_DEFLATED) as zo:
    for info in zi.infolist():
        zo.writestr(info.filename, zi.read(info.filename))
d = torch.load(os.path.join(out, "deflated.pt"))
res["deflated.pt"] = {k: sha(v.numpy()) for k, v in d.items()}
print(json.dumps(res))
`

// TestPartlyReadable: one member tensorfs cannot serve as a tensor never
// costs the file. An .npz with string and object members serves its
// arrays (ls, load --sha256, a mount) with the others in index.json's
// metadata and one log line; an .npz of strings only is one line; a torch
// zip of deflated members and a PaddlePaddle file with a joined parameter
// load byte-exact.
func TestPartlyReadable(t *testing.T) {
	dir := t.TempDir()
	var shas map[string]map[string]string
	if err := json.Unmarshal([]byte(runPy(t, membersScript, dir)), &shas); err != nil {
		t.Fatal(err)
	}
	for file, want := range shas {
		src := filepath.Join(dir, file)
		r := runTensorfs(t, "load", "--quiet", "--sha256", src)
		if r.code != 0 {
			t.Errorf("load %s: exit %d %s", file, r.code, r.stderr)
			continue
		}
		for name, sum := range want {
			if !strings.Contains(r.stdout, sum+"  "+name+"\n") {
				t.Errorf("load %s: %s: want sha256 %s in %q", file, name, sum, r.stdout)
			}
		}
		notes := strings.Count(r.stderr, "of no tensor dtype")
		if wantNotes := map[bool]int{true: 1, false: 0}[strings.HasSuffix(file, ".npz")]; notes != wantNotes || (notes == 1 && !strings.Contains(r.stderr, "tensorfs: "+src+": ")) {
			t.Errorf("load %s: stderr %q, want %d note naming the file", file, r.stderr, wantNotes)
		}
	}
	if r := runTensorfs(t, "ls", filepath.Join(dir, "golden.npz")); r.code != 0 || !strings.Contains(r.stdout, "logits") || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, `2 .npz member(s) of no tensor dtype are not served as tensors, they are in the metadata: "classes" (<U3), "objs" (|O)`) {
		t.Errorf("ls golden.npz: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	checkOneLineError(t, runTensorfs(t, "ls", filepath.Join(dir, "strings.npz")), 1, `strings.npz: dtype "<U3" is a string array; it has no tensor dtype (member classes.npy, at byte`)

	// Through a mount: the metadata in index.json, the log line once.
	m := mount(t, filepath.Join(dir, "scipy.npz"))
	b, err := os.ReadFile(m.Path(".tensorfs/index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Metadata["format"] != "csr" {
		t.Errorf("index.json metadata %v (%v), want format csr", doc.Metadata, err)
	}
	if _, err := os.Stat(m.Path("format")); err == nil {
		t.Error("the |S3 member is a file of the mount")
	}
	m.Unmount()
	if s := m.Stderr(); strings.Count(s, "of no tensor dtype") != 1 {
		t.Errorf("server log: %q", s)
	}

	// torch 2.6's dtypes: every tensor served as stored, its dtype in the
	// xattr and index.json; the .f32 view holds what converts (the float8
	// kinds, fnuz ones too) and not what does not (complex, uint64).
	modern := filepath.Join(testenv.Dir(t), "modern", "torch26_dtypes.pt")
	m = mount(t, modern)
	x := make([]byte, 64)
	for name, dt := range map[string]string{"f8_e4m3fnuz": "F8_E4M3FNUZ", "f8_e5m2fnuz": "F8_E5M2FNUZ", "c64": "C64", "u64": "U64", "u16": "U16"} {
		n, err := unix.Getxattr(m.Path(name), "user.tensorfs.dtype", x)
		if err != nil || string(x[:n]) != dt {
			t.Errorf("%s: dtype xattr %q %v, want %s", name, x[:max(n, 0)], err, dt)
		}
	}
	for name, in := range map[string]bool{"f8_e4m3fnuz": true, "f8_e5m2fnuz": true, "f8_e4m3fn": true, "c64": false, "u64": false} {
		if _, err := os.Stat(m.Path(".f32/" + name)); (err == nil) != in {
			t.Errorf(".f32/%s: %v, want present %v", name, err, in)
		}
	}
	b, err = os.ReadFile(m.Path(".tensorfs/index.json"))
	if err != nil || !strings.Contains(string(b), `"F8_E4M3FNUZ"`) {
		t.Errorf("index.json of torch26_dtypes.pt: %v, no F8_E4M3FNUZ", err)
	}
	m.Unmount()

	// PaddlePaddle: a parameter split into slices is one tensor.
	pd, err := filepath.Abs(filepath.Join("..", "index", "paddle", "testdata", "big_p2.pdparams"))
	if err != nil {
		t.Fatal(err)
	}
	m = mount(t, pd)
	out := runPy(t, `
import sys, pickle, hashlib, numpy as np
d = pickle.load(open(sys.argv[2], "rb"), encoding="latin1")
info = d.pop("UnpackBigParamInfor@@")
w = np.concatenate([d.pop(p) for p in info["emb.weight"]["slices"]]).reshape(info["emb.weight"]["OriginShape"])
a = np.load(sys.argv[1] + "/.npy/emb.weight.npy")
print(a.shape == w.shape and a.dtype == w.dtype and a.tobytes() == w.tobytes())
`, m.Dir, pd)
	if out != "True\n" {
		t.Errorf("emb.weight through the mount differs from the joined slices: %q", out)
	}
	m.Unmount()
}
