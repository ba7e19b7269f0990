package dtype

import (
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestQuantIKRows checks the row-scaled types' dequantizers against
// ik_llama.cpp's own dequantize_row_*, bit for bit, on every row of their
// tensors in testdata/ikllama (ikgen: "<type>.a" of 3 rows of 512, "<type>.b"
// of 2 rows of 2304; .f32ref in file order).
func TestQuantIKRows(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "ikllama", "*.gguf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/ikllama/*.gguf (%v)", err)
	}
	byCode := map[uint32]ikRowType{}
	for _, rt := range ikRowTypes {
		byCode[rt.code] = rt
	}
	checked := map[string]int{}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := os.ReadFile(path + ".f32ref")
		if err != nil {
			t.Fatal(err)
		}
		pos := 0 // in ref, elements
		for _, tn := range quantWalkGGUF(t, b) {
			n := int(tn.elems)
			want := ref[4*pos : 4*(pos+n)]
			pos += n
			rt, ok := byCode[tn.ggml]
			if !ok {
				continue
			}
			if !strings.HasPrefix(tn.name, strings.ToLower(rt.name)+".") {
				t.Fatalf("%s: code %d", tn.name, tn.ggml)
			}
			cols := map[bool]int{true: 512, false: 2304}[strings.HasSuffix(tn.name, ".a")]
			rowBytes := rt.meta + cols/256*rt.blockBytes
			got := make([]float32, cols+1)
			for r := 0; r < n/cols; r++ {
				got[cols] = -7
				row := b[int(tn.offset)+r*rowBytes : int(tn.offset)+(r+1)*rowBytes]
				rt.deq(got[:cols], row[:rt.meta], row[rt.meta:])
				if got[cols] != -7 {
					t.Fatalf("%s row %d: wrote past the row", tn.name, r)
				}
				bad := 0
				for j := 0; j < cols; j++ {
					w := binary.LittleEndian.Uint32(want[4*(r*cols+j):])
					if math.Float32bits(got[j]) != w {
						if bad < 3 {
							t.Errorf("%s row %d element %d: %#08x, ik_llama.cpp %#08x", tn.name, r, j, math.Float32bits(got[j]), w)
						}
						bad++
					}
				}
				if bad > 0 {
					t.Fatalf("%s row %d: %d of %d elements differ", tn.name, r, bad, cols)
				}
			}
			checked[rt.name]++
		}
		if 4*pos != len(ref) {
			t.Fatalf("%s: tensors hold %d elements, .f32ref %d", path, pos, len(ref)/4)
		}
	}
	for _, rt := range ikRowTypes {
		if checked[rt.name] == 0 {
			t.Errorf("%s: not checked", rt.name)
		}
	}
}

// BenchmarkDequantIKRows reports each row-scaled type's dequantization
// (and the _BN types') on 256 random rows of 4096 elements (finite
// scales), as BenchmarkDequant does for the table's types (best-Melem/s:
// the best of 20 calls).
func BenchmarkDequantIKRows(b *testing.B) {
	for _, rt := range append(slices.Clone(ikRowTypes), bnRowTypes...) {
		const rows, cols = 256, 4096
		d, _ := ByGGML(rt.code)
		rowBytes := rt.meta + cols/int(d.Info().BlockElems)*rt.blockBytes
		src := make([]byte, rows*rowBytes)
		rng := rand.New(rand.NewSource(3))
		rng.Read(src)
		for r := 0; r < rows; r++ {
			row := src[r*rowBytes:]
			if rt.meta == 4 {
				binary.LittleEndian.PutUint32(row, math.Float32bits(float32(rng.NormFloat64())))
			} else {
				binary.LittleEndian.PutUint16(row, 0x3c00|uint16(rng.Intn(1<<10)))
			}
		}
		dst := make([]float32, cols)
		b.Run(rt.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			best := time.Duration(math.MaxInt64)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				for r := 0; r < rows; r++ {
					rt.deq(dst, src[r*rowBytes:r*rowBytes+rt.meta], src[r*rowBytes+rt.meta:(r+1)*rowBytes])
				}
				best = min(best, time.Since(start))
			}
			b.ReportMetric(float64(rows*cols)/best.Seconds()/1e6, "best-Melem/s")
		})
	}
}

// BenchmarkRowConvert reports the F32 RowConverter of each type with row
// meta (what a view converts with) on 256 random rows of 4096 elements
// (finite scales), a row per call, as best-Melem/s (the best of the calls).
func BenchmarkRowConvert(b *testing.B) {
	for d := DType(1); d < numDTypes; d++ {
		conv, ok := RowConverterFor(d, F32)
		if !ok {
			continue
		}
		const rows, cols = 256, 4096
		meta := int(d.RowMeta())
		rb, _ := d.RowSize(cols)
		rowBytes := int(rb)
		src := make([]byte, rows*rowBytes)
		rng := rand.New(rand.NewSource(int64(d)))
		rng.Read(src)
		for r := 0; r < rows; r++ {
			if meta == 4 {
				binary.LittleEndian.PutUint32(src[r*rowBytes:], math.Float32bits(float32(rng.NormFloat64())))
			} else {
				binary.LittleEndian.PutUint16(src[r*rowBytes:], 0x3c00|uint16(rng.Intn(1<<10)))
			}
		}
		dst := make([]byte, 4*cols)
		b.Run(d.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			best := time.Duration(math.MaxInt64)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				for r := 0; r < rows; r++ {
					row := src[r*rowBytes : (r+1)*rowBytes]
					conv(dst, row[:meta], row[meta:])
				}
				best = min(best, time.Since(start))
			}
			b.ReportMetric(float64(rows*cols)/best.Seconds()/1e6, "best-Melem/s")
		})
	}
}
