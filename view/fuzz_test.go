package view

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// FuzzNew builds tensors with arbitrary dtype, small shape, arbitrary
// strides and offset over a small source: New must either refuse them or
// serve reads that match the reference, never panic or read outside the
// source; Size must agree with it.
func FuzzNew(f *testing.F) {
	i64s := func(v ...int64) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	f.Add(uint8(dtype.F32), []byte{2, 3}, []byte(nil), int64(4), false, uint16(100), int64(3), uint16(10), uint8(0))
	f.Add(uint8(dtype.F16), []byte{3, 4}, i64s(1, 3), int64(2), true, uint16(64), int64(1), uint16(21), uint8(0))
	f.Add(uint8(dtype.F64), []byte{2, 2, 3}, i64s(0, 1, 2), int64(0), false, uint16(64), int64(5), uint16(40), uint8(dtype.F32))
	f.Add(uint8(dtype.BF16), []byte{4}, i64s(-1), int64(6), false, uint16(8), int64(0), uint16(8), uint8(dtype.F32))
	f.Add(uint8(dtype.Q4_0), []byte{32}, []byte(nil), int64(1), false, uint16(40), int64(7), uint16(100), uint8(dtype.F16))
	f.Add(uint8(dtype.F32), []byte{5, 5}, i64s(1<<61, 1), int64(0), false, uint16(100), int64(0), uint16(10), uint8(0))
	f.Fuzz(func(t *testing.T, dt uint8, dims, strides []byte, offset int64, be bool, srcLen uint16, off int64, n uint16, to uint8) {
		if len(dims) > 5 {
			dims = dims[:5]
		}
		shape := make([]int64, len(dims))
		for i, d := range dims {
			shape[i] = int64(d % 40)
		}
		d := dtype.DType(dt)
		elems, _ := index.Elements(shape)
		size, _ := d.ByteSize(elems)
		tn := index.Tensor{Name: "f", DType: d, Shape: shape, Offset: offset, Size: size, BigEndian: be}
		if len(strides) >= 8*len(shape) && len(shape) > 0 {
			tn.Strides = make([]int64, len(shape))
			for i := range shape {
				tn.Strides[i] = int64(binary.LittleEndian.Uint64(strides[8*i:]))
			}
		}
		data := make([]byte, srcLen)
		fill(data, uint64(srcLen))
		src := &memSource{b: data, name: "fuzz.bin"}
		target := dtype.DType(to % 8)
		if target != dtype.Invalid && !target.IsFloatView() {
			target = dtype.Invalid
		}
		size, sizeErr := Size(&tn, src, target)
		rd, err := New(&tn, src, target)
		if (sizeErr == nil) != (err == nil) || (err == nil && size != rd.Size()) {
			t.Fatalf("Size: %d, %v; New: %v", size, sizeErr, err)
		}
		if err != nil {
			if rd != nil {
				t.Fatalf("New returned a reader and an error")
			}
			return
		}
		p := make([]byte, n)
		got, err := rd.ReadAt(p, off)
		if err != nil && err != io.EOF && !errors.Is(err, ErrNegativeOffset) {
			t.Fatalf("ReadAt: %v", err)
		}
		if got > len(p) || (off >= 0 && off < rd.Size() && int64(got) != min(int64(n), rd.Size()-off)) {
			t.Fatalf("ReadAt(%d at %d) = %d of %d", n, off, got, rd.Size())
		}
		if d.RowMeta() != 0 || d.RowGroup() != 0 {
			// No block reference without the row's meta, or for blocks
			// of G rows (dtype has no Converter for these types):
			// rowmeta_test.go and rowgroup_test.go check them.
			return
		}
		c := tcase{t: tn, src: data}
		want := refNative(&c)
		if target != dtype.Invalid && target != d {
			conv, _ := dtype.ConverterFor(d, target)
			out := make([]byte, elems*target.ElemSize())
			conv(out, want)
			want = out
		}
		if int64(len(want)) != rd.Size() {
			t.Fatalf("Size() = %d, reference %d", rd.Size(), len(want))
		}
		if got > 0 && !bytes.Equal(p[:got], want[off:off+int64(got)]) {
			t.Fatalf("ReadAt(%d at %d): wrong bytes", n, off)
		}
	})
}
