package pickle

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
)

// runScalar executes the opcodes that push one scalar: None, booleans, integers, floats, strings and bytes.
// ok is false when op is not one of them; push is whether v is pushed.
func (m *Machine) runScalar(op byte, off int64) (v any, push, ok bool, err error) {
	push, ok = true, true
	switch op {
	case OpNONE:
		v = nil
	case OpNEWTRUE:
		v = true
	case OpNEWFALSE:
		v = false
	case OpINT:
		s, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		switch s {
		case "01":
			v = true
		case "00":
			v = false
		default:
			if v, err = m.parseInt(s, off); err != nil {
				return nil, false, true, err
			}
		}
	case OpLONG:
		s, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		if v, err = m.parseInt(strings.TrimSuffix(s, "L"), off); err != nil {
			return nil, false, true, err
		}
	case OpBININT:
		b, err := m.fixed(4)
		if err != nil {
			return nil, false, true, err
		}
		v = int64(int32(binary.LittleEndian.Uint32(b)))
	case OpBININT1:
		c, err := m.readByte()
		if err != nil {
			return nil, false, true, err
		}
		v = int64(c)
	case OpBININT2:
		b, err := m.fixed(2)
		if err != nil {
			return nil, false, true, err
		}
		v = int64(binary.LittleEndian.Uint16(b))
	case OpLONG1, OpLONG4:
		var n int64
		if op == OpLONG1 {
			c, err := m.readByte()
			if err != nil {
				return nil, false, true, err
			}
			n = int64(c)
		} else {
			b, err := m.fixed(4)
			if err != nil {
				return nil, false, true, err
			}
			n = int64(int32(binary.LittleEndian.Uint32(b)))
		}
		if n < 0 || n > MaxLong {
			return nil, false, true, m.errAt(off, "pickle integer of %d bytes (want 0..%d)", n, MaxLong)
		}
		b, err := m.next(uint64(n), "integer")
		if err != nil {
			return nil, false, true, err
		}
		v = DecodeLong(b)
	case OpFLOAT:
		s, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		f, perr := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if perr != nil && !isRangeErr(perr) {
			return nil, false, true, m.errAt(off, "pickle FLOAT %q is not a number", Clip(s))
		}
		v = f
	case OpBINFLOAT:
		b, err := m.fixed(8)
		if err != nil {
			return nil, false, true, err
		}
		v = math.Float64frombits(binary.BigEndian.Uint64(b))
	case OpSTRING:
		s, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		b, ok := unquote(s)
		if !ok {
			return nil, false, true, m.errAt(off, "pickle STRING %q is not a quoted string", Clip(s))
		}
		v = Py2Str(b)
	case OpBINSTRING, OpSHORT_BINSTRING, OpBINUNICODE, OpSHORT_BINUNICODE, OpBINUNICODE8,
		OpBINBYTES, OpSHORT_BINBYTES, OpBINBYTES8, OpBYTEARRAY8:
		n, err := m.length(op, off)
		if err != nil {
			return nil, false, true, err
		}
		isBytes := op == OpBINBYTES || op == OpSHORT_BINBYTES || op == OpBINBYTES8 || op == OpBYTEARRAY8
		isUnicode := op == OpBINUNICODE || op == OpSHORT_BINUNICODE || op == OpBINUNICODE8
		at := m.pos
		if n > MaxValue {
			sc, err := m.skip(n)
			if err != nil {
				return nil, false, true, err
			}
			l := Large{N: n, Bytes: isBytes, Off: at, Raw: !isUnicode || !sc.High, Latin1: int64(n), BadAt: -1}
			if isUnicode {
				chars, bad := sc.Done()
				l.Latin1, l.BadAt = chars, at+bad
				if bad < 0 {
					l.BadAt = -1
				}
			}
			v = l
			break
		}
		b, err := m.next(n, "string")
		if err != nil {
			return nil, false, true, err
		}
		sp := Span{Off: at, N: int64(n), Raw: true, Latin1: int64(n), BadAt: -1}
		switch {
		case isUnicode:
			sp.Raw = ascii(b)
			if !sp.Raw {
				var sc Latin1Scan
				sc.Write(b)
				chars, bad := sc.Done()
				sp.Latin1, sp.BadAt = chars, -1
				if bad >= 0 {
					sp.BadAt = at + bad
				}
			}
			s := string(b)
			m.setStrSpan(s, sp)
			v = s
		case isBytes:
			m.SetSpan(b, sp)
			v = Bytes(b)
		default: // a Python 2 str: the stream holds its bytes
			s := Py2Str(b)
			m.setStrSpan(s, sp)
			v = s
		}
	case OpUNICODE:
		s, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		v = rawUnicodeEscape(s)
	default:
		return nil, false, false, nil
	}
	return v, push, true, nil
}
