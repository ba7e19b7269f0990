package view

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// memSource is a backing.Source over bytes in memory.
type memSource struct {
	b    []byte
	name string
}

func (m *memSource) Size() int64  { return int64(len(m.b)) }
func (m *memSource) Name() string { return m.name }
func (m *memSource) Close() error { return nil }
func (m *memSource) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// tcase is a random tensor over random backing bytes.
type tcase struct {
	t   index.Tensor
	src []byte
}

func (c *tcase) String() string {
	return fmt.Sprintf("%s %v strides %v offset %d be %v (src %d bytes)", c.t.DType, c.t.Shape, c.t.Strides, c.t.Offset, c.t.BigEndian, len(c.src))
}

type genOpts struct {
	dtypes  []dtype.DType // to pick from; nil: all
	strided bool          // allow strided layouts
	bigDims bool          // allow one dim up to 300
}

// genCase makes a random tensor: any rank 0..4 (1..3 for block dtypes),
// dims 0..6 (and sometimes one large one), contiguous or strided
// (permuted, sliced with steps and an offset, expanded with stride 0,
// sometimes reversed with a negative stride), little- or big-endian.
func genCase(r *rand.Rand, o genOpts) tcase {
	dts := o.dtypes
	if dts == nil {
		// Types with row meta or interleaved rows have their own tests
		// (rowmeta_test.go, rowgroup_test.go): their blocks convert only
		// with their row's meta, or into G rows.
		for _, d := range dtype.All() {
			if d.RowMeta() == 0 && d.RowGroup() == 0 {
				dts = append(dts, d)
			}
		}
	}
	dt := dts[r.IntN(len(dts))]
	info := dt.Info()
	es := dt.ElemSize()
	rank := r.IntN(5)
	if info.BlockElems > 1 {
		rank = 1 + r.IntN(3)
	}
	if dt.RowGroup() > 0 {
		rank = 2 + r.IntN(2) // rows in whole groups (below)
	}
	shape := make([]int64, rank)
	for k := range shape {
		switch x := r.IntN(20); {
		case x == 0:
			shape[k] = 0
		case x < 5:
			shape[k] = 1
		default:
			shape[k] = int64(2 + r.IntN(5))
		}
	}
	if o.bigDims && rank > 0 && r.IntN(3) == 0 {
		shape[r.IntN(rank)] = int64(50 + r.IntN(250))
	}
	if info.BlockElems > 1 {
		shape[rank-1] = info.BlockElems * int64(r.IntN(4))
		if r.IntN(4) == 0 {
			shape[rank-1] = info.BlockElems * int64(5+r.IntN(20))
		}
	}
	if g := dt.RowGroup(); g > 0 {
		shape[rank-2] *= g
	}
	n, _ := index.Elements(shape)
	size, ok := dt.TensorSize(n, dtype.RowLen(shape))
	if !ok {
		panic(fmt.Sprintf("genCase: %s %v", dt, shape))
	}
	t := index.Tensor{Name: "t", DType: dt, Shape: shape, Size: size}
	t.BigEndian = info.Unit > 1 && r.IntN(3) == 0
	var srcLen int64
	if o.strided && es > 0 && rank > 0 && r.IntN(3) > 0 {
		strides := make([]int64, rank)
		perm := r.Perm(rank)
		stride := int64(1)
		for j := rank - 1; j >= 0; j-- {
			k := perm[j]
			step := int64(1)
			if r.IntN(3) == 0 {
				step = int64(2 + r.IntN(2))
			}
			strides[k] = stride * step
			stride *= max(1, shape[k]*step+int64(r.IntN(2)))
		}
		if r.IntN(5) == 0 {
			strides[r.IntN(rank)] = 0
		}
		var lo, hi int64
		for k := range strides {
			if r.IntN(10) == 0 {
				strides[k] = -strides[k]
			}
			if shape[k] > 0 {
				if s := (shape[k] - 1) * strides[k]; s < 0 {
					lo += s
				} else {
					hi += s
				}
			}
		}
		t.Strides = strides
		startElem := -lo + int64(r.IntN(6))
		t.Offset = startElem*es + int64(r.IntN(3))
		srcLen = t.Offset + (hi+1)*es + int64(r.IntN(5))
	} else {
		t.Offset = int64(r.IntN(20))
		srcLen = t.Offset + size + int64(r.IntN(10))
	}
	src := make([]byte, srcLen)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	return tcase{t: t, src: src}
}

// refNative builds the whole native file of c by the simplest means: each
// element found by its multi-index, then every unit reversed when stored
// big-endian.
func refNative(c *tcase) []byte {
	t := &c.t
	var out []byte
	if t.Strides == nil {
		out = append(out, c.src[t.Offset:t.Offset+t.Size]...)
	} else {
		es := t.DType.ElemSize()
		n := t.NumElements()
		for i := int64(0); i < n; i++ {
			rem, at := i, int64(0)
			for k := len(t.Shape) - 1; k >= 0; k-- {
				at += rem % t.Shape[k] * t.Strides[k]
				rem /= t.Shape[k]
			}
			b := t.Offset + at*es
			out = append(out, c.src[b:b+es]...)
		}
	}
	if u := t.DType.Info().Unit; t.BigEndian && u > 1 {
		for i := 0; i+u <= len(out); i += u {
			for a, b := i, i+u-1; a < b; a, b = a+1, b-1 {
				out[a], out[b] = out[b], out[a]
			}
		}
	}
	return out
}

// sweep reads r at many (off, len) pairs, all of them for small files, and
// compares with want, the whole file.
func sweep(t *testing.T, what string, rd Reader, want []byte, r *rand.Rand) {
	t.Helper()
	size := int64(len(want))
	if rd.Size() != size {
		t.Fatalf("%s: Size() = %d, want %d", what, rd.Size(), size)
	}
	buf := make([]byte, size+16)
	check := func(off int64, n int) bool {
		p := buf[:n]
		for i := range p {
			p[i] = 0xA5
		}
		got, err := rd.ReadAt(p, off)
		switch {
		case off < 0:
			if got != 0 || !errors.Is(err, ErrNegativeOffset) {
				t.Errorf("%s: ReadAt(%d at %d) = %d, %v; want ErrNegativeOffset", what, n, off, got, err)
				return false
			}
			return true
		case off >= size:
			if got != 0 || err != io.EOF {
				t.Errorf("%s: ReadAt(%d at %d) = %d, %v; want 0, EOF", what, n, off, got, err)
				return false
			}
			return true
		}
		wantN, wantErr := n, error(nil)
		if off+int64(n) > size {
			wantN, wantErr = int(size-off), io.EOF
		}
		if got != wantN || err != wantErr {
			t.Errorf("%s: ReadAt(%d at %d) = %d, %v; want %d, %v", what, n, off, got, err, wantN, wantErr)
			return false
		}
		if !bytes.Equal(p[:got], want[off:off+int64(got)]) {
			t.Errorf("%s: ReadAt(%d at %d): wrong bytes\n got %x\nwant %x", what, n, off, p[:got], want[off:off+int64(got)])
			return false
		}
		return true
	}
	if size <= 40 {
		for off := int64(-1); off <= size+2; off++ {
			for n := 0; int64(n) <= size-off+3 && n <= len(buf); n++ {
				if !check(off, n) {
					return
				}
			}
		}
		return
	}
	fixed := [][2]int64{{0, size}, {0, size + 5}, {1, size - 1}, {size - 1, 1}, {size - 1, 10}, {size, 1}, {size + 3, 2}, {-1, 4}, {0, 0}}
	for _, f := range fixed {
		if f[1] >= 0 && !check(f[0], int(f[1])) {
			return
		}
	}
	for range iters(120) {
		off := r.Int64N(size + 2)
		var n int
		switch r.IntN(3) {
		case 0:
			n = r.IntN(17)
		case 1:
			n = r.IntN(int(size) + 8)
		default:
			n = int(size - off + int64(r.IntN(4)))
		}
		if n < 0 {
			n = 0
		}
		if !check(off, n) {
			return
		}
	}
}

// fill fills b with pseudo-random bytes.
func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// quickCheck reads rd whole in odd-sized pieces and at a few random ranges.
func quickCheck(t *testing.T, what string, rd Reader, want []byte, r *rand.Rand) {
	t.Helper()
	size := int64(len(want))
	if rd.Size() != size {
		t.Fatalf("%s: Size() = %d, want %d", what, rd.Size(), size)
	}
	got := make([]byte, 0, size)
	buf := make([]byte, 1000+r.IntN(3000))
	for off := int64(0); ; {
		n, err := rd.ReadAt(buf, off)
		got = append(got, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: ReadAt at %d: %v", what, off, err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: whole read differs", what)
	}
	for range 5 {
		if size == 0 {
			break
		}
		off := r.Int64N(size)
		n, err := rd.ReadAt(buf[:r.IntN(len(buf))], off)
		if (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], want[off:off+int64(n)]) {
			t.Errorf("%s: ReadAt at %d = %d, %v: wrong", what, off, n, err)
		}
	}
}

// iters scales a property test's case count down under the race detector,
// which makes byte loops 10-20 times slower (the plain run has every case).
func iters(n int) int {
	if raceEnabled {
		return n / 32
	}
	return n
}
