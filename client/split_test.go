package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// refPart cuts part s out of whole, the row-major bytes of a tensor of
// shape in elements of es bytes, by numpy.array_split's definition.
func refPart(whole []byte, shape []int64, es int64, s Split) []byte {
	outer, _ := index.Elements(shape[:s.Dim])
	inner, _ := index.Elements(shape[s.Dim+1:])
	d := shape[s.Dim]
	var start, end int64
	for k := 0; k <= s.Part; k++ {
		l := d / int64(s.Parts)
		if int64(k) < d%int64(s.Parts) {
			l++
		}
		start, end = end, end+l
	}
	var out []byte
	for o := int64(0); o < outer; o++ {
		out = append(out, whole[(o*d+start)*inner*es:(o*d+end)*inner*es]...)
	}
	return out
}

// splitCheckpoint writes a safetensors file of tensors of rank 1 to 3 in
// several dtypes and opens it.
func splitCheckpoint(t *testing.T) *Checkpoint {
	t.Helper()
	path := filepath.Join(tempDir(t), "split.safetensors")
	writeSafetensors(t, path, nil, []stTensor{
		{"a.weight", "F32", []int64{10, 6}, randomBytes(1, 240)},
		{"b.weight", "BF16", []int64{5, 7}, randomBytes(2, 70)},
		{"c.cube", "F16", []int64{3, 4, 5}, randomBytes(3, 120)},
		{"d.bias", "F32", []int64{9}, randomBytes(4, 36)},
		{"e.ids", "I32", []int64{2, 3}, randomBytes(5, 24)},
	})
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readAll(t *testing.T, r *TensorReader) []byte {
	t.Helper()
	b := make([]byte, r.Size())
	if n, err := r.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("read %d of %d: %v", n, len(b), err)
	}
	return b
}

// TestOpenSlice: every part of every dim of every tensor, as stored and
// converted, is the part of the whole tensor's bytes; parts that do not
// exist are ErrNoPart.
func TestOpenSlice(t *testing.T) {
	c := splitCheckpoint(t)
	for _, ti := range c.Tensors() {
		for _, to := range []dtype.DType{AsStored, dtype.F32, dtype.F16} {
			if !native(ti, to) && !c.convertible(ti, to) {
				continue
			}
			wr, err := c.OpenTensor(ti.Name, to)
			if err != nil {
				t.Fatal(err)
			}
			whole := readAll(t, wr)
			es := wr.DType().ElemSize()
			for dim := range ti.Shape {
				for _, parts := range []int{1, 2, 3, 8} {
					for part := range parts {
						s := Split{Dim: dim, Parts: parts, Part: part}
						r, err := c.OpenSlice(ti.Name, to, s)
						if err != nil {
							t.Fatalf("%s %v %v: %v", ti.Name, to, s, err)
						}
						if got, ok := r.Split(); !ok || got != s {
							t.Errorf("Split() = %v, %v", got, ok)
						}
						if got, want := readAll(t, r), refPart(whole, ti.Shape, es, s); !bytes.Equal(got, want) {
							t.Errorf("%s %v part %v: wrong bytes", ti.Name, to, s)
						}
					}
				}
			}
		}
		for _, s := range []Split{{Dim: len(ti.Shape), Parts: 1}, {Dim: 0, Parts: 0}, {Dim: 0, Parts: 2, Part: 2}, {Dim: -1, Parts: 1}} {
			if _, err := c.OpenSlice(ti.Name, AsStored, s); !errors.Is(err, ErrNoPart) {
				t.Errorf("%s part %v: %v, want ErrNoPart", ti.Name, s, err)
			}
		}
	}
}

// rankSplit is a tensor-parallel rule: 2-D weights by rows (dim 0),
// everything else replicated.
func rankSplit(parts, part int) func(TensorInfo) *Split {
	return func(t TensorInfo) *Split {
		if len(t.Shape) != 2 {
			return nil
		}
		return &Split{Dim: 0, Parts: parts, Part: part}
	}
}

// TestStreamSplit: a Stream with a Split delivers each tensor's part (and
// replicated tensors whole); a part that does not exist fails it.
func TestStreamSplit(t *testing.T) {
	c := splitCheckpoint(t)
	for part := range 3 {
		sink := newRecSink(t, 0)
		split := rankSplit(3, part)
		if err := c.Stream(context.Background(), sink, StreamOptions{ChunkSize: 7, Split: split}); err != nil {
			t.Fatal(err)
		}
		for _, ti := range c.Tensors() {
			wr, _ := c.OpenTensor(ti.Name, AsStored)
			want := readAll(t, wr)
			if s := split(ti); s != nil {
				want = refPart(want, ti.Shape, ti.DType.ElemSize(), *s)
			}
			rt := sink.tensors[ti.Name]
			if rt == nil || rt.size != int64(len(want)) || !bytes.Equal(rt.data.Bytes(), want) {
				t.Errorf("rank %d: %s: wrong part", part, ti.Name)
			}
		}
	}
	err := c.Stream(context.Background(), newRecSink(t, 0), StreamOptions{Split: func(TensorInfo) *Split { return &Split{Dim: 1, Parts: 2} }})
	if !errors.Is(err, ErrNoPart) {
		t.Errorf("dim 1 of a 1-D tensor: %v, want ErrNoPart", err)
	}
}

// collectSink is a FillSink that keeps every tensor's delivered bytes.
type collectSink struct {
	bufs [][]byte
	mu   sync.Mutex
	got  map[int][]byte
	plan []FillTensor
}

func (s *collectSink) Buffers() [][]byte { return s.bufs }
func (s *collectSink) Reclaim(int) error { return nil }
func (s *collectSink) Fill(i int, buf []byte, segs []Segment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sg := range segs {
		b := s.got[sg.Tensor]
		if b == nil {
			b = make([]byte, s.plan[sg.Tensor].Size)
			s.got[sg.Tensor] = b
		}
		copy(b[sg.Off:], buf[sg.BufOff:sg.BufOff+sg.N])
	}
	return nil
}

// TestFillSplit: PlanFill sizes each tensor's part and Fill delivers
// exactly the parts (dim 0 of contiguous tensors by file range, other
// parts through readers, converted or not); a part that does not exist
// fails PlanFill.
func TestFillSplit(t *testing.T) {
	c := splitCheckpoint(t)
	for _, dim := range []int{0, 1} {
		for _, to := range []dtype.DType{AsStored, dtype.F32} {
			for part := range 3 {
				split := func(t TensorInfo) *Split {
					if len(t.Shape) < 2 {
						return nil
					}
					return &Split{Dim: dim, Parts: 3, Part: part}
				}
				opts := FillOptions{DType: to, Split: split, Workers: 2}
				plan, err := c.PlanFill(opts)
				if err != nil {
					t.Fatal(err)
				}
				sink := &collectSink{bufs: [][]byte{make([]byte, 16), make([]byte, 16)}, got: map[int][]byte{}, plan: plan}
				stats, err := c.Fill(context.Background(), plan, sink, opts)
				if err != nil {
					t.Fatal(err)
				}
				var total int64
				for k, ft := range plan {
					what := fmt.Sprintf("dim %d %v part %d: %s", dim, to, part, ft.Info.Name)
					wr, _ := c.OpenTensor(ft.Info.Name, ft.DType)
					want := readAll(t, wr)
					if s := split(ft.Info); s != nil {
						want = refPart(want, ft.Info.Shape, wr.DType().ElemSize(), *s)
						if ft.Split == nil || *ft.Split != *s {
							t.Errorf("%s: planned split %v", what, ft.Split)
						}
					}
					if ft.Size != int64(len(want)) || !bytes.Equal(sink.got[k], want) && len(want) > 0 {
						t.Errorf("%s: got %d bytes (planned %d), want %d", what, len(sink.got[k]), ft.Size, len(want))
					}
					total += ft.Size
				}
				if stats.Bytes != total {
					t.Errorf("dim %d: delivered %d bytes, planned %d", dim, stats.Bytes, total)
				}
			}
		}
	}
	_, err := c.PlanFill(FillOptions{Split: func(TensorInfo) *Split { return &Split{Dim: 2, Parts: 2} }})
	if !errors.Is(err, ErrNoPart) {
		t.Errorf("dim 2 of 2-D tensors: %v, want ErrNoPart", err)
	}
}
