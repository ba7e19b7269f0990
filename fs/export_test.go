package fs

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

// readEntry reads a whole file of the tree through Root.read in pieces of
// step bytes, as the kernel would.
func readEntry(t *testing.T, r *Root, e *node, step int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, step)
	for off := int64(0); off < e.file.size; {
		res, errno := r.read(e, buf, off)
		if errno != 0 {
			t.Fatalf("%s: read at %d: %v", e.name, off, errno)
		}
		b, _ := res.Bytes(buf)
		if len(b) == 0 {
			t.Fatalf("%s: empty read at %d of %d", e.name, off, e.file.size)
		}
		out = append(out, b...)
		off += int64(len(b))
	}
	return out
}

// intSpecs is a checkpoint with nothing to convert: every converted view
// is empty of tensors, but not of its export.
var intSpecs = []spec{
	{"input_ids", dtype.I64, []int64{2, 3}},
	{"model/counts", dtype.I32, []int64{5}},
	{"model/mask", dtype.Bool, []int64{3}},
}

// TestExportTree: .safetensors/ sits in the top level and in each view
// (and .native/ with a converted top level), holding the export of that
// tree in its dtype and the model directory's other files; reads at any
// step give view.Export's bytes. Every view has it, even with no tensor
// to convert (integers only; no tensors at all).
func TestExportTree(t *testing.T) {
	for _, specs := range [][]spec{basicSpecs, intSpecs, nil} {
		testExportTree(t, specs)
	}
}

func testExportTree(t *testing.T, specs []spec) {
	idx, src := fixture(t, specs)
	extra := &memSource{name: "config.json", data: []byte(`{"model_type": "llama"}`)}
	files := []ExportFile{{Name: "config.json", Src: extra}, {Name: "tokenizer.json", Src: &memSource{data: []byte("{}")}}}
	for _, view0 := range []dtype.DType{dtype.Invalid, dtype.F16} {
		r := newRoot(t, idx, src, Options{View: view0, ExportFiles: files})
		if d := r.lookupPath(npyDir); d == nil || !d.isDir() {
			t.Errorf("%d tensors, view %v: no .npy/", len(idx.Tensors), view0)
		} else {
			files := map[string]*node{}
			tensorFiles(d, "", files)
			if n := len(files); n != len(idx.Tensors) {
				t.Errorf("%d tensors, view %v: %d files in .npy/", len(idx.Tensors), view0, len(files))
			}
		}
		dirs := map[string]dtype.DType{".safetensors": view0, ".f32/.safetensors": dtype.F32, ".f16/.safetensors": dtype.F16, ".bf16/.safetensors": dtype.BF16, ".f64/.safetensors": dtype.F64}
		if view0 != dtype.Invalid {
			dirs[".native/.safetensors"] = dtype.Invalid
		}
		for dir, dt := range dirs {
			d := r.lookupPath(dir)
			if d == nil || !d.isDir() {
				t.Fatalf("%d tensors, view %v: no %s/", len(idx.Tensors), view0, dir)
			}
			if got := strings.Join(names(d), ","); got != "config.json,model.safetensors,tokenizer.json" {
				t.Errorf("%s/: %s", dir, got)
			}
			x, err := view.NewExport(idx, []backing.Source{src}, dt)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, x.Size())
			x.ReadAt(want, 0)
			e := d.child("model.safetensors")
			for _, step := range []int{7, 4096} {
				if got := readEntry(t, r, e, step); !bytes.Equal(got, want) {
					t.Errorf("%s/model.safetensors (reads of %d) differs from the export", dir, step)
				}
			}
			if got := readEntry(t, r, d.child("config.json"), 5); !bytes.Equal(got, extra.data) {
				t.Errorf("%s/config.json = %q", dir, got)
			}
		}
		// The views' directories count .safetensors as a subdirectory.
		want := uint32(2) // .safetensors/ and .split/
		if len(specs) > 0 && specs[0].dt.IsFloatView() {
			want++ // model/
		}
		if d := r.lookupPath(".f32"); r.subdirs(d) != want {
			t.Errorf(".f32 has %d subdirectories, want %d", r.subdirs(d), want)
		}
	}
}
