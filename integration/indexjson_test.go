package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testdata"
)

// indexJSONFixtures are the checkpoints TestIndexJSONIsLsJSON mounts,
// relative to the shared test data: every entry of the directories
// whose checkpoints the format and quantization tests read (each
// format, members, tiles, keys, the quantization schemes), and one of
// each third-party kind.
var indexJSONFixtures = struct{ dirs, files []string }{
	dirs: []string{"generated", "modern", "formats2", "quant"},
	files: []string{
		"gguf/types/types.gguf",
		"gguf/quantized/ollama-ggml-q4_k.gguf",
		"gguf/llama.cpp/ggml-vocab-phi-3.gguf",
		"safetensors/fluxml/non_sharded/model.safetensors",
		"safetensors/java/sample.safetensors",
		"numpy/npyio/data_float32_2x3_corder.npy",
		"pytorch/gopickle/tensor_bfloat16_proto5_zip.pt",
	},
}

// TestIndexJSONIsLsJSON: a mount's .tensorfs/index.json and `tensorfs ls
// --json` of the same checkpoint are byte for byte the same (one
// writer: index.Document.WriteIndexJSON), for every fixture above and
// the CLI's own (names with spaces); the quantized ones say their
// parts' role.
func TestIndexJSONIsLsJSON(t *testing.T) {
	needFUSE(t)
	root := testdata.Dir(t)
	srcs := indexJSONFixtures.files
	for _, d := range indexJSONFixtures.dirs {
		ents, err := os.ReadDir(filepath.Join(root, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".json") {
				srcs = append(srcs, filepath.Join(d, e.Name()))
			}
		}
	}
	cli, _ := cliFixture(t)
	compared, parts := 0, 0
	for _, rel := range append(srcs, "") {
		src := cli
		if rel != "" {
			src = filepath.Join(root, rel)
		}
		ls := runTensorfs(t, "ls", "--json", src)
		if ls.code != 0 {
			t.Logf("%s: refused by ls (%s): not mounted", rel, strings.TrimSpace(ls.stderr))
			continue
		}
		m := mount(t, src)
		served, err := os.ReadFile(m.Path(".tensorfs/index.json"))
		m.Unmount()
		if err != nil {
			t.Fatal(err)
		}
		if string(served) != ls.stdout {
			t.Errorf("%s: index.json (%d bytes) and ls --json (%d bytes) differ:\n%.2000s\n--\n%.2000s", src, len(served), len(ls.stdout), served, ls.stdout)
		}
		compared++
		if strings.HasPrefix(rel, "quant/") && strings.Contains(ls.stdout, `"role":"part"}`) {
			parts++
		}
	}
	if compared < len(srcs)/2 || parts < 5 {
		t.Errorf("%d of %d checkpoints compared, %d quantized with parts: the fixtures are not there", compared, len(srcs)+1, parts)
	}
}
