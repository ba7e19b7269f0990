package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing/s3/s3test"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// quantCase is one directory of ../shared/testdata/quant/EXPECTED.json.
type quantCase struct {
	Logical []struct {
		Name       string   `json:"name"`
		Shape      []int64  `json:"shape"`
		SHA256F32  string   `json:"sha256_f32"`
		SHA256BF16 string   `json:"sha256_bf16"`
		SHA256F16  string   `json:"sha256_f16"`
		Parts      []string `json:"parts"`
	} `json:"logical"`
	Absent []string `json:"absent"`
	Stored []struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
	} `json:"stored"`
	Negative bool   `json:"negative"`
	Missing  string `json:"missing"` // the broken weight of a negative case
}

func quantCases(t *testing.T) (string, map[string]quantCase) {
	dir := testenv.Path(t, "quant")
	b, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	var exp struct {
		Cases map[string]quantCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Cases) < 10 {
		t.Fatalf("%d cases in EXPECTED.json", len(exp.Cases))
	}
	return dir, exp.Cases
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// stEntries parses a safetensors file into each tensor's dtype and bytes.
func stEntries(t *testing.T, path string) map[string]struct {
	DType string
	Data  []byte
} {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8 {
		t.Fatalf("%s: %d bytes", path, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatalf("%s: header: %v", path, err)
	}
	out := map[string]struct {
		DType string
		Data  []byte
	}{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string   `json:"dtype"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		out[name] = struct {
			DType string
			Data  []byte
		}{e.DType, b[8+int64(n)+e.Offsets[0] : 8+int64(n)+e.Offsets[1]]}
	}
	return out
}

// TestQuantViews: every shared quantized fixture, mounted, serves each
// logical tensor bit-exact to EXPECTED.json in .f32/, .bf16/ and .f16/
// (the quantized weights as their values, the rest as today), lists no
// part there, keeps the stored tree as stored, and exports the logical
// model in .bf16/.safetensors/ with a config.json that no longer names
// the quantization; convert --dtype bf16 writes the same tensors and
// load --dtype bf16 --sha256 hashes them. A broken weight is left out
// of the views with one log line naming it, and check exits 1 naming it.
func TestQuantViews(t *testing.T) {
	needFUSE(t)
	dir, cases := quantCases(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		tc := cases[name]
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(dir, name)
			m := mount(t, src)
			for _, l := range tc.Logical {
				p := index.NameToPath(l.Name)
				if tc.Negative && l.Name == tc.Missing {
					continue
				}
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
			absent := append([]string(nil), tc.Absent...)
			if tc.Negative {
				absent = append(absent, tc.Missing)
			}
			for _, a := range absent {
				if _, err := os.Stat(m.Path(".bf16/" + index.NameToPath(a))); err == nil {
					t.Errorf(".bf16/%s is there: a part (or a broken weight) in a converted view", a)
				}
			}
			for _, s := range tc.Stored {
				b, err := os.ReadFile(m.Path(index.NameToPath(s.Name)))
				if err != nil {
					t.Errorf("stored tree: %v", err)
					continue
				}
				if got := sha(b); got != s.SHA256 {
					t.Errorf("stored %s: sha256 %s, want %s", s.Name, got, s.SHA256)
				}
			}
			// The export of the logical model, and its config.json.
			want := map[string]string{}
			for _, l := range tc.Logical {
				if !(tc.Negative && l.Name == tc.Missing) {
					want[l.Name] = l.SHA256BF16
				}
			}
			checkBF16 := func(what, path string) {
				got := stEntries(t, path)
				for n, h := range want {
					e, ok := got[n]
					if !ok {
						t.Errorf("%s: no tensor %s", what, n)
						continue
					}
					if e.DType != "BF16" || sha(e.Data) != h {
						t.Errorf("%s: %s is %s, sha256 %s, want BF16 %s", what, n, e.DType, sha(e.Data), h)
					}
				}
				for _, a := range absent {
					if _, ok := got[a]; ok {
						t.Errorf("%s holds %s", what, a)
					}
				}
			}
			checkBF16(".bf16/.safetensors/model.safetensors", m.Path(".bf16/.safetensors/model.safetensors"))
			cfg, err := os.ReadFile(m.Path(".bf16/.safetensors/config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var c map[string]any
			if err := json.Unmarshal(cfg, &c); err != nil {
				t.Fatalf(".bf16/.safetensors/config.json: %v", err)
			}
			if _, ok := c["quantization_config"]; ok {
				t.Errorf(".bf16/.safetensors/config.json still has quantization_config")
			}
			orig, _ := os.ReadFile(filepath.Join(src, "config.json"))
			if got, err := os.ReadFile(m.Path(".safetensors/config.json")); err != nil || !bytes.Equal(got, orig) {
				t.Errorf("the stored export's config.json is not the checkpoint's: %v", err)
			}
			for _, f := range []string{"hf_quant_config.json", "quantize_config.json"} {
				if _, err := os.Stat(filepath.Join(src, f)); err != nil {
					continue
				}
				if _, err := os.Stat(m.Path(".safetensors/" + f)); err != nil {
					t.Errorf("the stored export lacks %s: %v", f, err)
				}
				if _, err := os.Stat(m.Path(".bf16/.safetensors/" + f)); err == nil {
					t.Errorf("the bf16 export has %s: a loader would dequantize its logical weights again", f)
				}
			}

			// convert --dtype bf16, load --dtype bf16 --sha256.
			out := filepath.Join(t.TempDir(), "out.safetensors")
			if r := runTensorfs(t, "convert", "--dtype", "bf16", "--quiet", src, out); r.code != 0 {
				t.Fatalf("convert: exit %d: %s", r.code, r.stderr)
			}
			checkBF16("convert --dtype bf16", out)
			hashLines(t, "load --dtype bf16 --sha256", runTensorfs(t, "load", "--dtype", "bf16", "--sha256", "--quiet", src), want)

			// The same through the mount (the client reads the logical
			// weights from index.json's quantization), and a
			// tensor-parallel part of each 2-D logical weight.
			hashLines(t, "load --dtype bf16 --sha256 of the mount", runTensorfs(t, "load", "--dtype", "bf16", "--sha256", "--quiet", m.Dir), want)
			for _, l := range tc.Logical {
				if len(l.Shape) != 2 || (tc.Negative && l.Name == tc.Missing) {
					continue
				}
				p := index.NameToPath(l.Name)
				whole, err1 := os.ReadFile(m.Path(".f32/" + p))
				part, err2 := os.ReadFile(m.Path(".f32/.split/0/2/0/" + p))
				rows := (l.Shape[0] + 1) / 2
				if err1 != nil || err2 != nil || !bytes.Equal(part, whole[:rows*l.Shape[1]*4]) {
					t.Errorf(".f32/.split/0/2/0/%s is not the first %d rows of .f32/%s (%v, %v)", p, rows, p, err1, err2)
				}
			}

			// A broken weight: one log line, check exit 1.
			ck := runTensorfs(t, "check", src)
			m.Unmount()
			logged := strings.Count(m.Stderr(), "left out of the converted views")
			if !tc.Negative {
				if ck.code != 0 || logged != 0 {
					t.Errorf("check: exit %d, %d lines of weights left out:\n%s%s", ck.code, logged, ck.stderr, m.Stderr())
				}
				return
			}
			if logged != 1 || !strings.Contains(m.Stderr(), `weight "`+tc.Missing+`" left out of the converted views: `) {
				t.Errorf("mount's log: %d lines on weights left out, want one naming %s:\n%s", logged, tc.Missing, m.Stderr())
			}
			if ck.code != 1 || !strings.Contains(ck.stderr, tc.Missing) {
				t.Errorf("check: exit %d, want 1 naming %s:\n%s", ck.code, tc.Missing, ck.stderr)
			}
		})
	}
}

// TestQuantLoadGPU: load --gpu --dtype bf16 of a block-FP8 checkpoint
// uploads the logical model (through the stand-in CUDA runtime), each
// tensor verified against the host's.
func TestQuantLoadGPU(t *testing.T) {
	fakeCUDA(t)
	dir, cases := quantCases(t)
	tc := cases["fp8_block"]
	r := runTensorfs(t, "load", "--gpu", "0", "--verify", "--dtype", "bf16", filepath.Join(dir, "fp8_block"))
	if r.code != 0 {
		t.Fatalf("load --gpu: exit %d: %s", r.code, r.stderr)
	}
	up, ver := uploadedLine.FindStringSubmatch(r.stderr), verifiedLine.FindStringSubmatch(r.stderr)
	if up == nil || ver == nil || up[1] != ver[1] {
		t.Fatalf("load --gpu: report:\n%s", r.stderr)
	}
	if want := len(tc.Logical); up[1] != strconv.Itoa(want) {
		t.Errorf("uploaded %s tensors, want the %d of the logical model", up[1], want)
	}
}

// hashLines checks load --sha256's lines against want (name → sha256):
// every name, and no other.
func hashLines(t *testing.T, what string, r result, want map[string]string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d: %s", what, r.code, r.stderr)
	}
	lines := map[string]string{}
	for _, ln := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		h, n, _ := strings.Cut(ln, "  ")
		lines[n] = h
	}
	if len(lines) != len(want) {
		t.Errorf("%s: %d lines, want %d:\n%s", what, len(lines), len(want), r.stdout)
	}
	for n, h := range want {
		if lines[n] != h {
			t.Errorf("%s: %s: %q, want %s", what, n, lines[n], h)
		}
	}
}

// TestQuantMountDType: a mount made with --dtype bf16 of a block-FP8
// checkpoint has the logical model at its top level (each weight's
// values under its name, no scale), the stored tree under .native/
// (the F8 codes under the same names), and load reads it as the
// checkpoint it serves, as stored and converted.
func TestQuantMountDType(t *testing.T) {
	needFUSE(t)
	dir, cases := quantCases(t)
	tc := cases["fp8_block"]
	src := filepath.Join(dir, "fp8_block")
	m := mount(t, src, "--dtype", "bf16")
	want, stored := map[string]string{}, map[string]string{}
	for _, l := range tc.Logical {
		want[l.Name] = l.SHA256BF16
		b, err := os.ReadFile(m.Path(index.NameToPath(l.Name)))
		if err != nil || sha(b) != l.SHA256BF16 {
			t.Errorf("top level %s: %v, or not the bf16 values", l.Name, err)
		}
	}
	for _, s := range tc.Stored {
		stored[s.Name] = s.SHA256
		b, err := os.ReadFile(m.Path(".native/" + index.NameToPath(s.Name)))
		if err != nil || sha(b) != s.SHA256 {
			t.Errorf(".native/%s: %v, or not as stored", s.Name, err)
		}
	}
	for _, a := range tc.Absent {
		if _, err := os.Stat(m.Path(index.NameToPath(a))); err == nil {
			t.Errorf("top level holds %s", a)
		}
	}
	hashLines(t, "load --dtype bf16 --sha256 of a --dtype mount", runTensorfs(t, "load", "--dtype", "bf16", "--sha256", "--quiet", m.Dir), want)
	hashLines(t, "load --sha256 of a --dtype mount", runTensorfs(t, "load", "--sha256", "--quiet", m.Dir), stored)
}

// TestQuantRemote: an s3:// prefix holding a quantized checkpoint is read
// as the model it encodes, as the local directory is: the scheme from
// the config.json object beside the shards; a broken weight is left out
// and check names it.
func TestQuantRemote(t *testing.T) {
	dir, cases := quantCases(t)
	srv := s3test.Start(t)
	srv.Bucket(t, "models")
	root := t.TempDir()
	for _, name := range []string{"fp8_block", "neg_fp8_badscale"} {
		srcDir := filepath.Join(dir, name)
		local := filepath.Join(root, name)
		if err := os.MkdirAll(local, 0o755); err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(srcDir)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(srcDir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(local, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	uploadTree(t, srv, "models", root)
	env := srv.Env()
	tc := cases["fp8_block"]
	want := map[string]string{}
	for _, l := range tc.Logical {
		want[l.Name] = l.SHA256BF16
	}
	hashLines(t, "load --dtype bf16 --sha256 s3://models/fp8_block/", runEnv(t, env, "load", "--dtype", "bf16", "--sha256", "--quiet", "s3://models/fp8_block/"), want)
	neg := cases["neg_fp8_badscale"]
	r := runEnv(t, env, "check", "s3://models/neg_fp8_badscale/")
	if r.code != 1 || !strings.Contains(r.stderr, neg.Missing) || !strings.Contains(r.stderr, "s3://models/neg_fp8_badscale/") {
		t.Errorf("check s3://models/neg_fp8_badscale/: exit %d, want 1 naming %s in its object:\n%s", r.code, neg.Missing, r.stderr)
	}
}
