package torch_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// TestFloat4X2Views loads the float4_e2m1fn_x2 fixtures torch 2.14 wrote
// (testdata/f4: torch.save zip and legacy; ../dcp/testdata/f4: dcp.save
// on 1 and 2 ranks) through formats.Load and reads each tensor's .f32
// view (view.New, what the mount serves), bit for bit against torch's
// own bytes (EXPECTED.json of each, gen.py).
func TestFloat4X2Views(t *testing.T) {
	type want map[string]struct {
		Shape []int64
		F32   []float32
	}
	read := func(p string, v any) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	var pt struct{ Tensors want }
	read("testdata/f4/EXPECTED.json", &pt)
	var dcp struct{ Cases map[string]want }
	read("../dcp/testdata/f4/EXPECTED.json", &dcp)
	cases := map[string]want{"testdata/f4/f4.pt": pt.Tensors, "testdata/f4/f4_legacy.pt": pt.Tensors}
	for c, w := range dcp.Cases {
		m := want{}
		for k, v := range w {
			m[k] = v
		}
		cases[filepath.Join("../dcp/testdata/f4", c)] = m
	}
	if len(cases) != 5 {
		t.Fatalf("%d cases", len(cases))
	}
	open := func(p string) (index.File, error) { return backing.Open(p, backing.Options{Mode: backing.Pread}) }
	for p, w := range cases {
		t.Run(filepath.Base(p), func(t *testing.T) {
			idx, srcs, err := formats.Load(p, open, formats.Options{Inflate: backing.DefaultInflateCache()})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, s := range srcs {
					s.Close()
				}
			}()
			seen := 0
			for i := range idx.Tensors {
				tn := &idx.Tensors[i]
				e, ok := w[tn.Name]
				if !ok {
					continue
				}
				seen++
				if tn.DType != dtype.F4 {
					t.Fatalf("%s: %s", tn.Name, tn.DType)
				}
				r, err := view.New(tn, srcs[tn.Source], dtype.F32)
				if err != nil {
					t.Fatal(err)
				}
				if r.Size() != int64(4*len(e.F32)) {
					t.Fatalf("%s: .f32 of %d bytes, want %d", tn.Name, r.Size(), 4*len(e.F32))
				}
				buf := make([]byte, r.Size())
				if n, err := r.ReadAt(buf, 0); n != len(buf) {
					t.Fatalf("%s: read %d: %v", tn.Name, n, err)
				}
				for j, x := range e.F32 {
					if g := binary.LittleEndian.Uint32(buf[4*j:]); g != math.Float32bits(x) {
						t.Fatalf("%s: element %d is %#x, want %v", tn.Name, j, g, x)
					}
				}
			}
			if seen != len(w) {
				t.Fatalf("%d of the %d float4 tensors found", seen, len(w))
			}
		})
	}
}
