package formats_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/formats/internal/toy"
	"github.com/lazyweights/tensorfs/index"
)

// toyLayout is the one layout row a toy directory format takes (with
// its room, formats/internal/toy): it claims a directory holding the
// manifest, parses it, and keeps the data file it names as the
// checkpoint's one source.
var toyLayout = formats.Layout{
	Name: "toy",
	Claim: func(d *formats.Dir) (bool, error) {
		return slices.ContainsFunc(d.Files, func(p string) bool { return filepath.Base(p) == toy.ManifestName }), nil
	},
	Load: func(d *formats.Dir) (*index.Index, error) {
		m, err := d.Open(filepath.Join(d.Path, toy.ManifestName))
		if err != nil {
			return nil, err
		}
		defer d.Release(m)
		idx, err := toy.Parse(m)
		if err != nil {
			return nil, err
		}
		data, err := d.Open(filepath.Join(d.Path, filepath.Base(idx.Sources[0])))
		if err != nil {
			return nil, err
		}
		d.Keep(data)
		idx.Sources[0] = data.Name()
		return idx, nil
	},
}

// TestToyLayout: a directory format that tensorfs does not know (a
// manifest and a raw .bin) loads by adding its room and one row of
// formats.Layouts, nothing else: without the row the directory is no
// checkpoint (the .bin and the manifest are no format's), with it Load
// returns its tensors, their bytes read through the returned sources,
// the manifest closed.
func TestToyLayout(t *testing.T) {
	dir := t.TempDir()
	var data bytes.Buffer
	for _, v := range []float32{1, 2, 3, 4, 5, 6} {
		binary.Write(&data, binary.LittleEndian, math.Float32bits(v))
	}
	binary.Write(&data, binary.LittleEndian, int64(-7))
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("weights.bin", data.Bytes())
	write(toy.ManifestName, []byte("data weights.bin\ntensor w F32 2x3 0\ntensor step I64 - 24\n"))
	write("README.md", []byte("a toy checkpoint\n"))
	opened := map[string]int{}
	open := func(p string) (index.File, error) {
		s, err := backing.Open(p, backing.Options{Mode: backing.Pread})
		if err == nil {
			opened[filepath.Base(p)]++
		}
		return s, err
	}
	opts := formats.Options{Inflate: backing.DefaultInflateCache()}

	if _, _, err := formats.Load(dir, open, opts); err == nil || !strings.Contains(err.Error(), "no checkpoint in the directory") {
		t.Fatalf("without the toy row: %v, want no checkpoint", err)
	}

	saved := formats.Layouts
	t.Cleanup(func() { formats.Layouts = saved })
	formats.Layouts = append([]formats.Layout{toyLayout}, saved...)
	clear(opened)
	idx, srcs, err := formats.Load(dir, open, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range srcs {
			s.Close()
		}
	}()
	if idx.Format != "toy" || len(idx.Sources) != 1 || len(srcs) != 1 || filepath.Base(idx.Sources[0]) != "weights.bin" || !filepath.IsAbs(idx.Sources[0]) {
		t.Fatalf("format %q, sources %q, %d files", idx.Format, idx.Sources, len(srcs))
	}
	if opened[toy.ManifestName] != 1 || opened["weights.bin"] != 1 || opened["README.md"] != 0 {
		t.Errorf("opened %v", opened)
	}
	want := map[string][]byte{"w": data.Bytes()[:24], "step": data.Bytes()[24:]}
	if len(idx.Tensors) != 2 {
		t.Fatalf("%d tensors", len(idx.Tensors))
	}
	for _, tn := range idx.Tensors {
		b := make([]byte, tn.Size)
		if n, err := srcs[tn.Source].ReadAt(b, tn.Offset); n != len(b) {
			t.Fatalf("%s: %v", tn.Name, err)
		}
		if !bytes.Equal(b, want[tn.Name]) || tn.Path == "" {
			t.Errorf("%s (path %q): %x, want %x", tn.Name, tn.Path, b, want[tn.Name])
		}
	}

	// A bad manifest is the load's one line, naming the manifest.
	write(toy.ManifestName, []byte("data weights.bin\ntensor w F32 2x3 16\n"))
	if _, _, err := formats.Load(dir, open, opts); err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "weights.bin") {
		t.Errorf("a tensor past the end of the data: %v", err)
	}
	write(toy.ManifestName, []byte("tensor w F32 2x3 0\n"))
	if _, _, err := formats.Load(dir, open, opts); err == nil || !strings.HasSuffix(err.Error(), toy.ManifestName+`: want "data FILE" (line 1)`) {
		t.Errorf("no data line: %v", err)
	}
}
