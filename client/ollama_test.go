package client

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestOllama: the Go client opens ollama://NAME:TAG: a tensor-blob model
// whose quantized weights (Ollama's X.weight, .scale, .bias and
// quant_type) read in F32 as the MLX checkpoint they were made from
// (quant/mlx_affine) reads, and whose metadata layers are beside it.
func TestOllama(t *testing.T) {
	dir := testenv.Path(t, "quant/mlx_affine")
	s := testenv.OllamaStore{Root: t.TempDir()}
	t.Setenv("OLLAMA_MODELS", s.Root)
	data, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := testenv.ReadSafetensors(t, data)
	by := map[string]testenv.OllamaTensor{}
	for _, x := range ts {
		by[x.Name] = x
	}
	var layers []testenv.OllamaLayer
	for _, x := range ts {
		if strings.HasSuffix(x.Name, ".scales") || strings.HasSuffix(x.Name, ".biases") {
			continue
		}
		blob, meta := []testenv.OllamaTensor{x}, map[string]string(nil)
		if sc, ok := by[strings.TrimSuffix(x.Name, ".weight")+".scales"]; ok {
			bi := by[strings.TrimSuffix(x.Name, ".weight")+".biases"]
			sc.Name, bi.Name = x.Name+".scale", x.Name+".bias"
			blob, meta = append(blob, sc, bi), map[string]string{"quant_type": "int4", "group_size": "64"}
		}
		layers = append(layers, s.Blob(t, "application/vnd.ollama.image.tensor", x.Name, testenv.WriteSafetensors(blob, meta)))
	}
	layers = append(layers, s.Blob(t, "application/vnd.ollama.image.template", "", []byte("{{ .Prompt }}")))
	s.Manifest(t, "registry.ollama.ai/library/tiny:int4", testenv.OllamaLayer{}, layers)

	c, err := Open("ollama://tiny:int4")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	read := func(c *Checkpoint, name string) []byte {
		r, err := c.OpenTensor(name, dtype.F32)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const name = "model.layers.0.mlp.up_proj.weight"
	if got, want := read(c, name), read(w, name); len(want) == 0 || !bytes.Equal(got, want) {
		t.Errorf("%s in F32: %d bytes, want the MLX checkpoint's %d, or they differ", name, len(got), len(want))
	}
	beside, err := c.Beside(t.Context())
	if err != nil || len(beside) != 1 || beside[0].Name != "template" {
		t.Errorf("beside: %v, %v", beside, err)
	}
}
