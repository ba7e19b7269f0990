package formats

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// expected2 is testdata/formats2/EXPECTED.json: each case's tensors as
// the writers' own readers see them.
type expected2 struct {
	Cases map[string]struct {
		Kind    string `json:"kind"`
		Source  string `json:"source"`
		Tensors []struct {
			Name   string  `json:"name"`
			DType  string  `json:"dtype"`
			Shape  []int64 `json:"shape"`
			SHA256 string  `json:"sha256"`
		} `json:"tensors"`
	} `json:"cases"`
}

// numpyNames are EXPECTED.json's dtype spellings (numpy's).
var numpyNames = map[string]string{"float32": "F32", "float16": "F16", "float64": "F64", "bfloat16": "BF16",
	"int8": "I8", "uint8": "U8", "int16": "I16", "uint16": "U16", "int32": "I32", "uint32": "U32",
	"int64": "I64", "uint64": "U64", "bool": "BOOL"}

// TestFormats2Load: every ONNX and HDF5 case of formats2 loads with the
// tensors the writers' own readers see, byte for byte (sha256 of the
// bytes tensorfs serves, members decoded through the inflate cache).
func TestFormats2Load(t *testing.T) {
	checkExpectedDir(t, testenv.Path(t, "formats2"), "onnx", "h5")
}

// TestOthersRegression: real files written by others
// (testdata/others/MANIFEST: a Keras 3 model.weights.h5 from a public
// repository) load as their writer's own reader reads them.
func TestOthersRegression(t *testing.T) {
	checkExpectedDir(t, "testdata/others", "onnx", "h5", "keras")
}

// checkExpectedDir loads every case of dir/EXPECTED.json of the given
// kinds and compares each tensor's dtype, shape and sha256.
func checkExpectedDir(t *testing.T, dir string, kinds ...string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp expected2
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, c := range exp.Cases {
		if !slices.Contains(kinds, c.Kind) {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			idx, files, err := Load(filepath.Join(dir, c.Source), openDCP, testOptions)
			if err != nil {
				t.Fatal(err)
			}
			defer closeAll(files)
			if len(idx.Unserved) > 0 {
				t.Errorf("unserved: %+v", idx.Unserved)
			}
			var got []string
			for _, tn := range idx.Tensors {
				got = append(got, tn.Name)
			}
			for _, want := range c.Tensors {
				i := slices.IndexFunc(idx.Tensors, func(x index.Tensor) bool { return x.Name == want.Name })
				if i < 0 {
					t.Errorf("no tensor %q (have %s)", want.Name, strings.Join(got, ", "))
					continue
				}
				tn := idx.Tensors[i]
				if tn.DType.String() != numpyNames[want.DType] || !slices.Equal(tn.Shape, want.Shape) {
					t.Errorf("%s: %s %v, want %s %v", want.Name, tn.DType, tn.Shape, want.DType, want.Shape)
				}
				buf := make([]byte, tn.Size)
				if k, err := files[tn.Source].ReadAt(buf, tn.Offset); int64(k) != tn.Size {
					t.Errorf("%s: read %d of %d: %v", want.Name, k, tn.Size, err)
					continue
				}
				if tn.BigEndian {
					buf = swapped(buf, tn.DType.Info().Unit)
				}
				if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != want.SHA256 {
					t.Errorf("%s: sha256 %x, want %s", want.Name, sum, want.SHA256)
				}
			}
			if len(idx.Tensors) != len(c.Tensors) {
				t.Errorf("%d tensors, want %d", len(idx.Tensors), len(c.Tensors))
			}
		})
	}
	if n == 0 {
		t.Fatalf("no case of kinds %v in %s/EXPECTED.json", kinds, dir)
	}
}

func swapped(b []byte, unit int) []byte {
	out := slices.Clone(b)
	for i := 0; i+unit <= len(out); i += unit {
		slices.Reverse(out[i : i+unit])
	}
	return out
}

var _ = backing.Mmap

// onnxExternal is an ONNX model with one float32 [3] initializer "w"
// whose data is external, at location.
func onnxExternal(location string) []byte {
	kv := func(k, v string) []byte {
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendString(b, v)
	}
	var tp []byte
	tp = protowire.AppendTag(tp, 1, protowire.VarintType) // dims
	tp = protowire.AppendVarint(tp, 3)
	tp = protowire.AppendTag(tp, 2, protowire.VarintType) // data_type FLOAT
	tp = protowire.AppendVarint(tp, 1)
	tp = protowire.AppendTag(tp, 8, protowire.BytesType) // name
	tp = protowire.AppendString(tp, "w")
	tp = protowire.AppendTag(tp, 13, protowire.BytesType) // external_data
	tp = protowire.AppendBytes(tp, kv("location", location))
	tp = protowire.AppendTag(tp, 14, protowire.VarintType) // data_location EXTERNAL
	tp = protowire.AppendVarint(tp, 1)
	g := protowire.AppendTag(nil, 5, protowire.BytesType)
	g = protowire.AppendBytes(g, tp)
	m := protowire.AppendTag(nil, 1, protowire.VarintType)
	m = protowire.AppendVarint(m, 8)
	m = protowire.AppendTag(m, 7, protowire.BytesType)
	return protowire.AppendBytes(m, g)
}

// TestONNXExternalConfined: an ONNX model's external data is read from
// its directory only: a location with "..", an absolute path, a
// symbolic link out (the file, or a directory on the way), a missing or
// truncated file are each refused in one line naming the model and the
// initializer; the same model with its data beside it loads, by file
// and by directory.
func TestONNXExternalConfined(t *testing.T) {
	outside := t.TempDir()
	data := make([]byte, 12)
	if err := os.WriteFile(filepath.Join(outside, "w.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		location string
		setup    func(dir string) error
		want     string
	}{
		{"w.bin", func(dir string) error { return os.WriteFile(filepath.Join(dir, "w.bin"), data, 0o644) }, ""},
		{"./sub/../w.bin", func(dir string) error { return os.WriteFile(filepath.Join(dir, "w.bin"), data, 0o644) }, ""},
		{"../w.bin", nil, "leads out of the checkpoint's directory"},
		{"sub/../../w.bin", nil, "leads out of the checkpoint's directory"},
		{"/etc/passwd", nil, "absolute path"},
		{filepath.Join(outside, "w.bin"), nil, "absolute path"},
		{"link.bin", func(dir string) error {
			return os.Symlink(filepath.Join(outside, "w.bin"), filepath.Join(dir, "link.bin"))
		}, "symbolic link out"},
		{"sub/w.bin", func(dir string) error { return os.Symlink(outside, filepath.Join(dir, "sub")) }, "symbolic link out"},
		{"gone.bin", nil, `file "gone.bin" is missing: the checkpoint's directory has no such file`},
		{"short.bin", func(dir string) error { return os.WriteFile(filepath.Join(dir, "short.bin"), data[:8], 0o644) }, "past the end of short.bin (8 bytes)"},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "m")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		model := filepath.Join(dir, "model.onnx")
		if err := os.WriteFile(model, onnxExternal(c.location), 0o644); err != nil {
			t.Fatal(err)
		}
		if c.setup != nil {
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
		}
		for _, src := range []string{model, dir} {
			idx, files, err := Load(src, openDCP, testOptions)
			if c.want == "" {
				if err != nil {
					t.Errorf("%s (%s): %v", c.location, src, err)
					continue
				}
				if len(idx.Tensors) != 1 || idx.Tensors[0].Source != 1 || len(files) != 2 || filepath.Base(idx.Sources[1]) != "w.bin" {
					t.Errorf("%s: tensors %+v sources %v", c.location, idx.Tensors, idx.Sources)
				}
				closeAll(files)
				continue
			}
			if err == nil {
				closeAll(files)
				t.Errorf("%s (%s): loaded", c.location, src)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, "model.onnx") || !strings.Contains(msg, `initializer "w"`) || strings.Contains(msg, "\n") {
				t.Errorf("%s (%s): %v, want one line with %q", c.location, src, err, c.want)
			}
		}
	}
}

// kerasZip writes a .keras zip as Keras 3 does (metadata.json,
// config.json, model.weights.h5), the weights member with method.
func kerasZip(t *testing.T, h5 []byte, method uint16) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "model.keras")
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, m := range []struct {
		name   string
		data   []byte
		method uint16
	}{{"metadata.json", []byte(`{"keras_version": "3.12.0"}`), zip.Store}, {"config.json", []byte(`{}`), zip.Store}, {"model.weights.h5", h5, method}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: m.method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(m.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKerasZip: a .keras zip's stored model.weights.h5 is read in place,
// byte-exact (contiguous and gzip-chunked datasets); a deflated one
// too, through the inflate cache (TestKerasDeflated).
func TestKerasZip(t *testing.T) {
	dir := testenv.Path(t, "formats2")
	data, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp expected2
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keras_mlp.weights.h5", "keras_gzip.weights.h5"} {
		h5, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		idx, files, err := Load(kerasZip(t, h5, zip.Store), openDCP, testOptions)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := exp.Cases[name]
		if len(idx.Tensors) != len(c.Tensors) || idx.Format != "keras" {
			t.Errorf("%s: %s with %d tensors, want keras with %d", name, idx.Format, len(idx.Tensors), len(c.Tensors))
		}
		for _, want := range c.Tensors {
			i := slices.IndexFunc(idx.Tensors, func(x index.Tensor) bool { return x.Name == want.Name })
			if i < 0 {
				t.Errorf("%s: no %s", name, want.Name)
				continue
			}
			tn := idx.Tensors[i]
			buf := make([]byte, tn.Size)
			files[tn.Source].ReadAt(buf, tn.Offset)
			if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != want.SHA256 {
				t.Errorf("%s %s: sha256 %x, want %s", name, want.Name, sum, want.SHA256)
			}
		}
		closeAll(files)
	}
}
