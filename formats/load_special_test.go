package formats

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLoadLFSPointer: a Git LFS pointer is said to be one, with the
// command that fetches the file: as SOURCE, as a weight map's shard, and
// as the only candidate in a directory.
func TestLoadLFSPointer(t *testing.T) {
	ptr := []byte("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 987654321\n")
	dir := t.TempDir()
	p := ldWrite(t, dir, "model.safetensors", ptr)
	for _, tt := range []struct{ source, want string }{
		{p, "a Git LFS pointer of a 987654321-byte file"},
		{dir, "model.safetensors is a Git LFS pointer"},
	} {
		_, err := ldLoad(t, tt.source, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "git lfs pull") {
			t.Errorf("%s: %v; want %q and git lfs pull", tt.source, err, tt.want)
		}
	}
	ldWrite(t, dir, "model.safetensors.index.json", []byte(`{"weight_map":{"w":"model.safetensors"}}`))
	if _, err := ldLoad(t, dir, nil); err == nil || !strings.Contains(err.Error(), p+": a Git LFS pointer") {
		t.Errorf("weight map of a pointer: %v", err)
	}
}

// TestLoadSpecialSource: a SOURCE that is a named pipe or a link to a
// device is refused by what it is, without being opened.
func TestLoadSpecialSource(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "dev")
	if err := os.Symlink("/dev/null", dev); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "a named pipe (FIFO)", dev: "a character device"} {
		o := newLdOpener()
		_, err := ldLoad(t, path, o)
		if err == nil || !strings.Contains(err.Error(), want) || len(o.opened) != 0 {
			t.Errorf("%s: %v (opened %v); want %q and nothing opened", path, err, o.opened, want)
		}
	}
}
