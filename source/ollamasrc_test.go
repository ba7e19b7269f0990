package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// ollamaStore is an empty store in a temporary directory, named by
// OLLAMA_MODELS for the test.
func ollamaStore(t *testing.T) testenv.OllamaStore {
	root := t.TempDir()
	t.Setenv("OLLAMA_MODELS", root)
	return testenv.OllamaStore{Root: root}
}

// readTensor is the bytes of the stored tensor name of ck.
func readTensor(t *testing.T, ck *Checkpoint, name string) []byte {
	t.Helper()
	return readRole(t, ck, name, index.RoleStored)
}

// readRole is the bytes of tensor name of ck in role (a logical weight
// can have its stored weight's name).
func readRole(t *testing.T, ck *Checkpoint, name string, role index.Role) []byte {
	t.Helper()
	for _, x := range ck.Index.Tensors {
		if x.Name == name && x.Role == role {
			b := make([]byte, x.Size)
			if _, err := ck.Sources[x.Source].ReadAt(b, x.Offset); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return b
		}
	}
	t.Fatalf("no tensor %q", name)
	return nil
}

func tensorNames(ck *Checkpoint) []string {
	var out []string
	for _, x := range ck.Index.Tensors {
		out = append(out, x.Name)
	}
	return out
}

// TestOllamaGGUF: a model whose weights are one GGUF layer is that GGUF,
// its blob the backing file; the other layers are the files beside it,
// and the blob's digest is the sha256 check --data verifies. The three
// kinds of name (library, another namespace, hf.co/USER/REPO) are found
// where Ollama writes their manifests.
func TestOllamaGGUF(t *testing.T) {
	s := ollamaStore(t)
	gguf := testenv.Path(t, "gguf/quantized/ollama-ggml-q4_k.gguf")
	data, err := os.ReadFile(gguf)
	if err != nil {
		t.Fatal(err)
	}
	model := s.Blob(t, "application/vnd.ollama.image.model", "", data)
	layers := []testenv.OllamaLayer{
		model,
		s.Blob(t, "application/vnd.ollama.image.template", "", []byte("{{ .Prompt }}")),
		s.Blob(t, "application/vnd.ollama.image.license", "", []byte("MIT")),
		s.Blob(t, "application/vnd.ollama.image.license", "", []byte("Apache-2.0")),
		s.Blob(t, "application/vnd.ollama.image.params", "", []byte(`{"stop":["</s>"]}`)),
	}
	cfg := s.OllamaConfig(t, "gguf")
	s.Manifest(t, "registry.ollama.ai/library/spm:latest", cfg, layers)
	s.Manifest(t, "registry.ollama.ai/someone/spm:q4", cfg, layers)
	s.Manifest(t, "hf.co/user/spm-GGUF:Q4_K_M", cfg, layers)

	want, err := Load(context.Background(), gguf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	for _, src := range []string{"ollama://spm", "ollama://spm:latest", "ollama://someone/spm:q4", "ollama://hf.co/user/spm-GGUF:Q4_K_M", "OLLAMA://spm"} {
		ck, err := Load(context.Background(), src, Options{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := ck.Index.Sources; len(got) != 1 || got[0] != s.BlobPath(model) {
			t.Errorf("%s: sources %v, want the blob %s itself", src, got, s.BlobPath(model))
		}
		if len(want.Index.Tensors) == 0 || !slices.Equal(tensorNames(ck), tensorNames(want)) || ck.Index.Format != want.Index.Format {
			t.Errorf("%s: tensors %v (%s), want %v (%s)", src, tensorNames(ck), ck.Index.Format, tensorNames(want), want.Index.Format)
		}
		if h, ok := ck.SHA256(0); !ok || "sha256:"+h != model.Digest {
			t.Errorf("%s: SHA256(0) = %q %v, want %s", src, h, ok, model.Digest)
		}
		beside, err := ck.Beside(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range beside {
			names = append(names, f.Name)
		}
		if want := []string{"template", "license", "license-2", "params", "config"}; !slices.Equal(names, want) {
			t.Errorf("%s: beside %v, want %v", src, names, want)
		}
		ck.Close()
	}
}

// TestOllamaTensorBlobs: an MLX-engine model (a safetensors blob per
// tensor, and a group blob named by its prefix) is one tree whose tensors
// have their names and bytes, each read from its blob; the JSON layers
// are beside it by their names.
func TestOllamaTensorBlobs(t *testing.T) {
	s := ollamaStore(t)
	orig := testenv.Path(t, "safetensors/ollama-minicpm3/model.safetensors")
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := testenv.ReadSafetensors(t, data)
	var layers []testenv.OllamaLayer
	var group []testenv.OllamaTensor
	for _, x := range ts {
		if strings.HasPrefix(x.Name, "model.layers.0.mlp.") {
			group = append(group, x)
			continue
		}
		layers = append(layers, s.Blob(t, "application/vnd.ollama.image.tensor", x.Name, testenv.WriteSafetensors([]testenv.OllamaTensor{x}, nil)))
	}
	layers = append(layers, s.Blob(t, "application/vnd.ollama.image.tensor", "model.layers.0.mlp", testenv.WriteSafetensors(group, nil)))
	layers = append(layers, s.Blob(t, "application/vnd.ollama.image.json", "config.json", []byte(`{"model_type":"minicpm3"}`)))
	layers = append(layers, s.Blob(t, "application/vnd.ollama.image.json", "tokenizer.json", []byte(`{}`)))
	layers = append(layers, s.Blob(t, "application/vnd.ollama.image.json", "model.safetensors.index.json", []byte(`{"weight_map":{}}`)))
	s.Manifest(t, "registry.ollama.ai/library/minicpm:mlx", s.OllamaConfig(t, "safetensors"), layers)

	ck, err := Load(context.Background(), "ollama://minicpm:mlx", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if got := len(ck.Index.Tensors); got != len(ts) {
		t.Fatalf("%d tensors, want %d", got, len(ts))
	}
	for _, x := range ts {
		if got := readTensor(t, ck, x.Name); !bytes.Equal(got, x.Data) {
			t.Errorf("%s: bytes differ", x.Name)
		}
	}
	for i := range ck.Sources {
		if _, ok := ck.SHA256(i); !ok {
			t.Errorf("source %d (%s) has no digest", i, ck.Index.SourceName(i))
		}
	}
	beside, _ := ck.Beside(context.Background())
	var names []string
	for _, f := range beside {
		names = append(names, f.Name)
	}
	if want := []string{"config.json", "tokenizer.json", "config"}; !slices.Equal(names, want) {
		t.Errorf("beside %v, want %v", names, want)
	}
	if notes := strings.Join(ck.Index.Notes, "\n"); !strings.Contains(notes, "model.safetensors.index.json") {
		t.Errorf("notes %q: no word of the layer left out", notes)
	}
}

// TestOllamaQuantized: tensor blobs quantized as Ollama's create writes
// them (X.weight, X.weight.scale, X.weight.bias; __metadata__ quant_type
// and group_size) are served as their weights, with the same logical
// tensors, bytes for bytes, as the MLX checkpoint they were made from
// (quant/mlx_affine, whose dequantization is checked against MLX's
// formula in quant/).
func TestOllamaQuantized(t *testing.T) {
	s := ollamaStore(t)
	dir := testenv.Path(t, "quant/mlx_affine")
	data, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := testenv.ReadSafetensors(t, data)
	byName := map[string]testenv.OllamaTensor{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	var layers []testenv.OllamaLayer
	for _, x := range ts {
		switch {
		case strings.HasSuffix(x.Name, ".scales"), strings.HasSuffix(x.Name, ".biases"):
			continue
		}
		mod := strings.TrimSuffix(x.Name, ".weight")
		sc, quantized := byName[mod+".scales"]
		if !quantized {
			layers = append(layers, s.Blob(t, "application/vnd.ollama.image.tensor", x.Name, testenv.WriteSafetensors([]testenv.OllamaTensor{x}, nil)))
			continue
		}
		bi := byName[mod+".biases"]
		sc.Name, bi.Name = x.Name+".scale", x.Name+".bias"
		blob := testenv.WriteSafetensors([]testenv.OllamaTensor{x, sc, bi}, map[string]string{"quant_type": "int4", "group_size": "64"})
		layers = append(layers, s.Blob(t, "application/vnd.ollama.image.tensor", x.Name, blob))
	}
	s.Manifest(t, "registry.ollama.ai/library/tiny:int4", s.OllamaConfig(t, "safetensors"), layers)

	want, err := Load(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	ck, err := Load(context.Background(), "ollama://tiny:int4", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	logical := func(ck *Checkpoint) []string {
		var out []string
		for _, x := range ck.Index.Tensors {
			if x.Role == index.RoleLogical {
				out = append(out, x.Name)
			}
		}
		return out
	}
	if got, w := logical(ck), logical(want); len(w) == 0 || !slices.Equal(got, w) {
		t.Fatalf("logical weights %v, want %v (notes %q)", got, w, ck.Index.Notes)
	}
	for _, n := range logical(want) {
		if !bytes.Equal(readRole(t, ck, n, index.RoleLogical), readRole(t, want, n, index.RoleLogical)) {
			t.Errorf("%s: dequantized bytes differ from the MLX checkpoint's", n)
		}
	}
}

// TestOllamaQuantUnnamed: a quantized blob that names no quant_type, or
// one whose weight has a global scale (an imported pre-quantized NVFP4),
// is served as stored, with a note naming the tensor and why.
func TestOllamaQuantUnnamed(t *testing.T) {
	w := testenv.OllamaTensor{Name: "a.weight", DType: "U32", Shape: []int64{2, 8}, Data: make([]byte, 64)}
	sc := testenv.OllamaTensor{Name: "a.weight.scale", DType: "U8", Shape: []int64{2, 4}, Data: make([]byte, 8)}
	gs := testenv.OllamaTensor{Name: "a.weight.global_scale", DType: "F32", Shape: []int64{}, Data: make([]byte, 4)}
	for _, c := range []struct {
		blob []testenv.OllamaTensor
		meta map[string]string
		why  string
	}{
		{[]testenv.OllamaTensor{w, sc}, nil, "names no quant_type"},
		{[]testenv.OllamaTensor{w, sc, gs}, map[string]string{"quant_type": "nvfp4", "group_size": "16"}, "global scale"},
		{[]testenv.OllamaTensor{w, sc}, map[string]string{"quant_type": "q3"}, `quant_type "q3" is not one Ollama writes`},
	} {
		s := ollamaStore(t)
		l := s.Blob(t, "application/vnd.ollama.image.tensor", "a.weight", testenv.WriteSafetensors(c.blob, c.meta))
		s.Manifest(t, "registry.ollama.ai/library/q:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{l})
		ck, err := Load(context.Background(), "ollama://q", Options{})
		if err != nil {
			t.Fatal(err)
		}
		var stored []string
		for _, x := range c.blob {
			stored = append(stored, x.Name)
		}
		slices.Sort(stored)
		if !slices.Equal(tensorNames(ck), stored) {
			t.Errorf("%s: tensors %v, want %v as stored", c.why, tensorNames(ck), stored)
		}
		if notes := strings.Join(ck.Index.Notes, "\n"); !strings.Contains(notes, `"a.weight": served as stored`) || !strings.Contains(notes, c.why) {
			t.Errorf("%s: notes %q", c.why, ck.Index.Notes)
		}
		ck.Close()
	}
}

// TestOllamaHostile: a store that lies or escapes is one line naming the
// manifest and what is wrong, and nothing is loaded.
func TestOllamaHostile(t *testing.T) {
	tensor := testenv.WriteSafetensors([]testenv.OllamaTensor{{Name: "w", DType: "F32", Shape: []int64{1}, Data: make([]byte, 4)}}, nil)
	cases := []struct {
		name, source, want string
		make               func(t *testing.T, s testenv.OllamaStore)
	}{
		{"dotdot name", "ollama://../../etc/passwd", "not a model name", nil},
		{"dotdot part", "ollama://a/../b:c", `namespace ".."`, nil},
		{"no model", "ollama://nothere", "no model registry.ollama.ai/library/nothere:latest", nil},
		{"empty", "ollama://", "no model named", nil},
		{"digest escapes", "ollama://m", `digest "sha256:../../../etc/passwd" is not sha256`, func(t *testing.T, s testenv.OllamaStore) {
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{{MediaType: "application/vnd.ollama.image.model", Digest: "sha256:../../../etc/passwd", Size: 4}})
		}},
		{"md5 digest", "ollama://m", `digest "md5:`, func(t *testing.T, s testenv.OllamaStore) {
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{{MediaType: "application/vnd.ollama.image.model", Digest: "md5:0123456789abcdef0123456789abcdef", Size: 4}})
		}},
		{"missing blob", "ollama://m", "is missing", func(t *testing.T, s testenv.OllamaStore) {
			l := s.Blob(t, "application/vnd.ollama.image.tensor", "w", tensor)
			os.Remove(s.BlobPath(l))
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{l})
		}},
		{"size lie", "ollama://m", "the manifest says 999", func(t *testing.T, s testenv.OllamaStore) {
			l := s.Blob(t, "application/vnd.ollama.image.tensor", "w", tensor)
			l.Size = 999
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{l})
		}},
		{"missing metadata blob", "ollama://m", "template", func(t *testing.T, s testenv.OllamaStore) {
			l := s.Blob(t, "application/vnd.ollama.image.tensor", "w", tensor)
			tp := s.Blob(t, "application/vnd.ollama.image.template", "", []byte("x"))
			os.Remove(s.BlobPath(tp))
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{l, tp})
		}},
		{"huge manifest", "ollama://m", "over 33554432", func(t *testing.T, s testenv.OllamaStore) {
			p := s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, nil)
			if err := os.Truncate(p, 64<<20); err != nil { // sparse: costs no disk
				t.Fatal(err)
			}
		}},
		{"blob symlink out", "ollama://m", "symbolic link out of the store's blobs/", func(t *testing.T, s testenv.OllamaStore) {
			l := s.Blob(t, "application/vnd.ollama.image.tensor", "w", tensor)
			out := filepath.Join(t.TempDir(), "outside")
			os.WriteFile(out, tensor, 0o644)
			os.Remove(s.BlobPath(l))
			if err := os.Symlink(out, s.BlobPath(l)); err != nil {
				t.Fatal(err)
			}
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{l})
		}},
		{"manifest symlink out", "ollama://m", "symbolic link out of the store's manifests/", func(t *testing.T, s testenv.OllamaStore) {
			l := s.Blob(t, "application/vnd.ollama.image.tensor", "w", tensor)
			p := s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{l})
			out := filepath.Join(t.TempDir(), "manifest")
			b, _ := os.ReadFile(p)
			os.WriteFile(out, b, 0o644)
			os.Remove(p)
			if err := os.Symlink(out, p); err != nil {
				t.Fatal(err)
			}
		}},
		{"manifest symlink loop", "ollama://m", "latest: too many levels of symbolic links", func(t *testing.T, s testenv.OllamaStore) {
			p := filepath.Join(s.Root, "manifests", "registry.ollama.ai", "library", "m", "latest")
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.Symlink("latest", p); err != nil { // itself
				t.Fatal(err)
			}
		}},
		{"manifest list", "ollama://m", "a manifest list", func(t *testing.T, s testenv.OllamaStore) {
			p := filepath.Join(s.Root, "manifests", "registry.ollama.ai", "library", "m", "latest")
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`), 0o644)
		}},
		{"no weights", "ollama://m", "no weights", func(t *testing.T, s testenv.OllamaStore) {
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{s.Blob(t, "application/vnd.ollama.image.license", "", []byte("x"))})
		}},
		{"gguf and tensors", "ollama://m", "both a GGUF layer", func(t *testing.T, s testenv.OllamaStore) {
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{
				s.Blob(t, "application/vnd.ollama.image.model", "", []byte("GGUF")),
				s.Blob(t, "application/vnd.ollama.image.tensor", "w", tensor),
			})
		}},
		{"name not the layer's", "ollama://m", `holds tensor "w", which is not under its layer's name`, func(t *testing.T, s testenv.OllamaStore) {
			s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{s.Blob(t, "application/vnd.ollama.image.tensor", "other.weight", tensor)})
		}},
		{"not json", "ollama://m", "not a JSON manifest", func(t *testing.T, s testenv.OllamaStore) {
			p := filepath.Join(s.Root, "manifests", "registry.ollama.ai", "library", "m", "latest")
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(`{"layers":[`), 0o644)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ollamaStore(t)
			if c.make != nil {
				c.make(t, s)
			}
			ck, err := Load(context.Background(), c.source, Options{Backing: backing.Options{}})
			if err == nil {
				ck.Close()
				t.Fatalf("loaded; want an error with %q", c.want)
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line with %q", msg, c.want)
			}
		})
	}
}

// TestOllamaQuantGroup: a group blob (Ollama's packed experts, named by
// the group's prefix) whose tensors have different quantizations, named
// per tensor in __metadata__ ("NAME.quant_type", "NAME.group_size"), is
// read tensor by tensor, each to its values: MXFP8 (E4M3 codes, E8M0
// scales per 32), int8 affine (scale·q + bias per 64), NVFP4 (E2M1 codes,
// E4M3 scales per 16) and MXFP4 (E2M1 codes, E8M0 scales per 32), as
// mlx.Quantize packs them (8 codes a U32 word, low nibble first).
func TestOllamaQuantGroup(t *testing.T) {
	s := ollamaStore(t)
	fill := func(n int, b ...byte) []byte {
		out := make([]byte, n)
		for i := range out {
			out[i] = b[i%len(b)]
		}
		return out
	}
	g, u := "m.experts.gate_proj.weight", "m.experts.up_proj.weight"
	nv, mx := "m.experts.down_proj.weight", "m.experts.o_proj.weight"
	blob := testenv.WriteSafetensors([]testenv.OllamaTensor{
		{Name: nv, DType: "U32", Shape: []int64{2, 8}, Data: fill(64, 0x22)},                 // E2M1 1.0, 1.0
		{Name: nv + ".scale", DType: "U8", Shape: []int64{2, 4}, Data: fill(8, 0x40)},        // E4M3 2.0
		{Name: mx, DType: "U32", Shape: []int64{2, 8}, Data: fill(64, 0x33)},                 // E2M1 1.5, 1.5
		{Name: mx + ".scale", DType: "U8", Shape: []int64{2, 2}, Data: fill(4, 128)},         // E8M0 2^1
		{Name: g, DType: "U32", Shape: []int64{2, 16}, Data: fill(128, 0x38)},                // E4M3 1.0
		{Name: g + ".scale", DType: "U8", Shape: []int64{2, 2}, Data: fill(4, 127)},          // E8M0 2^0
		{Name: u, DType: "U32", Shape: []int64{2, 16}, Data: fill(128, 3)},                   // q = 3
		{Name: u + ".scale", DType: "BF16", Shape: []int64{2, 1}, Data: fill(4, 0x00, 0x40)}, // 2.0
		{Name: u + ".bias", DType: "BF16", Shape: []int64{2, 1}, Data: fill(4, 0x80, 0x3f)},  // 1.0
	}, map[string]string{g + ".quant_type": "mxfp8", g + ".group_size": "32", u + ".quant_type": "int8", u + ".group_size": "64",
		nv + ".quant_type": "nvfp4", nv + ".group_size": "16", mx + ".quant_type": "MXFP4", mx + ".group_size": "32"})
	l := s.Blob(t, "application/vnd.ollama.image.tensor", "m.experts", blob)
	s.Manifest(t, "registry.ollama.ai/library/moe:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{l})
	ck, err := Load(context.Background(), "ollama://moe", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	want := map[string]float32{g: 1, u: 7, nv: 2, mx: 3}
	for _, x := range ck.Index.Tensors {
		v, ok := want[x.Name]
		if !ok || x.Role != index.RoleLogical {
			continue
		}
		delete(want, x.Name)
		if !slices.Equal(x.Shape, []int64{2, 64}) {
			t.Errorf("%s: shape %v, want [2 64]", x.Name, x.Shape)
		}
		b := readRole(t, ck, x.Name, index.RoleLogical)
		got, err := f32Values(x.DType.String(), b)
		if err != nil {
			t.Fatalf("%s: %v", x.Name, err)
		}
		for i, y := range got {
			if y != v {
				t.Fatalf("%s[%d] = %v, want %v", x.Name, i, y, v)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("not read as weights: %v (notes %q, unserved %v)", want, ck.Index.Notes, ck.Index.Unserved)
	}
}

// f32Values decodes little-endian F32, BF16 or F16 values (F16 only for
// small integers, which it holds exactly).
func f32Values(dt string, b []byte) ([]float32, error) {
	var out []float32
	switch dt {
	case "F32":
		for i := 0; i+4 <= len(b); i += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
		}
	case "BF16":
		for i := 0; i+2 <= len(b); i += 2 {
			out = append(out, math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[i:]))<<16))
		}
	default:
		return nil, fmt.Errorf("dtype %s", dt)
	}
	return out, nil
}

// TestOllamaModels: the store's models are listed by name, sorted, a
// manifest that cannot be read as "unreadable" with its reason.
func TestOllamaModels(t *testing.T) {
	s := ollamaStore(t)
	tensor := testenv.WriteSafetensors([]testenv.OllamaTensor{{Name: "w", DType: "F32", Shape: []int64{1}, Data: make([]byte, 4)}}, nil)
	s.Manifest(t, "registry.ollama.ai/library/good:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{s.Blob(t, "application/vnd.ollama.image.tensor", "w", tensor)})
	s.Manifest(t, "hf.co/u/bad:q4", testenv.OllamaLayer{}, []testenv.OllamaLayer{{MediaType: "application/vnd.ollama.image.model", Digest: "sha256:../x"}})
	os.WriteFile(filepath.Join(s.Root, "manifests", "registry.ollama.ai", "library", "good", ".hidden"), []byte("{}"), 0o644)
	root, ms, err := OllamaModels()
	if err != nil || root != s.Root {
		t.Fatal(root, err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name+" "+m.Weights)
	}
	if want := []string{"hf.co/u/bad:q4 unreadable", "good:latest tensors"}; !slices.Equal(got, want) {
		t.Errorf("models %q, want %q", got, want)
	}
	if len(ms) == 2 && !strings.Contains(ms[0].Problem, `digest "sha256:../x"`) {
		t.Errorf("problem %q", ms[0].Problem)
	}
}

// TestOllamaDotDotNames: a tensor layer and its blob's tensor named
// "../../etc/passwd" is a tensor of that name, whose path in the mounted
// tree has no ".." component (index.AssignPaths), and a JSON layer named
// "../config.json" is a file beside called "..--config.json": a manifest's
// names are names, never paths.
func TestOllamaDotDotNames(t *testing.T) {
	s := ollamaStore(t)
	const evil = "../../etc/passwd"
	blob := testenv.WriteSafetensors([]testenv.OllamaTensor{{Name: evil, DType: "F32", Shape: []int64{1}, Data: make([]byte, 4)}}, nil)
	s.Manifest(t, "registry.ollama.ai/library/m:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{
		s.Blob(t, "application/vnd.ollama.image.tensor", evil, blob),
		s.Blob(t, "application/vnd.ollama.image.json", "../config.json", []byte("{}")),
	})
	ck, err := Load(context.Background(), "ollama://m", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Index.Tensors) != 1 || ck.Index.Tensors[0].Name != evil {
		t.Fatalf("tensors %v", tensorNames(ck))
	}
	for _, c := range strings.Split(ck.Index.Tensors[0].Path, "/") {
		if c == ".." || c == "." || c == "" {
			t.Errorf("path %q has a %q component", ck.Index.Tensors[0].Path, c)
		}
	}
	beside, _ := ck.Beside(context.Background())
	if len(beside) != 1 || beside[0].Name != "..--config.json" {
		t.Errorf("beside %v", beside)
	}
}

// TestOllamaRelativeRoot: OLLAMA_MODELS may be a relative path: the GGUF's
// blob (whose source name a local load makes absolute) still has its
// digest.
func TestOllamaRelativeRoot(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("OLLAMA_MODELS", "models")
	s := testenv.OllamaStore{Root: filepath.Join(dir, "models")}
	data, err := os.ReadFile(testenv.Path(t, "gguf/quantized/ollama-ggml-q4_k.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	l := s.Blob(t, "application/vnd.ollama.image.model", "", data)
	s.Manifest(t, "registry.ollama.ai/library/g:latest", testenv.OllamaLayer{}, []testenv.OllamaLayer{l})
	ck, err := Load(context.Background(), "ollama://g", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if h, ok := ck.SHA256(0); !ok || "sha256:"+h != l.Digest {
		t.Errorf("SHA256(0) = %q, %v; want %s (source %s)", h, ok, l.Digest, ck.Index.Sources[0])
	}
}
