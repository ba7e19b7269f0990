package backing

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// bytesSource is a Source over a byte slice.
type bytesSource struct {
	b    []byte
	name string
}

func (s *bytesSource) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(s.b)) {
		return 0, io.EOF
	}
	n := copy(p, s.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (s *bytesSource) Size() int64  { return int64(len(s.b)) }
func (s *bytesSource) Name() string { return s.name }
func (s *bytesSource) Close() error { return nil }

// box is a chunk of a tiling: offsets and sizes per dim.
type box struct{ start, shape []int64 }

// tileArray cuts whole (row-major, shape, es bytes per element) into the
// boxes, each stored contiguously in its own source after pad bytes, and
// returns the tiles.
func tileArray(whole []byte, shape []int64, es int64, boxes []box) []Tile {
	inner := make([]int64, len(shape))
	n := int64(1)
	for k := len(shape) - 1; k >= 0; k-- {
		inner[k] = n
		n *= shape[k]
	}
	var tiles []Tile
	for bi, b := range boxes {
		data := []byte(strings.Repeat("~", 3+bi)) // padding before the chunk
		pad := int64(len(data))
		cnt := int64(1)
		for _, d := range b.shape {
			cnt *= d
		}
		idx := make([]int64, len(shape))
		for e := int64(0); e < cnt; e++ {
			rem, off := e, int64(0)
			for k := len(shape) - 1; k >= 0; k-- {
				idx[k] = rem % b.shape[k]
				rem /= b.shape[k]
				off += (b.start[k] + idx[k]) * inner[k]
			}
			data = append(data, whole[off*es:(off+1)*es]...)
		}
		tiles = append(tiles, Tile{Src: &bytesSource{b: data, name: "chunk"}, Offset: pad, Start: b.start, Shape: b.shape})
	}
	return tiles
}

func TestTiled(t *testing.T) {
	cases := []struct {
		name  string
		shape []int64
		es    int64
		boxes []box
		err   string
	}{
		{"one chunk", []int64{4, 3}, 2, []box{{[]int64{0, 0}, []int64{4, 3}}}, ""},
		{"dim 0 uneven", []int64{5, 3}, 2, []box{{[]int64{0, 0}, []int64{3, 3}}, {[]int64{3, 0}, []int64{2, 3}}}, ""},
		{"dim 1", []int64{4, 6}, 4, []box{{[]int64{0, 3}, []int64{4, 3}}, {[]int64{0, 0}, []int64{4, 3}}}, ""},
		{"2x2 mesh", []int64{4, 6}, 1, []box{{[]int64{0, 0}, []int64{2, 3}}, {[]int64{0, 3}, []int64{2, 3}}, {[]int64{2, 0}, []int64{2, 3}}, {[]int64{2, 3}, []int64{2, 3}}}, ""},
		{"zero-size chunk", []int64{2, 5}, 2, []box{{[]int64{0, 0}, []int64{2, 5}}, {[]int64{2, 0}, []int64{0, 5}}}, ""},
		{"3-D dim 1 and 2", []int64{2, 4, 4}, 8, []box{{[]int64{0, 0, 0}, []int64{2, 2, 4}}, {[]int64{0, 2, 0}, []int64{2, 2, 1}}, {[]int64{0, 2, 1}, []int64{2, 2, 3}}}, ""},
		{"scalar", nil, 4, []box{{nil, nil}}, ""},
		{"empty", []int64{0, 4}, 4, []box{{[]int64{0, 0}, []int64{0, 4}}}, ""},
		{"4x4 grid, uneven", []int64{15, 14}, 1, grid([]int64{0, 4, 8, 12, 15}, []int64{0, 4, 8, 11, 14}), ""},
		{"overlap", []int64{4, 2}, 1, []box{{[]int64{0, 0}, []int64{3, 2}}, {[]int64{2, 0}, []int64{2, 2}}}, "overlap"},
		{"hole", []int64{4, 2}, 1, []box{{[]int64{0, 0}, []int64{3, 2}}}, "cover 6 of 8"},
		{"outside", []int64{4, 2}, 1, []box{{[]int64{0, 0}, []int64{4, 2}}, {[]int64{4, 0}, []int64{1, 2}}}, "outside the shape"},
		{"dims", []int64{4, 2}, 1, []box{{[]int64{0}, []int64{4}}}, "dims"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := int64(1)
			for _, d := range c.shape {
				n *= d
			}
			whole := make([]byte, n*c.es)
			for i := range whole {
				whole[i] = byte(i*7 + i/251)
			}
			var boxes []box
			for _, b := range c.boxes {
				if b.start == nil && c.shape == nil {
					b = box{[]int64{}, []int64{}}
				}
				boxes = append(boxes, b)
			}
			var tiles []Tile
			if c.err == "" || c.err == "overlap" {
				tiles = tileArray(whole, c.shape, c.es, boxes)
			} else {
				for _, b := range boxes {
					tiles = append(tiles, Tile{Src: &bytesSource{b: make([]byte, 64)}, Start: b.start, Shape: b.shape})
				}
			}
			src, err := NewTiled("x", c.shape, c.es, tiles)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("NewTiled: %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.Size() != int64(len(whole)) {
				t.Fatalf("size %d, want %d", src.Size(), len(whole))
			}
			pieces := 0
			defer func() {
				if len(boxes) > 0 && len(whole) > 0 && pieces == 0 {
					t.Errorf("Piece never found a run")
				}
			}()
			// Every read: any offset, any length, past the end too.
			for off := 0; off <= len(whole); off++ {
				for ln := 0; ln <= len(whole)-off+3; ln++ {
					p := make([]byte, ln)
					got, err := src.ReadAt(p, int64(off))
					wantN := min(ln, len(whole)-off)
					if got != wantN || !bytes.Equal(p[:got], whole[off:off+wantN]) {
						t.Fatalf("ReadAt(%d, %d) = %d %v: got %x want %x", ln, off, got, err, p[:got], whole[off:off+wantN])
					}
					if (wantN < ln) != (err == io.EOF) && !(ln == 0 && off == len(whole)) {
						t.Fatalf("ReadAt(%d, %d): err %v", ln, off, err)
					}
					if err != nil && err != io.EOF {
						t.Fatal(err)
					}
					// Piece, where it says a read is one run, says
					// where that run is.
					if src, at, ok := src.Piece(int64(off), int64(ln)); ok {
						q := make([]byte, ln)
						if n, _ := src.ReadAt(q, at); n != ln || !bytes.Equal(q, whole[off:off+ln]) {
							t.Fatalf("Piece(%d, %d) = %d: %x, want %x", off, ln, at, q, whole[off:off+ln])
						}
						pieces++
					}
				}
			}
		})
	}
}

// grid returns the boxes of a 2-D grid with the given row and column
// boundaries.
func grid(rows, cols []int64) []box {
	var out []box
	for i := 0; i+1 < len(rows); i++ {
		for j := 0; j+1 < len(cols); j++ {
			out = append(out, box{[]int64{rows[i], cols[j]}, []int64{rows[i+1] - rows[i], cols[j+1] - cols[j]}})
		}
	}
	return out
}

// TestTiledReadLinear: issue 34's tiling, a [32768, 2] tensor whose
// column 0 is one chunk and column 1 32,768 [1,1] chunks, read whole and
// in 4 KiB reads, gives the right bytes testing a few tiles per piece
// (the dim-0 scan it replaces went back over every earlier row's tile:
// 32,768 rows x 16,384 tiles on average).
func TestTiledReadLinear(t *testing.T) {
	const rows = 1 << 15
	shape := []int64{rows, 2}
	whole := make([]byte, rows*2*2)
	for i := range whole {
		whole[i] = byte(i*7 + i>>8)
	}
	// Column 0 at the start of one source, each element of column 1 a
	// tile of its own after it.
	src := &bytesSource{name: "chunks"}
	tiles := []Tile{{Src: src, Offset: 0, Start: []int64{0, 0}, Shape: []int64{rows, 1}}}
	for r := 0; r < rows; r++ {
		src.b = append(src.b, whole[4*r:4*r+2]...)
	}
	for r := 0; r < rows; r++ {
		tiles = append(tiles, Tile{Src: src, Offset: int64(len(src.b)), Start: []int64{int64(r), 1}, Shape: []int64{1, 1}})
		src.b = append(src.b, whole[4*r+2:4*r+4]...)
	}
	tl, err := NewTiled("t", shape, 2, tiles)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{len(whole), 4096} {
		before := tiledProbes.Load()
		buf := make([]byte, size)
		for off := 0; off < len(whole); off += size {
			n, err := tl.ReadAt(buf, int64(off))
			if err != nil || !bytes.Equal(buf[:n], whole[off:off+n]) {
				t.Fatalf("read %d at %d: %d bytes, %v", size, off, n, err)
			}
		}
		pieces := int64(2 * rows)
		if probes := tiledProbes.Load() - before; probes > 64*pieces {
			t.Errorf("reads of %d: %d tiles tested for %d pieces", size, probes, pieces)
		}
	}
}
