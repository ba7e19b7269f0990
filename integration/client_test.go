package integration

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestClientSameThroughMount opens real checkpoints with the Go client
// directly and through a mount (this process only reads the mount; a
// tensorfs subprocess serves it): the metadata, with GGUF's typed
// integers, floats and large arrays, and every TensorInfo are equal.
func TestClientSameThroughMount(t *testing.T) {
	needFUSE(t)
	for _, rel := range []string{
		"gguf/quantized/ollama-ggml-q4_k.gguf",
		"gguf/llama.cpp/ggml-vocab-gpt-2.gguf",
		"safetensors/fluxml/non_sharded/model.safetensors",
	} {
		src := testenv.Path(t, rel)
		t.Run(filepath.Base(src), func(t *testing.T) {
			if _, err := os.Stat(src); err != nil {
				testenv.SkipOrFail(t, err.Error())
			}
			direct, err := client.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			for _, flags := range [][]string{nil, {"--dtype", "f32"}} {
				m := mount(t, src, flags...)
				via, err := client.Open(m.Dir)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(direct.Metadata(), via.Metadata()) {
					t.Errorf("mount %v: metadata differs from the file's", flags)
					for k, v := range direct.Metadata() {
						if w := via.Metadata()[k]; !reflect.DeepEqual(v, w) {
							t.Errorf("  %s: %T %.80v directly, %T %.80v through the mount", k, v, v, w, w)
							break
						}
					}
				}
				if !reflect.DeepEqual(direct.Tensors(), via.Tensors()) {
					t.Errorf("mount %v: tensors differ:\n%+v\n%+v", flags, direct.Tensors(), via.Tensors())
				}
				if direct.Format() != via.Format() || !reflect.DeepEqual(direct.Sources(), via.Sources()) {
					t.Errorf("mount %v: format %q sources %q, directly %q %q", flags, via.Format(), via.Sources(), direct.Format(), direct.Sources())
				}
				via.Close()
				m.Unmount()
			}
		})
	}
}
