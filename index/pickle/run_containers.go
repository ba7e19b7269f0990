package pickle

// runContainer executes the opcodes that build or fill containers: tuples, lists, dicts, sets, APPEND(S), SETITEM(S), ADDITEMS.
// ok is false when op is not one of them; push is whether v is pushed.
func (m *Machine) runContainer(op byte, off int64) (v any, push, ok bool, err error) {
	push, ok = true, true
	switch op {
	case OpEMPTY_TUPLE:
		v = Tuple{}
	case OpTUPLE1, OpTUPLE2, OpTUPLE3:
		n := int(op-OpTUPLE1) + 1
		if len(m.stack)-m.frame() < n {
			return nil, false, true, m.errAt(off, "pickle stack underflow")
		}
		t := append(Tuple(nil), m.stack[len(m.stack)-n:]...)
		m.stack = m.stack[:len(m.stack)-n]
		v = t
	case OpTUPLE:
		items, err := m.popMark(off)
		if err != nil {
			return nil, false, true, err
		}
		v = Tuple(items)
	case OpEMPTY_LIST:
		v = &List{}
	case OpLIST:
		items, err := m.popMark(off)
		if err != nil {
			return nil, false, true, err
		}
		v = &List{Items: items}
	case OpEMPTY_DICT:
		v = NewDict()
	case OpDICT:
		items, err := m.popMark(off)
		if err != nil {
			return nil, false, true, err
		}
		if len(items)%2 != 0 {
			return nil, false, true, m.errAt(off, "pickle DICT with an odd number of items")
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
			return nil, false, true, err
		}
		v = &Set{Items: items, Frozen: true}
	case OpAPPEND, OpAPPENDS:
		push = false
		var items []any
		if op == OpAPPEND {
			x, err := m.pop(off)
			if err != nil {
				return nil, false, true, err
			}
			items = []any{x}
		} else if items, err = m.popMark(off); err != nil {
			return nil, false, true, err
		}
		t, err := m.top(off)
		if err != nil {
			return nil, false, true, err
		}
		switch l := t.(type) {
		case *List:
			l.Items = append(l.Items, items...)
		case *Object:
			l.List = append(l.List, items...)
		default:
			return nil, false, true, m.errAt(off, "pickle APPEND to a %s", TypeName(t))
		}
	case OpSETITEM, OpSETITEMS:
		push = false
		var items []any
		if op == OpSETITEM {
			if len(m.stack)-m.frame() < 2 {
				return nil, false, true, m.errAt(off, "pickle stack underflow")
			}
			items = append(items, m.stack[len(m.stack)-2:]...)
			m.stack = m.stack[:len(m.stack)-2]
		} else if items, err = m.popMark(off); err != nil {
			return nil, false, true, err
		}
		if len(items)%2 != 0 {
			return nil, false, true, m.errAt(off, "pickle SETITEMS with an odd number of items")
		}
		t, err := m.top(off)
		if err != nil {
			return nil, false, true, err
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
			return nil, false, true, m.errAt(off, "pickle SETITEM on a %s", TypeName(t))
		}
		for i := 0; i < len(items); i += 2 {
			d.Set(items[i], items[i+1])
		}
	case OpADDITEMS:
		push = false
		items, err := m.popMark(off)
		if err != nil {
			return nil, false, true, err
		}
		t, err := m.top(off)
		if err != nil {
			return nil, false, true, err
		}
		s, ok := t.(*Set)
		if !ok {
			return nil, false, true, m.errAt(off, "pickle ADDITEMS on a %s", TypeName(t))
		}
		s.Items = append(s.Items, items...)
	default:
		return nil, false, false, nil
	}
	return v, push, true, nil
}
