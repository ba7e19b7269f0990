package view

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"

	"github.com/lazyweights/tensorfs/dtype"
)

// HeaderTensor is one tensor of a safetensors header: its data is the
// next Size bytes of the data section, right after the previous tensor's.
type HeaderTensor struct {
	Name  string
	DType dtype.DType
	Shape []int64
	Size  int64
}

// SafetensorsHeader returns the header of a safetensors file holding
// tensors one after another, in this order, from the start of the data
// section: the 8-byte little-endian length, then the JSON (meta as
// __metadata__ with its keys sorted, none when meta is nil; then each
// tensor's dtype, shape and data_offsets), padded with spaces to a
// multiple of 8. It is the header an Export writes (Export adds its own
// metadata keys): the one safetensors header writer of the product.
func SafetensorsHeader(meta map[string]string, tensors []HeaderTensor) ([]byte, error) {
	var b bytes.Buffer
	var h []byte
	_, err := writeHeader(&b, meta, len(tensors), func(i int) (string, dtype.DType, []int64, int64) {
		t := &tensors[i]
		return t.Name, t.DType, t.Shape, t.Size
	}, meta != nil, func(buf []byte) { h = buf })
	return h, err
}

// writeHeader renders a safetensors header into b: the 8-byte length
// (filled in when b is a bytes.Buffer, which done is then given), the
// __metadata__ object when withMeta (meta's keys sorted), then tensor(i)
// for i < n, laid out from data offset 0, and the padding. It returns
// the header's size; one over MaxExportHeader is an error. Each name is
// encoded in one scratch buffer, so that a header only counted costs no
// memory per tensor.
func writeHeader(b headerWriter, meta map[string]string, n int, tensor func(i int) (name string, dt dtype.DType, shape []int64, size int64), withMeta bool, done func([]byte)) (int64, error) {
	var scratch jsonScratch
	b.Write(make([]byte, 8))
	b.WriteByte('{')
	if withMeta {
		b.WriteString(`"__metadata__":{`)
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonBytes(k))
		b.WriteByte(':')
		b.Write(jsonBytes(meta[k]))
	}
	if withMeta {
		b.WriteByte('}')
	}
	var off int64
	for i := range n {
		name, dt, shape, size := tensor(i)
		if withMeta || i > 0 {
			b.WriteByte(',')
		}
		b.Write(scratch.encode(name))
		b.WriteString(`:{"dtype":"`)
		b.WriteString(dt.String())
		b.WriteString(`","shape":[`)
		for k, d := range shape {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(d, 10))
		}
		b.WriteString(`],"data_offsets":[`)
		b.WriteString(strconv.FormatInt(off, 10))
		b.WriteByte(',')
		off += size
		b.WriteString(strconv.FormatInt(off, 10))
		b.WriteString("]}")
		if b.Len() > MaxExportHeader+8 {
			return 0, fmt.Errorf("view: export: header over %d bytes", MaxExportHeader)
		}
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	hn := b.Len() - 8
	if hn > MaxExportHeader {
		return 0, fmt.Errorf("view: export: header of %d bytes is over %d", hn, MaxExportHeader)
	}
	if buf, ok := b.(*bytes.Buffer); ok {
		h := buf.Bytes()
		for i := 0; i < 8; i++ {
			h[i] = byte(uint64(hn) >> (8 * i))
		}
		done(h)
	}
	return int64(b.Len()), nil
}
