package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
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
	root := testenv.Dir(t)
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

// TestClientRolesThroughMount: the Go client reading a mount of a
// quantized checkpoint (roles from index.json's "role", the logical
// weights from "quantization") lists what it lists reading the
// checkpoint directly, as stored and in F32, with and without --dtype.
func TestClientRolesThroughMount(t *testing.T) {
	needFUSE(t)
	dir := testenv.Path(t, "quant")
	ents, err := os.ReadDir(dir)
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	listed := func(c *client.Checkpoint, to dtype.DType) []string {
		var out []string
		for _, ti := range c.TensorsIn(to) {
			out = append(out, fmt.Sprintf("%s %v %v %v %d", ti.Name, ti.Role, ti.DType, ti.Shape, ti.Size))
		}
		slices.Sort(out)
		return out
	}
	parts := 0
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), "neg_") {
			continue
		}
		src := filepath.Join(dir, e.Name())
		direct, err := client.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, flags := range [][]string{nil, {"--dtype", "bf16"}} {
			m := mount(t, src, flags...)
			via, err := client.Open(m.Dir)
			if err != nil {
				t.Fatalf("%s %v: %v", e.Name(), flags, err)
			}
			for _, to := range []dtype.DType{client.AsStored, dtype.F32} {
				if a, b := listed(direct, to), listed(via, to); !slices.Equal(a, b) {
					t.Errorf("%s, mount %v, in %v: through the mount\n%v\ndirectly\n%v", e.Name(), flags, to, b, a)
				}
			}
			for _, ti := range via.Tensors() {
				if ti.Role == index.RolePart {
					parts++
				}
			}
			via.Close()
			m.Unmount()
		}
		direct.Close()
	}
	if parts == 0 {
		t.Errorf("no part through any mount")
	}
}
