package view

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// rowMetaConvert is want32 (float32 elements) in view dtype to.
func rowMetaConvert(t *testing.T, want32 []byte, to dtype.DType) []byte {
	t.Helper()
	if to == dtype.F32 {
		return want32
	}
	c, ok := dtype.ConverterFor(dtype.F32, to)
	if !ok {
		t.Fatalf("no F32 -> %s", to)
	}
	out := make([]byte, len(want32)/4*int(to.ElemSize()))
	c(out, want32)
	return out
}

// rowMetaColumns is part [lo, hi) of the columns of a row-major matrix of
// rows of cols elements of es bytes.
func rowMetaColumns(b []byte, cols, lo, hi, es int64) []byte {
	var out []byte
	for r := int64(0); r < int64(len(b))/(cols*es); r++ {
		out = append(out, b[(r*cols+lo)*es:(r*cols+hi)*es]...)
	}
	return out
}

// TestRowMetaViews: ik_llama.cpp's row-scaled tensors (a scale before each
// row's blocks; dtype/testdata/ikllama, made by ik_llama.cpp itself) are
// served in every float view bit for bit as ik_llama.cpp dequantizes them
// (.f32ref; F64, F16, BF16 from those float32s), at any offset and length
// (a read inside a row uses that row's scale), as .npy, and split along
// either dim (natively only along the rows).
func TestRowMetaViews(t *testing.T) {
	fixture := filepath.Join("..", "dtype", "testdata", "ikllama", "seed7.gguf")
	ref, err := os.ReadFile(fixture + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	idx, srcs, ok := loadSource(t, fixture)
	if !ok {
		t.Fatalf("%s refused", fixture)
	}
	if len(idx.Unserved) != 0 {
		t.Fatalf("unserved: %+v", idx.Unserved)
	}
	ts := slices.Clone(idx.Tensors)
	slices.SortFunc(ts, func(a, b index.Tensor) int { return int(a.Offset - b.Offset) })
	r := rand.New(rand.NewPCG(44, 6))
	pos, checked := int64(0), map[dtype.DType]int{}
	for i := range ts {
		tn := &ts[i]
		n, _ := index.Elements(tn.Shape)
		want32 := ref[4*pos : 4*(pos+n)]
		pos += n
		if tn.DType.RowMeta() == 0 {
			continue
		}
		src := srcs[tn.Source]
		rows, cols := tn.Shape[0], tn.Shape[1]
		if row, _ := tn.DType.RowSize(cols); tn.Size != rows*row {
			t.Fatalf("%s: size %d, want %d rows of %d", tn.Name, tn.Size, rows, row)
		}
		for _, to := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
			want := rowMetaConvert(t, want32, to)
			rd, err := New(tn, src, to)
			if err != nil {
				t.Fatalf("%s as %s: %v", tn.Name, to, err)
			}
			sweep(t, tn.Name+" as "+to.String(), rd, want, r)
			es := to.ElemSize()
			for _, s := range []Split{{Dim: 0, Parts: 2, Part: 1}, {Dim: 1, Parts: 3, Part: 1}, {Dim: 1, Parts: 3, Part: 2}} {
				rd, err := NewSlice(tn, src, to, s)
				if err != nil {
					t.Fatalf("%s as %s part %v: %v", tn.Name, to, s, err)
				}
				var ws []byte
				if lo, hi := s.Bounds(tn.Shape[s.Dim]); s.Dim == 0 {
					ws = want[lo*cols*es : hi*cols*es]
				} else {
					ws = rowMetaColumns(want, cols, lo, hi, es)
				}
				quickCheck(t, tn.Name+" part", rd, ws, r)
			}
		}
		// Natively, a part of whole rows is their bytes, scales included;
		// a part of a row is refused.
		rd, err := NewSlice(tn, src, dtype.Invalid, Split{Dim: 0, Parts: int(rows), Part: 1})
		if err != nil {
			t.Fatalf("%s native row 1: %v", tn.Name, err)
		}
		row := tn.Size / rows
		quickCheck(t, tn.Name+" native row", rd, file[tn.Offset+row:tn.Offset+2*row], r)
		if _, err := NewSlice(tn, src, dtype.Invalid, Split{Dim: 1, Parts: 2, Part: 0}); err == nil {
			t.Errorf("%s: a native part of its rows served", tn.Name)
		}
		npy, err := NewNPY(tn, src)
		if err != nil {
			t.Fatalf("%s .npy: %v", tn.Name, err)
		}
		b, err := io.ReadAll(io.NewSectionReader(npy, 0, npy.Size()))
		if err != nil || !bytes.HasSuffix(b, want32) || !bytes.Contains(b, []byte("'<f4'")) {
			t.Errorf("%s .npy: %d bytes, %v; not its float32s", tn.Name, len(b), err)
		}
		checked[tn.DType]++
	}
	if 4*pos != int64(len(ref)) || len(checked) != 6 {
		t.Fatalf("%d of %d reference elements; types checked %v", pos, len(ref)/4, checked)
	}
}

// TestRowMetaSteps: row-scaled tensors (ik_llama.cpp's _KS/_KL and _BN
// types) whose rows are many to a step of a read, or larger than a step,
// read at any offset as their rows converted one by one.
func TestRowMetaSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 44))
	for _, c := range []struct {
		dt         dtype.DType
		rows, cols int64
	}{{dtype.IQ4_KS, 300, 256}, {dtype.IQ2_KS, 37, 1024}, {dtype.IQ5_KS, 3, 256 * 400}, {dtype.IQ2_KL, 2, 256 * 1000},
		{dtype.IQ1_BN, 41, 64 * 7}, {dtype.IQ2_BN, 3, 64 * 1500}} { // blocks of 64, IQ1_BN's rows of odd size
		row, ok := c.dt.RowSize(c.cols)
		if !ok {
			t.Fatalf("%s rows of %d", c.dt, c.cols)
		}
		b := make([]byte, c.rows*row)
		fill(b, uint64(c.rows))
		for i := int64(0); i < c.rows; i++ { // finite scales
			if c.dt.RowMeta() == 4 {
				binary.LittleEndian.PutUint32(b[i*row:], math.Float32bits(float32(r.NormFloat64())))
			} else {
				binary.LittleEndian.PutUint16(b[i*row:], 0x3c00|uint16(r.IntN(1<<10)))
			}
		}
		tn := &index.Tensor{Name: "w", DType: c.dt, Shape: []int64{c.rows, c.cols}, Size: int64(len(b))}
		for _, to := range []dtype.DType{dtype.F32, dtype.BF16} {
			conv, ok := dtype.RowConverterFor(c.dt, to)
			if !ok {
				t.Fatalf("no %s -> %s", c.dt, to)
			}
			out := c.cols * to.ElemSize()
			want := make([]byte, c.rows*out)
			for i := int64(0); i < c.rows; i++ {
				m := b[i*row : i*row+c.dt.RowMeta()]
				conv(want[i*out:(i+1)*out], m, b[i*row+c.dt.RowMeta():(i+1)*row])
			}
			rd, err := New(tn, &memSource{b: b, name: "m"}, to)
			if err != nil {
				t.Fatal(err)
			}
			sweep(t, c.dt.String()+" as "+to.String(), rd, want, r)
		}
		// Sizes are rows of the meta and the blocks: one byte short is
		// refused.
		short := *tn
		short.Size--
		if _, err := New(&short, &memSource{b: b, name: "m"}, dtype.F32); err == nil {
			t.Errorf("%s: a size without a row's meta served", c.dt)
		}
	}
}
