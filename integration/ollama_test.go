package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// ollamaFixtures writes an Ollama store (OLLAMA_MODELS, for the test and
// the tensorfs it runs) holding spm (a GGUF model, under library/ and
// hf.co/USER/REPO) and tiny:int4 (the MLX checkpoint quant/mlx_affine as
// Ollama's create stores it: a tensor blob each, quantized ones holding
// X.weight, X.weight.scale, X.weight.bias and their quant_type), and
// returns the store and the two checkpoints they were made from.
func ollamaFixtures(t *testing.T) (s testenv.OllamaStore, gguf, mlxDir string) {
	t.Helper()
	s = testenv.OllamaStore{Root: t.TempDir()}
	t.Setenv("OLLAMA_MODELS", s.Root)
	gguf = testenv.Path(t, "gguf/quantized/ollama-ggml-q4_k.gguf")
	data, err := os.ReadFile(gguf)
	if err != nil {
		t.Fatal(err)
	}
	layers := []testenv.OllamaLayer{
		s.Blob(t, "application/vnd.ollama.image.model", "", data),
		s.Blob(t, "application/vnd.ollama.image.template", "", []byte("{{ .Prompt }}")),
		s.Blob(t, "application/vnd.ollama.image.params", "", []byte(`{"temperature":0}`)),
	}
	s.Manifest(t, "registry.ollama.ai/library/spm:latest", s.OllamaConfig(t, "gguf"), layers)
	s.Manifest(t, "hf.co/someone/spm-GGUF:Q8_0", s.OllamaConfig(t, "gguf"), layers)

	mlxDir = testenv.Path(t, "quant/mlx_affine")
	data, err = os.ReadFile(filepath.Join(mlxDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(mlxDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := testenv.ReadSafetensors(t, data)
	byName := map[string]testenv.OllamaTensor{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	layers = nil
	for _, x := range ts {
		if strings.HasSuffix(x.Name, ".scales") || strings.HasSuffix(x.Name, ".biases") {
			continue
		}
		mod := strings.TrimSuffix(x.Name, ".weight")
		blob := []testenv.OllamaTensor{x}
		var meta map[string]string
		if sc, ok := byName[mod+".scales"]; ok {
			bi := byName[mod+".biases"]
			sc.Name, bi.Name = x.Name+".scale", x.Name+".bias"
			blob, meta = append(blob, sc, bi), map[string]string{"quant_type": "int4", "group_size": "64"}
		}
		layers = append(layers, s.Blob(t, "application/vnd.ollama.image.tensor", x.Name, testenv.WriteSafetensors(blob, meta)))
	}
	layers = append(layers, s.Blob(t, "application/vnd.ollama.image.json", "config.json", cfg))
	s.Manifest(t, "registry.ollama.ai/library/tiny:int4", s.OllamaConfig(t, "safetensors"), layers)
	return s, gguf, mlxDir
}

// TestOllamaLoadCheck: load --sha256 of an ollama:// model equals the
// checkpoint it was made from, read from disk (the GGUF, and the MLX
// checkpoint whose quantized weights the tensor blobs hold); check --data
// verifies every blob against its digest and names one that differs.
func TestOllamaLoadCheck(t *testing.T) {
	s, gguf, mlxDir := ollamaFixtures(t)
	for _, c := range []struct{ src, local string }{
		{"ollama://spm", gguf},
		{"ollama://hf.co/someone/spm-GGUF:Q8_0", gguf},
		{"ollama://tiny:int4", mlxDir},
	} {
		want := runTensorfs(t, "load", "--quiet", "--sha256", c.local)
		got := runTensorfs(t, "load", "--quiet", "--sha256", c.src)
		if got.code != 0 || want.code != 0 || got.stdout != want.stdout || got.stdout == "" {
			t.Errorf("load --sha256 %s (exit %d, stderr %q):\n%s\nwant (%s):\n%s", c.src, got.code, got.stderr, got.stdout, c.local, want.stdout)
		}
		r := runTensorfs(t, "check", "--data", c.src)
		if r.code != 0 {
			t.Errorf("check --data %s: exit %d: %s", c.src, r.code, r.stderr)
		}
	}
	r := runTensorfs(t, "ls", "ollama://")
	var rows []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			rows = append(rows, f[0]+" "+f[1])
		}
	}
	for _, want := range []string{"hf.co/someone/spm-GGUF:Q8_0 gguf", "spm:latest gguf", "tiny:int4 tensors"} {
		if r.code != 0 || !slices.Contains(rows, want) {
			t.Errorf("ls ollama://: exit %d, no %q in:\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	// The GGUF is its blob: the index's one source is the blob's path.
	r = runTensorfs(t, "ls", "--json", "ollama://spm")
	if gguf := s.BlobPath(s.Blob(t, "application/vnd.ollama.image.model", "", mustRead(t, gguf))); !strings.Contains(r.stdout, `"`+gguf+`"`) {
		t.Errorf("ls --json ollama://spm: the source is not the blob %s:\n%.400s", gguf, r.stdout)
	}
	r = runTensorfs(t, "check", "--data", "--json", "ollama://tiny:int4")
	if n := strings.Count(r.stdout, `"sha256 ok"`); n != len(layersOf(t, s, "registry.ollama.ai/library/tiny/int4"))+1 {
		t.Errorf("check --data --json: %d blobs verified, want every layer's and the config's:\n%s", n, r.stdout)
	}

	// Blobs changed in place (same size), the GGUF and the template:
	// check --data says which, one line each.
	blobs, _ := filepath.Glob(filepath.Join(s.Root, "blobs", "sha256-*"))
	var victims []string
	for _, b := range blobs {
		data, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("GGUF")) && string(data) != "{{ .Prompt }}" {
			continue
		}
		data[len(data)-1] ^= 0xff
		if err := os.WriteFile(b, data, 0o644); err != nil {
			t.Fatal(err)
		}
		victims = append(victims, b)
	}
	r = runTensorfs(t, "check", "--data", "ollama://spm")
	lines := checkLines(r)
	if r.code != 1 || len(victims) != 2 || len(lines) != 2 {
		t.Fatalf("check --data of 2 changed blobs: exit %d, problems %q", r.code, lines)
	}
	for _, v := range victims {
		if !strings.Contains(strings.Join(lines, "\n"), v+": sha256 of the file's") {
			t.Errorf("check --data: no line names %s: %q", v, lines)
		}
	}
}

// TestOllamaMount: an MLX-engine model of tensor blobs mounts as one tree
// with its names: its quantized weights read as the MLX checkpoint's do,
// its config.json beside the export, from a mount read by this process
// (the server is a subprocess).
func TestOllamaMount(t *testing.T) {
	_, _, mlxDir := ollamaFixtures(t)
	m := mount(t, "ollama://tiny:int4")
	w := mount(t, mlxDir)
	for _, name := range []string{"model.layers.0.mlp.up_proj.weight", "model.layers.0.self_attn.k_proj.weight", "model.norm.weight"} {
		for _, v := range []string{"", ".f32/"} {
			p := v + index.NameToPath(name)
			got, err := os.ReadFile(m.Path(p))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(w.Path(p))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || len(got) == 0 {
				t.Errorf("%s: %d bytes through ollama://, %d from the MLX checkpoint, or they differ", p, len(got), len(want))
			}
		}
	}
	cfg, err := os.ReadFile(m.Path(".safetensors/config.json"))
	want, _ := os.ReadFile(filepath.Join(mlxDir, "config.json"))
	if err != nil || !bytes.Equal(cfg, want) {
		t.Errorf(".safetensors/config.json: %v (%d bytes, want %d)", err, len(cfg), len(want))
	}
	m.Unmount()
	w.Unmount()
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// layersOf is the layers of the manifest at manifests/REL of s.
func layersOf(t *testing.T, s testenv.OllamaStore, rel string) []testenv.OllamaLayer {
	t.Helper()
	var m struct{ Layers []testenv.OllamaLayer }
	if err := json.Unmarshal(mustRead(t, filepath.Join(s.Root, "manifests", rel)), &m); err != nil {
		t.Fatal(err)
	}
	return m.Layers
}
