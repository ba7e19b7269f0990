package view

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// checkSizeAgrees fails unless Size and NPYSize say what New and NewNPY
// do for t over src: the same error (or none), and the reader's size.
func checkSizeAgrees(t *testing.T, what string, tn *index.Tensor, src backing.Source, to dtype.DType) (ok, npyOK bool) {
	t.Helper()
	size, err := Size(tn, src, to)
	rd, newErr := New(tn, src, to)
	switch {
	case (err == nil) != (newErr == nil) || (err != nil && err.Error() != newErr.Error()):
		t.Errorf("%s to %s: Size: %v; New: %v", what, to, err, newErr)
	case err == nil && size != rd.Size():
		t.Errorf("%s to %s: Size = %d, New(...).Size() = %d", what, to, size, rd.Size())
	}
	nsize, err := NPYSize(tn, src)
	nrd, newErr := NewNPY(tn, src)
	switch {
	case (err == nil) != (newErr == nil) || (err != nil && err.Error() != newErr.Error()):
		t.Errorf("%s: NPYSize: %v; NewNPY: %v", what, err, newErr)
	case err == nil && nsize != nrd.Size():
		t.Errorf("%s: NPYSize = %d, NewNPY(...).Size() = %d", what, nsize, nrd.Size())
	}
	return newErr == nil, err == nil
}

// TestSizeAgreesWithNew: for random tensors of every dtype and layout, in
// every target dtype (and some that are not view dtypes), over sources
// that hold them and sources cut short, Size and NPYSize agree with New
// and NewNPY on whether there is a reader, why not, and its size.
func TestSizeAgreesWithNew(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	targets := []dtype.DType{dtype.Invalid, dtype.F32, dtype.F16, dtype.BF16, dtype.F64, dtype.I32, dtype.U8}
	var accepted, refused, npy int
	for i := range iters(3000) {
		c := genCase(r, genOpts{strided: true, bigDims: i%3 == 0})
		b := c.src
		switch r.IntN(6) {
		case 0: // cut short: some tensors no longer fit
			b = b[:r.IntN(len(b)+1)]
		case 1: // a size that does not match the shape
			c.t.Size += int64(r.IntN(5)) - 2
		case 2: // a shape NumPy's header must spell out at length
			if len(c.t.Shape) > 0 && c.t.Strides == nil {
				c.t.Shape = append(c.t.Shape, 1, 1, 1)
			}
		}
		src := &memSource{b: b, name: "src.bin"}
		what := fmt.Sprintf("case %d %v", i, &c)
		for _, to := range targets {
			ok, npyOK := checkSizeAgrees(t, what, &c.t, src, to)
			if ok {
				accepted++
			} else {
				refused++
			}
			if npyOK {
				npy++
			}
		}
		if t.Failed() {
			return
		}
	}
	if accepted == 0 || refused == 0 || npy == 0 {
		t.Errorf("accepted %d, refused %d, .npy %d: the cases do not cover both sides", accepted, refused, npy)
	}

	// Every dtype, one block of elements and many, and the named errors.
	src := &memSource{b: make([]byte, 1<<16), name: "src.bin"}
	for _, dt := range dtype.All() {
		for _, blocks := range []int64{0, 1, 7} {
			n := dt.Info().BlockElems * blocks
			size, _ := dt.ByteSize(n)
			tn := &index.Tensor{Name: "x", DType: dt, Shape: []int64{n}, Size: size}
			for _, to := range targets {
				checkSizeAgrees(t, fmt.Sprintf("%s %v", dt, tn.Shape), tn, src, to)
			}
		}
	}
	// Headers on both sides of 65535 bytes (formats 1.0 and 2.0).
	big := make([]int64, 25000)
	for k := range big {
		big[k] = 1
	}
	for _, n := range []int{21700, 21790, 21800, 21810, 21900, 25000} {
		checkSizeAgrees(t, fmt.Sprintf("%d dims", n), &index.Tensor{Name: "x", DType: dtype.F32, Shape: big[:n], Size: 4}, src, dtype.Invalid)
	}
	checkSizeAgrees(t, "nil tensor", nil, src, dtype.F32)
	checkSizeAgrees(t, "nil source", &index.Tensor{Name: "x", DType: dtype.U8, Shape: []int64{1}, Size: 1}, nil, dtype.Invalid)
}

// TestSizeNoAllocs: Size and NPYSize of a servable tensor allocate
// nothing, so that a tree of many files can be laid out cheaply.
func TestSizeNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	src := &memSource{b: make([]byte, 4096), name: "src.bin"}
	tensors := []*index.Tensor{
		{Name: "c", DType: dtype.BF16, Shape: []int64{4, 8}, Size: 64},
		{Name: "s", DType: dtype.F32, Shape: []int64{8, 4}, Strides: []int64{1, 8}, Size: 128},
		{Name: "b", DType: dtype.F16, Shape: []int64{2, 3, 5}, Size: 60, BigEndian: true},
	}
	for _, tn := range tensors {
		for _, to := range []dtype.DType{dtype.Invalid, dtype.F32, dtype.F64} {
			if a := testing.AllocsPerRun(100, func() { Size(tn, src, to) }); a != 0 {
				t.Errorf("Size(%s, %s): %.0f allocations", tn.Name, to, a)
			}
		}
		if a := testing.AllocsPerRun(100, func() { NPYSize(tn, src) }); a != 0 {
			t.Errorf("NPYSize(%s): %.0f allocations", tn.Name, a)
		}
	}
}
