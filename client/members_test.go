package client

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// deflatedTorchPy writes a torch.save state dict (several dtypes, views,
// an empty tensor, a storage that compresses well) to argv[1]/plain.pt
// and rewrites it with Python's zipfile as a non-Python writer would:
// every member deflated (deflated.pt), or only the storages
// (deflated_storages.pt). It prints, per rewritten file, the sha256 of
// each tensor's C-order bytes as torch.load reads that file.
const deflatedTorchPy = `
import sys, os, zipfile, hashlib, json, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(3)
base = torch.randn(6, 8, generator=g)
sd = {"w": base, "h": torch.randn(5, 7, generator=g).half(), "b": torch.randn(4, generator=g).bfloat16(),
      "i": torch.arange(-20, 20, dtype=torch.int64), "m": torch.rand(3, 3, generator=g) > 0.5,
      "t": base.t(), "s": base[2:, 1::3], "z": torch.zeros(0, 3), "big": torch.arange(40000, dtype=torch.float32) % 7}
p = os.path.join(out, "plain.pt")
torch.save(sd, p)
def rewrite(dst, which):
    with zipfile.ZipFile(p) as zi, zipfile.ZipFile(os.path.join(out, dst), "w") as zo:
        for info in zi.infolist():
            zo.writestr(info.filename, zi.read(info.filename), compress_type=zipfile.ZIP_DEFLATED if which(info.filename) else zipfile.ZIP_STORED)
rewrite("deflated.pt", lambda n: True)
rewrite("deflated_storages.pt", lambda n: "/data/" in n)
res = {}
for f in ("deflated.pt", "deflated_storages.pt"):
    d = torch.load(os.path.join(out, f))
    res[f] = {k: hashlib.sha256((v.view(torch.int16) if v.dtype == torch.bfloat16 else v).contiguous().numpy().tobytes()).hexdigest() for k, v in d.items()}
print(json.dumps(res))
`

// TestStreamDeflatedTorchZip: a torch.save zip whose members are deflated
// (as TorchSharp and other non-Python writers store them) is served
// through the inflate path, every tensor byte-exact to torch.load of the
// same file; a storage whose CRC-32 does not match fails its read instead
// of serving wrong bytes.
func TestStreamDeflatedTorchZip(t *testing.T) {
	py := testenv.Python(t, "torch")
	dir := t.TempDir()
	out, err := exec.Command(py, "-c", deflatedTorchPy, dir).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var want map[string]map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"deflated.pt", "deflated_storages.pt"} {
		t.Run(file, func(t *testing.T) {
			c, err := Open(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if n := len(c.idx.Members); n != 7 { // w (with its views t, s), h, b, i, m, z, big
				t.Errorf("%d members, want the 7 deflated storages", n)
			}
			for _, m := range c.idx.Members {
				if _, ok := m.Kind.(*index.Deflated); !ok {
					t.Errorf("member %+v is not deflated", m)
				}
			}
			s := newHashSink()
			if err := c.Stream(context.Background(), s, StreamOptions{ChunkSize: 13, Parallel: 3}); err != nil {
				t.Fatal(err)
			}
			if len(s.sums) != len(want[file]) {
				t.Errorf("%d tensors (%s), torch has %d", len(s.sums), keys(s.sums), len(want[file]))
			}
			for name, sum := range want[file] {
				if s.sums[name] != sum {
					t.Errorf("%s: sha256 %s, torch says %s", name, s.sums[name], sum)
				}
			}
		})
	}

	// The CRC-32 of storage data/8 ("big", 160000 bytes) in the central
	// directory changed: that tensor's read fails, naming the CRC.
	data, err := os.ReadFile(filepath.Join(dir, "deflated.pt"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var crc []byte
	for _, zf := range zr.File {
		if zf.UncompressedSize64 == 160000 {
			crc = binary.LittleEndian.AppendUint32(nil, zf.CRC32)
		}
	}
	at := bytes.LastIndex(data, crc)
	if crc == nil || at < 0 {
		t.Fatal("no storage of 160000 bytes")
	}
	data[at] ^= 1
	bad := filepath.Join(dir, "badcrc.pt")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Open(bad)
	if err != nil {
		t.Fatal(err) // the data are checked when read, not when opened
	}
	defer c.Close()
	err = c.Stream(context.Background(), newHashSink(), StreamOptions{})
	if err == nil || !strings.Contains(err.Error(), "CRC-32") {
		t.Errorf("stream with a bad CRC-32: %v, want a CRC-32 error", err)
	}
}

// TestStreamPaddle streams the PaddlePaddle fixtures (index/paddle/
// testdata, written by its gen.py as paddle.save writes) through the
// loader and the backing layer, joined slices and Latin-1 arrays
// included, and compares every tensor with what paddle.load gives.
func TestStreamPaddle(t *testing.T) {
	dir := filepath.Join("..", "index", "paddle", "testdata")
	raw, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp map[string]map[string][]json.RawMessage
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	concat := 0
	for file, want := range exp {
		t.Run(file, func(t *testing.T) {
			c, err := Open(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, m := range c.idx.Members {
				if _, ok := m.Kind.(*index.Tiles); ok {
					concat++
				}
			}
			s := newHashSink()
			if err := c.Stream(context.Background(), s, StreamOptions{ChunkSize: 5, Parallel: 2}); err != nil {
				t.Fatal(err)
			}
			if len(s.sums) != len(want) {
				t.Errorf("%d tensors (%s), paddle.load gives %d", len(s.sums), keys(s.sums), len(want))
			}
			for name, w := range want {
				var sum string
				json.Unmarshal(w[2], &sum)
				if s.sums[name] != sum {
					t.Errorf("%s: sha256 %s, paddle.load's %s", name, s.sums[name], sum)
				}
			}
		})
	}
	if concat == 0 {
		t.Error("no joined parameter read through a concatenation")
	}
}

// TestStreamModernTorchDtypes: torch 2.6's file of every dtype (the four
// float8 kinds, the fnuz ones included, uint16/32/64, complex, bool, an
// empty and a 0-d tensor, a view) loads whole, each tensor byte-exact as
// stored (modern/EXPECTED.json, written by torch), its dtype the one
// torch names.
func TestStreamModernTorchDtypes(t *testing.T) {
	raw, err := os.ReadFile(testenv.Path(t, "modern/EXPECTED.json"))
	if err != nil {
		testenv.SkipOrFail(t, "no modern/EXPECTED.json: "+err.Error())
	}
	var exp struct {
		Cases map[string]struct {
			Tensors []struct {
				DType string  `json:"dtype"`
				FQN   string  `json:"fqn"`
				SHA   string  `json:"sha256"`
				Shape []int64 `json:"shape"`
			} `json:"tensors"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	want := exp.Cases["torch26_dtypes.pt"].Tensors
	if len(want) < 15 {
		t.Fatalf("EXPECTED.json lists %d tensors of torch26_dtypes.pt", len(want))
	}
	c, err := Open(testenv.Path(t, "modern/torch26_dtypes.pt"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := newHashSink()
	if err := c.Stream(context.Background(), s, StreamOptions{ChunkSize: 7}); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{ // torch's dtype names, as tensorfs names them
		"bfloat16": "BF16", "bool": "BOOL", "complex64": "C64", "float16": "F16", "float32": "F32",
		"float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ",
		"int8": "I8", "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64",
	}
	if len(s.sums) != len(want) {
		t.Errorf("%d tensors (%s), torch saved %d", len(s.sums), keys(s.sums), len(want))
	}
	for _, w := range want {
		info, ok := c.Tensor(w.FQN)
		if !ok {
			t.Errorf("%s: missing", w.FQN)
			continue
		}
		if info.DType.String() != names[w.DType] || !reflect.DeepEqual(append([]int64{}, info.Shape...), append([]int64{}, w.Shape...)) {
			t.Errorf("%s: %s%v, torch says %s%v", w.FQN, info.DType, info.Shape, w.DType, w.Shape)
		}
		if s.sums[w.FQN] != w.SHA {
			t.Errorf("%s (%s): sha256 %s, torch says %s", w.FQN, w.DType, s.sums[w.FQN], w.SHA)
		}
	}
}
