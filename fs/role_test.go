package fs

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// roleIndex is a hand-made checkpoint with a logical tensor: X.weight,
// a plain F32 range standing for a weight computed from its parts
// X.weight_packed (F16) and X.weight_scale (F32), and a stored X.bias.
func roleIndex(t *testing.T) (*index.Index, *memSource, []byte) {
	t.Helper()
	var data []byte
	f32 := func(vals ...float32) []byte {
		var b []byte
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	weight := f32(1, 2, 3, 4, 5, 6)
	add := func(b []byte) int64 { off := int64(len(data)); data = append(data, b...); return off }
	wOff := add(weight)
	bOff := add(f32(0.5, -0.5))
	pOff := add(make([]byte, 12)) // 6 F16 zeros
	sOff := add(f32(2, 3))
	idx := &index.Index{Format: "safetensors", Sources: []string{"m.safetensors"}, Tensors: []index.Tensor{
		{Name: "X.bias", DType: dtype.F32, Shape: []int64{2}, Offset: bOff, Size: 8},
		{Name: "X.weight", DType: dtype.F32, Shape: []int64{2, 3}, Offset: wOff, Size: 24, Role: index.RoleLogical},
		{Name: "X.weight_packed", DType: dtype.F16, Shape: []int64{2, 3}, Offset: pOff, Size: 12, Role: index.RolePart},
		{Name: "X.weight_scale", DType: dtype.F32, Shape: []int64{2, 1}, Offset: sOff, Size: 8, Role: index.RolePart},
	}}
	if err := index.AssignPaths(idx); err != nil {
		t.Fatal(err)
	}
	return idx, &memSource{name: "m.safetensors", data: data}, weight
}

// filesUnder lists the tensor files under dir of r (paths relative to it).
func filesUnder(r *Root, dir string) []string {
	files := map[string]*node{}
	if d := r.lookupPath(dir); d != nil {
		tensorFiles(d, "", files)
	}
	var out []string
	for p := range files {
		if !strings.Contains(p, "/.") { // not the places below a view
			out = append(out, strings.TrimPrefix(p, "/"))
		}
	}
	sort.Strings(out)
	return out
}

// exportNames returns the tensor names in the header of idx's export in
// view dtype to.
func exportNames(t *testing.T, idx *index.Index, src backing.Source, to dtype.DType) []string {
	t.Helper()
	x, err := view.NewExport(idx, []backing.Source{src}, to)
	if err != nil {
		t.Fatal(err)
	}
	return headerNames(t, x)
}

func headerNames(t *testing.T, r interface {
	ReadAt([]byte, int64) (int, error)
}) []string {
	t.Helper()
	var n [8]byte
	if _, err := r.ReadAt(n[:], 0); err != nil {
		t.Fatal(err)
	}
	h := make([]byte, binary.LittleEndian.Uint64(n[:]))
	if _, err := r.ReadAt(h, 8); err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(h, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range m {
		if k != "__metadata__" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestRoleListings: the stored tree, .npy/ and the native export list
// the stored tensors and the parts, never a logical tensor; the
// converted views and their exports list the logical tensor and the
// stored tensors that are not parts; index.json and the index document
// follow the stored tree. A logical tensor is read as any tensor.
func TestRoleListings(t *testing.T) {
	idx, src, weight := roleIndex(t)
	native := []string{"X.bias", "X.weight_packed", "X.weight_scale"}
	converted := []string{"X.bias", "X.weight"}

	r := newRoot(t, idx, src, Options{})
	if got := filesUnder(r, ""); !slices.Equal(got, native) {
		t.Errorf("stored tree: %v, want %v", got, native)
	}
	if got := filesUnder(r, npyDir); !slices.Equal(got, []string{"X.bias.npy", "X.weight_packed.npy", "X.weight_scale.npy"}) {
		t.Errorf(".npy/: %v", got)
	}
	for _, v := range []string{".f32", ".f16", ".bf16", ".f64"} {
		if got := filesUnder(r, v); !slices.Equal(got, converted) {
			t.Errorf("%s/: %v, want %v", v, got, converted)
		}
	}
	if got := readAll(t, r, r.lookupPath(".f32/X.weight")); !bytes.Equal(got, weight) {
		t.Errorf(".f32/X.weight = %x, want the logical tensor's %x", got, weight)
	}
	if got := headerNames(t, readerOf(t, r, ".bf16/.safetensors/model.safetensors")); !slices.Equal(got, converted) {
		t.Errorf(".bf16/.safetensors/model.safetensors holds %v, want %v", got, converted)
	}
	if got := headerNames(t, readerOf(t, r, ".safetensors/model.safetensors")); !slices.Equal(got, native) {
		t.Errorf(".safetensors/model.safetensors holds %v, want %v", got, native)
	}
	if got := exportNames(t, idx, src, dtype.F32); !slices.Equal(got, converted) {
		t.Errorf("F32 export: %v, want %v", got, converted)
	}
	if got := exportNames(t, idx, src, dtype.Invalid); !slices.Equal(got, native) {
		t.Errorf("native export: %v, want %v", got, native)
	}
	var doc struct{ Tensors []struct{ Name string } }
	if err := json.Unmarshal(readAll(t, r, r.lookupPath(controlDir+"/index.json")), &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range doc.Tensors {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, native) {
		t.Errorf("index.json lists %v, want %v", names, native)
	}
	names = nil
	for _, d := range idx.Document().Tensors {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, native) {
		t.Errorf("index document lists %v, want %v", names, native)
	}

	// A converted top level shows the logical tensor; .native/ the parts.
	r = newRoot(t, idx, src, Options{View: dtype.BF16})
	if got := filesUnder(r, ""); !slices.Equal(got, converted) {
		t.Errorf("--dtype bf16 top level: %v, want %v", got, converted)
	}
	if got := filesUnder(r, nativeDir); !slices.Equal(got, native) {
		t.Errorf("--dtype bf16 .native/: %v, want %v", got, native)
	}
}

// readerOf returns a ReaderAt of the file at p of r, read as the mount
// reads it.
func readerOf(t *testing.T, r *Root, p string) *bytes.Reader {
	t.Helper()
	e := r.lookupPath(p)
	if e == nil {
		t.Fatalf("no %s", p)
	}
	return bytes.NewReader(readAll(t, r, e))
}
