package formats

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

func openDCP(p string) (index.File, error) {
	s, err := backing.Open(p, backing.Options{Mode: backing.Mmap})
	if err != nil {
		return nil, err
	}
	return backing.ForParsing(s), nil
}

func closeAll(files []backing.Source) {
	for _, f := range files {
		f.Close()
	}
}

// copyDir copies the regular files of src into a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLoadDCP: a distributed checkpoint's directory, or its .metadata,
// loads whole (Sources: the .distcp files, absolute, then the tiled
// tensors); a symbolic link to a regular file is followed wherever it
// leads (a Hugging Face cache snapshot), one to anything else refused; a directory
// whose .metadata is something else is read as any directory.
func TestLoadDCP(t *testing.T) {
	src := testenv.Path(t, "modern/dcp_ws4")
	for _, p := range []string{src, filepath.Join(src, ".metadata")} {
		idx, files, err := Load(p, openDCP, testOptions)
		if err != nil {
			t.Fatal(err)
		}
		tiled := 0
		for i := range idx.Tensors {
			tt := &idx.Tensors[i]
			if tt.Path == "" {
				t.Fatalf("%s: no path", tt.Name)
			}
			if idx.Member(tt.Source) != nil {
				tiled++
				// Mapped: the tiles read the mapping, not the parsing view.
				buf := make([]byte, tt.Size)
				if n, err := files[tt.Source].ReadAt(buf, 0); int64(n) != tt.Size {
					t.Fatalf("%s: %d bytes: %v", tt.Name, n, err)
				}
			}
		}
		if idx.Format != "dcp" || len(idx.Tensors) != 17 || tiled == 0 || len(idx.Files()) != 4 || !filepath.IsAbs(idx.Sources[0]) {
			t.Fatalf("%s: %s, %d tensors (%d tiled), files %v", p, idx.Format, len(idx.Tensors), tiled, idx.Files())
		}
		closeAll(files)
	}

	dir := copyDir(t, src)
	out := filepath.Join(t.TempDir(), "elsewhere.distcp")
	if err := os.Rename(filepath.Join(dir, "__1_0.distcp"), out); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(dir, "__1_0.distcp")); err != nil {
		t.Fatal(err)
	}
	if _, files, err := Load(dir, openDCP, testOptions); err != nil {
		t.Fatalf("a .distcp linked to a regular file outside: %v", err)
	} else {
		closeAll(files)
	}
	// A Hugging Face cache snapshot: every file a link to ../../blobs/X.
	hf := t.TempDir()
	os.MkdirAll(filepath.Join(hf, "blobs"), 0o755)
	os.MkdirAll(filepath.Join(hf, "snapshots", "abc"), 0o755)
	ents, _ := os.ReadDir(src)
	for i, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		blob := fmt.Sprintf("%064x", i)
		os.WriteFile(filepath.Join(hf, "blobs", blob), data, 0o644)
		if err := os.Symlink("../../blobs/"+blob, filepath.Join(hf, "snapshots", "abc", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if idx, files, err := Load(filepath.Join(hf, "snapshots", "abc"), openDCP, testOptions); err != nil || len(idx.Tensors) != 17 {
		t.Fatalf("a Hugging Face cache snapshot: %v", err)
	} else {
		closeAll(files)
	}
	// A link to what is not a regular file is refused, in one line.
	os.Remove(filepath.Join(dir, "__1_0.distcp"))
	os.Symlink("/dev/zero", filepath.Join(dir, "__1_0.distcp"))
	_, _, err := Load(dir, openDCP, testOptions)
	if err == nil || !strings.Contains(err.Error(), "__1_0.distcp") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a .distcp linked to /dev/zero: %v", err)
	}
	t.Logf("a .distcp linked to /dev/zero: %v", err)
	os.Remove(filepath.Join(dir, "__1_0.distcp"))
	os.Symlink(t.TempDir(), filepath.Join(dir, "__1_0.distcp"))
	_, _, err = Load(dir, openDCP, testOptions)
	if err == nil || !strings.Contains(err.Error(), "__1_0.distcp") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a .distcp linked to a directory: %v", err)
	}
	t.Logf("a .distcp linked to a directory: %v", err)
	os.Remove(filepath.Join(dir, "__1_0.distcp"))
	os.Symlink(out, filepath.Join(dir, "__1_0.distcp"))
	// A link inside the directory is fine.
	os.Remove(filepath.Join(dir, "__1_0.distcp"))
	os.Rename(out, filepath.Join(dir, "rank1.bin"))
	os.Symlink("rank1.bin", filepath.Join(dir, "__1_0.distcp"))
	if _, files, err := Load(dir, openDCP, testOptions); err != nil {
		t.Fatalf("a .distcp linked inside the directory: %v", err)
	} else {
		closeAll(files)
	}

	other := t.TempDir()
	os.WriteFile(filepath.Join(other, ".metadata"), []byte("\x80\x04N."), 0o644)
	if _, _, err := Load(other, openDCP, testOptions); err == nil || !strings.Contains(err.Error(), "no checkpoint in the directory") {
		t.Fatalf("a directory with another .metadata: %v", err)
	}
}

// TestLoneDistcp: a .distcp given alone (a row of torch.save zips, which
// no reader takes for one file) says it is a shard of a Distributed
// Checkpoint and to pass its directory, in one line.
func TestLoneDistcp(t *testing.T) {
	src := testenv.Path(t, "modern/dcp_ws4")
	alone := filepath.Join(t.TempDir(), "__0_0.distcp")
	data, err := os.ReadFile(filepath.Join(src, "__0_0.distcp"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(alone, data, 0o644)
	for p, dir := range map[string]string{filepath.Join(src, "__0_0.distcp"): src, alone: filepath.Dir(alone)} {
		_, _, err := Load(p, openDCP, testOptions)
		if err == nil || !strings.Contains(err.Error(), "a shard of a PyTorch Distributed Checkpoint, which is read whole: pass the directory that holds it and its .metadata") || !strings.Contains(err.Error(), filepath.Base(dir)) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", p, err)
		}
	}
}
