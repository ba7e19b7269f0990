package pickle

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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

// Claimer is an Env that claims globals CheckGlobal would refuse,
// because it recognises a fixed form of their use and never calls them
// (the Paddle reader's builtins.eval in ('data', {'data': array})):
// Global is asked for a claimed name instead of refusing the file, and
// the Env's Call must refuse any other use of the value it returns.
type Claimer interface {
	Claims(module, name string) bool
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
	memo  memo
	work  int64 // copy budget left (Charge)
	// cost is the bytes the stream costs in its file (limit, or less
	// for a compressed stream: SetCost); memoLeft the memo entries it
	// may still add (MaxMemo of cost).
	cost     int64
	memoLeft int64

	// Where str and bytes values lie in the stream, for every Run
	// (Span): bytes by their first byte, str by value.
	byteSpans map[*byte]Span
	strSpans  map[string]Span
}

// NewMachine returns a machine reading a stream of limit bytes from r,
// interpreting with env.
func NewMachine(r io.Reader, limit int64, env Env) *Machine {
	// The buffer is no larger than the stream: a small pickle (one per
	// item of a distributed checkpoint) does not cost 64 KiB.
	return &Machine{r: bufio.NewReaderSize(r, int(min(64<<10, max(limit, 16)))), limit: limit, env: env, work: MaxWork(limit),
		cost: limit, memoLeft: MaxMemo(limit), byteSpans: map[*byte]Span{}, strSpans: map[string]Span{}}
}

// SetCost sets the bytes the stream costs in its file, before the first
// Run: a compressed pickle of limit bytes that is cost bytes in the
// file gets the copy and memo budgets of cost bytes, so that a few KB of
// deflate cannot buy what megabytes of pickle would.
func (m *Machine) SetCost(cost int64) {
	m.cost, m.work, m.memoLeft = cost, MaxWork(cost), MaxMemo(cost)
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
		return m.Errorf(off, "pickle copies more values than its size allows (limit pickle.MaxWork: %d for %d bytes); shared references multiply", MaxWork(m.cost), m.cost)
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
	m.memo = memo{}
	for {
		off := m.pos
		op, err := m.readByte()
		if err != nil {
			return nil, err
		}
		if op == OpSTOP {
			if len(m.stack) == 0 {
				return nil, m.errAt(off, "pickle STOP with an empty stack")
			}
			return m.stack[len(m.stack)-1], nil
		}
		v, push, err := m.step(op, off)
		if err != nil {
			return nil, err
		}
		if push {
			if err := m.push(v, off); err != nil {
				return nil, err
			}
		}
	}
}

// step executes one opcode other than STOP, by group (run_*.go), and
// returns the value to push, if push.
func (m *Machine) step(op byte, off int64) (v any, push bool, err error) {
	if v, push, ok, err := m.runStack(op, off); ok {
		return v, push, err
	}
	if v, push, ok, err := m.runScalar(op, off); ok {
		return v, push, err
	}
	if v, push, ok, err := m.runContainer(op, off); ok {
		return v, push, err
	}
	if v, push, ok, err := m.runObject(op, off); ok {
		return v, push, err
	}
	return nil, false, m.errAt(off, "unknown pickle opcode 0x%02x", op)
}

// memo is a pickle's memo: keys 0, 1, 2, ... (MEMOIZE, and what
// pickle.dump writes with BINPUT) in blocks of memoBlock entries, 16
// bytes an entry and nothing more (a slice grown by append would hold
// up to twice that, and copy it); other keys in a map.
type memo struct {
	blocks [][]any
	n      int64 // dense entries
	sparse map[int64]any
}

// memoBlock is the entries of one block of the memo.
const memoBlock = 4096

func (mm *memo) len() int64 { return mm.n + int64(len(mm.sparse)) }

func (mm *memo) get(k int64) (any, bool) {
	if k >= 0 && k < mm.n {
		return mm.blocks[k/memoBlock][k%memoBlock], true
	}
	v, ok := mm.sparse[k]
	return v, ok
}

// push appends the next dense entry.
func (mm *memo) push(v any) {
	if mm.n%memoBlock == 0 {
		mm.blocks = append(mm.blocks, make([]any, 0, memoBlock))
	}
	b := &mm.blocks[len(mm.blocks)-1]
	*b = append(*b, v)
	mm.n++
}

// put sets entry k and reports whether it is a new entry.
func (mm *memo) put(k int64, v any) bool {
	if k >= 0 && k < mm.n {
		mm.blocks[k/memoBlock][k%memoBlock] = v
		return false
	}
	_, had := mm.sparse[k]
	if k != mm.n {
		if mm.sparse == nil {
			mm.sparse = map[int64]any{}
		}
		mm.sparse[k] = v
		return !had
	}
	delete(mm.sparse, k)
	mm.push(v)
	for { // keys that were sparse and now continue the dense run
		x, ok := mm.sparse[mm.n]
		if !ok {
			break
		}
		delete(mm.sparse, mm.n)
		mm.push(x)
	}
	return !had
}
