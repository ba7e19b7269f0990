package view

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestOpenDispatch: Open and Sizeof serve, for every Form, the bytes
// and size of the reader the form names (stored or converted, raw or
// .npy, whole or part), and fail where it fails.
func TestOpenDispatch(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 1))
	for range iters(300) {
		c := genCase(r, genOpts{strided: true})
		src := &memSource{name: "x", b: c.src}
		tt := &c.t
		var splits []*Split
		splits = append(splits, nil)
		if len(tt.Shape) > 0 {
			d := r.IntN(len(tt.Shape))
			n := 1 + r.IntN(3)
			splits = append(splits, &Split{Dim: d, Parts: n, Part: r.IntN(n)})
		}
		for _, sp := range splits {
			for _, to := range []dtype.DType{dtype.Invalid, dtype.F32, dtype.BF16} {
				for _, npy := range []bool{false, true} {
					if npy && to != dtype.Invalid {
						continue
					}
					form := Form{To: to, NPY: npy, Split: sp}
					var want Reader
					var wantErr error
					var wantSize int64
					var sizeErr error
					switch {
					case npy && sp != nil:
						want, wantErr = NewNPYSlice(tt, src, *sp)
						wantSize, sizeErr = NPYSliceSize(tt, src, *sp)
					case npy:
						want, wantErr = NewNPY(tt, src)
						wantSize, sizeErr = NPYSize(tt, src)
					case sp != nil:
						want, wantErr = NewSlice(tt, src, to, *sp)
						wantSize, sizeErr = SliceSize(tt, src, to, *sp)
					default:
						want, wantErr = New(tt, src, to)
						wantSize, sizeErr = Size(tt, src, to)
					}
					got, err := Open(tt, src, form)
					size, serr := Sizeof(tt, src, form)
					if (err == nil) != (wantErr == nil) || (serr == nil) != (sizeErr == nil) || size != wantSize {
						t.Fatalf("%v %+v: Open err %v (want %v), Sizeof %d, %v (want %d, %v)", &c, form, err, wantErr, size, serr, wantSize, sizeErr)
					}
					if err != nil {
						continue
					}
					if got.Size() != want.Size() || !bytes.Equal(readAllOf(t, got), readAllOf(t, want)) {
						t.Fatalf("%v %+v: Open's bytes differ from its reader's", &c, form)
					}
				}
			}
		}
	}
}

func readAllOf(t *testing.T, rd Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(rd, 0, rd.Size()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
