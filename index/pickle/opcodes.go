package pickle

import (
	"encoding/binary"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Opcodes (pickletools names).
const (
	OpMARK             = '('
	OpSTOP             = '.'
	OpPOP              = '0'
	OpPOP_MARK         = '1'
	OpDUP              = '2'
	OpFLOAT            = 'F'
	OpINT              = 'I'
	OpBININT           = 'J'
	OpBININT1          = 'K'
	OpLONG             = 'L'
	OpBININT2          = 'M'
	OpNONE             = 'N'
	OpPERSID           = 'P'
	OpBINPERSID        = 'Q'
	OpREDUCE           = 'R'
	OpSTRING           = 'S'
	OpBINSTRING        = 'T'
	OpSHORT_BINSTRING  = 'U'
	OpUNICODE          = 'V'
	OpBINUNICODE       = 'X'
	OpAPPEND           = 'a'
	OpBUILD            = 'b'
	OpGLOBAL           = 'c'
	OpDICT             = 'd'
	OpEMPTY_DICT       = '}'
	OpAPPENDS          = 'e'
	OpGET              = 'g'
	OpBINGET           = 'h'
	OpINST             = 'i'
	OpLONG_BINGET      = 'j'
	OpLIST             = 'l'
	OpEMPTY_LIST       = ']'
	OpOBJ              = 'o'
	OpPUT              = 'p'
	OpBINPUT           = 'q'
	OpLONG_BINPUT      = 'r'
	OpSETITEM          = 's'
	OpTUPLE            = 't'
	OpEMPTY_TUPLE      = ')'
	OpSETITEMS         = 'u'
	OpBINFLOAT         = 'G'
	OpPROTO            = 0x80
	OpNEWOBJ           = 0x81
	OpEXT1             = 0x82
	OpEXT2             = 0x83
	OpEXT4             = 0x84
	OpTUPLE1           = 0x85
	OpTUPLE2           = 0x86
	OpTUPLE3           = 0x87
	OpNEWTRUE          = 0x88
	OpNEWFALSE         = 0x89
	OpLONG1            = 0x8a
	OpLONG4            = 0x8b
	OpBINBYTES         = 'B'
	OpSHORT_BINBYTES   = 'C'
	OpSHORT_BINUNICODE = 0x8c
	OpBINUNICODE8      = 0x8d
	OpBINBYTES8        = 0x8e
	OpEMPTY_SET        = 0x8f
	OpADDITEMS         = 0x90
	OpFROZENSET        = 0x91
	OpNEWOBJ_EX        = 0x92
	OpSTACK_GLOBAL     = 0x93
	OpMEMOIZE          = 0x94
	OpFRAME            = 0x95
	OpBYTEARRAY8       = 0x96
	OpNEXT_BUFFER      = 0x97
	OpREADONLY_BUFFER  = 0x98
)

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// length reads the length prefix of a string/bytes opcode.
func (m *Machine) length(op byte, off int64) (uint64, error) {
	switch op {
	case OpSHORT_BINSTRING, OpSHORT_BINUNICODE, OpSHORT_BINBYTES:
		c, err := m.readByte()
		return uint64(c), err
	case OpBINSTRING:
		b, err := m.fixed(4)
		if err != nil {
			return 0, err
		}
		n := int32(binary.LittleEndian.Uint32(b))
		if n < 0 {
			return 0, m.errAt(off, "pickle BINSTRING with negative length %d", n)
		}
		return uint64(n), nil
	case OpBINUNICODE, OpBINBYTES:
		b, err := m.fixed(4)
		if err != nil {
			return 0, err
		}
		return uint64(binary.LittleEndian.Uint32(b)), nil
	default: // 8-byte lengths
		b, err := m.fixed(8)
		if err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(b), nil
	}
}

func (m *Machine) memoIndex(op byte, off int64) (int64, error) {
	switch op {
	case OpGET, OpPUT:
		s, err := m.line()
		if err != nil {
			return 0, err
		}
		k, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || k < 0 {
			return 0, m.errAt(off, "pickle memo index %q is not a non-negative integer", Clip(s))
		}
		return k, nil
	case OpBINGET, OpBINPUT:
		c, err := m.readByte()
		return int64(c), err
	default:
		b, err := m.fixed(4)
		if err != nil {
			return 0, err
		}
		return int64(binary.LittleEndian.Uint32(b)), nil
	}
}

func (m *Machine) parseInt(s string, off int64) (any, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if d := len(strings.TrimLeft(s, "+-")); d > MaxIntDigits {
		return nil, m.errAt(off, "pickle integer of %d digits (at most %d, as Python reads them)", d, MaxIntDigits)
	}
	if len(s) > 0 {
		if b, ok := new(big.Int).SetString(s, 10); ok {
			return b, nil
		}
	}
	return nil, m.errAt(off, "pickle integer %q is not a decimal number", Clip(s))
}

func (m *Machine) global(mod, name string, off int64) (any, error) {
	if c, ok := m.env.(Claimer); ok && c.Claims(NormModule(mod), name) {
		return m.env.Global(m, NormModule(mod), name, off)
	}
	if bad, why := CheckGlobal(mod, name); bad {
		return nil, m.errAt(off, "refused global %s.%s%s", Clip(mod), Clip(name), why)
	}
	return m.env.Global(m, NormModule(mod), name, off)
}

// DecodeLong decodes a little-endian two's complement integer.
func DecodeLong(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	if len(b) <= 8 {
		var u uint64
		for i := len(b) - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		shift := uint(64 - 8*len(b))
		return int64(u<<shift) >> shift
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	x := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if x.IsInt64() {
		return x.Int64()
	}
	return x
}

// Py2Str turns a Python 2 str (bytes) into a string: kept as is when
// it is valid UTF-8 (what torch.load's encoding="utf-8" does), else
// decoded as Latin-1.
func Py2Str(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// unquote decodes the argument of a protocol-0 STRING opcode: a Python
// string literal in single or double quotes with backslash escapes.
func unquote(s string) ([]byte, bool) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return nil, false
	}
	s = s[1 : len(s)-1]
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(s) {
			return nil, false
		}
		switch c = s[i]; c {
		case '\\', '\'', '"':
			out = append(out, c)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'a':
			out = append(out, 7)
		case 'b':
			out = append(out, 8)
		case 'f':
			out = append(out, 12)
		case 'v':
			out = append(out, 11)
		case '\n':
		case 'x':
			if i+2 >= len(s) {
				return nil, false
			}
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return nil, false
			}
			out = append(out, byte(n))
			i += 2
		default:
			if c >= '0' && c <= '7' {
				n := 0
				j := i
				for ; j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7'; j++ {
					n = n*8 + int(s[j]-'0')
				}
				out = append(out, byte(n))
				i = j - 1
			} else {
				out = append(out, '\\', c)
			}
		}
	}
	return out, true
}

// rawUnicodeEscape decodes Python's raw-unicode-escape (protocol 0
// UNICODE): \uXXXX and \UXXXXXXXX are escapes, every other byte is a
// Latin-1 code point.
func rawUnicodeEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') {
			n := 4
			if s[i+1] == 'U' {
				n = 8
			}
			if i+2+n <= len(s) {
				if r, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32); err == nil {
					b.WriteRune(rune(r))
					i += 1 + n
					continue
				}
			}
		}
		b.WriteRune(rune(c))
	}
	return b.String()
}

// Build applies BUILD's state to obj. Values that Python would call
