package check

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

// DataOptions configure Data.
type DataOptions struct {
	// Values counts the NaN and Inf values of every tensor that has a
	// float32 view (floating point and quantized dtypes), on the values
	// as that view converts them (DataReport.Tensors).
	Values bool
}

// TensorValues is what Data found in one tensor's values.
type TensorValues struct {
	Name     string `json:"name"`
	DType    string `json:"dtype"`
	Elements int64  `json:"elements"`
	NaN      int64  `json:"nan"`
	Inf      int64  `json:"inf"`
}

// DataReport is what Data read.
type DataReport struct {
	Bytes   int64          // bytes read from the sources
	CRCs    int            // stored members whose CRC-32 was checked
	Tensors []TensorValues // with DataOptions.Values, in index order
}

// chunk is how much Data reads at a time: its memory.
const chunk = 1 << 20

// Data reads every byte of every tensor of c: a tensor in a stored zip
// member (an .npz array) is checked against the member's CRC-32
// (index.Tensor.Verify), every other one is read whole (a read error, a
// compressed member that does not inflate, an object changed under a
// remote SOURCE is a problem). With o.Values, each tensor that has a
// float32 view is read through it and its NaN and Inf values counted.
// Memory: one buffer of 1 MiB.
func Data(c *Checkpoint, o DataOptions) (DataReport, []Problem) {
	var rep DataReport
	var ps []Problem
	buf := make([]byte, chunk)
	for i := range c.Index.Tensors {
		t := &c.Index.Tensors[i]
		if t.Source < 0 || t.Source >= len(c.Sources) {
			continue // ranges reports it
		}
		src := c.Sources[t.Source]
		file, where := c.Index.SourceName(t.Source), "tensor "+strconv.Quote(t.Name)
		fail := func(err error) {
			msg := strings.TrimPrefix(err.Error(), "view: "+t.Name+": ")
			ps = append(ps, Problem{File: file, Where: where, What: msg})
		}
		if t.Check != nil {
			rep.Bytes += t.Check.Size
			rep.CRCs++
			if err := t.Verify(src); err != nil {
				fail(err)
				continue
			}
		}
		if o.Values && view.Convertible(t, dtype.F32) {
			r, err := view.New(t, src, dtype.F32)
			if err != nil {
				fail(err)
				continue
			}
			v := TensorValues{Name: t.Name, DType: t.DType.String(), Elements: r.Size() / 4}
			err = readAll(r, r.Size(), buf, func(p []byte) {
				for j := 0; j+4 <= len(p); j += 4 {
					f := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[j:])))
					switch {
					case math.IsNaN(f):
						v.NaN++
					case math.IsInf(f, 0):
						v.Inf++
					}
				}
			})
			if t.Check == nil {
				rep.Bytes += t.Size
			}
			if err != nil {
				fail(err)
				continue
			}
			rep.Tensors = append(rep.Tensors, v)
			continue
		}
		if t.Check != nil {
			continue // read whole by Verify
		}
		var r io.ReaderAt = io.NewSectionReader(src, t.Offset, t.Size)
		if !t.Contiguous() {
			v, err := view.New(t, src, dtype.Invalid)
			if err != nil {
				fail(err)
				continue
			}
			r = v
		}
		rep.Bytes += t.Size
		if err := readAll(r, t.Size, buf, nil); err != nil {
			fail(err)
		}
	}
	return rep, ps
}

// readAll reads the size bytes of r in len(buf) pieces, giving each to
// each (when set).
func readAll(r io.ReaderAt, size int64, buf []byte, each func([]byte)) error {
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		got, err := r.ReadAt(buf[:n], off)
		if got < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading at byte %d: %v", off+int64(got), err)
		}
		if each != nil {
			each(buf[:n])
		}
		off += int64(n)
	}
	return nil
}
