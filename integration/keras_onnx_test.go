package integration

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// onnxChecked writes dir/model.onnx with one float32 [256] initializer
// "w" whose data is external, in dir/model.onnx.data, with the
// external_data "checksum" key: the SHA-1 of its bytes (as onnx's
// external data helpers write it), or with wrong, of other bytes.
func onnxChecked(t *testing.T, dir string, wrong bool) {
	t.Helper()
	var data []byte
	for i := range 256 {
		data = binary.LittleEndian.AppendUint32(data, uint32(i)*0x01010101)
	}
	sum := sha1.Sum(data)
	if wrong {
		sum[0] ^= 1
	}
	kv := func(k, v string) []byte {
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendString(b, v)
	}
	var tp []byte
	tp = protowire.AppendTag(tp, 1, protowire.VarintType) // dims
	tp = protowire.AppendVarint(tp, 256)
	tp = protowire.AppendTag(tp, 2, protowire.VarintType) // data_type FLOAT
	tp = protowire.AppendVarint(tp, 1)
	tp = protowire.AppendTag(tp, 8, protowire.BytesType) // name
	tp = protowire.AppendString(tp, "w")
	for _, e := range [][2]string{{"location", "model.onnx.data"}, {"offset", "0"}, {"length", "1024"}, {"checksum", hex.EncodeToString(sum[:])}} {
		tp = protowire.AppendTag(tp, 13, protowire.BytesType) // external_data
		tp = protowire.AppendBytes(tp, kv(e[0], e[1]))
	}
	tp = protowire.AppendTag(tp, 14, protowire.VarintType) // data_location EXTERNAL
	tp = protowire.AppendVarint(tp, 1)
	g := protowire.AppendTag(nil, 5, protowire.BytesType) // graph.initializer
	g = protowire.AppendBytes(g, tp)
	m := protowire.AppendTag(nil, 1, protowire.VarintType) // ir_version
	m = protowire.AppendVarint(m, 8)
	m = protowire.AppendTag(m, 7, protowire.BytesType) // graph
	m = protowire.AppendBytes(m, g)
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx.data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Whole reads check an ONNX tensor's external_data "checksum" (SHA-1 of
// its bytes): cat, load (stream and fill), convert and check --data fail
// on a wrong one with one line naming the model, the tensor and both
// digests; the same model with the right checksum passes.
func TestONNXChecksum(t *testing.T) {
	ok, bad := filepath.Join(t.TempDir(), "ok"), filepath.Join(t.TempDir(), "bad")
	for _, d := range []string{ok, bad} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	onnxChecked(t, ok, false)
	onnxChecked(t, bad, true)
	out := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"cat", []string{"cat", "SRC", "w"}},
		{"cat --dtype", []string{"cat", "--dtype", "f64", "SRC", "w"}},
		{"load", []string{"load", "--quiet", "SRC"}},
		{"load --dtype", []string{"load", "--quiet", "--dtype", "f16", "SRC"}},
		{"convert", []string{"convert", "--quiet", "SRC", "OUT"}},
		{"check --data", []string{"check", "--data", "SRC"}},
	} {
		for _, dir := range []string{ok, bad} {
			src := filepath.Join(dir, "model.onnx")
			dst := filepath.Join(out, filepath.Base(dir)+strings.ReplaceAll(c.name, " ", "")+".safetensors")
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = strings.NewReplacer("SRC", src, "OUT", dst).Replace(a)
			}
			r := runTensorfs(t, args...)
			if dir == ok {
				if r.code != 0 {
					t.Errorf("%s, right checksum: exit %d: %s", c.name, r.code, r.stderr)
				}
				if c.name == "check --data" && !strings.Contains(r.stdout, "1 SHA-1 checked") {
					t.Errorf("check --data, right checksum: %q does not say the SHA-1 was checked", r.stdout)
				}
				continue
			}
			text := r.stderr
			if c.name == "check --data" {
				text = r.stdout + r.stderr
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
				if strings.Contains(l, "SHA-1") {
					lines = append(lines, l)
				}
			}
			if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "model.onnx") || !strings.Contains(lines[0], `"w"`) {
				t.Errorf("%s, wrong checksum: exit %d, stdout %q, stderr %q; want exit 1, one line naming model.onnx, tensor \"w\" and SHA-1", c.name, r.code, r.stdout, r.stderr)
			}
			if strings.HasPrefix(c.name, "cat") && r.stdout != "" {
				t.Errorf("%s, wrong checksum: %d bytes on stdout, want none", c.name, len(r.stdout))
			}
			if _, err := os.Stat(dst); c.name == "convert" && err == nil {
				t.Errorf("convert, wrong checksum: %s written", dst)
			}
		}
	}
}

// A Keras 3 .keras zip whose model.weights.h5 is deflated (written by
// Python's zipfile, formats/testdata/others) loads with the same
// tensors, byte for byte, as the model.weights.h5 it holds.
func TestKerasDeflatedLoad(t *testing.T) {
	dir := filepath.Join("..", "formats", "testdata", "others", "bank_churn")
	h5 := runTensorfs(t, "load", "--quiet", "--sha256", filepath.Join(dir, "model.weights.h5"))
	keras := runTensorfs(t, "load", "--quiet", "--sha256", filepath.Join(dir, "model.keras"))
	if h5.code != 0 || keras.code != 0 || h5.stdout != keras.stdout || strings.Count(h5.stdout, "\n") != 20 {
		t.Errorf("model.weights.h5: exit %d %q\nmodel.keras: exit %d %q %q", h5.code, h5.stdout, keras.code, keras.stdout, keras.stderr)
	}
}

// A zstd DCP whose chunks are over 1 MiB (decoded on first read, once)
// loads with the same bytes as the same DCP uncompressed; an item
// corrupted in its middle leaves the open (ls) alone and fails load,
// cat and check --data with one line naming the .distcp and the item.
func TestDCPZstdLazy(t *testing.T) {
	root := t.TempDir()
	z, plain := filepath.Join(root, "z"), filepath.Join(root, "plain")
	for _, args := range [][]string{{"-zstd", "-mib", "4", "-ranks", "2", z}, {"-mib", "4", "-ranks", "2", plain}} {
		cmd := exec.Command(goBinary(), append([]string{"run", "./index/dcp/internal/gendcp"}, args...)...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gendcp %v: %v: %s", args, err, out)
		}
	}
	a := runTensorfs(t, "load", "--quiet", "--sha256", z)
	b := runTensorfs(t, "load", "--quiet", "--sha256", plain)
	if a.code != 0 || a.stdout != b.stdout || a.stdout == "" {
		t.Fatalf("zstd: exit %d %q %q; plain: %q", a.code, a.stdout, a.stderr, b.stdout)
	}
	p := filepath.Join(z, "__0_0.distcp")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runTensorfs(t, "ls", z); r.code != 0 {
		t.Errorf("ls of the corrupt item: exit %d: %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"load", "--quiet", z}, {"cat", z, "model/big.weight"}, {"check", "--data", z}} {
		r := runTensorfs(t, args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "__0_0.distcp") || !strings.Contains(lines[0], "the zstd item at byte") {
			t.Errorf("%s of the corrupt item: exit %d, stderr %q; want exit 1, one line naming __0_0.distcp and the item", args[0], r.code, r.stderr)
		}
	}
}
