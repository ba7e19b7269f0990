package integration

import (
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lazyweights/tensorfs/backing/s3/s3test"
	"github.com/lazyweights/tensorfs/internal/testdata"
)

// f2Kinds are the kinds of ../shared/testdata/formats2 cases that
// TestFormats2 reads: a format whose writer's own reader filled
// EXPECTED.json is one entry here, not one more hand-written test.
// (formats2 also has "dcp" and "hf" cases, for the DCP layouts of issue
// 37: add them here once tensorfs reads them.)
var f2Kinds = map[string]bool{"onnx": true, "h5": true}

// f2Case is one case of formats2/EXPECTED.json: the source to give
// tensorfs (relative to formats2) and each tensor as the writer's own
// reader sees it.
type f2Case struct {
	Kind    string `json:"kind"`
	Source  string `json:"source"`
	Tensors []struct {
		Name   string  `json:"name"`
		DType  string  `json:"dtype"`
		Shape  []int64 `json:"shape"`
		SHA256 string  `json:"sha256"`
	} `json:"tensors"`
}

func f2Cases(t *testing.T) (string, map[string]f2Case) {
	t.Helper()
	dir := testdata.Path(t, "formats2")
	data, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Cases map[string]f2Case `json:"cases"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	out := map[string]f2Case{}
	for name, c := range e.Cases {
		if f2Kinds[c.Kind] {
			out[name] = c
		}
	}
	if len(out) == 0 {
		t.Fatalf("no case of kinds %v in %s", slices.Sorted(maps.Keys(f2Kinds)), filepath.Join(dir, "EXPECTED.json"))
	}
	return dir, out
}

// f2CheckPy reads a mount from another process and compares every view
// of every tensor with EXPECTED.json: the tensor file (and its shape
// xattr), its .npy (payload; bfloat16, which NumPy lacks, is float32
// there: compared with .f32), the safetensors export, the .f32 view of
// 16-bit floats (bf16 widened by shifting, f16 by struct's 'e'), and
// .split/0/2/i halves along dim 0. Paths come from the mount's own
// .tensorfs/index.json. argv: mount, EXPECTED.json, case.
const f2CheckPy = `
import hashlib, json, os, struct, sys
mnt, exp, case = sys.argv[1:4]
c = json.load(open(exp))["cases"][case]
sha = lambda b: hashlib.sha256(b).hexdigest()
ES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
      "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1}
paths = {t["name"]: t["path"] for t in json.load(open(os.path.join(mnt, ".tensorfs", "index.json")))["tensors"]}
st = open(os.path.join(mnt, ".safetensors", "model.safetensors"), "rb").read()
n = struct.unpack("<Q", st[:8])[0]
hdr = json.loads(st[8:8 + n])
checked = 0
for t in c["tensors"]:
    name, path = t["name"], paths[t["name"]]
    raw = open(os.path.join(mnt, path), "rb").read()
    assert sha(raw) == t["sha256"], (name, "file")
    assert json.loads(os.getxattr(os.path.join(mnt, path), "user.tensorfs.shape")) == t["shape"], name
    npy = open(os.path.join(mnt, ".npy", path + ".npy"), "rb").read()
    hl = struct.unpack("<H", npy[8:10])[0]
    if t["dtype"] == "bfloat16":
        assert npy[10 + hl:] == open(os.path.join(mnt, ".f32", path), "rb").read(), (name, "npy")
    else:
        assert sha(npy[10 + hl:]) == t["sha256"], (name, "npy")
    s, e = hdr[name]["data_offsets"]
    assert sha(st[8 + n + s:8 + n + e]) == t["sha256"], (name, "export")
    if t["dtype"] in ("bfloat16", "float16"):
        k = len(raw) // 2
        if t["dtype"] == "bfloat16":
            want = struct.pack("<%dI" % k, *[u << 16 for u in struct.unpack("<%dH" % k, raw)])
        else:
            want = struct.pack("<%df" % k, *struct.unpack("<%de" % k, raw))
        assert open(os.path.join(mnt, ".f32", path), "rb").read() == want, (name, "f32")
    if t["shape"] and t["shape"][0] >= 2:
        d = t["shape"][0]
        row = len(raw) // d
        for part in range(2):
            lo, hi = (0, (d + 1) // 2) if part == 0 else ((d + 1) // 2, d)
            got = open(os.path.join(mnt, ".split", "0", "2", str(part), path), "rb").read()
            assert got == raw[lo * row:hi * row], (name, "split", part)
    checked += 1
print("checked", checked)
`

// TestFormats2: every case of formats2 whose kind is in f2Kinds reads
// byte-exact, as its writer's own reader reads it, through `ls`, `load
// --sha256` (each read path), `convert` to safetensors, `cat`, and a
// mount (every view: f2CheckPy).
func TestFormats2(t *testing.T) {
	dir, cases := f2Cases(t)
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(dir, c.Source)
			want := map[string]string{}
			for _, tn := range c.Tensors {
				want[tn.Name] = tn.SHA256
			}
			r := runTensorfs(t, "ls", src)
			if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 1+len(want) {
				t.Fatalf("ls: exit %d, %d lines for %d tensors: %s", r.code, len(lines), len(want), r.stderr)
			}
			for _, flags := range [][]string{nil, {"--io", "mmap"}, {"--io", "direct"}, {"--parallel", "1", "--chunk", "4KiB"}} {
				got := loadDigests(t, src, append([]string{"--quiet"}, flags...)...)
				if !maps.Equal(got, want) {
					t.Fatalf("load --sha256 %v:\n got %v\nwant %v", flags, got, want)
				}
			}
			converted := convertDigests(t, src)
			for tn, sum := range want {
				if converted[tn] != sum {
					t.Errorf("convert: %s differs", tn)
				}
			}
			for _, tn := range c.Tensors {
				r := runTensorfs(t, "cat", src, tn.Name)
				h := sha256.Sum256([]byte(r.stdout))
				if r.code != 0 || hex.EncodeToString(h[:]) != tn.SHA256 {
					t.Errorf("cat %s: exit %d, %s", tn.Name, r.code, r.stderr)
				}
			}
			needFUSE(t)
			m := mount(t, src)
			defer m.Unmount()
			out2 := runPy(t, f2CheckPy, m.Dir, filepath.Join(dir, "EXPECTED.json"), name)
			if w := "checked " + itoa(int64(len(c.Tensors))); !strings.Contains(out2, w) {
				t.Fatalf("python: %s, want %q", out2, w)
			}
		})
	}
}

// f2ONNXExternal is an ONNX model with one float32 [3] initializer "w"
// whose data is external, at location.
func f2ONNXExternal(location string) []byte {
	kv := protowire.AppendTag(nil, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "location")
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendString(kv, location)
	tp := protowire.AppendTag(nil, 1, protowire.VarintType) // dims [3]
	tp = protowire.AppendVarint(tp, 3)
	tp = protowire.AppendTag(tp, 2, protowire.VarintType) // FLOAT
	tp = protowire.AppendVarint(tp, 1)
	tp = protowire.AppendTag(tp, 8, protowire.BytesType)
	tp = protowire.AppendString(tp, "w")
	tp = protowire.AppendTag(tp, 13, protowire.BytesType)
	tp = protowire.AppendBytes(tp, kv)
	tp = protowire.AppendTag(tp, 14, protowire.VarintType) // EXTERNAL
	tp = protowire.AppendVarint(tp, 1)
	g := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), tp)
	m := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 8)
	return protowire.AppendBytes(protowire.AppendTag(m, 7, protowire.BytesType), g)
}

// TestFormats2Hostile: through the command line, an ONNX model whose
// external data leads out of its directory (.., an absolute path, a
// symbolic link out) or is cut short, an HDF5 file whose group B-tree
// loops, and one whose gzip chunk inflates to 2 MiB for a 12-byte chunk
// (a chunk bomb, read by `load`), each fail with one line naming the file
// (the time and peak memory of each are logged: `ls` reads structure
// only, `load` stops at the bomb's first byte over its chunk).
func TestFormats2Hostile(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside.bin")
	if err := os.WriteFile(outside, make([]byte, 12), 0o644); err != nil {
		t.Fatal(err)
	}
	type hostile struct {
		name, src string
		cmd       string
		want      string
	}
	var cases []hostile
	for _, c := range []struct{ name, location, want string }{
		{"onnx-dotdot", "../outside.bin", "leads out of the checkpoint's directory"},
		{"onnx-absolute", "/etc/passwd", "absolute path"},
		{"onnx-symlink", "link.bin", "symbolic link out of the checkpoint's directory"},
		{"onnx-truncated", "short.bin", "past the end of short.bin (8 bytes)"},
	} {
		d := filepath.Join(dir, c.name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "model.onnx"), f2ONNXExternal(c.location), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Symlink(outside, filepath.Join(d, "link.bin"))
		os.WriteFile(filepath.Join(d, "short.bin"), make([]byte, 8), 0o644)
		cases = append(cases, hostile{c.name, filepath.Join(d, "model.onnx"), "ls", c.want})
	}
	h5dir := testdata.Path(t, "formats2")
	mlp, err := os.ReadFile(filepath.Join(h5dir, "keras_mlp.weights.h5"))
	if err != nil {
		t.Fatal(err)
	}
	// A looping group B-tree: its first node claims level 1 and names
	// itself as its first child.
	node := bytes.Index(mlp, []byte("TREE\x00"))
	loop := bytes.Clone(mlp)
	loop[node+5] = 1
	binary.LittleEndian.PutUint64(loop[node+24+8:], uint64(node))
	p := filepath.Join(dir, "loop.weights.h5")
	os.WriteFile(p, loop, 0o644)
	cases = append(cases, hostile{"h5-loop", p, "ls", "reached twice (a loop)"})
	// A chunk bomb: the first chunk of a one-dimensional gzip dataset
	// (its chunk B-tree key is size, mask and two offsets, then the
	// chunk's address) points at 2 MiB of zeros deflated, appended.
	gz, err := os.ReadFile(filepath.Join(h5dir, "keras_gzip.weights.h5"))
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&zb, zlib.BestCompression)
	zw.Write(make([]byte, 2<<20))
	zw.Close()
	bomb := bytes.Clone(gz)
	found := false
	for i := 0; !found; {
		j := bytes.Index(gz[i:], []byte("TREE\x01\x00"))
		if j < 0 {
			break
		}
		n := i + j
		i = n + 4
		key := n + 24
		// A one-dimensional dataset's first key: offsets 0 and 0, then
		// the address of a zlib stream (0x78).
		if a := binary.LittleEndian.Uint64(gz[key+24:]); gz[n+5] == 0 && a > 0 && a < uint64(len(gz)) && gz[a] == 0x78 &&
			binary.LittleEndian.Uint64(gz[key+8:]) == 0 && binary.LittleEndian.Uint64(gz[key+16:]) == 0 {
			binary.LittleEndian.PutUint32(bomb[key:], uint32(zb.Len()))
			binary.LittleEndian.PutUint64(bomb[key+24:], uint64(len(gz)))
			found = true
		}
	}
	if !found {
		t.Fatal("no chunk B-tree node of a one-dimensional dataset in keras_gzip.weights.h5")
	}
	p = filepath.Join(dir, "bomb.weights.h5")
	os.WriteFile(p, append(bomb, zb.Bytes()...), 0o644)
	cases = append(cases, hostile{"h5-chunk-bomb", p, "load", "inflates to more than its 12 bytes"})

	for _, c := range cases {
		start := time.Now()
		args := []string{c.cmd, c.src}
		if c.cmd == "load" {
			args = []string{"load", "--quiet", c.src}
		}
		r := runTensorfs(t, args...)
		t.Logf("%s: %s exit %d in %v: %s", c.name, c.cmd, r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code == 0 || len(lines) != 1 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, filepath.Base(c.src)) {
			t.Errorf("%s: %s: exit %d, stderr %q; want one line naming the file with %q", c.name, c.cmd, r.code, r.stderr, c.want)
		}
	}
}

// TestFormats2RemoteS3: an ONNX model with one external data file per
// tensor, under an S3 prefix, loads as the local directory does: the
// files its initializers name are opened beside it in the bucket.
func TestFormats2RemoteS3(t *testing.T) {
	local := filepath.Join(testdata.Path(t, "formats2"), "onnx_ext_each")
	srv := s3test.Start(t)
	srv.Bucket(t, "ckpt")
	ents, err := os.ReadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		srv.PutFile(t, "ckpt", "onnx/"+e.Name(), filepath.Join(local, e.Name()))
	}
	env := srv.Env()
	want := runEnv(t, env, "load", "--quiet", "--sha256", filepath.Join(local, "model.onnx"))
	for _, src := range []string{"s3://ckpt/onnx/model.onnx", "s3://ckpt/onnx/"} {
		got := runEnv(t, env, "load", "--quiet", "--sha256", "--part-size", "8KiB", src)
		if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
			t.Fatalf("load --sha256 %s: exit %d %s\nwant:\n%s\ngot:\n%s", src, got.code, got.stderr, want.stdout, got.stdout)
		}
	}
}
