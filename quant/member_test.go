package quant_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/quant"
	"github.com/lazyweights/tensorfs/source"
)

// TestVariantsThroughLoader: every generated variant, written as a
// checkpoint directory and opened as any SOURCE is (source.Load: the
// scheme from its config.json, each logical weight a tensor of a
// dequantized member), serves each weight's values bit for bit, whole
// and in random sub-ranges, and lists no part in the converted views.
func TestVariantsThroughLoader(t *testing.T) {
	rnd := rand.New(rand.NewPCG(35, 2))
	for _, v := range quant.Variants() {
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
			if q == nil || q.Scheme != v.Scheme || len(q.Problems) != 0 {
				t.Fatalf("quantization %+v, want scheme %s and no problems", q, v.Scheme)
			}
			logical := map[string]*index.Tensor{}
			for i := range ck.Index.Tensors {
				if tn := &ck.Index.Tensors[i]; tn.Role == index.RoleLogical {
					logical[tn.Name] = tn
				}
			}
			if len(logical) != len(v.Want) {
				t.Fatalf("%d logical tensors, want %d", len(logical), len(v.Want))
			}
			for name, want := range v.Want {
				lt := logical[name]
				if lt == nil {
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
					if got := binary.LittleEndian.Uint32(whole[4*i:]); got != math.Float32bits(w) {
						t.Fatalf("%s[%d] = %v, want %v", name, i, math.Float32frombits(got), w)
					}
				}
				for k := 0; k < 50; k++ {
					off := rnd.Int64N(int64(len(whole)))
					n := 1 + rnd.Int64N(int64(len(whole))-off)
					buf := make([]byte, n+1)[1:]
					if got, err := src.ReadAt(buf, off); got != int(n) || err != nil || !bytes.Equal(buf, whole[off:off+n]) {
						t.Fatalf("%s: [%d, +%d): %d, %v, or bytes differ", name, off, n, got, err)
					}
				}
			}
			for i := range ck.Index.Tensors {
				tn := &ck.Index.Tensors[i]
				if tn.Listed(true) && tn.Role != index.RoleLogical && logical[tn.Name] != nil {
					t.Errorf("%s listed twice in the converted views", tn.Name)
				}
			}
		})
	}
}
