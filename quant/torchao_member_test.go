package quant_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/quant"
	"github.com/lazyweights/tensorfs/source"
)

// TestTorchAOThroughLoader: a torchao checkpoint opened as any SOURCE is
// (source.Load: the parts named by the safetensors __metadata__) serves
// each logical weight bit for bit under its own name, lists none of its
// M._w_DATA parts in the converted views, and keeps the plain tensor
// ({"_type": "Tensor"}) as stored. Without the metadata hook in
// formats.Quantize no logical weight exists at all.
func TestTorchAOThroughLoader(t *testing.T) {
	for _, v := range quant.TorchAOVariants() {
		t.Run(v.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), v.Safetensors, 0o644); err != nil {
				t.Fatal(err)
			}
			for n, b := range v.Files {
				if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ck, err := source.Load(context.Background(), dir, source.Options{Backing: backing.Options{Mode: backing.Pread}})
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			q := ck.Index.Quantization
			if q == nil || q.Scheme != v.Scheme || q.Method != "torchao" || len(q.Problems) != 0 {
				t.Fatalf("quantization %+v, want method torchao, scheme %s and no problems", q, v.Scheme)
			}
			listed := map[string]*index.Tensor{}
			for i := range ck.Index.Tensors {
				if tn := &ck.Index.Tensors[i]; tn.Listed(true) {
					listed[tn.Name] = tn
				}
			}
			if n := len(listed); n != len(v.Want)+1 {
				t.Errorf("%d tensors in the converted views, want %d weights and the plain tensor", n, len(v.Want))
			}
			if p := listed["model.norm.weight"]; p == nil || p.Role == index.RoleLogical {
				t.Errorf("the plain tensor is not served as stored: %+v", p)
			}
			for name, want := range v.Want {
				lt := listed[name]
				if lt == nil || lt.Role != index.RoleLogical {
					t.Fatalf("no logical tensor %s", name)
				}
				src := ck.Sources[lt.Source]
				whole := make([]byte, src.Size())
				if n, err := src.ReadAt(whole, 0); n != len(whole) || err != nil {
					t.Fatalf("%s: %d, %v", name, n, err)
				}
				if len(whole) != 4*len(want) {
					t.Fatalf("%s: %d bytes, want %d", name, len(whole), 4*len(want))
				}
				for i, w := range want {
					// NaN (E8M0 255) as NaN: torch's payloads are not compared
					if got := binary.LittleEndian.Uint32(whole[4*i:]); got != math.Float32bits(w) && !(w != w && math.IsNaN(float64(math.Float32frombits(got)))) {
						t.Fatalf("%s[%d] = %v, want %v", name, i, math.Float32frombits(got), w)
					}
				}
			}
		})
	}
}
