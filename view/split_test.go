package view

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// refSlice cuts part s out of whole, the row-major bytes of a tensor of
// shape in dtype dt, element by element along the flattened index (the
// definition of numpy.array_split), or returns ok false where the part's
// bounds do not fall on whole blocks.
func refSlice(whole []byte, shape []int64, dt dtype.DType, s Split) ([]byte, bool) {
	inner, _ := index.Elements(shape[s.Dim+1:])
	outer, _ := index.Elements(shape[:s.Dim])
	d := shape[s.Dim]
	// numpy.array_split: the first d%parts parts one longer.
	var start, end int64
	for k := 0; k <= s.Part; k++ {
		l := d / int64(s.Parts)
		if int64(k) < d%int64(s.Parts) {
			l++
		}
		start, end = end, end+l
	}
	be := dt.Info().BlockElems
	var out []byte
	if n, ok := dt.ByteSize(outer * (end - start) * inner); ok {
		out = make([]byte, 0, n) // one allocation, not one growth per row
	}
	for o := int64(0); o < outer; o++ {
		a, b := (o*d+start)*inner, (o*d+end)*inner
		if a%be != 0 || b%be != 0 {
			return nil, false
		}
		ab, _ := dt.ByteSize(a)
		bb, _ := dt.ByteSize(b)
		out = append(out, whole[ab:bb]...)
	}
	if (end-start)*inner%be != 0 {
		return nil, false
	}
	return out, true
}

// TestSliceProperty: every part of every dim of random tensors (every
// dtype, contiguous, strided, big-endian), in the stored dtype, converted
// and as .npy, is the reference's bytes at every range, sized as
// SliceSize says; parts of a dim-0 contiguous tensor are file ranges.
func TestSliceProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var ranged, blocked, gathered int
	for i := range iters(400) {
		c := genCase(r, genOpts{strided: true, bigDims: i%4 == 0})
		src := &memSource{b: c.src, name: "src.bin"}
		whole := refNative(&c)
		tos := []dtype.DType{dtype.Invalid}
		if Convertible(&c.t, dtype.F32) && c.t.DType != dtype.F32 {
			tos = append(tos, dtype.F32)
		}
		for _, to := range tos {
			dt, want := c.t.DType, whole
			if to != dtype.Invalid {
				wr, err := New(&c.t, src, to)
				if err != nil {
					t.Fatalf("case %d %v: New: %v", i, &c, err)
				}
				dt, want = to, make([]byte, wr.Size())
				if _, err := wr.ReadAt(want, 0); err != nil && len(want) > 0 {
					t.Fatalf("case %d %v: %v", i, &c, err)
				}
			}
			for dim := 0; dim < len(c.t.Shape); dim++ {
				for _, parts := range []int{1, 2, 3, 8} {
					for part := 0; part < parts; part++ {
						s := Split{dim, parts, part}
						what := fmt.Sprintf("case %d %v to %v split %v", i, &c, to, s)
						ref, ok := refSlice(want, c.t.Shape, dt, s)
						size, err := SliceSize(&c.t, src, to, s)
						rd, err2 := NewSlice(&c.t, src, to, s)
						if !ok {
							blocked++
							if err == nil || err2 == nil {
								t.Fatalf("%s: want an error for a part off the blocks, got size %d", what, size)
							}
							continue
						}
						if err != nil || err2 != nil || size != int64(len(ref)) {
							t.Fatalf("%s: SliceSize = %d, %v; NewSlice: %v; want %d bytes", what, size, err, err2, len(ref))
						}
						quickCheck(t, what, rd, ref, r)
						if rg, ok := rd.(Ranger); ok {
							if s, off, ok := rg.FileRange(); ok {
								ranged++
								if s != src || off < 0 || off+rd.Size() > int64(len(c.src)) || !bytes.Equal(c.src[off:off+rd.Size()], ref) {
									t.Fatalf("%s: FileRange at %d: not the part's bytes", what, off)
								}
							}
						} else if dim > 0 {
							gathered++
						}
					}
				}
			}
			if t.Failed() {
				return
			}
		}
		// .npy: the header of the part's shape, then the part's data.
		npyDT, ok := NPYDType(&c.t)
		if !ok || len(c.t.Shape) == 0 {
			continue
		}
		full, err := NewNPY(&c.t, src)
		if err != nil {
			continue
		}
		fb := make([]byte, full.Size())
		full.ReadAt(fb, 0)
		data := fb[len(fb)-int(mustSize(t, &c, src, npyDT)):]
		s := Split{r.IntN(len(c.t.Shape)), 1 + r.IntN(4), 0}
		s.Part = r.IntN(s.Parts)
		ref, ok := refSlice(data, c.t.Shape, npyDT, s)
		if !ok {
			continue
		}
		want := append(npyHeader(npyDT.Info().NumPy, s.SliceShape(c.t.Shape)), ref...)
		size, err := NPYSliceSize(&c.t, src, s)
		rd, err2 := NewNPYSlice(&c.t, src, s)
		if err != nil || err2 != nil || size != int64(len(want)) {
			t.Fatalf("case %d %v: npy split %v: size %d, %v, %v; want %d", i, &c, s, size, err, err2, len(want))
		}
		quickCheck(t, fmt.Sprintf("case %d npy %v", i, s), rd, want, r)
	}
	if ranged == 0 || blocked == 0 || gathered == 0 {
		t.Errorf("ranged %d, blocked %d, gathered %d: want some of each", ranged, blocked, gathered)
	}
}

func mustSize(t *testing.T, c *tcase, src *memSource, to dtype.DType) int64 {
	n, err := Size(&c.t, src, to)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSplitBounds: numpy.array_split's bounds, and what is not a part.
func TestSplitBounds(t *testing.T) {
	for _, c := range []struct {
		n          int64
		s          Split
		start, end int64
	}{
		{10, Split{0, 3, 0}, 0, 4},
		{10, Split{0, 3, 1}, 4, 7},
		{10, Split{0, 3, 2}, 7, 10},
		{2, Split{0, 3, 2}, 2, 2},
		{0, Split{0, 2, 1}, 0, 0},
		{11008, Split{0, 8, 7}, 9632, 11008},
	} {
		if a, b := c.s.Bounds(c.n); a != c.start || b != c.end {
			t.Errorf("%v.Bounds(%d) = %d, %d; want %d, %d", c.s, c.n, a, b, c.start, c.end)
		}
	}
	for _, s := range []Split{{2, 1, 0}, {-1, 1, 0}, {0, 0, 0}, {0, 2, 2}, {0, 2, -1}} {
		if s.Valid([]int64{3, 4}) {
			t.Errorf("%v is Valid for [3 4]", s)
		}
	}
}
