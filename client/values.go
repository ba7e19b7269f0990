package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/lazyweights/tensorfs/dtype"
)

// MaxReadValues is the most bytes ReadFloat32 reads into memory: one
// tensor's float32 values, 1 GiB (268,435,456 values). Larger tensors are
// read piecemeal with OpenTensor or Stream, whose memory is bounded by
// their buffers.
const MaxReadValues = 1 << 30

// ErrTooLarge is returned (wrapped) by ReadFloat32 for a tensor whose
// values are more than MaxReadValues bytes.
var ErrTooLarge = errors.New("client: tensor too large to read into memory in one go (use OpenTensor or Stream)")

// ReadFloat32 returns the values of the tensor called name as float32, in
// row-major order: converted from its stored dtype where that is not F32
// (F64, F16, BF16, F8 and quantized types, as the .f32/ view does: round
// to nearest even, NaN and Inf kept). It is the common case in one call;
// the memory it takes is the result plus one small buffer.
//
// Errors: ErrNoTensor for a name the checkpoint lacks, ErrNotConvertible
// for a tensor with no float32 view (integers, bool), ErrTooLarge when the
// result would be more than MaxReadValues bytes, and read errors; each a
// *TensorError naming the tensor.
func (c *Checkpoint) ReadFloat32(name string) ([]float32, error) {
	r, err := c.OpenTensor(name, dtype.F32)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	size := r.Size()
	if size > MaxReadValues {
		return nil, &TensorError{Source: c.path, Name: name, Op: "read", Off: -1,
			Err: fmt.Errorf("%w: %d bytes of float32 values, more than %d", ErrTooLarge, size, MaxReadValues)}
	}
	if size%4 != 0 {
		return nil, &TensorError{Source: c.path, Name: name, Op: "read", Off: -1,
			Err: fmt.Errorf("internal error: %d bytes of float32 values is not a whole number of values", size)}
	}
	out := make([]float32, size/4)
	buf := make([]byte, min(size, 1<<16))
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		got, err := r.ReadAt(buf[:n], off)
		if int64(got) < n {
			if err == nil || err == io.EOF {
				err = &TensorError{Source: c.path, Name: name, Op: "read", Off: off + int64(got), Err: io.ErrUnexpectedEOF}
			}
			return nil, err
		}
		for i := int64(0); i < n; i += 4 {
			out[(off+i)/4] = math.Float32frombits(binary.LittleEndian.Uint32(buf[i:]))
		}
		off += n
	}
	return out, nil
}
