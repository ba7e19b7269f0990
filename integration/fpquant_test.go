package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// TestQuantFPQuant: the FP-Quant MXFP4 checkpoint of testdata/fp_quant
// (written by its gen.py from the formula W = Q·Hᵀ per group of 32, the
// exact sum rounded once to float32; a Sylvester H, a sequency-ordered H
// with permuted columns, an H with rows permuted at random), mounted,
// serves each logical weight bit-exact to its EXPECTED.json in .f32/,
// .bf16/ and .f16/, hides every code, scale and rotation matrix there,
// keeps the stored tree as stored; convert --dtype bf16 and f32 write
// the same values, load --dtype bf16 --sha256 hashes them (of the
// directory and of the mount), and check passes.
func TestQuantFPQuant(t *testing.T) {
	needFUSE(t)
	src, err := filepath.Abs(filepath.Join("testdata", "fp_quant"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(src, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tc quantCase
	if err := json.Unmarshal(b, &tc); err != nil {
		t.Fatal(err)
	}
	if len(tc.Logical) != 6 || len(tc.Absent) != 18 {
		t.Fatalf("EXPECTED.json: %d logical tensors, %d absent", len(tc.Logical), len(tc.Absent))
	}
	m := mount(t, src)
	bf16, f32 := map[string]string{}, map[string]string{}
	for _, l := range tc.Logical {
		bf16[l.Name], f32[l.Name] = l.SHA256BF16, l.SHA256F32
		p := index.NameToPath(l.Name)
		for _, v := range []struct{ dir, want string }{{".f32", l.SHA256F32}, {".bf16", l.SHA256BF16}, {".f16", l.SHA256F16}} {
			b, err := os.ReadFile(m.Path(v.dir + "/" + p))
			if err != nil {
				t.Errorf("%s: %v", v.dir, err)
				continue
			}
			if got := sha(b); got != v.want {
				t.Errorf("%s/%s: sha256 %s, want %s", v.dir, p, got, v.want)
			}
		}
	}
	for _, a := range tc.Absent {
		if _, err := os.Stat(m.Path(".bf16/" + index.NameToPath(a))); err == nil {
			t.Errorf(".bf16/%s is there: a part in a converted view", a)
		}
	}
	for _, s := range tc.Stored {
		b, err := os.ReadFile(m.Path(index.NameToPath(s.Name)))
		if err != nil || sha(b) != s.SHA256 {
			t.Errorf("stored %s: %v, or not as stored", s.Name, err)
		}
	}
	for _, cv := range []struct {
		dtype, st string
		want      map[string]string
	}{{"bf16", "BF16", bf16}, {"f32", "F32", f32}} {
		out := filepath.Join(t.TempDir(), "out.safetensors")
		if r := runTensorfs(t, "convert", "--dtype", cv.dtype, "--quiet", src, out); r.code != 0 || strings.Contains(r.stderr, "left out") {
			t.Fatalf("convert --dtype %s: exit %d: %s", cv.dtype, r.code, r.stderr)
		}
		got := stEntries(t, out)
		for n, h := range cv.want {
			if e, ok := got[n]; !ok || e.DType != cv.st || sha(e.Data) != h {
				t.Errorf("convert --dtype %s: %s written %v, as %s, sha256 %s, want %s", cv.dtype, n, ok, e.DType, sha(e.Data), h)
			}
		}
		if len(got) != len(cv.want) {
			t.Errorf("convert --dtype %s wrote %d tensors, want %d", cv.dtype, len(got), len(cv.want))
		}
	}
	hashLines(t, "load --dtype bf16 --sha256", runTensorfs(t, "load", "--dtype", "bf16", "--sha256", "--quiet", src), bf16)
	hashLines(t, "load --dtype bf16 --sha256 of the mount", runTensorfs(t, "load", "--dtype", "bf16", "--sha256", "--quiet", m.Dir), bf16)
	if r := runTensorfs(t, "check", src); r.code != 0 {
		t.Errorf("check: exit %d: %s", r.code, r.stderr)
	}
	m.Unmount()
	if strings.Contains(m.Stderr(), "left out of the converted views") {
		t.Errorf("mount's log:\n%s", m.Stderr())
	}
}
