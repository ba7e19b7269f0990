package source

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// TestBeside: a model directory's other regular files go beside
// model.safetensors; its checkpoint files, weight maps and
// subdirectories do not.
func TestBeside(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "model-00001-of-00001.safetensors")
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A minimal safetensors file (the source) and a stray checkpoint.
	hdr := []byte(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	stBytes := append(append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...), 0, 0, 128, 63)
	write(filepath.Base(st), stBytes)
	write("stray.safetensors", stBytes)
	write("model.safetensors.index.json", []byte(`{"weight_map":{"w":"model-00001-of-00001.safetensors"}}`))
	write("config.json", []byte(`{}`))
	write("tokenizer.model", []byte("spm"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("config.json", filepath.Join(dir, "link.json"))
	os.Symlink("missing", filepath.Join(dir, "dangling"))
	idx := &index.Index{Sources: []string{st}}
	for _, source := range []string{dir, filepath.Join(dir, "model.safetensors.index.json"), st} {
		files, err := localBeside(source, idx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range files {
			got = append(got, f.Name)
		}
		closeBeside(files)
		want := []string{"config.json", "link.json", "tokenizer.model"}
		if source == st {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("Beside(%s) = %v, want %v", filepath.Base(source), got, want)
		}
	}
}
