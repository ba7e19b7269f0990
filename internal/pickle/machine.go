package pickle

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Env interprets what a pickle names and calls. The machine hands it
// every global (after CheckGlobal), call, __new__, BUILD and persistent
// id; PlainEnv interprets plain Python data and nothing else, a client
// (the PyTorch reader) wraps it to add its own types. An Env never runs
// anything: it returns values that describe what Python would build.
// Errors it returns should be m.Errorf(off, ...) so that they carry the
// offset.
type Env interface {
	// Global resolves module.name (already checked by CheckGlobal, module
	// normalised by NormModule).
	Global(m *Machine, module, name string, off int64) (any, error)
	// Call interprets fn(*args) (REDUCE, OBJ, INST).
	Call(m *Machine, fn any, args Tuple, off int64) (any, error)
	// NewObj interprets cls.__new__(cls, *args, **kwargs) (NEWOBJ[_EX]).
	NewObj(m *Machine, cls any, args Tuple, kwargs any, off int64) (any, error)
	// Build applies BUILD's state to obj.
	Build(m *Machine, obj, state any, off int64) error
	// Persistent resolves a persistent id (PERSID, BINPERSID).
	Persistent(m *Machine, pid any, off int64) (any, error)
}

// Error is a problem in a pickle at stream offset Off (bytes from the
// start of the stream the Machine reads). Err is the read error behind
// it, if any. Clients turn it into their own error with their file name
// and the stream's place in the file.
type Error struct {
	Off int64
	Msg string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("%s (at byte %d of the pickle)", e.Msg, e.Off) }

func (e *Error) Unwrap() error { return e.Err }

// Machine runs one or more pickles from a stream, one Run each.
type Machine struct {
	r     *bufio.Reader
	pos   int64 // bytes consumed from r
	limit int64 // bytes r has in all
	env   Env

	stack []any
	marks []int // stack lengths at each MARK
	memo  map[int64]any
	work  int64 // copy budget left (Charge)

	// Where str and bytes values lie in the stream, for every Run
	// (Span): bytes by their first byte, str by value.
	byteSpans map[*byte]Span
	strSpans  map[string]Span
}

// NewMachine returns a machine reading a stream of limit bytes from r,
// interpreting with env.
func NewMachine(r io.Reader, limit int64, env Env) *Machine {
	return &Machine{r: bufio.NewReaderSize(r, 64<<10), limit: limit, env: env, work: MaxWork(limit),
		byteSpans: map[*byte]Span{}, strSpans: map[string]Span{}}
}

// Pos is the stream offset of the next byte the machine reads.
func (m *Machine) Pos() int64 { return m.pos }

// SetEnv sets the Env for the next Run (a legacy torch file has pickles
// of plain data around the one that names storages).
func (m *Machine) SetEnv(env Env) { m.env = env }

// Errorf returns an *Error at stream offset off.
func (m *Machine) Errorf(off int64, format string, args ...any) error {
	return &Error{Off: off, Msg: fmt.Sprintf(format, args...)}
}

// Charge takes n values from the machine's copy budget (MaxWork of the
// stream's size): an Env that copies a container it was handed (list(x),
// dict(x), BUILD merging a state) charges the copy, so that a few bytes
// naming a large shared container many times cannot cost time or memory
// the stream does not have.
func (m *Machine) Charge(n int, off int64) error {
	if int64(n) > m.work {
		return m.Errorf(off, "pickle copies more values than its size allows (limit pickle.MaxWork: %d for %d bytes); shared references multiply", MaxWork(m.limit), m.limit)
	}
	m.work -= int64(n)
	return nil
}

func (m *Machine) errAt(off int64, format string, args ...any) error {
	return m.Errorf(off, format, args...)
}

func (m *Machine) readByte() (byte, error) {
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

func (m *Machine) readErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return m.errAt(m.pos, "pickle is truncated")
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	return &Error{Off: m.pos, Msg: "cannot read pickle: " + err.Error(), Err: err}
}

// next reads n bytes, after checking that the stream has them.
func (m *Machine) next(n uint64, what string) ([]byte, error) {
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

// skip passes over n bytes without keeping them, and reports what they
// are as the UTF-8 of a Latin-1 str (all ASCII, or not Latin-1 where).
func (m *Machine) skip(n uint64) (Latin1Scan, error) {
	if n > uint64(m.limit-m.pos) {
		return Latin1Scan{}, m.errAt(m.pos, "pickle string of %d bytes runs past the end of the data (%d bytes left)", n, m.limit-m.pos)
	}
	w := Latin1Scan{}
	if _, err := io.CopyN(&w, m.r, int64(n)); err != nil {
		return Latin1Scan{}, m.readErr(err)
	}
	m.pos += int64(n)
	return w, nil
}

func (m *Machine) fixed(n int) ([]byte, error) { return m.next(uint64(n), "argument") }

// line reads a text argument up to '\n' (not included).
func (m *Machine) line() (string, error) {
	var b []byte
	for {
		c, err := m.readByte()
		if err != nil {
			return "", err
		}
		if c == '\n' {
			return string(b), nil
		}
		if len(b) >= MaxLine {
			return "", m.errAt(m.pos, "pickle text argument longer than %d bytes", MaxLine)
		}
		b = append(b, c)
	}
}

func (m *Machine) push(v any, off int64) error {
	if len(m.stack) >= MaxStack {
		return m.errAt(off, "pickle stack holds more than %d values", MaxStack)
	}
	m.stack = append(m.stack, v)
	return nil
}

func (m *Machine) frame() int {
	if len(m.marks) == 0 {
		return 0
	}
	return m.marks[len(m.marks)-1]
}

func (m *Machine) pop(off int64) (any, error) {
	if len(m.stack) <= m.frame() {
		return nil, m.errAt(off, "pickle stack underflow")
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

func (m *Machine) top(off int64) (any, error) {
	if len(m.stack) <= m.frame() {
		return nil, m.errAt(off, "pickle stack underflow")
	}
	return m.stack[len(m.stack)-1], nil
}

// popMark returns the values pushed since the last MARK, and drops the mark.
func (m *Machine) popMark(off int64) ([]any, error) {
	if len(m.marks) == 0 {
		return nil, m.errAt(off, "pickle has no MARK to pop to")
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := append([]any(nil), m.stack[k:]...)
	m.stack = m.stack[:k]
	return items, nil
}

// Run executes one pickle up to its STOP and returns its value. The
// machine can run the next pickle of the same stream afterwards.
func (m *Machine) Run() (any, error) {
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
		case OpSTOP:
			if len(m.stack) == 0 {
				return nil, m.errAt(off, "pickle STOP with an empty stack")
			}
			return m.stack[len(m.stack)-1], nil
		case OpMARK:
			if len(m.marks) >= MaxNesting {
				return nil, m.errAt(off, "pickle nests MARKs deeper than %d", MaxNesting)
			}
			m.marks = append(m.marks, len(m.stack))
			push = false
		case OpPOP:
			push = false
			if len(m.stack) > m.frame() {
				m.stack = m.stack[:len(m.stack)-1]
			} else if _, err := m.popMark(off); err != nil {
				return nil, err
			}
		case OpPOP_MARK:
			push = false
			if _, err := m.popMark(off); err != nil {
				return nil, err
			}
		case OpDUP:
			if v, err = m.top(off); err != nil {
				return nil, err
			}
		case OpPROTO:
			c, err := m.readByte()
			if err != nil {
				return nil, err
			}
			if c > 5 {
				return nil, m.errAt(off, "pickle protocol %d is newer than 5", c)
			}
			push = false
		case OpFRAME:
			if _, err := m.fixed(8); err != nil {
				return nil, err
			}
			push = false
		case OpNONE:
			v = nil
		case OpNEWTRUE:
			v = true
		case OpNEWFALSE:
			v = false
		case OpINT:
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
		case OpLONG:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			if v, err = m.parseInt(strings.TrimSuffix(s, "L"), off); err != nil {
				return nil, err
			}
		case OpBININT:
			b, err := m.fixed(4)
			if err != nil {
				return nil, err
			}
			v = int64(int32(binary.LittleEndian.Uint32(b)))
		case OpBININT1:
			c, err := m.readByte()
			if err != nil {
				return nil, err
			}
			v = int64(c)
		case OpBININT2:
			b, err := m.fixed(2)
			if err != nil {
				return nil, err
			}
			v = int64(binary.LittleEndian.Uint16(b))
		case OpLONG1, OpLONG4:
			var n int64
			if op == OpLONG1 {
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
			if n < 0 || n > MaxLong {
				return nil, m.errAt(off, "pickle integer of %d bytes (want 0..%d)", n, MaxLong)
			}
			b, err := m.next(uint64(n), "integer")
			if err != nil {
				return nil, err
			}
			v = DecodeLong(b)
		case OpFLOAT:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			f, perr := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if perr != nil && !isRangeErr(perr) {
				return nil, m.errAt(off, "pickle FLOAT %q is not a number", Clip(s))
			}
			v = f
		case OpBINFLOAT:
			b, err := m.fixed(8)
			if err != nil {
				return nil, err
			}
			v = math.Float64frombits(binary.BigEndian.Uint64(b))
		case OpSTRING:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			b, ok := unquote(s)
			if !ok {
				return nil, m.errAt(off, "pickle STRING %q is not a quoted string", Clip(s))
			}
			v = Py2Str(b)
		case OpBINSTRING, OpSHORT_BINSTRING, OpBINUNICODE, OpSHORT_BINUNICODE, OpBINUNICODE8,
			OpBINBYTES, OpSHORT_BINBYTES, OpBINBYTES8, OpBYTEARRAY8:
			n, err := m.length(op, off)
			if err != nil {
				return nil, err
			}
			isBytes := op == OpBINBYTES || op == OpSHORT_BINBYTES || op == OpBINBYTES8 || op == OpBYTEARRAY8
			isUnicode := op == OpBINUNICODE || op == OpSHORT_BINUNICODE || op == OpBINUNICODE8
			at := m.pos
			if n > MaxValue {
				sc, err := m.skip(n)
				if err != nil {
					return nil, err
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
				return nil, err
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
				return nil, err
			}
			v = rawUnicodeEscape(s)
		case OpEMPTY_TUPLE:
			v = Tuple{}
		case OpTUPLE1, OpTUPLE2, OpTUPLE3:
			n := int(op-OpTUPLE1) + 1
			if len(m.stack)-m.frame() < n {
				return nil, m.errAt(off, "pickle stack underflow")
			}
			t := append(Tuple(nil), m.stack[len(m.stack)-n:]...)
			m.stack = m.stack[:len(m.stack)-n]
			v = t
		case OpTUPLE:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			v = Tuple(items)
		case OpEMPTY_LIST:
			v = &List{}
		case OpLIST:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			v = &List{Items: items}
		case OpEMPTY_DICT:
			v = NewDict()
		case OpDICT:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			if len(items)%2 != 0 {
				return nil, m.errAt(off, "pickle DICT with an odd number of items")
			}
			d := NewDict()
			for i := 0; i < len(items); i += 2 {
				d.Set(items[i], items[i+1])
			}
			v = d
		case OpEMPTY_SET:
			v = &Set{}
		case OpFROZENSET:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			v = &Set{Items: items, Frozen: true}
		case OpAPPEND, OpAPPENDS:
			push = false
			var items []any
			if op == OpAPPEND {
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
			case *List:
				l.Items = append(l.Items, items...)
			case *Object:
				l.List = append(l.List, items...)
			default:
				return nil, m.errAt(off, "pickle APPEND to a %s", TypeName(t))
			}
		case OpSETITEM, OpSETITEMS:
			push = false
			var items []any
			if op == OpSETITEM {
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
			var d *Dict
			switch o := t.(type) {
			case *Dict:
				d = o
			case *Object:
				if o.Items == nil {
					o.Items = NewDict()
				}
				d = o.Items
			default:
				return nil, m.errAt(off, "pickle SETITEM on a %s", TypeName(t))
			}
			for i := 0; i < len(items); i += 2 {
				d.Set(items[i], items[i+1])
			}
		case OpADDITEMS:
			push = false
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			t, err := m.top(off)
			if err != nil {
				return nil, err
			}
			s, ok := t.(*Set)
			if !ok {
				return nil, m.errAt(off, "pickle ADDITEMS on a %s", TypeName(t))
			}
			s.Items = append(s.Items, items...)
		case OpGET, OpBINGET, OpLONG_BINGET:
			k, err := m.memoIndex(op, off)
			if err != nil {
				return nil, err
			}
			x, ok := m.memo[k]
			if !ok {
				return nil, m.errAt(off, "pickle memo has no entry %d", k)
			}
			v = x
		case OpPUT, OpBINPUT, OpLONG_BINPUT, OpMEMOIZE:
			push = false
			var k int64
			if op == OpMEMOIZE {
				k = int64(len(m.memo))
			} else if k, err = m.memoIndex(op, off); err != nil {
				return nil, err
			}
			t, err := m.top(off)
			if err != nil {
				return nil, err
			}
			m.memo[k] = t
		case OpGLOBAL:
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
		case OpSTACK_GLOBAL:
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
				return nil, m.errAt(off, "pickle STACK_GLOBAL wants two strings, got %s and %s", TypeName(mod), TypeName(name))
			}
			if v, err = m.global(ms, ns, off); err != nil {
				return nil, err
			}
		case OpREDUCE:
			args, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			fn, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			t, ok := args.(Tuple)
			if !ok {
				return nil, m.errAt(off, "pickle REDUCE wants an argument tuple, got %s", TypeName(args))
			}
			if v, err = m.env.Call(m, fn, t, off); err != nil {
				return nil, err
			}
		case OpNEWOBJ, OpNEWOBJ_EX:
			var kwargs any
			if op == OpNEWOBJ_EX {
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
			t, ok := args.(Tuple)
			if !ok {
				return nil, m.errAt(off, "pickle NEWOBJ wants an argument tuple, got %s", TypeName(args))
			}
			if v, err = m.env.NewObj(m, cls, t, kwargs, off); err != nil {
				return nil, err
			}
		case OpOBJ:
			items, err := m.popMark(off)
			if err != nil {
				return nil, err
			}
			if len(items) == 0 {
				return nil, m.errAt(off, "pickle OBJ without a class")
			}
			if v, err = m.env.Call(m, items[0], Tuple(items[1:]), off); err != nil {
				return nil, err
			}
		case OpINST:
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
			if v, err = m.env.Call(m, cls, Tuple(items), off); err != nil {
				return nil, err
			}
		case OpBUILD:
			push = false
			state, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			t, err := m.top(off)
			if err != nil {
				return nil, err
			}
			if err := m.env.Build(m, t, state, off); err != nil {
				return nil, err
			}
		case OpPERSID:
			s, err := m.line()
			if err != nil {
				return nil, err
			}
			if v, err = m.env.Persistent(m, s, off); err != nil {
				return nil, err
			}
		case OpBINPERSID:
			pid, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			if v, err = m.env.Persistent(m, pid, off); err != nil {
				return nil, err
			}
		case OpEXT1, OpEXT2, OpEXT4:
			return nil, m.errAt(off, "refused pickle opcode EXT%d (copyreg extension registry)", map[byte]int{OpEXT1: 1, OpEXT2: 2, OpEXT4: 4}[op])
		case OpNEXT_BUFFER, OpREADONLY_BUFFER:
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
