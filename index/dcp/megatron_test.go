package dcp

import (
	"encoding/binary"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index/dcp/internal/dcpwrite"
)

// TestMegatronUnreformulated: a tensor Megatron's torch_dist saved in a
// reformulated shape whose chunks hold whole cells is served in its
// original shape, each element where resharding.py's loader puts it
// (the writer numbers the original's elements 0, 1, …); one whose cells
// are saved in pieces stays in not_read, saying why.
func TestMegatronUnreformulated(t *testing.T) {
	for _, c := range []struct {
		name              string
		orig, grid        []int64
		run, pieces       int64
		notRead           string // in the not_read line; "" when served
		tiles, wantChunks int
	}{
		{"2-D one cell a chunk", []int64{4, 6}, []int64{2, 2}, 1, 1, "", 4, 4},
		{"2-D two cells a chunk", []int64{4, 6}, []int64{2, 2}, 2, 1, "", 4, 2},
		{"along dim 0 only", []int64{6, 5}, []int64{3, 1}, 1, 1, "", 3, 3},
		{"along dim 1 only", []int64{3, 8}, []int64{1, 4}, 2, 1, "", 4, 2},
		{"a prepended axis", []int64{2, 4, 6}, []int64{2, 2, 2}, 1, 1, "", 8, 8},
		{"1-D", []int64{12}, []int64{3}, 3, 1, "", 3, 1},
		{"one cell", []int64{3, 5}, []int64{1, 1}, 1, 1, "", 0, 1},
		{"cells in pieces", []int64{4, 6}, []int64{2, 2}, 1, 2, "a cell saved in pieces by several ranks", 0, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := dcpwrite.Reformulated(dir, c.orig, c.grid, c.run, c.pieces); err != nil {
				t.Fatal(err)
			}
			idx, files, err := load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, f := range files {
					f.(io.Closer).Close()
				}
			}()
			if c.notRead != "" {
				why := idx.NotRead["w"]
				if len(idx.Tensors) != 0 || !strings.Contains(why, c.notRead) || !strings.Contains(why, "not read") {
					t.Fatalf("%d tensors, not_read %q: want w listed with %q", len(idx.Tensors), why, c.notRead)
				}
				return
			}
			if len(idx.Tensors) != 1 || len(idx.NotRead) != 0 {
				t.Fatalf("%d tensors, not_read %v", len(idx.Tensors), idx.NotRead)
			}
			tt := idx.Tensors[0]
			if !slices.Equal(tt.Shape, c.orig) {
				t.Fatalf("shape %v, want %v", tt.Shape, c.orig)
			}
			if m := idx.Member(tt.Source); (m != nil) != (c.tiles > 0) {
				t.Fatalf("member %v, want tiles: %v", m, c.tiles > 0)
			}
			buf := make([]byte, tt.Size)
			if n, err := files[tt.Source].ReadAt(buf, tt.Offset); int64(n) != tt.Size {
				t.Fatalf("read %d of %d: %v", n, tt.Size, err)
			}
			for i := 0; i < len(buf)/4; i++ {
				if v := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])); v != float32(i) {
					t.Fatalf("element %d is %v", i, v)
				}
			}
			// Reads at odd offsets and lengths give the same bytes.
			for _, step := range []int64{4, 12, 20} {
				part := make([]byte, step)
				for off := int64(0); off < tt.Size; off += step {
					n, _ := files[tt.Source].ReadAt(part[:min(step, tt.Size-off)], tt.Offset+off)
					if string(part[:n]) != string(buf[off:off+int64(n)]) {
						t.Fatalf("read of %d at %d differs", step, off)
					}
				}
			}
		})
	}
}
