package source

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
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
		files, skipped, err := localBeside(source, idx, nil)
		if err != nil || skipped != nil {
			t.Fatal(err, skipped)
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

// TestBesideSkips: a file beside the checkpoint that cannot be opened
// or read is one error line naming it, and the other files are taken;
// of more than MaxBeside files, the first MaxBeside are.
func TestBesideSkips(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.json", "tokenizer.json", "vocab.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	open := openBeside
	t.Cleanup(func() { openBeside = open })
	openBeside = func(p string) (backing.Source, error) {
		if filepath.Base(p) == "tokenizer.json" {
			return nil, &os.PathError{Op: "open", Path: p, Err: syscall.EACCES}
		}
		if filepath.Base(p) == "vocab.txt" {
			return failingSource{}, nil
		}
		return open(p)
	}
	files, skipped, err := localBeside(dir, &index.Index{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Name != "config.json" {
		t.Errorf("files %v", files)
	}
	closeBeside(files)
	if len(skipped) != 2 || !strings.Contains(skipped[0].Error(), "tokenizer.json: left out of the model directory's files: open") ||
		!strings.Contains(skipped[0].Error(), "permission denied") || !strings.Contains(skipped[1].Error(), "vocab.txt: left out") {
		t.Errorf("skipped %v", skipped)
	}

	many := t.TempDir()
	for i := 0; i <= MaxBeside; i++ {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, skipped, err = localBeside(many, &index.Index{}, nil)
	closeBeside(files)
	if err != nil || len(files) != MaxBeside || len(skipped) != 1 || !strings.Contains(skipped[0].Error(), fmt.Sprintf("f%05d and the files after it left out", MaxBeside)) {
		t.Errorf("%d files beside: %d taken, skipped %v, %v", MaxBeside+1, len(files), skipped, err)
	}
}

// failingSource fails every read.
type failingSource struct{}

func (failingSource) ReadAt(p []byte, off int64) (int, error) { return 0, syscall.EIO }
func (failingSource) Size() int64                             { return 100 }
func (failingSource) Name() string                            { return "failing" }
func (failingSource) Close() error                            { return nil }
