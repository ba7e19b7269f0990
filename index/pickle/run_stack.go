package pickle

// runStack executes the stack, mark and memo opcodes: MARK, POP, POP_MARK, DUP, PROTO, FRAME, GET and PUT.
// ok is false when op is not one of them; push is whether v is pushed.
func (m *Machine) runStack(op byte, off int64) (v any, push, ok bool, err error) {
	push, ok = true, true
	switch op {
	case OpMARK:
		if len(m.marks) >= MaxNesting {
			return nil, false, true, m.errAt(off, "pickle nests MARKs deeper than %d", MaxNesting)
		}
		m.marks = append(m.marks, len(m.stack))
		push = false
	case OpPOP:
		push = false
		if len(m.stack) > m.frame() {
			m.stack = m.stack[:len(m.stack)-1]
		} else if _, err := m.popMark(off); err != nil {
			return nil, false, true, err
		}
	case OpPOP_MARK:
		push = false
		if _, err := m.popMark(off); err != nil {
			return nil, false, true, err
		}
	case OpDUP:
		if v, err = m.top(off); err != nil {
			return nil, false, true, err
		}
	case OpPROTO:
		c, err := m.readByte()
		if err != nil {
			return nil, false, true, err
		}
		if c > 5 {
			return nil, false, true, m.errAt(off, "pickle protocol %d is newer than 5", c)
		}
		push = false
	case OpFRAME:
		if _, err := m.fixed(8); err != nil {
			return nil, false, true, err
		}
		push = false
	case OpGET, OpBINGET, OpLONG_BINGET:
		k, err := m.memoIndex(op, off)
		if err != nil {
			return nil, false, true, err
		}
		x, ok := m.memo.get(k)
		if !ok {
			return nil, false, true, m.errAt(off, "pickle memo has no entry %d", k)
		}
		v = x
	case OpPUT, OpBINPUT, OpLONG_BINPUT, OpMEMOIZE:
		push = false
		var k int64
		if op == OpMEMOIZE {
			k = m.memo.len()
		} else if k, err = m.memoIndex(op, off); err != nil {
			return nil, false, true, err
		}
		t, err := m.top(off)
		if err != nil {
			return nil, false, true, err
		}
		if m.memoLeft <= 0 {
			if _, ok := m.memo.get(k); !ok {
				return nil, false, true, m.errAt(off, "pickle memoizes more values than its size allows (limit pickle.MaxMemo: %d for %d bytes)", MaxMemo(m.cost), m.cost)
			}
		}
		if m.memo.put(k, t) {
			m.memoLeft--
		}
	default:
		return nil, false, false, nil
	}
	return v, push, true, nil
}
