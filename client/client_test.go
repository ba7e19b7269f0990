package client

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

func TestCheckpointListing(t *testing.T) {
	c, _ := patternCheckpoint(t, standardSpecs(64))
	defer c.Close()
	ts := c.Tensors()
	if len(ts) != 8 {
		t.Fatalf("%d tensors, want 8", len(ts))
	}
	if !sort.SliceIsSorted(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name }) {
		t.Errorf("tensors not in name order")
	}
	var total int64
	for i, ti := range ts {
		if ti.Index != i {
			t.Errorf("%s: Index %d, want %d", ti.Name, ti.Index, i)
		}
		got, ok := c.Tensor(ti.Name)
		if !ok || got.Name != ti.Name || got.Index != i {
			t.Errorf("Tensor(%q) = %+v, %v", ti.Name, got, ok)
		}
		if ti.Source != "pattern.bin" || ti.Offset < 0 || ti.DType != dtype.U8 || len(ti.Shape) != 1 || ti.Shape[0] != ti.Size {
			t.Errorf("%s: %+v", ti.Name, ti)
		}
		if ti.NumElements() != ti.Size {
			t.Errorf("%s: NumElements %d", ti.Name, ti.NumElements())
		}
		total += ti.Size
	}
	if c.TotalSize() != total {
		t.Errorf("TotalSize %d, want %d", c.TotalSize(), total)
	}
	if _, ok := c.Tensor("nope"); ok {
		t.Errorf("Tensor(nope) found")
	}
	if c.Format() != "test" || c.Metadata()["k"] != "v" || c.IsMount() || c.Path() != "pattern.bin" {
		t.Errorf("Format %q Metadata %v IsMount %v Path %q", c.Format(), c.Metadata(), c.IsMount(), c.Path())
	}
	if s := c.Sources(); len(s) != 1 || s[0] != "pattern.bin" {
		t.Errorf("Sources %v", s)
	}
	// Tensors returns a copy.
	ts[0].Name = "changed"
	if c.Tensors()[0].Name == "changed" {
		t.Errorf("Tensors shares its slice")
	}
}

func TestTensorReader(t *testing.T) {
	c, _ := patternCheckpoint(t, standardSpecs(64))
	ti, _ := c.Tensor("f.many")
	want := expected(ti)
	size := ti.Size
	r, err := c.OpenTensor("f.many", dtype.Invalid)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != size || r.DType() != dtype.U8 || r.Info().Name != "f.many" {
		t.Fatalf("Size %d DType %v Info %+v", r.Size(), r.DType(), r.Info())
	}
	for _, tc := range []struct {
		off     int64
		n       int
		wantN   int
		wantEOF bool
	}{
		{0, 0, 0, false},
		{0, 1, 1, false},
		{5, 100, 100, false},
		{3, int(size) - 3, int(size) - 3, false},
		{size - 1, 1, 1, false},
		{size - 1, 10, 1, true},
		{0, int(size) + 5, int(size), true},
		{size, 1, 0, true},
		{size + 7, 3, 0, true},
	} {
		p := make([]byte, tc.n)
		n, err := r.ReadAt(p, tc.off)
		if n != tc.wantN || (err == io.EOF) != tc.wantEOF || (err != nil && err != io.EOF) {
			t.Errorf("ReadAt(%d, %d) = %d, %v; want %d, EOF %v", tc.n, tc.off, n, err, tc.wantN, tc.wantEOF)
			continue
		}
		if !bytes.Equal(p[:n], want[min(tc.off, size):min(tc.off, size)+int64(n)]) {
			t.Errorf("ReadAt(%d, %d): bytes differ", tc.n, tc.off)
		}
	}
	if _, err := r.ReadAt(make([]byte, 1), -1); err == nil {
		t.Errorf("negative offset: no error")
	}
	all, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(all, want) {
		t.Errorf("ReadAll: %d bytes, %v", len(all), err)
	}
	if pos, err := r.Seek(-3, io.SeekEnd); err != nil || pos != size-3 {
		t.Errorf("Seek end: %d, %v", pos, err)
	}
	rest, _ := io.ReadAll(r)
	if !bytes.Equal(rest, want[size-3:]) {
		t.Errorf("read after Seek: %x", rest)
	}
	if pos, _ := r.Seek(10, io.SeekStart); pos != 10 {
		t.Errorf("Seek start: %d", pos)
	}
	if pos, _ := r.Seek(5, io.SeekCurrent); pos != 15 {
		t.Errorf("Seek current: %d", pos)
	}
	if _, err := r.Seek(-100, io.SeekCurrent); err == nil {
		t.Errorf("Seek before start: no error")
	}
	if _, err := r.Seek(0, 42); err == nil {
		t.Errorf("Seek whence 42: no error")
	}
}

func TestOpenTensorErrors(t *testing.T) {
	c, src := patternCheckpoint(t, standardSpecs(64))
	_, err := c.OpenTensor("missing", dtype.Invalid)
	var te *TensorError
	if !errors.Is(err, ErrNoTensor) || !errors.As(err, &te) || te.Name != "missing" {
		t.Errorf("missing tensor: %v", err)
	}
	// U8 has no F32 view; I64 is not a view dtype at all.
	for _, to := range []dtype.DType{dtype.F32, dtype.I64} {
		if _, err := c.OpenTensor("b.one", to); !errors.Is(err, ErrNotConvertible) {
			t.Errorf("U8 as %v: %v, want ErrNotConvertible", to, err)
		}
	}
	ti, _ := c.Tensor("b.one")
	if !c.Convertible(ti.Name, AsStored) || !c.Convertible(ti.Name, dtype.U8) || c.Convertible(ti.Name, dtype.F32) || c.Convertible("missing", AsStored) {
		t.Errorf("Convertible wrong for U8")
	}
	// A read error is a one-line *TensorError naming the tensor.
	src.failAt = ti.Offset
	r, err := c.OpenTensor("b.one", dtype.Invalid)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ReadAt(make([]byte, 1), 0)
	if !errors.As(err, &te) || te.Name != "b.one" || !errors.Is(err, errInjected) || strings.Contains(err.Error(), "\n") {
		t.Errorf("read error %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenTensor("b.one", dtype.Invalid); !errors.Is(err, os.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	// So does a mount's.
	m, err := Open(newFakeMount(t, false).dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := m.OpenTensor("w", dtype.Invalid); !errors.Is(err, os.ErrClosed) {
		t.Errorf("mount after Close: %v", err)
	}
}

// TestSeekErrors: Seek's errors are *TensorError values naming the tensor,
// as the TensorReader documentation says of every error but io.EOF.
func TestSeekErrors(t *testing.T) {
	c, _ := patternCheckpoint(t, standardSpecs(64))
	r, err := c.OpenTensor("b.one", dtype.Invalid)
	if err != nil {
		t.Fatal(err)
	}
	var te *TensorError
	for _, c := range []struct {
		off    int64
		whence int
	}{{-1, io.SeekStart}, {-1 << 40, io.SeekEnd}, {0, 7}} {
		if pos, err := r.Seek(c.off, c.whence); !errors.As(err, &te) || te.Name != "b.one" || te.Op != "seek" || pos != 0 {
			t.Errorf("Seek(%d, %d) = %d, %v", c.off, c.whence, pos, err)
		}
	}
	if pos, err := r.Seek(3, io.SeekEnd); err != nil || pos != r.Size()+3 {
		t.Errorf("Seek(3, SeekEnd) = %d, %v", pos, err)
	}
}

func TestTensorErrorMessage(t *testing.T) {
	e := &TensorError{Source: "m.safetensors", Name: "a\nb", Op: "read", Off: 12, Err: errors.New("line1\nline2")}
	want := `m.safetensors: tensor "a\nb": read at byte 12: line1 line2`
	if e.Error() != want {
		t.Errorf("got %q, want %q", e.Error(), want)
	}
	e = &TensorError{Name: "x", Op: "sink end", Off: -1, Err: io.EOF}
	if e.Error() != `tensor "x": sink end: EOF` || !errors.Is(e, io.EOF) {
		t.Errorf("got %q", e.Error())
	}
}

// TestKeysAreNames: a distributed checkpoint's dotted keys (index.json
// "keys") are taken wherever a tensor's name is, opened directly and
// through a document of a mount alike.
func TestKeysAreNames(t *testing.T) {
	ck, err := Open(testenv.Path(t, "formats2/dcp_single"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	const name, key = "model/blocks.0.norm%scale", "model.blocks.0.norm%scale"
	if _, ok := ck.Tensor(name); !ok {
		t.Fatalf("no tensor %q", name)
	}
	byKey, ok := ck.Tensor(key)
	if !ok || byKey.Name != name {
		t.Fatalf("Tensor(%q) = %+v, %v; want %q", key, byKey, ok, name)
	}
	a, err := ck.ReadFloat32(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ck.ReadFloat32(key)
	if err != nil || !slices.Equal(a, b) {
		t.Errorf("ReadFloat32(%q): %v, %v; want %v", key, b, err, a)
	}
	if _, ok := ck.Tensor("model.blocks.0.nope"); ok {
		t.Error("a key the checkpoint lacks was found")
	}
}
