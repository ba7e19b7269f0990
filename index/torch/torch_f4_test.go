package torch

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// TestFloat4X2 reads testdata/f4 (gen.py: torch 2.14.1's torch.save, zip
// and legacy) and checks every float4_e2m1fn_x2 tensor bit for bit in
// the .f32 view against the values gen.py took from torch's own bytes:
// F4 with the last dimension doubled (a 0-d one as [2]), one range of
// the file, the even element in the low nibble; non-contiguous views
// listed in Unserved with the file's other tensors served.
func TestFloat4X2(t *testing.T) {
	data, err := os.ReadFile("testdata/f4/EXPECTED.json")
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Tensors map[string]struct {
			Shape []int64
			F32   []float32
		}
		Unserved map[string]struct {
			Shape, Stride []int64
		}
	}
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Tensors) != 5 || len(exp.Unserved) != 2 {
		t.Fatalf("EXPECTED.json: %d tensors, %d unserved", len(exp.Tensors), len(exp.Unserved))
	}
	conv, ok := dtype.ConverterFor(dtype.F4, dtype.F32)
	if !ok {
		t.Fatal("no F4 -> F32 converter")
	}
	for _, file := range []string{"f4.pt", "f4_legacy.pt"} {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile("testdata/f4/" + file)
			if err != nil {
				t.Fatal(err)
			}
			idx, err := ptParse(file, b)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]index.Tensor{}
			for _, tn := range idx.Tensors {
				got[tn.Name] = tn
			}
			if f := got["f"]; f.DType != dtype.F32 || len(got) != len(exp.Tensors)+1 {
				t.Fatalf("tensors %v", ptNames(idx))
			}
			for name, want := range exp.Tensors {
				tn := got[name]
				if tn.DType != dtype.F4 || !reflect.DeepEqual(tn.Shape, want.Shape) || tn.Strides != nil || tn.Source != 0 || tn.Size != int64(len(want.F32)/2) {
					t.Fatalf("%s: %+v, want F4 %v of %d bytes", name, tn, want.Shape, len(want.F32)/2)
				}
				out := make([]byte, 4*len(want.F32))
				conv(out, b[tn.Offset:tn.Offset+tn.Size])
				for i, w := range want.F32 {
					if g := binary.LittleEndian.Uint32(out[4*i:]); g != math.Float32bits(w) {
						t.Fatalf("%s: element %d is %#x, want %v", name, i, g, w)
					}
				}
			}
			if len(idx.Unserved) != 2 {
				t.Fatalf("unserved %+v", idx.Unserved)
			}
			for _, u := range idx.Unserved {
				want := exp.Unserved[u.Name]
				why := fmt.Sprintf("a non-contiguous view (strides %v) of torch.float4_e2m1fn_x2: tensorfs serves F4 as one range only", want.Stride)
				if u.Type != "torch.float4_e2m1fn_x2" || !reflect.DeepEqual(u.Shape, want.Shape) || u.Why != why {
					t.Errorf("%+v, want why %q", u, why)
				}
			}
		})
	}
}
