package view

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// BenchmarkReadAt reads a 32 MiB BF16 tensor from a page-cached, mapped
// file in 1 MiB reads of each view's output; SetBytes is the output, so
// MB/s is output throughput.
func BenchmarkReadAt(b *testing.B) {
	const elems = 16 << 20 // 32 MiB of BF16
	const side = 4096      // as a side x side matrix
	data := make([]byte, 2*elems)
	fill(data, 31)
	path := filepath.Join(b.TempDir(), "w.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	src, err := backing.Open(path, backing.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	flat := &index.Tensor{Name: "w", DType: dtype.BF16, Shape: []int64{side, elems / side}, Size: 2 * elems}
	transposed := &index.Tensor{Name: "wt", DType: dtype.BF16, Shape: []int64{elems / side, side}, Strides: []int64{1, elems / side}, Size: 2 * elems}
	bigEndian := &index.Tensor{Name: "wbe", DType: dtype.BF16, Shape: []int64{side, elems / side}, Size: 2 * elems, BigEndian: true}
	benches := []struct {
		name string
		t    *index.Tensor
		to   dtype.DType
	}{
		{"native", flat, dtype.Invalid},
		{"bigendian", bigEndian, dtype.Invalid},
		{"bf16-f32", flat, dtype.F32},
		{"bf16-f64", flat, dtype.F64},
		{"transposed", transposed, dtype.Invalid},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			rd, err := New(bb.t, src, bb.to)
			if err != nil {
				b.Skip(err) // converter not available yet
			}
			const chunk = 1 << 20
			buf := make([]byte, chunk)
			b.SetBytes(chunk)
			off := int64(0)
			for b.Loop() {
				n, err := rd.ReadAt(buf, off)
				if err != nil && n < chunk {
					off = 0
					continue
				}
				off += chunk
				if off >= rd.Size() {
					off = 0
				}
			}
		})
	}
}
