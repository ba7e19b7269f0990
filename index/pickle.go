package index

// A restricted unpickler for the pickles inside PyTorch checkpoints.
//
// Nothing is ever imported, called or executed: the machine below only
// builds Go values (pkl* types) that describe what Python would have built.
// GLOBAL and friends resolve to a *pklGlobal naming the class or function;
// REDUCE, NEWOBJ, OBJ and INST hand the callable and its arguments to a
// pklEnv, which interprets the few callables it knows (tensor rebuilds,
// containers, numpy scalars) and otherwise records an opaque *pklObject
// whose arguments and state are still walked for tensors.
//
// Globals that a data file has no reason to name (os.system, builtins.eval,
// subprocess, ...) refuse the whole file at the byte they appear at; see
// pklCheckGlobal. Opcodes that need Python-side machinery (EXT1/2/4, the
// out-of-band buffers of protocol 5) are refused too.
//
// Caps: every length read from the stream is checked against the bytes the
// stream really has left before anything is allocated; the stack, the mark
// stack and text lines have named limits; the memo grows by at most one
// entry per opcode, so it is bounded by the input size.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	pklMaxStack = 1 << 20 // values on the stack at once
	pklMaxLine  = 1 << 16 // bytes of one text-opcode line (protocol 0)
	pklMaxLong  = 1 << 16 // bytes of one LONG1/LONG4 integer
	// pklMaxPickle caps a pickle that has to be held in memory (a
	// compressed data.pkl member: torch never writes one).
	pklMaxPickle = 64 << 20
	// pklMaxValue caps one str/bytes value kept in memory; a longer one
	// (a blob a checkpoint carries along) is skipped over and stands as a
	// pklLarge, so memory never follows the size of such values.
	pklMaxValue = 16 << 20
)

// Values built by the machine. Python None is nil, bool is bool, int is
// int64 or *big.Int, float is float64, str is string.
type (
	pklTuple []any
	pklList  struct{ items []any }
	pklSet   struct {
		items  []any
		frozen bool
	}
	pklBytes   []byte
	pklComplex struct{ re, im float64 }
	// pklGlobal is a class or function named by GLOBAL/STACK_GLOBAL/INST.
	// Module is normalised (Python 2 __builtin__ -> builtins).
	pklGlobal struct{ module, name string }
	// pklObject is an instance of a class the env does not interpret, or
	// the result of a call it does not know: never called, only walked.
	pklObject struct {
		class  any
		args   []any
		kwargs any
		state  any      // BUILD
		items  *pklDict // SETITEM(S) on the object (dict subclasses)
		list   []any    // APPEND(S) on the object (list subclasses)
	}
	// pklLarge stands for a str or bytes value longer than pklMaxValue.
	pklLarge struct {
		n     uint64
		bytes bool
	}
	// pklRefused is a value the file holds that tensorfs cannot serve (a
	// quantized or sparse tensor...). The tree walk refuses the file with
	// the value's name when it meets one. off is its file offset, or -1.
	pklRefused struct {
		what string
		off  int64
	}
)

// pklDict is an insertion-ordered Python dict. Keys are matched by
// pklKeyID, which is close enough to Python equality for checkpoints.
type pklDict struct {
	keys, vals []any
	index      map[string]int
	attrs      any // BUILD state of a dict subclass (OrderedDict._metadata)
}

func newPklDict() *pklDict { return &pklDict{index: map[string]int{}} }

func (l pklLarge) String() string {
	if l.bytes {
		return fmt.Sprintf("<%d-byte bytes>", l.n)
	}
	return fmt.Sprintf("<%d-byte str>", l.n)
}

func (d *pklDict) set(k, v any) {
	id := pklKeyID(k)
	if i, ok := d.index[id]; ok {
		d.vals[i] = v
		return
	}
	d.index[id] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
}

func (d *pklDict) get(k string) (any, bool) {
	if i, ok := d.index[pklKeyID(k)]; ok {
		return d.vals[i], true
	}
	return nil, false
}

// pklKeyID identifies a dict key. Python's 1 == 1.0 == True is kept for
// ints and bools; anything else is told apart by its type and repr.
func pklKeyID(k any) string {
	switch v := k.(type) {
	case string:
		return "s" + v
	case bool:
		if v {
			return "i1"
		}
		return "i0"
	case int64:
		return "i" + strconv.FormatInt(v, 10)
	case *big.Int:
		return "i" + v.String()
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
			return "i" + strconv.FormatInt(int64(v), 10)
		}
		return "f" + strconv.FormatFloat(v, 'g', -1, 64)
	case nil:
		return "n"
	}
	return fmt.Sprintf("%T:%s", k, pklRepr(k, 64))
}

// pklEnv interprets what the pickle names and calls.
type pklEnv interface {
	// global resolves module.name (already checked by pklCheckGlobal).
	global(module, name string, off int64) (any, error)
	// call interprets fn(*args) (REDUCE, OBJ, INST).
	call(fn any, args pklTuple, off int64) (any, error)
	// newobj interprets cls.__new__(cls, *args, **kwargs) (NEWOBJ[_EX]).
	newobj(cls any, args pklTuple, kwargs any, off int64) (any, error)
	// persistent resolves a persistent id (PERSID, BINPERSID).
	persistent(pid any, off int64) (any, error)
}

// pklMachine runs one or more pickles from a stream.
type pklMachine struct {
	r     *bufio.Reader
	pos   int64 // bytes consumed from r
	limit int64 // bytes r has in all
	base  int64 // file offset of r's byte 0, or -1 when not a plain range
	file  string
	where string // names the stream when base < 0 (e.g. "member x/data.pkl")
	env   pklEnv

	stack []any
	marks []int // stack lengths at each MARK
	memo  map[int64]any
}

func newPklMachine(file string, r io.Reader, limit, base int64, where string, env pklEnv) *pklMachine {
	return &pklMachine{r: bufio.NewReaderSize(r, 64<<10), limit: limit, base: base, file: file, where: where, env: env}
}

// errAt returns a *FormatError at stream offset off.
func (m *pklMachine) errAt(off int64, format string, args ...any) error {
	if m.base >= 0 {
		return Errorf(m.file, m.base+off, format, args...)
	}
	return ErrorAt(m.file, fmt.Sprintf("%s, at byte %d", m.where, off), format, args...)
}

func (m *pklMachine) readByte() (byte, error) {
	if m.pos >= m.limit {
		return 0, m.errAt(m.pos, "pickle is truncated")
	}
	c, err := m.r.ReadByte()
	if err != nil {
		return 0, m.readErr(err)
	}
	m.pos++
	return c, nil
}

func (m *pklMachine) readErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return m.errAt(m.pos, "pickle is truncated")
	}
	if fe, ok := err.(*FormatError); ok {
		return fe
	}
	return m.errAt(m.pos, "cannot read pickle: %v", err)
}

// next reads n bytes, after checking that the stream has them.
func (m *pklMachine) next(n uint64, what string) ([]byte, error) {
	if n > uint64(m.limit-m.pos) {
		return nil, m.errAt(m.pos, "pickle %s of %d bytes runs past the end of the data (%d bytes left)", what, n, m.limit-m.pos)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(m.r, b); err != nil {
		return nil, m.readErr(err)
	}
	m.pos += int64(n)
	return b, nil
}

// skip passes over n bytes without keeping them.
func (m *pklMachine) skip(n uint64) error {
	if n > uint64(m.limit-m.pos) {
		return m.errAt(m.pos, "pickle string of %d bytes runs past the end of the data (%d bytes left)", n, m.limit-m.pos)
	}
	if _, err := io.CopyN(io.Discard, m.r, int64(n)); err != nil {
		return m.readErr(err)
	}
	m.pos += int64(n)
	return nil
}

func (m *pklMachine) fixed(n int) ([]byte, error) { return m.next(uint64(n), "argument") }

// line reads a text argument up to '\n' (not included).
func (m *pklMachine) line() (string, error) {
	var b []byte
	for {
		c, err := m.readByte()
		if err != nil {
			return "", err
		}
		if c == '\n' {
			return string(b), nil
		}
		if len(b) >= pklMaxLine {
			return "", m.errAt(m.pos, "pickle text argument longer than %d bytes", pklMaxLine)
		}
		b = append(b, c)
	}
}

func (m *pklMachine) push(v any, off int64) error {
	if len(m.stack) >= pklMaxStack {
		return m.errAt(off, "pickle stack holds more than %d values", pklMaxStack)
	}
	m.stack = append(m.stack, v)
	return nil
}

func (m *pklMachine) frame() int {
	if len(m.marks) == 0 {
		return 0
	}
	return m.marks[len(m.marks)-1]
}

func (m *pklMachine) pop(off int64) (any, error) {
	if len(m.stack) <= m.frame() {
		return nil, m.errAt(off, "pickle stack underflow")
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

func (m *pklMachine) top(off int64) (any, error) {
	if len(m.stack) <= m.frame() {
		return nil, m.errAt(off, "pickle stack underflow")
	}
	return m.stack[len(m.stack)-1], nil
}

// popMark returns the values pushed since the last MARK, and drops the mark.
func (m *pklMachine) popMark(off int64) ([]any, error) {
	if len(m.marks) == 0 {
		return nil, m.errAt(off, "pickle has no MARK to pop to")
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := append([]any(nil), m.stack[k:]...)
	m.stack = m.stack[:k]
	return items, nil
}

// Opcodes (pickletools names).
const (
	pkMARK             = '('
	pkSTOP             = '.'
	pkPOP              = '0'
	pkPOP_MARK         = '1'
	pkDUP              = '2'
	pkFLOAT            = 'F'
	pkINT              = 'I'
	pkBININT           = 'J'
	pkBININT1          = 'K'
	pkLONG             = 'L'
	pkBININT2          = 'M'
	pkNONE             = 'N'
	pkPERSID           = 'P'
	pkBINPERSID        = 'Q'
	pkREDUCE           = 'R'
	pkSTRING           = 'S'
	pkBINSTRING        = 'T'
	pkSHORT_BINSTRING  = 'U'
	pkUNICODE          = 'V'
	pkBINUNICODE       = 'X'
	pkAPPEND           = 'a'
	pkBUILD            = 'b'
	pkGLOBAL           = 'c'
	pkDICT             = 'd'
	pkEMPTY_DICT       = '}'
	pkAPPENDS          = 'e'
	pkGET              = 'g'
	pkBINGET           = 'h'
	pkINST             = 'i'
	pkLONG_BINGET      = 'j'
	pkLIST             = 'l'
	pkEMPTY_LIST       = ']'
	pkOBJ              = 'o'
	pkPUT              = 'p'
	pkBINPUT           = 'q'
	pkLONG_BINPUT      = 'r'
	pkSETITEM          = 's'
	pkTUPLE            = 't'
	pkEMPTY_TUPLE      = ')'
	pkSETITEMS         = 'u'
	pkBINFLOAT         = 'G'
	pkPROTO            = 0x80
	pkNEWOBJ           = 0x81
	pkEXT1             = 0x82
	pkEXT2             = 0x83
	pkEXT4             = 0x84
	pkTUPLE1           = 0x85
	pkTUPLE2           = 0x86
	pkTUPLE3           = 0x87
	pkNEWTRUE          = 0x88
	pkNEWFALSE         = 0x89
	pkLONG1            = 0x8a
	pkLONG4            = 0x8b
	pkBINBYTES         = 'B'
	pkSHORT_BINBYTES   = 'C'
	pkSHORT_BINUNICODE = 0x8c
	pkBINUNICODE8      = 0x8d
	pkBINBYTES8        = 0x8e
	pkEMPTY_SET        = 0x8f
	pkADDITEMS         = 0x90
	pkFROZENSET        = 0x91
	pkNEWOBJ_EX        = 0x92
	pkSTACK_GLOBAL     = 0x93
	pkMEMOIZE          = 0x94
	pkFRAME            = 0x95
	pkBYTEARRAY8       = 0x96
	pkNEXT_BUFFER      = 0x97
	pkREADONLY_BUFFER  = 0x98
)

// run executes one pickle up to its STOP and returns its value. The
// machine can run the next pickle of the same stream afterwards.
func (m *pklMachine) run() (any, error) {
	m.stack = m.stack[:0]
	m.marks = m.marks[:0]
	m.memo = map[int64]any{}
	for {
		off := m.pos
		op, err := m.readByte()
		if err != nil {
			return nil, err
		}
		var v any // value to push, when push is set
		push := true
		switch op {
		case pkSTOP:
			if len(m.stack) == 0 {
				return nil, m.errAt(off, "pickle STOP with an empty stack")
			}
			return m.stack[len(m.stack)-1], nil
		case pkMARK:
			if len(m.marks) >= MaxNesting {
				return nil, m.errAt(off, "pickle nests MARKs deeper than %d", MaxNesting)
			}
			m.marks = append(m.marks, len(m.stack))
			push = false
		case pkPOP:
			push = false
			if len(m.stack) > m.frame() {
				m.stack = m.stack[:len(m.stack)-1]
			} else if _, err := m.popMark(off); err != nil {
				return nil, err
			}
		case pkPOP_MARK:
			push = false
			if _, err := m.popMark(off); err != nil {
				return nil, err
			}
		case pkDUP:
			if v, err = m.top(off); err != nil {
				return nil, err
			}
		case pkPROTO:
			c, err := m.readByte()
			if err != nil {
				return nil, err
			}
			if c > 5 {
				return nil, m.errAt(off, "pickle protocol %d is newer than 5", c)
			}
			push = false
		case pkFRAME:
			if _, err := m.fixed(8); err != nil {
				return nil, err
			}
			push = false
		case pkNONE:
			v = nil
		case pkNEWTRUE:
			v = true
		case pkNEWFALSE:
			v = false
		case pkINT:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			switch s {
			case "01":
				v = true
			case "00":
				v = false
			default:
				if v, err = m.parseInt(s, off); err != nil {
					return nil, err
				}
			}
		case pkLONG:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			if v, err = m.parseInt(strings.TrimSuffix(s, "L"), off); err != nil {
				return nil, err
			}
		case pkBININT:
			b, err := m.fixed(4)
			if err != nil {
				return nil, err
			}
			v = int64(int32(binary.LittleEndian.Uint32(b)))
		case pkBININT1:
			c, err := m.readByte()
			if err != nil {
				return nil, err
			}
			v = int64(c)
		case pkBININT2:
			b, err := m.fixed(2)
			if err != nil {
				return nil, err
			}
			v = int64(binary.LittleEndian.Uint16(b))
		case pkLONG1, pkLONG4:
			var n int64
			if op == pkLONG1 {
				c, err := m.readByte()
				if err != nil {
					return nil, err
				}
				n = int64(c)
			} else {
				b, err := m.fixed(4)
				if err != nil {
					return nil, err
				}
				n = int64(int32(binary.LittleEndian.Uint32(b)))
			}
			if n < 0 || n > pklMaxLong {
				return nil, m.errAt(off, "pickle integer of %d bytes (want 0..%d)", n, pklMaxLong)
			}
			b, err := m.next(uint64(n), "integer")
			if err != nil {
				return nil, err
			}
			v = pklDecodeLong(b)
		case pkFLOAT:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			f, perr := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if perr != nil && !isRangeErr(perr) {
				return nil, m.errAt(off, "pickle FLOAT %q is not a number", pklClip(s))
			}
			v = f
		case pkBINFLOAT:
			b, err := m.fixed(8)
			if err != nil {
				return nil, err
			}
			v = math.Float64frombits(binary.BigEndian.Uint64(b))
		case pkSTRING:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			b, ok := pklUnquote(s)
			if !ok {
				return nil, m.errAt(off, "pickle STRING %q is not a quoted string", pklClip(s))
			}
			v = pklPy2Str(b)
		case pkBINSTRING, pkSHORT_BINSTRING, pkBINUNICODE, pkSHORT_BINUNICODE, pkBINUNICODE8,
			pkBINBYTES, pkSHORT_BINBYTES, pkBINBYTES8, pkBYTEARRAY8:
			n, err := m.length(op, off)
			if err != nil {
				return nil, err
			}
			if n > pklMaxValue {
				if err := m.skip(n); err != nil {
					return nil, err
				}
				v = pklLarge{n: n, bytes: op == pkBINBYTES || op == pkSHORT_BINBYTES || op == pkBINBYTES8 || op == pkBYTEARRAY8}
				break
			}
			b, err := m.next(n, "string")
			if err != nil {
				return nil, err
			}
			switch op {
			case pkBINSTRING, pkSHORT_BINSTRING:
				v = pklPy2Str(b)
			case pkBINUNICODE, pkSHORT_BINUNICODE, pkBINUNICODE8:
				v = string(b)
			default:
				v = pklBytes(b)
			}
		case pkUNICODE:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			v = pklRawUnicodeEscape(s)
		case pkEMPTY_TUPLE:
			v = pklTuple{}
		case pkTUPLE1, pkTUPLE2, pkTUPLE3:
			n := int(op-pkTUPLE1) + 1
			if len(m.stack)-m.frame() < n {
				return nil, m.errAt(off, "pickle stack underflow")
			}
			t := append(pklTuple(nil), m.stack[len(m.stack)-n:]...)
			m.stack = m.stack[:len(m.stack)-n]
			v = t
		case pkTUPLE:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			v = pklTuple(items)
		case pkEMPTY_LIST:
			v = &pklList{}
		case pkLIST:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			v = &pklList{items: items}
		case pkEMPTY_DICT:
			v = newPklDict()
		case pkDICT:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			if len(items)%2 != 0 {
				return nil, m.errAt(off, "pickle DICT with an odd number of items")
			}
			d := newPklDict()
			for i := 0; i < len(items); i += 2 {
				d.set(items[i], items[i+1])
			}
			v = d
		case pkEMPTY_SET:
			v = &pklSet{}
		case pkFROZENSET:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			v = &pklSet{items: items, frozen: true}
		case pkAPPEND, pkAPPENDS:
			push = false
			var items []any
			if op == pkAPPEND {
				x, err := m.pop(off)
				if err != nil {
					return nil, err
				}
				items = []any{x}
			} else if items, err = m.popMark(off); err != nil {
				return nil, err
			}
			t, err := m.top(off)
			if err != nil {
				return nil, err
			}
			switch l := t.(type) {
			case *pklList:
				l.items = append(l.items, items...)
			case *pklObject:
				l.list = append(l.list, items...)
			default:
				return nil, m.errAt(off, "pickle APPEND to a %s", pklTypeName(t))
			}
		case pkSETITEM, pkSETITEMS:
			push = false
			var items []any
			if op == pkSETITEM {
				if len(m.stack)-m.frame() < 2 {
					return nil, m.errAt(off, "pickle stack underflow")
				}
				items = append(items, m.stack[len(m.stack)-2:]...)
				m.stack = m.stack[:len(m.stack)-2]
			} else if items, err = m.popMark(off); err != nil {
				return nil, err
			}
			if len(items)%2 != 0 {
				return nil, m.errAt(off, "pickle SETITEMS with an odd number of items")
			}
			t, err := m.top(off)
			if err != nil {
				return nil, err
			}
			var d *pklDict
			switch o := t.(type) {
			case *pklDict:
				d = o
			case *pklObject:
				if o.items == nil {
					o.items = newPklDict()
				}
				d = o.items
			default:
				return nil, m.errAt(off, "pickle SETITEM on a %s", pklTypeName(t))
			}
			for i := 0; i < len(items); i += 2 {
				d.set(items[i], items[i+1])
			}
		case pkADDITEMS:
			push = false
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			t, err := m.top(off)
			if err != nil {
				return nil, err
			}
			s, ok := t.(*pklSet)
			if !ok {
				return nil, m.errAt(off, "pickle ADDITEMS on a %s", pklTypeName(t))
			}
			s.items = append(s.items, items...)
		case pkGET, pkBINGET, pkLONG_BINGET:
			k, err := m.memoIndex(op, off)
			if err != nil {
				return nil, err
			}
			x, ok := m.memo[k]
			if !ok {
				return nil, m.errAt(off, "pickle memo has no entry %d", k)
			}
			v = x
		case pkPUT, pkBINPUT, pkLONG_BINPUT, pkMEMOIZE:
			push = false
			var k int64
			if op == pkMEMOIZE {
				k = int64(len(m.memo))
			} else if k, err = m.memoIndex(op, off); err != nil {
				return nil, err
			}
			t, err := m.top(off)
			if err != nil {
				return nil, err
			}
			m.memo[k] = t
		case pkGLOBAL:
			mod, err := m.line()
			if err != nil {
				return nil, err
			}
			name, err := m.line()
			if err != nil {
				return nil, err
			}
			if v, err = m.global(mod, name, off); err != nil {
				return nil, err
			}
		case pkSTACK_GLOBAL:
			name, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			mod, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			ms, ok1 := mod.(string)
			ns, ok2 := name.(string)
			if !ok1 || !ok2 {
				return nil, m.errAt(off, "pickle STACK_GLOBAL wants two strings, got %s and %s", pklTypeName(mod), pklTypeName(name))
			}
			if v, err = m.global(ms, ns, off); err != nil {
				return nil, err
			}
		case pkREDUCE:
			args, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			fn, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			t, ok := args.(pklTuple)
			if !ok {
				return nil, m.errAt(off, "pickle REDUCE wants an argument tuple, got %s", pklTypeName(args))
			}
			if v, err = m.env.call(fn, t, off); err != nil {
				return nil, err
			}
		case pkNEWOBJ, pkNEWOBJ_EX:
			var kwargs any
			if op == pkNEWOBJ_EX {
				if kwargs, err = m.pop(off); err != nil {
					return nil, err
				}
			}
			args, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			cls, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			t, ok := args.(pklTuple)
			if !ok {
				return nil, m.errAt(off, "pickle NEWOBJ wants an argument tuple, got %s", pklTypeName(args))
			}
			if v, err = m.env.newobj(cls, t, kwargs, off); err != nil {
				return nil, err
			}
		case pkOBJ:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			if len(items) == 0 {
				return nil, m.errAt(off, "pickle OBJ without a class")
			}
			if v, err = m.env.call(items[0], pklTuple(items[1:]), off); err != nil {
				return nil, err
			}
		case pkINST:
			mod, err := m.line()
			if err != nil {
				return nil, err
			}
			name, err := m.line()
			if err != nil {
				return nil, err
			}
			cls, err := m.global(mod, name, off)
			if err != nil {
				return nil, err
			}
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			if v, err = m.env.call(cls, pklTuple(items), off); err != nil {
				return nil, err
			}
		case pkBUILD:
			push = false
			state, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			t, err := m.top(off)
			if err != nil {
				return nil, err
			}
			pklBuild(t, state)
		case pkPERSID:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			if v, err = m.env.persistent(s, off); err != nil {
				return nil, err
			}
		case pkBINPERSID:
			pid, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			if v, err = m.env.persistent(pid, off); err != nil {
				return nil, err
			}
		case pkEXT1, pkEXT2, pkEXT4:
			return nil, m.errAt(off, "refused pickle opcode EXT%d (copyreg extension registry)", map[byte]int{pkEXT1: 1, pkEXT2: 2, pkEXT4: 4}[op])
		case pkNEXT_BUFFER, pkREADONLY_BUFFER:
			return nil, m.errAt(off, "refused pickle opcode 0x%02x (protocol 5 out-of-band buffer)", op)
		default:
			return nil, m.errAt(off, "unknown pickle opcode 0x%02x", op)
		}
		if push {
			if err := m.push(v, off); err != nil {
				return nil, err
			}
		}
	}
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// length reads the length prefix of a string/bytes opcode.
func (m *pklMachine) length(op byte, off int64) (uint64, error) {
	switch op {
	case pkSHORT_BINSTRING, pkSHORT_BINUNICODE, pkSHORT_BINBYTES:
		c, err := m.readByte()
		return uint64(c), err
	case pkBINSTRING:
		b, err := m.fixed(4)
		if err != nil {
			return 0, err
		}
		n := int32(binary.LittleEndian.Uint32(b))
		if n < 0 {
			return 0, m.errAt(off, "pickle BINSTRING with negative length %d", n)
		}
		return uint64(n), nil
	case pkBINUNICODE, pkBINBYTES:
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

func (m *pklMachine) memoIndex(op byte, off int64) (int64, error) {
	switch op {
	case pkGET, pkPUT:
		s, err := m.line()
		if err != nil {
			return 0, err
		}
		k, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || k < 0 {
			return 0, m.errAt(off, "pickle memo index %q is not a non-negative integer", pklClip(s))
		}
		return k, nil
	case pkBINGET, pkBINPUT:
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

func (m *pklMachine) parseInt(s string, off int64) (any, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if len(s) > 0 && len(s) <= 4*pklMaxLong {
		if b, ok := new(big.Int).SetString(s, 10); ok {
			return b, nil
		}
	}
	return nil, m.errAt(off, "pickle integer %q is not a decimal number", pklClip(s))
}

func (m *pklMachine) global(mod, name string, off int64) (any, error) {
	if bad, why := pklCheckGlobal(mod, name); bad {
		return nil, m.errAt(off, "refused global %s.%s%s", pklClip(mod), pklClip(name), why)
	}
	return m.env.global(pklNormModule(mod), name, off)
}

// pklDecodeLong decodes a little-endian two's complement integer.
func pklDecodeLong(b []byte) any {
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

// pklPy2Str turns a Python 2 str (bytes) into a string: kept as is when
// it is valid UTF-8 (what torch.load's encoding="utf-8" does), else
// decoded as Latin-1.
func pklPy2Str(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// pklUnquote decodes the argument of a protocol-0 STRING opcode: a Python
// string literal in single or double quotes with backslash escapes.
func pklUnquote(s string) ([]byte, bool) {
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

// pklRawUnicodeEscape decodes Python's raw-unicode-escape (protocol 0
// UNICODE): \uXXXX and \UXXXXXXXX are escapes, every other byte is a
// Latin-1 code point.
func pklRawUnicodeEscape(s string) string {
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

// pklBuild applies BUILD's state to obj. Values that Python would call
// __setstate__ on are only recorded; values with no state are left alone.
func pklBuild(obj, state any) {
	switch o := obj.(type) {
	case *pklObject:
		if old, ok := o.state.(*pklDict); ok {
			if nd, ok := state.(*pklDict); ok {
				for i := range nd.keys {
					old.set(nd.keys[i], nd.vals[i])
				}
				return
			}
		}
		o.state = state
	case *pklDict:
		o.attrs = state
	case interface{ setState(any) }:
		o.setState(state)
	}
}

// pklNormModule maps Python 2 module names to their Python 3 names.
func pklNormModule(mod string) string {
	switch mod {
	case "__builtin__", "exceptions":
		return "builtins"
	case "copy_reg":
		return "copyreg"
	case "cPickle":
		return "pickle"
	}
	return mod
}

// Modules a data file has no business naming: anything in them (or their
// submodules) refuses the file.
var pklDangerousModules = map[string]bool{
	"os": true, "posix": true, "nt": true, "posixpath": true, "ntpath": true,
	"subprocess": true, "_posixsubprocess": true, "sys": true, "shutil": true,
	"importlib": true, "imp": true, "pickle": true, "_pickle": true, "cPickle": true,
	"pickletools": true, "copyreg": true, "copy_reg": true, "marshal": true,
	"webbrowser": true, "socket": true, "_socket": true, "pty": true, "runpy": true,
	"code": true, "codeop": true, "ctypes": true, "_ctypes": true, "cffi": true,
	"multiprocessing": true, "signal": true, "pdb": true, "bdb": true, "timeit": true,
	"commands": true, "popen2": true, "platform": true, "types": true,
	"functools": true, "operator": true, "_operator": true, "io": true, "_io": true,
	"tempfile": true, "glob": true, "pathlib": true, "urllib": true, "urllib2": true,
	"http": true, "httplib": true, "ftplib": true, "smtplib": true, "telnetlib": true,
	"asyncio": true, "threading": true, "_thread": true, "thread": true, "gc": true,
	"inspect": true, "site": true, "zipimport": true, "pkgutil": true,
	"distutils": true, "setuptools": true, "pip": true, "dill": true, "cloudpickle": true,
	"joblib": true, "shelve": true, "dbm": true, "sqlite3": true, "requests": true,
	"builtins.__import__": true, "torch.hub": true, "numpy.f2py": true,
	"numpy.distutils": true, "numpy.testing": true, "_winapi": true, "winreg": true,
	"msvcrt": true, "resource": true, "fcntl": true, "mmap": true, "select": true,
	"selectors": true, "ssl": true, "xmlrpc": true, "tarfile": true, "zipfile": true,
	"linecache": true, "trace": true, "traceback": true, "sysconfig": true,
	"venv": true, "ensurepip": true, "idlelib": true, "tkinter": true, "turtle": true,
}

// Dangerous names in otherwise harmless modules.
var pklDangerousNames = map[string]bool{
	"torch.load": true, "torch.save": true, "torch.jit.load": true,
	"torch.serialization.load": true, "numpy.load": true, "numpy.loadtxt": true,
	"numpy.fromfile": true, "numpy.save": true, "numpy.lib.npyio.load": true,
}

// Plain data classes in otherwise refused modules (paths and namespaces
// in training configs).
var pklSafeInRefusedModules = map[string]bool{
	"types.SimpleNamespace": true, "pathlib.Path": true, "pathlib.PosixPath": true,
	"pathlib.WindowsPath": true, "pathlib.PurePath": true, "pathlib.PurePosixPath": true,
	"pathlib.PureWindowsPath": true,
}

// The builtins a data file may name; every other builtin is refused.
var pklSafeBuiltins = map[string]bool{
	"set": true, "frozenset": true, "tuple": true, "list": true, "dict": true,
	"object": true, "complex": true, "bytearray": true, "bytes": true, "str": true,
	"unicode": true, "int": true, "long": true, "float": true, "bool": true,
	"slice": true, "range": true, "xrange": true, "NoneType": true, "Ellipsis": true,
	"NotImplemented": true,
}

// pklCheckGlobal reports whether module.name must refuse the file, and
// why (a suffix for the message, possibly empty).
func pklCheckGlobal(mod, name string) (bool, string) {
	if mod == "" || name == "" || strings.ContainsAny(mod+name, " \t\r\n\x00") {
		return true, ": malformed name"
	}
	for _, c := range strings.Split(name, ".") {
		if len(c) > 4 && strings.HasPrefix(c, "__") && strings.HasSuffix(c, "__") {
			return true, ": it reaches a dunder attribute"
		}
	}
	nm := pklNormModule(mod)
	if nm == "builtins" {
		if pklSafeBuiltins[name] {
			return false, ""
		}
		return true, ": a builtin that is not a plain data type"
	}
	if pklSafeInRefusedModules[nm+"."+name] {
		return false, ""
	}
	for m := nm; ; {
		if pklDangerousModules[m] {
			return true, ""
		}
		i := strings.LastIndexByte(m, '.')
		if i < 0 {
			break
		}
		m = m[:i]
	}
	return pklDangerousNames[nm+"."+name], ""
}

// pklClip shortens s for an error message.
func pklClip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// pklTypeName names v's Python type for messages.
func pklTypeName(v any) string {
	switch o := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case pklBytes:
		return "bytes"
	case pklTuple:
		return "tuple"
	case *pklList:
		return "list"
	case *pklDict:
		return "dict"
	case *pklSet:
		return "set"
	case pklComplex:
		return "complex"
	case *pklGlobal:
		return o.module + "." + o.name
	case *pklObject:
		return pklRepr(o.class, 60) + " object"
	}
	return fmt.Sprintf("%T", v)
}

// pklRepr is a bounded, Python-like repr of v (for dict keys that are not
// str or int, and for opaque values in metadata).
func pklRepr(v any, max int) string {
	var b strings.Builder
	pklReprTo(&b, v, max, 0)
	s := b.String()
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

func pklReprTo(b *strings.Builder, v any, max, depth int) {
	if b.Len() > max || depth > 16 {
		b.WriteString("...")
		return
	}
	seq := func(open, close string, items []any) {
		b.WriteString(open)
		for i, x := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			if b.Len() > max {
				b.WriteString("...")
				break
			}
			pklReprTo(b, x, max, depth+1)
		}
		if open == "(" && len(items) == 1 {
			b.WriteString(",")
		}
		b.WriteString(close)
	}
	switch o := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if o {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(o, 10))
	case *big.Int:
		b.WriteString(o.String())
	case float64:
		b.WriteString(pklFloatRepr(o))
	case string:
		b.WriteString(strconv.Quote(o))
	case pklBytes:
		n := len(o)
		if n > 32 {
			n = 32
		}
		b.WriteString("b" + strconv.Quote(string(o[:n])))
		if len(o) > n {
			fmt.Fprintf(b, "...(%d bytes)", len(o))
		}
	case pklComplex:
		fmt.Fprintf(b, "(%s%+gj)", pklFloatRepr(o.re), o.im)
	case pklTuple:
		seq("(", ")", o)
	case *pklList:
		seq("[", "]", o.items)
	case *pklSet:
		seq("{", "}", o.items)
	case *pklDict:
		b.WriteString("{")
		for i := range o.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if b.Len() > max {
				b.WriteString("...")
				break
			}
			pklReprTo(b, o.keys[i], max, depth+1)
			b.WriteString(": ")
			pklReprTo(b, o.vals[i], max, depth+1)
		}
		b.WriteString("}")
	case *pklGlobal:
		b.WriteString(o.module + "." + o.name)
	case *pklObject:
		pklReprTo(b, o.class, max, depth+1)
		seq("(", ")", o.args)
	case *pklRefused:
		b.WriteString(o.what)
	case fmt.Stringer:
		b.WriteString(o.String())
	default:
		fmt.Fprintf(b, "<%T>", v)
	}
}

func pklFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// pklFloat64 returns v as a float64 when it is a Python int or float.
func pklFloat64(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// pklInt returns v as an int64 when it is a Python int (or bool).
func pklInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// pklItems returns the elements of a tuple or list.
func pklItems(v any) ([]any, bool) {
	switch x := v.(type) {
	case pklTuple:
		return x, true
	case *pklList:
		return x.items, true
	}
	return nil, false
}

// pklGenericCall interprets the calls that plain Python data needs
// (containers, complex, bytes, collections, numpy scalars) and returns an
// opaque *pklObject for anything else. Nothing is ever called.
func pklGenericCall(fn any, args pklTuple) any {
	g, ok := fn.(*pklGlobal)
	if !ok {
		return &pklObject{class: fn, args: args}
	}
	arg0 := func() any {
		if len(args) > 0 {
			return args[0]
		}
		return nil
	}
	switch g.module + "." + g.name {
	case "collections.OrderedDict", "builtins.dict", "collections.defaultdict", "collections.Counter":
		d := newPklDict()
		if g.name == "defaultdict" {
			return d // the one argument is the default factory
		}
		switch a := arg0().(type) {
		case *pklDict:
			for i := range a.keys {
				d.set(a.keys[i], a.vals[i])
			}
		case pklTuple, *pklList:
			items, _ := pklItems(a)
			for _, it := range items {
				kv, ok := pklItems(it)
				if !ok || len(kv) != 2 {
					return &pklObject{class: fn, args: args}
				}
				d.set(kv[0], kv[1])
			}
		}
		return d
	case "builtins.list":
		items, _ := pklItems(arg0())
		return &pklList{items: append([]any(nil), items...)}
	case "builtins.tuple":
		items, _ := pklItems(arg0())
		return append(pklTuple{}, items...)
	case "builtins.set", "builtins.frozenset":
		var items []any
		switch a := arg0().(type) {
		case *pklSet:
			items = a.items
		default:
			items, _ = pklItems(a)
		}
		return &pklSet{items: append([]any(nil), items...), frozen: g.name == "frozenset"}
	case "builtins.complex":
		re, ok1 := pklFloat64(arg0())
		im := 0.0
		ok2 := true
		if len(args) > 1 {
			im, ok2 = pklFloat64(args[1])
		}
		if ok1 && ok2 && len(args) <= 2 {
			return pklComplex{re, im}
		}
	case "builtins.bytearray", "builtins.bytes":
		switch a := arg0().(type) {
		case pklBytes:
			return a
		case nil:
			if len(args) == 0 {
				return pklBytes{}
			}
		case string:
			return pklLatin1(a)
		}
	case "_codecs.encode":
		// How protocol 2 writes Python 3 bytes: _codecs.encode(str, "latin1").
		if s, ok := arg0().(string); ok && len(args) == 2 {
			if enc, _ := args[1].(string); enc == "latin1" || enc == "latin-1" {
				return pklLatin1(s)
			}
		}
	case "numpy.dtype":
		if s, ok := arg0().(string); ok {
			return &pklNumpyDType{descr: s, order: '='}
		}
	case "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar":
		if len(args) == 2 {
			if dt, ok := args[0].(*pklNumpyDType); ok {
				var raw []byte
				switch b := args[1].(type) {
				case pklBytes:
					raw = b
				case string: // protocol < 3 from Python 2
					raw = pklLatin1(b)
				}
				if v, ok := dt.decode(raw); ok {
					return v
				}
			}
		}
	}
	return &pklObject{class: fn, args: args}
}

// pklLatin1 encodes s (all runes < 256) as Latin-1 bytes.
func pklLatin1(s string) pklBytes {
	b := make(pklBytes, 0, len(s))
	for _, r := range s {
		b = append(b, byte(r))
	}
	return b
}

// pklNumpyDType is numpy.dtype(descr), with the byte order its BUILD state
// sets.
type pklNumpyDType struct {
	descr string
	order byte
}

func (d *pklNumpyDType) String() string { return "dtype('" + d.descr + "')" }

func (d *pklNumpyDType) setState(state any) {
	// (version, byteorder, subdescr, names, fields, elsize, alignment, flags)
	if t, ok := state.(pklTuple); ok && len(t) > 1 {
		if s, ok := t[1].(string); ok && len(s) == 1 {
			d.order = s[0]
		}
	}
}

// decode reads one numpy scalar of this dtype from raw.
func (d *pklNumpyDType) decode(raw []byte) (any, bool) {
	if len(d.descr) < 2 {
		return nil, false
	}
	kind := d.descr[0]
	size, err := strconv.Atoi(d.descr[1:])
	if err != nil || size != len(raw) {
		return nil, false
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if d.order == '>' {
		bo = binary.BigEndian
	}
	switch {
	case kind == 'f' && size == 2:
		return pklHalf(bo.Uint16(raw)), true
	case kind == 'f' && size == 4:
		return float64(math.Float32frombits(bo.Uint32(raw))), true
	case kind == 'f' && size == 8:
		return math.Float64frombits(bo.Uint64(raw)), true
	case kind == 'b' && size == 1:
		return raw[0] != 0, true
	case (kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8):
		var u uint64
		switch size {
		case 1:
			u = uint64(raw[0])
		case 2:
			u = uint64(bo.Uint16(raw))
		case 4:
			u = uint64(bo.Uint32(raw))
		case 8:
			u = bo.Uint64(raw)
		}
		if kind == 'i' {
			shift := uint(64 - 8*size)
			return int64(u<<shift) >> shift, true
		}
		if u > math.MaxInt64 {
			return new(big.Int).SetUint64(u), true
		}
		return int64(u), true
	}
	return nil, false
}

// pklHalf converts IEEE half-precision bits to float64.
func pklHalf(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	f := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(f, -24)
	case 31:
		if f == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1+f/1024, e-15)
}

// pklPlainEnv interprets plain Python data only: no persistent ids.
type pklPlainEnv struct{}

func (pklPlainEnv) global(module, name string, off int64) (any, error) {
	return &pklGlobal{module, name}, nil
}

func (pklPlainEnv) call(fn any, args pklTuple, off int64) (any, error) {
	return pklGenericCall(fn, args), nil
}

func (pklPlainEnv) newobj(cls any, args pklTuple, kwargs any, off int64) (any, error) {
	return pklNewObj(cls, args, kwargs), nil
}

func (pklPlainEnv) persistent(pid any, off int64) (any, error) {
	return &pklRefused{what: "persistent id " + pklRepr(pid, 60), off: -1}, nil
}

// pklNewObj interprets cls.__new__(cls, *args): the containers get their
// empty value (SETITEMS/APPENDS fill them), anything else is opaque.
func pklNewObj(cls any, args pklTuple, kwargs any) any {
	if g, ok := cls.(*pklGlobal); ok {
		switch g.module + "." + g.name {
		case "collections.OrderedDict", "builtins.dict", "collections.defaultdict", "collections.Counter":
			return newPklDict()
		case "builtins.list":
			return &pklList{}
		case "builtins.set":
			return &pklSet{}
		case "builtins.tuple", "builtins.frozenset", "builtins.complex":
			return pklGenericCall(cls, args)
		}
	}
	return &pklObject{class: cls, args: args, kwargs: kwargs}
}
