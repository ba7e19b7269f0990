package view

import (
	"bytes"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// TestExportTiled: the export of a tensor tiled from chunks (a distributed
// checkpoint's) hands out each chunk's run along dim 0 as a range of the
// chunk's file (Segment), and short runs (chunks along dim 1) not at all;
// the bytes are the whole tensor's either way.
func TestExportTiled(t *testing.T) {
	const rows, cols = 6, 40 << 10 // U8: a row is 40 KiB, two rows a run of 80 KiB
	whole := make([]byte, rows*cols)
	fill(whole, 7)
	for _, c := range []struct {
		name  string
		boxes [][4]int64 // start row, start col, rows, cols
		segs  int        // chunks Segment gives as file ranges
	}{
		// The last chunk, one row of 40 KiB, is under minTiledRun.
		{"dim 0", [][4]int64{{0, 0, 2, cols}, {2, 0, 3, cols}, {5, 0, 1, cols}}, 2},
		{"dim 1", [][4]int64{{0, 0, rows, cols / 2}, {0, cols / 2, rows, cols / 2}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tiles []backing.Tile
			var files []*memSource
			for _, b := range c.boxes {
				var data []byte
				data = append(data, "pad"...)
				for r := b[0]; r < b[0]+b[2]; r++ {
					data = append(data, whole[r*cols+b[1]:r*cols+b[1]+b[3]]...)
				}
				f := &memSource{b: data, name: "chunk"}
				files = append(files, f)
				tiles = append(tiles, backing.Tile{Src: f, Offset: 3, Start: []int64{b[0], b[1]}, Shape: []int64{b[2], b[3]}})
			}
			tl, err := backing.NewTiled("x", []int64{rows, cols}, 1, tiles)
			if err != nil {
				t.Fatal(err)
			}
			idx := &index.Index{Format: "dcp", Sources: []string{"x"}, Tensors: []index.Tensor{{Name: "w", Path: "w", DType: dtype.U8, Shape: []int64{rows, cols}, Size: rows * cols}}}
			x, err := NewExport(idx, []backing.Source{tl}, dtype.Invalid)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, x.Size())
			if n, _ := x.ReadAt(got, 0); int64(n) != x.Size() || !bytes.Equal(got[x.HeaderSize():], whole) {
				t.Fatal("export bytes differ")
			}
			segs := 0
			for off := x.HeaderSize(); off < x.Size(); {
				end, src, at, ok := x.Segment(off)
				if end <= off {
					t.Fatalf("Segment(%d) ends at %d", off, end)
				}
				if ok {
					segs++
					p := make([]byte, end-off)
					if n, _ := src.ReadAt(p, at); int64(n) != end-off || !bytes.Equal(p, got[off:end]) {
						t.Fatalf("Segment(%d): [%d, %d) of %s differs", off, at, at+end-off, src.Name())
					}
				}
				off = end
			}
			if segs != c.segs {
				t.Fatalf("%d segments, want %d", segs, c.segs)
			}
		})
	}
}
