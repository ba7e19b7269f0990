package dcp

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// TestFloat4X2 reads testdata/f4 (gen.py: torch 2.14.1's dcp.save, in one
// process and over 2 ranks sharded along the last dimension and dim 0, as
// torch.save items and as safetensors .distcp files)
// and checks every float4_e2m1fn_x2 tensor bit for bit in the .f32 view
// against the values gen.py took from torch's own bytes: F4 with the last
// dimension doubled (a 0-d one as [2]), chunks tiled in bytes.
func TestFloat4X2(t *testing.T) {
	data, err := os.ReadFile("testdata/f4/EXPECTED.json")
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Cases map[string]map[string]struct {
			Shape []int64
			F32   []float32
		}
	}
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Cases) != 3 {
		t.Fatalf("%d cases", len(exp.Cases))
	}
	conv, ok := dtype.ConverterFor(dtype.F4, dtype.F32)
	if !ok {
		t.Fatal("no F4 -> F32 converter")
	}
	for name, want := range exp.Cases {
		t.Run(name, func(t *testing.T) {
			idx, files, err := load(filepath.Join("testdata", "f4", name))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, f := range files {
					f.(io.Closer).Close()
				}
			}()
			got := map[string]index.Tensor{}
			for _, tn := range idx.Tensors {
				got[tn.Name] = tn
			}
			if f := got["model/f"]; f.DType != dtype.F32 || len(got) != len(want)+1 || len(idx.Unserved) != 0 {
				t.Fatalf("tensors %+v, unserved %+v", idx.Tensors, idx.Unserved)
			}
			tiled := 0
			for n, w := range want {
				tn := got[n]
				if tn.DType != dtype.F4 || !slices.Equal(tn.Shape, w.Shape) || tn.Size != int64(len(w.F32)/2) {
					t.Fatalf("%s: %+v, want F4 %v of %d bytes", n, tn, w.Shape, len(w.F32)/2)
				}
				if tn.Source >= len(idx.Sources)-len(idx.Members) {
					tiled++
				}
				buf := make([]byte, tn.Size)
				if k, err := files[tn.Source].ReadAt(buf, tn.Offset); int64(k) != tn.Size {
					t.Fatalf("%s: %d bytes: %v", n, k, err)
				}
				out := make([]byte, 4*len(w.F32))
				conv(out, buf)
				for i, x := range w.F32 {
					if g := binary.LittleEndian.Uint32(out[4*i:]); g != math.Float32bits(x) {
						t.Fatalf("%s: element %d is %#x, want %v", n, i, g, x)
					}
				}
			}
			if name != "r1" && tiled != 2 {
				t.Errorf("%d tensors tiled from chunks, want 2 (w along the last dimension, v along dim 0)", tiled)
			}
		})
	}
}
