package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// fakeMount lays out a directory the way a tensorfs mount presents a
// checkpoint (.tensorfs/index.json, one file per tensor, a .f32 view), so
// the client's mount path is tested without FUSE. With view, it is a mount
// made with --dtype f32: the top level is the .f32 view, the stored tree is
// under .native/, and index.json has "view" and "native". The integration
// tests run the same code against a real mount.
type fakeMount struct {
	dir    string
	native map[string][]byte // tensor name -> bytes of MOUNT/<path>
	f32    map[string][]byte // tensor name -> bytes of MOUNT/.f32/<path>
}

func f32Bytes(vals []float32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func newFakeMount(t *testing.T, view bool) *fakeMount {
	t.Helper()
	dir := t.TempDir()
	wVals := []float32{1, -2, 0.5, 0.25, 3, -0.125}
	bVals := []float32{1.5, 2.5, -3.5}
	ids := make([]byte, 16)
	for i := range 4 {
		binary.LittleEndian.PutUint32(ids[4*i:], uint32(100+i))
	}
	m := &fakeMount{
		dir:    dir,
		native: map[string][]byte{"w": f16Bytes(wVals), "dir/b": f32Bytes(bVals), "ids": ids},
		f32:    map[string][]byte{"w": f32Bytes(wVals), "dir/b": f32Bytes(bVals)},
	}
	off := int64(8)
	idx := &index.Index{
		Format:   "safetensors",
		Sources:  []string{"/models/m.safetensors"},
		Metadata: map[string]any{"format": "pt"},
		Keys:     map[string]string{"dir/b": "dir.b"}, // as a DCP keys its tensors
	}
	for _, x := range []struct {
		name  string
		dt    dtype.DType
		shape []int64
	}{
		{"dir/b", dtype.F32, []int64{3}},
		{"ids", dtype.I32, []int64{4}},
		{"w", dtype.F16, []int64{2, 3}},
	} {
		n := int64(len(m.native[x.name]))
		idx.Tensors = append(idx.Tensors, index.Tensor{Name: x.name, Path: x.name, DType: x.dt, Shape: x.shape, Offset: off, Size: n})
		off += n
	}
	doc := idx.Document()
	nativeAt := ""
	if view {
		nativeAt = ".native"
		doc.View = "F32"
		doc.Native = doc.Tensors
		doc.Tensors = nil
		for _, d := range doc.Native {
			if d.Name != "ids" {
				d.DType, d.Size, d.Source, d.Offset = "F32", int64(len(m.f32[d.Name])), "", nil
				if d.Name == "dir/b" { // stored F32: the same bytes
					d.Source, d.Offset = doc.Native[0].Source, doc.Native[0].Offset
				}
				doc.Tensors = append(doc.Tensors, d)
			}
		}
		for i := range doc.Native {
			doc.Native[i].Path = ".native/" + doc.Native[i].Path
		}
	}
	js, err := doc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel string, b []byte) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(MountIndexPath, js)
	for name, b := range m.native {
		write(filepath.Join(nativeAt, name), b)
	}
	for name, b := range m.f32 {
		write(filepath.Join(".f32", name), b)
		if view {
			write(name, b)
		}
	}
	return m
}

// TestMountKeysAreNames: a mount's index.json "keys" are taken wherever
// a tensor's name is, as for a checkpoint opened directly.
func TestMountKeysAreNames(t *testing.T) {
	m := newFakeMount(t, false)
	c, err := Open(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ti, ok := c.Tensor("dir.b")
	if !ok || ti.Name != "dir/b" {
		t.Fatalf("Tensor(dir.b) = %+v, %v", ti, ok)
	}
	got, err := c.ReadFloat32("dir.b")
	if err != nil || !bytes.Equal(f32Bytes(got), m.f32["dir/b"]) {
		t.Errorf("ReadFloat32(dir.b) = %v, %v", got, err)
	}
}

func TestOpenMount(t *testing.T) {
	for _, view := range []bool{false, true} {
		name := "plain"
		if view {
			name = "dtype f32"
		}
		t.Run(name, func(t *testing.T) { testOpenMount(t, view) })
	}
}

// testOpenMount checks that a mount reads as the checkpoint it serves, as
// stored, whether or not its top level is a converted view.
func testOpenMount(t *testing.T, view bool) {
	m := newFakeMount(t, view)
	c, err := Open(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.IsMount() || c.Format() != "safetensors" || c.Metadata()["format"] != "pt" {
		t.Fatalf("IsMount %v Format %q Metadata %v", c.IsMount(), c.Format(), c.Metadata())
	}
	ts := c.Tensors()
	if len(ts) != 3 || ts[0].Name != "dir/b" || ts[1].Name != "ids" || ts[2].Name != "w" {
		t.Fatalf("tensors %+v", ts)
	}
	w := ts[2]
	if w.DType != dtype.F16 || len(w.Shape) != 2 || w.Shape[0] != 2 || w.Shape[1] != 3 || w.Size != 12 ||
		w.Source != "/models/m.safetensors" || w.Offset != 8+12+16 {
		t.Errorf("w: %+v", w)
	}

	// Native bytes, streamed and read.
	sink := newRecSink(t, 5)
	if err := c.Stream(context.Background(), sink, StreamOptions{ChunkSize: 5, Parallel: 2}); err != nil {
		t.Fatal(err)
	}
	sink.checkEnded()
	for name, want := range m.native {
		if got := sink.tensors[name]; got == nil || !bytes.Equal(got.data.Bytes(), want) {
			t.Errorf("%s: streamed bytes differ", name)
		}
	}

	// Converted: float tensors come from .f32, the integer one as stored.
	sink = newRecSink(t, 4)
	if err := c.Stream(context.Background(), sink, StreamOptions{ChunkSize: 4, DType: dtype.F32}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"w": m.f32["w"], "dir/b": m.f32["dir/b"], "ids": m.native["ids"]} {
		got := sink.tensors[name]
		if got == nil || !bytes.Equal(got.data.Bytes(), want) {
			t.Errorf("%s as F32: bytes differ", name)
			continue
		}
		wantDT := dtype.F32
		if name == "ids" {
			wantDT = dtype.I32
		}
		if got.dt != wantDT || got.size != int64(len(want)) {
			t.Errorf("%s as F32: Begin(%v, %d)", name, got.dt, got.size)
		}
	}

	r, err := c.OpenTensor("w", dtype.F32)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil || !bytes.Equal(buf.Bytes(), m.f32["w"]) || r.DType() != dtype.F32 {
		t.Errorf("OpenTensor(w, F32): %v", err)
	}
	r.Close()
	if _, err := c.OpenTensor("ids", dtype.F32); !errors.Is(err, ErrNotConvertible) {
		t.Errorf("ids as F32: %v, want ErrNotConvertible", err)
	}
	if !c.Convertible(w.Name, dtype.F32) || c.Convertible(ts[1].Name, dtype.F32) || c.Convertible(w.Name, dtype.BF16) {
		t.Errorf("Convertible wrong on a mount")
	}
	vals, err := c.ReadFloat32("w")
	if err != nil || len(vals)*4 != len(m.f32["w"]) {
		t.Fatalf("ReadFloat32(w) on a mount: %d values, %v", len(vals), err)
	}
	for i, v := range vals {
		if math.Float32bits(v) != binary.LittleEndian.Uint32(m.f32["w"][4*i:]) {
			t.Errorf("ReadFloat32(w)[%d] = %v, want the .f32 file's value", i, v)
		}
	}
	if _, err := c.ReadFloat32("ids"); !errors.Is(err, ErrNotConvertible) {
		t.Errorf("ReadFloat32(ids) on a mount: %v, want ErrNotConvertible", err)
	}
}

func TestOpenMountBadIndex(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"not json", "{", "index.json"},
		{"unknown dtype", `{"format":"x","sources":[],"metadata":{},"tensors":[{"name":"a","path":"a","dtype":"F33","shape":[1],"size":4}]}`, `unknown dtype`},
		{"escaping path", `{"format":"x","sources":[],"metadata":{},"tensors":[{"name":"a","path":"../a","dtype":"F32","shape":[1],"size":4}]}`, `not inside the mount`},
		{"escaping native path", `{"format":"x","view":"F32","sources":[],"metadata":{},"tensors":[],"native":[{"name":"a","path":".native/../../a","dtype":"F32","shape":[1],"size":4}]}`, `not inside the mount`},
		{"native outside .native", `{"format":"x","view":"F32","sources":[],"metadata":{},"tensors":[],"native":[{"name":"a","path":"a","dtype":"F32","shape":[1],"size":4}]}`, `not under .native/`},
		{"bad view", `{"format":"x","view":"I32","sources":[],"metadata":{},"tensors":[]}`, `not a view dtype`},
		{"native without view", `{"format":"x","sources":[],"metadata":{},"tensors":[],"native":[]}`, `native tensors without a view`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, ".tensorfs"), 0o755)
			os.WriteFile(filepath.Join(dir, MountIndexPath), []byte(tc.doc), 0o644)
			_, err := Open(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, MountIndexPath)) {
				t.Errorf("error %v, want one naming %s and %q", err, MountIndexPath, tc.want)
			}
		})
	}
}

func TestMountMissingTensorFile(t *testing.T) {
	m := newFakeMount(t, false)
	os.Remove(filepath.Join(m.dir, "ids"))
	c, err := Open(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Stream(context.Background(), newRecSink(t, 0), StreamOptions{})
	var te *TensorError
	if !errors.As(err, &te) || te.Name != "ids" || te.Op != "open" || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v", err)
	}
}
