package gguf

import (
	"math"

	"github.com/lazyweights/tensorfs/index"
)

// GGUF metadata values: scalars, strings and arrays, inline or as a
// *FileValue (see gguf.go for the rules).

// value reads one metadata value of type typ (read at typAt).
func (p *ggufParser) value(typ uint32, typAt int64, key string, depth int) (any, error) {
	r := &p.r
	switch typ {
	case ggufTypeU8, ggufTypeI8, ggufTypeBool:
		b, err := r.next(1)
		if err != nil {
			return nil, err
		}
		switch typ {
		case ggufTypeU8:
			return uint64(b[0]), nil
		case ggufTypeI8:
			return int64(int8(b[0])), nil
		}
		return b[0] != 0, nil
	case ggufTypeU16, ggufTypeI16:
		b, err := r.next(2)
		if err != nil {
			return nil, err
		}
		v := uint16(b[0]) | uint16(b[1])<<8
		if typ == ggufTypeU16 {
			return uint64(v), nil
		}
		return int64(int16(v)), nil
	case ggufTypeU32, ggufTypeI32, ggufTypeF32:
		v, err := r.u32()
		if err != nil {
			return nil, err
		}
		switch typ {
		case ggufTypeU32:
			return uint64(v), nil
		case ggufTypeI32:
			return int64(int32(v)), nil
		}
		return ggufFloat(float64(math.Float32frombits(v))), nil
	case ggufTypeU64, ggufTypeI64, ggufTypeF64:
		v, err := r.u64()
		if err != nil {
			return nil, err
		}
		switch typ {
		case ggufTypeU64:
			return v, nil
		case ggufTypeI64:
			return int64(v), nil
		}
		return ggufFloat(math.Float64frombits(v)), nil
	case ggufTypeString:
		n, err := r.strLen(0, "string value")
		if err != nil {
			return nil, err
		}
		if n > p.inline {
			fv := &index.FileValue{Offset: r.pos, Size: n, Type: "string"}
			return fv, r.skip(n)
		}
		b, err := r.next(n)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	case ggufTypeArray:
		return p.array(key, depth+1)
	}
	return nil, p.errAt(typAt, "key "+ggufQuote(key), "gguf: unknown metadata value type %d (want 0..12)", typ)
}

// strings reads an array of n strings, or returns nil (and no error) as
// soon as a string would end past byte end of the file, having allocated
// no more than the strings before it.
func (p *ggufParser) strings(n int64, end int64) ([]string, error) {
	r := &p.r
	out := make([]string, n)
	for i := range out {
		l, err := r.strLen(0, "string in array")
		if err != nil {
			return nil, err
		}
		if r.pos > end-l {
			return nil, nil
		}
		b, err := r.next(l)
		if err != nil {
			return nil, err
		}
		out[i] = string(b)
	}
	return out, nil
}

// ggufFloat is a float as JSON can hold it: the value, or a string for
// NaN and infinities.
func ggufFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}

// ggufEmpty holds an empty array of each element type, boxed once: a file
// of empty arrays costs no allocation per array.
var ggufEmpty = [ggufNumTypes]any{
	ggufTypeU8: index.Uint8s{}, ggufTypeI8: []int8{}, ggufTypeU16: []uint16{}, ggufTypeI16: []int16{},
	ggufTypeU32: []uint32{}, ggufTypeI32: []int32{}, ggufTypeF32: []float32{}, ggufTypeBool: []bool{},
	ggufTypeString: []string{}, ggufTypeArray: []any{}, ggufTypeU64: []uint64{}, ggufTypeI64: []int64{},
	ggufTypeF64: []float64{},
}

// arrayHead reads an array's element type and count, checked against the
// bytes left.
func (p *ggufParser) arrayHead(key string, depth int) (et uint32, n int64, err error) {
	r := &p.r
	at := r.pos
	if depth > index.MaxNesting {
		return 0, 0, p.errAt(at, "key "+ggufQuote(key), "gguf: arrays nested more than %d deep", index.MaxNesting)
	}
	if et, err = r.u32(); err != nil {
		return 0, 0, err
	}
	if et >= ggufNumTypes {
		return 0, 0, p.errAt(at, "key "+ggufQuote(key), "gguf: unknown array element type %d (want 0..12)", et)
	}
	nAt := r.pos
	count, err := r.u64()
	if err != nil {
		return 0, 0, err
	}
	minSize := ggufMinSize[et]
	if count > uint64(r.left()/minSize) {
		return 0, 0, p.errAt(nAt, "key "+ggufQuote(key), "gguf: array of %d %s needs at least %d bytes each and the file has %d left", count, ggufTypeName(et), minSize, r.left())
	}
	return et, int64(count), nil
}

// skipElems moves past n elements of type et, checking every length and
// count on the way, allocating nothing.
func (p *ggufParser) skipElems(et uint32, n int64, key string, depth int) error {
	r := &p.r
	switch et {
	case ggufTypeString:
		for i := int64(0); i < n; i++ {
			l, err := r.strLen(0, "string in array")
			if err != nil {
				return err
			}
			if err := r.skip(l); err != nil {
				return err
			}
		}
		return nil
	case ggufTypeArray:
		for i := int64(0); i < n; i++ {
			et, m, err := p.arrayHead(key, depth+1)
			if err != nil {
				return err
			}
			if err := p.skipElems(et, m, key, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return r.skip(n * ggufMinSize[et]) // no overflow: checked against the bytes left
}

// array reads an array value (element type, count, elements). At the top
// (depth 1), an array whose elements take more than p.inline bytes is a
// *FileValue: an array of fixed-size elements is sized from its count, one
// of strings or arrays is walked to its end first.
func (p *ggufParser) array(key string, depth int) (any, error) {
	et, n, err := p.arrayHead(key, depth)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return ggufEmpty[et], nil
	}
	if depth == 1 {
		if v, err := p.topArray(et, n, key, depth); v != nil || err != nil {
			return v, err
		}
	}
	count := int(n)
	switch et {
	case ggufTypeString:
		return p.strings(n, math.MaxInt64)
	case ggufTypeArray:
		out := make([]any, count)
		for i := range out {
			v, err := p.array(key, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return p.fixedArray(et, count)
}

// topArray decides how a top-level array (depth 1) is held: a
// *FileValue when its elements take more than p.inline bytes, or (one
// pass) its strings when they were read whole; nil, nil when it is small
// enough to read (the reader back at its elements).
func (p *ggufParser) topArray(et uint32, n int64, key string, depth int) (any, error) {
	r := &p.r
	start := r.pos
	// n*ggufMinSize[et] <= the bytes left: no overflow
	small := n*ggufMinSize[et] <= p.inline
	if small && et == ggufTypeString {
		// One pass: read, unless the strings turn out too long.
		out, err := p.strings(n, start+p.inline)
		if out != nil || err != nil {
			return out, err
		}
		r.pos = start
		small = false
	}
	if !small || et == ggufTypeArray {
		if err := p.skipElems(et, n, key, depth); err != nil {
			return nil, err
		}
		if size := r.pos - start; size > p.inline {
			return &index.FileValue{Offset: start, Size: size, Type: "array", ElemType: ggufTypeName(et), Count: n}, nil
		}
		r.pos = start // small enough: read it
	}
	return nil, nil
}

// fixedArray reads count elements of the fixed-size type et, in chunks
// of the buffer.
func (p *ggufParser) fixedArray(et uint32, count int) (any, error) {
	r := &p.r
	minSize := ggufMinSize[et]
	// Fixed-size elements: read in chunks of the buffer.
	size := int(minSize)
	var (
		u8s  index.Uint8s
		u16s []uint16
		i8s  []int8
		i16s []int16
		u32s []uint32
		i32s []int32
		f32s []float32
		u64s []uint64
		i64s []int64
		f64s []float64
		bs   []bool
	)
	switch et {
	case ggufTypeU8:
		u8s = make(index.Uint8s, count)
	case ggufTypeU16:
		u16s = make([]uint16, count)
	case ggufTypeI8:
		i8s = make([]int8, count)
	case ggufTypeI16:
		i16s = make([]int16, count)
	case ggufTypeU32:
		u32s = make([]uint32, count)
	case ggufTypeI32:
		i32s = make([]int32, count)
	case ggufTypeF32:
		f32s = make([]float32, count)
	case ggufTypeU64:
		u64s = make([]uint64, count)
	case ggufTypeI64:
		i64s = make([]int64, count)
	case ggufTypeF64:
		f64s = make([]float64, count)
	case ggufTypeBool:
		bs = make([]bool, count)
	}
	finite := true
	for done := 0; done < count; {
		k := min(count-done, ggufBufSize/size)
		b, err := r.next(int64(k * size))
		if err != nil {
			return nil, err
		}
		for i := 0; i < k; i++ {
			e := b[i*size:]
			j := done + i
			switch et {
			case ggufTypeU8:
				u8s[j] = e[0]
			case ggufTypeI8:
				i8s[j] = int8(e[0])
			case ggufTypeBool:
				bs[j] = e[0] != 0
			case ggufTypeU16:
				u16s[j] = uint16(e[0]) | uint16(e[1])<<8
			case ggufTypeI16:
				i16s[j] = int16(uint16(e[0]) | uint16(e[1])<<8)
			case ggufTypeU32, ggufTypeI32, ggufTypeF32:
				v := uint32(e[0]) | uint32(e[1])<<8 | uint32(e[2])<<16 | uint32(e[3])<<24
				switch et {
				case ggufTypeU32:
					u32s[j] = v
				case ggufTypeI32:
					i32s[j] = int32(v)
				default:
					f32s[j] = math.Float32frombits(v)
					finite = finite && v&0x7f800000 != 0x7f800000
				}
			default: // 64-bit
				v := ggufLE64(e)
				switch et {
				case ggufTypeU64:
					u64s[j] = v
				case ggufTypeI64:
					i64s[j] = int64(v)
				default:
					f64s[j] = math.Float64frombits(v)
					finite = finite && v&0x7ff0000000000000 != 0x7ff0000000000000
				}
			}
		}
		done += k
	}
	switch et {
	case ggufTypeU8:
		return u8s, nil
	case ggufTypeU16:
		return u16s, nil
	case ggufTypeI8:
		return i8s, nil
	case ggufTypeI16:
		return i16s, nil
	case ggufTypeU32:
		return u32s, nil
	case ggufTypeI32:
		return i32s, nil
	case ggufTypeU64:
		return u64s, nil
	case ggufTypeI64:
		return i64s, nil
	case ggufTypeBool:
		return bs, nil
	case ggufTypeF32:
		if finite {
			return f32s, nil
		}
		out := make([]any, count)
		for i, v := range f32s {
			out[i] = ggufFloat(float64(v))
		}
		return out, nil
	}
	if finite {
		return f64s, nil
	}
	out := make([]any, count)
	for i, v := range f64s {
		out[i] = ggufFloat(v)
	}
	return out, nil
}
