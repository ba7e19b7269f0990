package pickle

// runObject executes the opcodes that reach the Env: globals, REDUCE, NEWOBJ, OBJ, INST, BUILD, persistent ids, and the refused EXT and out-of-band buffer opcodes.
// ok is false when op is not one of them; push is whether v is pushed.
func (m *Machine) runObject(op byte, off int64) (v any, push, ok bool, err error) {
	push, ok = true, true
	switch op {
	case OpGLOBAL:
		mod, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		name, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		if v, err = m.global(mod, name, off); err != nil {
			return nil, false, true, err
		}
	case OpSTACK_GLOBAL:
		name, err := m.pop(off)
		if err != nil {
			return nil, false, true, err
		}
		mod, err := m.pop(off)
		if err != nil {
			return nil, false, true, err
		}
		ms, ok1 := mod.(string)
		ns, ok2 := name.(string)
		if !ok1 || !ok2 {
			return nil, false, true, m.errAt(off, "pickle STACK_GLOBAL wants two strings, got %s and %s", TypeName(mod), TypeName(name))
		}
		if v, err = m.global(ms, ns, off); err != nil {
			return nil, false, true, err
		}
	case OpREDUCE:
		args, err := m.pop(off)
		if err != nil {
			return nil, false, true, err
		}
		fn, err := m.pop(off)
		if err != nil {
			return nil, false, true, err
		}
		t, ok := args.(Tuple)
		if !ok {
			return nil, false, true, m.errAt(off, "pickle REDUCE wants an argument tuple, got %s", TypeName(args))
		}
		if v, err = m.env.Call(m, fn, t, off); err != nil {
			return nil, false, true, err
		}
	case OpNEWOBJ, OpNEWOBJ_EX:
		var kwargs any
		if op == OpNEWOBJ_EX {
			if kwargs, err = m.pop(off); err != nil {
				return nil, false, true, err
			}
		}
		args, err := m.pop(off)
		if err != nil {
			return nil, false, true, err
		}
		cls, err := m.pop(off)
		if err != nil {
			return nil, false, true, err
		}
		t, ok := args.(Tuple)
		if !ok {
			return nil, false, true, m.errAt(off, "pickle NEWOBJ wants an argument tuple, got %s", TypeName(args))
		}
		if v, err = m.env.NewObj(m, cls, t, kwargs, off); err != nil {
			return nil, false, true, err
		}
	case OpOBJ:
		items, err := m.popMark(off)
		if err != nil {
			return nil, false, true, err
		}
		if len(items) == 0 {
			return nil, false, true, m.errAt(off, "pickle OBJ without a class")
		}
		if v, err = m.env.Call(m, items[0], Tuple(items[1:]), off); err != nil {
			return nil, false, true, err
		}
	case OpINST:
		mod, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		name, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		cls, err := m.global(mod, name, off)
		if err != nil {
			return nil, false, true, err
		}
		items, err := m.popMark(off)
		if err != nil {
			return nil, false, true, err
		}
		if v, err = m.env.Call(m, cls, Tuple(items), off); err != nil {
			return nil, false, true, err
		}
	case OpBUILD:
		push = false
		state, err := m.pop(off)
		if err != nil {
			return nil, false, true, err
		}
		t, err := m.top(off)
		if err != nil {
			return nil, false, true, err
		}
		if err := m.env.Build(m, t, state, off); err != nil {
			return nil, false, true, err
		}
	case OpPERSID:
		s, err := m.line()
		if err != nil {
			return nil, false, true, err
		}
		if v, err = m.env.Persistent(m, s, off); err != nil {
			return nil, false, true, err
		}
	case OpBINPERSID:
		pid, err := m.pop(off)
		if err != nil {
			return nil, false, true, err
		}
		if v, err = m.env.Persistent(m, pid, off); err != nil {
			return nil, false, true, err
		}
	case OpEXT1, OpEXT2, OpEXT4:
		return nil, false, true, m.errAt(off, "refused pickle opcode EXT%d (copyreg extension registry)", map[byte]int{OpEXT1: 1, OpEXT2: 2, OpEXT4: 4}[op])
	case OpNEXT_BUFFER, OpREADONLY_BUFFER:
		return nil, false, true, m.errAt(off, "refused pickle opcode 0x%02x (protocol 5 out-of-band buffer)", op)
	default:
		return nil, false, false, nil
	}
	return v, push, true, nil
}
