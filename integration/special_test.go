package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Special files: a named pipe or a device where a checkpoint file is
// expected (a weight map's shard, a split GGUF model's sibling, SOURCE
// itself, through a symbolic link or not). open(2) of a named pipe blocks
// until a writer comes, and opening some devices has side effects, so
// tensorfs checks a path is a regular file before opening it and opens
// with O_NONBLOCK (backing.OpenRegular). The hostile corpus runs each with
// a deadline, so a regression fails instead of hanging.

// hSplitGGUF is part no (0-based) of a two-part split GGUF model with one
// F32 tensor of 4 elements.
func hSplitGGUF(no uint16) []byte {
	kvs := hCat(
		hGKV("general.architecture", hGString, hGStr("llama")),
		hGKV("split.no", 2, []byte{byte(no), byte(no >> 8)}),
		hGKV("split.count", 2, []byte{2, 0}),
	)
	return hGGUF(1, 3, kvs, hGTI("t"+string(rune('0'+no)), 0, 0, 4), pattern(16, 5))
}

// hSpecialCorpus is the special-files class of the hostile corpus.
func hSpecialCorpus() []hostileFile {
	shard := hStRaw(`{"w":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}}`, pattern(16, 1))
	wm := []byte(`{"weight_map":{"w":"s.safetensors"}}`)
	const want = "not a regular file"
	return []hostileFile{
		{class: "special file", name: "special-wm-fifo-shard", want: "named pipe",
			dir: map[string][]byte{"model.safetensors.index.json": wm}, special: map[string]string{"s.safetensors": ""}},
		{class: "special file", name: "special-wm-fifo-link-shard", want: "named pipe",
			dir: map[string][]byte{"model.safetensors.index.json": wm}, special: map[string]string{"p": "", "s.safetensors": "p"}},
		{class: "special file", name: "special-wm-device-shard", want: "character device",
			dir: map[string][]byte{"model.safetensors.index.json": wm}, special: map[string]string{"s.safetensors": "/dev/zero"}},
		{class: "special file", name: "special-wm-dir-shard", want: "a directory",
			dir: map[string][]byte{"model.safetensors.index.json": wm, "s.safetensors/x": shard}},
		{class: "special file", name: "special-gguf-fifo-sibling", want: "named pipe",
			dir: map[string][]byte{"m-00001-of-00002.gguf": hSplitGGUF(0)}, special: map[string]string{"m-00002-of-00002.gguf": ""}, source: "m-00001-of-00002.gguf"},
		{class: "special file", name: "special-gguf-device-sibling", want: "character device",
			dir: map[string][]byte{"m-00001-of-00002.gguf": hSplitGGUF(0)}, special: map[string]string{"m-00002-of-00002.gguf": "/dev/zero"}, source: "m-00001-of-00002.gguf"},
		{class: "special file", name: "special-source-fifo", want: want,
			dir: map[string][]byte{}, special: map[string]string{"m.safetensors": ""}, source: "m.safetensors"},
		{class: "special file", name: "special-source-device-link", want: want,
			dir: map[string][]byte{}, special: map[string]string{"m.safetensors": "/dev/zero"}, source: "m.safetensors"},
		{class: "special file", name: "special-weight-map-fifo", want: want,
			dir: map[string][]byte{"s.safetensors": shard}, special: map[string]string{"model.safetensors.index.json": ""}, source: "model.safetensors.index.json"},
	}
}

// hMakeSpecial makes h's special files in the directory p (made for h.dir)
// and returns the SOURCE path of h.
func hMakeSpecial(t *testing.T, p string, h hostileFile) string {
	t.Helper()
	if h.special == nil {
		return p
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	for rel, target := range h.special {
		q := filepath.Join(p, rel)
		var err error
		if target == "" {
			err = syscall.Mkfifo(q, 0o644)
		} else {
			err = os.Symlink(target, q)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(p, h.source)
}

// TestSpecialFilesClient runs cat, load and convert (the Go client) on the special
// files of the corpus, and load on a directory that looks like a mount
// but whose index is a named pipe: each must exit 1 with one line, within
// the hostile deadline.
func TestSpecialFilesClient(t *testing.T) {
	dir := t.TempDir()
	corpus := hSpecialCorpus()
	corpus = append(corpus, hostileFile{class: "special file", name: "special-fake-mount", want: "named pipe",
		dir: map[string][]byte{}, special: map[string]string{".tensorfs/index.json": ""}})
	for _, h := range corpus {
		p := filepath.Join(dir, h.name)
		for rel, b := range h.dir {
			os.MkdirAll(filepath.Dir(filepath.Join(p, rel)), 0o755)
			if err := os.WriteFile(filepath.Join(p, rel), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		os.MkdirAll(filepath.Join(p, ".tensorfs"), 0o755)
		src := hMakeSpecial(t, p, h)
		out := filepath.Join(dir, h.name+".out.safetensors")
		for _, args := range [][]string{{"load", "--quiet", src}, {"cat", src, "w"}, {"convert", src, out}} {
			if h.name == "special-fake-mount" && args[0] != "load" {
				continue
			}
			r := hRun(t, "", 0, args...)
			switch {
			case r.killed != "":
				t.Errorf("%s %s: killed by %s (a hang)", args[0], h.name, r.killed)
			case r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "tensorfs: "):
				t.Errorf("%s %s: exit %d, stderr %q; want 1 and one line", args[0], h.name, r.code, r.stderr)
			case !strings.Contains(r.stderr, h.want):
				t.Errorf("%s %s: %q does not say %q", args[0], h.name, r.stderr, h.want)
			}
		}
	}
}
