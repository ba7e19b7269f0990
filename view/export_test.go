package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// exportViews are the dtypes an export is made in: stored, then each view.
var exportViews = []dtype.DType{dtype.Invalid, dtype.F32, dtype.F16, dtype.BF16, dtype.F64}

// readAll reads r whole.
func readAll(t *testing.T, r Reader) []byte {
	t.Helper()
	b := make([]byte, r.Size())
	if n, err := r.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt whole: %d of %d, %v", n, len(b), err)
	}
	return b
}

// checkExport holds the export of idx in to to the safetensors rules
// (testenv.CheckSafetensors, independent of this package) and compares
// every tensor with the reader the tensor's own file uses (New), its
// dtype and shape with ExportForm, and returns the parsed file.
func checkExport(t *testing.T, what string, idx *index.Index, srcs []backing.Source, to dtype.DType) (*testenv.STFile, []byte) {
	t.Helper()
	x, err := NewExport(idx, srcs, to)
	if err != nil {
		t.Fatalf("%s: NewExport: %v", what, err)
	}
	if sz, err := ExportSize(idx, srcs, to); err != nil || sz != x.Size() {
		t.Fatalf("%s: ExportSize = %d, %v; NewExport's is %d", what, sz, err, x.Size())
	}
	data := readAll(t, x)
	f, err := testenv.CheckSafetensors(data)
	if err != nil {
		t.Fatalf("%s: invalid safetensors: %v", what, err)
	}
	if len(f.Tensors) != len(idx.Tensors) {
		t.Fatalf("%s: %d tensors in the export, %d in the index", what, len(f.Tensors), len(idx.Tensors))
	}
	for i := range idx.Tensors {
		tt := &idx.Tensors[i]
		got, ok := f.Tensors[tt.Name]
		if !ok {
			t.Fatalf("%s: tensor %q missing", what, tt.Name)
		}
		dt, shape, conv, _ := ExportForm(tt, to)
		if got.DType != dt.String() || !slices.Equal(got.Shape, shape) {
			t.Errorf("%s: %q is %s %v, want %s %v", what, tt.Name, got.DType, got.Shape, dt, shape)
		}
		r, err := New(tt, srcs[tt.Source], conv)
		if err != nil {
			t.Fatalf("%s: New(%q): %v", what, tt.Name, err)
		}
		if want := readAll(t, r); !bytes.Equal(got.Data, want) {
			t.Errorf("%s: %q: data differs from its file's", what, tt.Name)
		}
	}
	if to != dtype.Invalid && f.Metadata[ExportViewKey] != to.String() {
		t.Errorf("%s: metadata %s = %q", what, ExportViewKey, f.Metadata[ExportViewKey])
	}
	return f, data
}

// TestExportRandom exports random tensors of every dtype and layout
// (strided, big-endian, quantized) in every view, and checks validity,
// every tensor, reads at any range, determinism and Segment.
func TestExportRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 16))
	for round := range iters(40) {
		n := r.IntN(7)
		idx := &index.Index{Format: "test", Metadata: map[string]any{"note": "héllo \"x\"", "n": int64(3)}}
		var srcs []backing.Source
		for i := range n {
			c := genCase(r, genOpts{strided: true, bigDims: r.IntN(3) == 0})
			c.t.Name = fmt.Sprintf("layer.%d/w<%d>", r.IntN(100), i)
			c.t.Path = c.t.Name
			c.t.Source = len(srcs)
			idx.Sources = append(idx.Sources, fmt.Sprintf("/x/src%d.bin", i))
			srcs = append(srcs, &memSource{b: c.src, name: fmt.Sprintf("src%d", i)})
			idx.Tensors = append(idx.Tensors, c.t)
		}
		slices.SortFunc(idx.Tensors, func(a, b index.Tensor) int { return bytesCmp(a.Name, b.Name) })
		for _, to := range exportViews {
			what := fmt.Sprintf("round %d, export %v", round, to)
			f, whole := checkExport(t, what, idx, srcs, to)
			if f.Metadata["note"] != "héllo \"x\"" || f.Metadata["format"] != "pt" || f.Metadata[ExportSourceFormatKey] != "test" {
				t.Errorf("%s: metadata %v", what, f.Metadata)
			}
			if _, ok := f.Metadata["n"]; ok {
				t.Errorf("%s: non-string metadata kept", what)
			}
			x, _ := NewExport(idx, srcs, to)
			x2, _ := NewExport(idx, srcs, to)
			if !bytes.Equal(readAll(t, x2), whole) {
				t.Fatalf("%s: two exports differ", what)
			}
			quickCheck(t, what, x, whole, r)
			if len(whole) < 600 {
				sweep(t, what, x, whole, r)
			}
			checkSegments(t, what, x, whole)
		}
	}
}

func bytesCmp(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkSegments walks the export by Segment and checks that every file
// range it names holds the export's bytes.
func checkSegments(t *testing.T, what string, x *Export, whole []byte) {
	t.Helper()
	for off := int64(0); off < x.Size(); {
		end, src, so, ok := x.Segment(off)
		if end <= off || end > x.Size() {
			t.Fatalf("%s: Segment(%d) ends at %d", what, off, end)
		}
		if ok {
			b := make([]byte, end-off)
			if _, err := src.ReadAt(b, so); err != nil || !bytes.Equal(b, whole[off:end]) {
				t.Fatalf("%s: Segment(%d): file range differs (%v)", what, off, err)
			}
		}
		off = end
	}
}

// TestExportOrderAligned checks the data order (widest elements first,
// then by name), the header's shape and the metadata that says where the
// export came from.
func TestExportOrderAligned(t *testing.T) {
	mk := func(name string, dt dtype.DType, shape []int64, off int64) index.Tensor {
		n, _ := index.Elements(shape)
		sz, _ := dt.ByteSize(n)
		return index.Tensor{Name: name, Path: name, DType: dt, Shape: shape, Offset: off, Size: sz}
	}
	src := make([]byte, 4096)
	fill(src, 1)
	idx := &index.Index{
		Format:  "gguf",
		Sources: []string{"/a/b/model.gguf"},
		Tensors: []index.Tensor{
			mk("a.u8", dtype.U8, []int64{3}, 0),
			mk("b.f16", dtype.F16, []int64{5}, 100),
			mk("c.q4", dtype.Q4_0, []int64{2, 32}, 200),
			mk("d.f64", dtype.F64, nil, 300),
			mk("e.iq", dtype.IQ2_XXS, []int64{2, 256}, 400),
			mk("f.c128", dtype.C128, []int64{1}, 600),
		},
	}
	srcs := []backing.Source{&memSource{b: src, name: "model.gguf"}}
	f, _ := checkExport(t, "stored", idx, srcs, dtype.Invalid)
	if want := []string{"d.f64", "f.c128", "c.q4", "e.iq", "b.f16", "a.u8"}; !slices.Equal(f.Order, want) {
		t.Errorf("data order %v, want %v", f.Order, want)
	}
	want := map[string]string{
		"c.q4": "F32 [2 32]", "e.iq": "F32 [2 256]", "f.c128": "F64 [1 2]", "d.f64": "F64 []",
	}
	for n, w := range want {
		if g := fmt.Sprint(f.Tensors[n].DType, " ", f.Tensors[n].Shape); g != w {
			t.Errorf("%s: %s, want %s", n, g, w)
		}
	}
	if f.Metadata[ExportSourceFilesKey] != `["model.gguf"]` || f.Metadata[ExportSourceFormatKey] != "gguf" {
		t.Errorf("metadata %v", f.Metadata)
	}
	var rel map[string]struct {
		DType string  `json:"dtype"`
		Shape []int64 `json:"shape"`
	}
	if err := json.Unmarshal([]byte(f.Metadata[ExportRelabeledKey]), &rel); err != nil || len(rel) != 1 || !slices.Equal(rel["f.c128"].Shape, []int64{1}) {
		t.Errorf("%s = %q (%v)", ExportRelabeledKey, f.Metadata[ExportRelabeledKey], err)
	}
	// The export reads back through tensorfs's own parser too.
	idx2, err := formats.ParseFile(&memSource{b: readAllExport(t, idx, srcs), name: "x.safetensors"})
	if err != nil || len(idx2.Tensors) != len(idx.Tensors) {
		t.Fatalf("formats.ParseFile of the export: %v", err)
	}
	if _, err := NewExport(idx, srcs, dtype.I32); err == nil {
		t.Error("export in I32 accepted")
	}
	idx.Tensors[0].Name = "__metadata__"
	if _, err := ExportSize(idx, srcs, dtype.Invalid); err == nil || !strings.Contains(err.Error(), "__metadata__") {
		t.Errorf("a tensor named __metadata__: %v", err)
	}
}

func readAllExport(t *testing.T, idx *index.Index, srcs []backing.Source) []byte {
	x, err := NewExport(idx, srcs, dtype.Invalid)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, x)
}

// TestExportReadNoAlloc checks that reads allocate nothing, whatever the
// representation.
func TestExportReadNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	r := rand.New(rand.NewPCG(3, 3))
	idx := &index.Index{Format: "test"}
	var srcs []backing.Source
	for i := range 20 {
		c := genCase(r, genOpts{strided: true, bigDims: true})
		c.t.Name = fmt.Sprintf("t%02d", i)
		c.t.Source = i
		idx.Sources = append(idx.Sources, c.t.Name)
		srcs = append(srcs, &memSource{b: c.src})
		idx.Tensors = append(idx.Tensors, c.t)
	}
	x, err := NewExport(idx, srcs, dtype.F16)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 777)
	x.ReadAt(buf, 0)
	allocs := testing.AllocsPerRun(50, func() {
		for off := int64(0); off < x.Size(); off += 777 {
			x.ReadAt(buf, off)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per pass", allocs)
	}
}

// TestExportTorchAOMetadata: a converted view's export of a torchao
// checkpoint holds M.weight dequantized under its own name, so its
// torchao entry (class, attributes, flattened parts) and its name in
// "tensor_names" are left out; plain tensors' entries and every other key
// are kept. The export of the stored dtypes, which holds the parts,
// keeps the metadata as it is.
func TestExportTorchAOMetadata(t *testing.T) {
	data := make([]byte, 24+8+6+8)
	meta := map[string]any{
		"tensor_names": `["M.weight", "M.bias"]`,
		"M.weight":     `{"_type": "Int4Tensor", "_data": {}, "_tensor_data_names": ["qdata", "scale"]}`,
		"M.bias":       `{"_type": "Tensor"}`,
		"format":       "pt",
		"other":        "kept",
	}
	idx := &index.Index{Format: "safetensors", Sources: []string{"m.safetensors"}, Metadata: meta, Tensors: []index.Tensor{
		{Name: "M.bias", DType: dtype.F32, Shape: []int64{2}, Offset: 24, Size: 8},
		{Name: "M.weight", DType: dtype.F32, Shape: []int64{2, 3}, Offset: 0, Size: 24, Role: index.RoleLogical},
		{Name: "M._weight_qdata", DType: dtype.I8, Shape: []int64{2, 3}, Offset: 32, Size: 6, Role: index.RolePart},
		{Name: "M._weight_scale", DType: dtype.F32, Shape: []int64{2, 1}, Offset: 38, Size: 8, Role: index.RolePart},
	}}
	if err := index.AssignPaths(idx); err != nil {
		t.Fatal(err)
	}
	src := &memSource{name: "m.safetensors", b: data}
	for _, c := range []struct {
		to   dtype.DType
		want map[string]string
	}{
		{dtype.BF16, map[string]string{"tensor_names": `["M.bias"]`, "M.bias": `{"_type": "Tensor"}`, "format": "pt", "other": "kept"}},
		{dtype.Invalid, map[string]string{"tensor_names": `["M.weight", "M.bias"]`, "M.weight": meta["M.weight"].(string), "M.bias": `{"_type": "Tensor"}`, "format": "pt", "other": "kept"}},
	} {
		x, err := NewExport(idx, []backing.Source{src}, c.to)
		if err != nil {
			t.Fatal(err)
		}
		h := readAll(t, x)
		n := int64(h[0]) | int64(h[1])<<8 | int64(h[2])<<16 | int64(h[3])<<24
		var hdr struct {
			Meta map[string]string `json:"__metadata__"`
		}
		if err := json.Unmarshal(h[8:8+n], &hdr); err != nil {
			t.Fatal(err)
		}
		for k := range hdr.Meta {
			if strings.HasPrefix(k, "tensorfs.") {
				delete(hdr.Meta, k)
			}
		}
		if fmt.Sprint(hdr.Meta) != fmt.Sprint(c.want) {
			t.Errorf("export in %v: __metadata__ %v, want %v", c.to, hdr.Meta, c.want)
		}
	}
}
