package onnx

import (
	"encoding/binary"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Typed fields (onnx.proto): float_data holds FLOAT and COMPLEX64 as
// fixed32 (the little-endian bytes of the float), double_data DOUBLE and
// COMPLEX128 as fixed64; int64_data INT64 and uint64_data UINT32/UINT64
// as varints; int32_data every type narrower than 32 bits as one varint
// each: INT8..UINT16 and BOOL their value, FLOAT16, BFLOAT16 and the
// FLOAT8 types their bit pattern in the low bits. Repeated fields may be
// packed (one length-delimited run) or not (one field per value), and a
// tensor may hold several runs: all are read in order. The decoded bytes
// are each value's low ElemSize (Unit for complex) bytes, little-endian.

// discard is an io.Writer that drops everything (the check at load).
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// decoder returns the member's Decode: read the TensorProto again and
// write its values.
func (tt typedTensor) decoder() func(w io.Writer, file io.ReaderAt) error {
	return func(w io.Writer, file io.ReaderAt) error {
		buf := make([]byte, tt.n)
		if n, err := file.ReadAt(buf, tt.off); n < len(buf) {
			return fmt.Errorf("cannot read its TensorProto (%d bytes at byte %d): %v", tt.n, tt.off, err)
		}
		return tt.decode(w, buf)
	}
}

// decode writes the values of the TensorProto msg to w, checking there
// are exactly tt.count of them.
func (tt typedTensor) decode(w io.Writer, msg []byte) error {
	unit := int(tt.dt.Info().Unit)
	out := make([]byte, 0, 64<<10)
	var count int64
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		_, err := w.Write(out)
		out = out[:0]
		return err
	}
	put := func(v uint64) error {
		if count >= tt.count {
			return fmt.Errorf("%s holds more than the %d values its dims give", fieldName(tt.field), tt.count)
		}
		count++
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		out = append(out, b[:unit]...)
		if len(out) >= 64<<10 {
			return flush()
		}
		return nil
	}
	wire := protowire.VarintType
	switch tt.field {
	case tensorFloatData:
		wire = protowire.Fixed32Type
	case tensorDoubleData:
		wire = protowire.Fixed64Type
	}
	for b, at := msg, tt.off; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("bad field tag at byte %d", at)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return fmt.Errorf("bad field %d at byte %d", num, at)
		}
		val := b[n : n+m]
		if num == tt.field {
			switch {
			case typ == wire:
				if err := one(val, wire, put); err != nil {
					return fmt.Errorf("%s at byte %d: %v", fieldName(tt.field), at, err)
				}
			case typ == protowire.BytesType:
				run, k := protowire.ConsumeBytes(val)
				if k < 0 {
					return fmt.Errorf("bad %s at byte %d", fieldName(tt.field), at)
				}
				for len(run) > 0 {
					k, err := oneLen(run, wire)
					if err != nil {
						return fmt.Errorf("packed %s at byte %d: %v", fieldName(tt.field), at, err)
					}
					if err := one(run[:k], wire, put); err != nil {
						return fmt.Errorf("packed %s at byte %d: %v", fieldName(tt.field), at, err)
					}
					run = run[k:]
				}
			default:
				return fmt.Errorf("%s at byte %d has wire type %d", fieldName(tt.field), at, typ)
			}
		}
		b = b[n+m:]
		at += int64(n + m)
	}
	if err := flush(); err != nil {
		return err
	}
	if count != tt.count {
		return fmt.Errorf("%s holds %d values; its dims give %d", fieldName(tt.field), count, tt.count)
	}
	return nil
}

// oneLen is the length of the first value of a packed run.
func oneLen(b []byte, wire protowire.Type) (int, error) {
	switch wire {
	case protowire.Fixed32Type:
		if len(b) < 4 {
			return 0, fmt.Errorf("a run of fixed32 values cut off")
		}
		return 4, nil
	case protowire.Fixed64Type:
		if len(b) < 8 {
			return 0, fmt.Errorf("a run of fixed64 values cut off")
		}
		return 8, nil
	}
	_, k := protowire.ConsumeVarint(b)
	if k < 0 {
		return 0, fmt.Errorf("a bad varint")
	}
	return k, nil
}

// one decodes one value of wire type wire and puts it.
func one(b []byte, wire protowire.Type, put func(uint64) error) error {
	switch wire {
	case protowire.Fixed32Type:
		v, k := protowire.ConsumeFixed32(b)
		if k < 0 {
			return fmt.Errorf("a fixed32 value cut off")
		}
		return put(uint64(v))
	case protowire.Fixed64Type:
		v, k := protowire.ConsumeFixed64(b)
		if k < 0 {
			return fmt.Errorf("a fixed64 value cut off")
		}
		return put(v)
	}
	v, k := protowire.ConsumeVarint(b)
	if k < 0 {
		return fmt.Errorf("a bad varint")
	}
	return put(v)
}
