package pickle

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"
)

// PlainEnv interprets plain Python data: the builtin containers,
// complex, bytes, collections' dicts and numpy scalars; any other class
// or call gives an opaque *Object, and a persistent id a *Refused. A
// client's Env embeds it and overrides what it knows better.
type PlainEnv struct{}

// Global returns a *Global naming module.name.
func (PlainEnv) Global(m *Machine, module, name string, off int64) (any, error) {
	return &Global{Module: module, Name: name}, nil
}

// Call interprets the calls that plain Python data needs (containers,
// complex, bytes, collections, numpy scalars) and returns an opaque
// *Object for anything else. Nothing is ever called. A copy of a
// container it was handed is charged to the machine (Machine.Charge).
func (PlainEnv) Call(m *Machine, fn any, args Tuple, off int64) (any, error) {
	g, ok := fn.(*Global)
	if !ok {
		if plainData(fn) {
			return nil, m.Errorf(off, "pickle calls a %s, which is not callable", TypeName(fn))
		}
		return &Object{Class: fn, Args: args}, nil
	}
	arg0 := func() any {
		if len(args) > 0 {
			return args[0]
		}
		return nil
	}
	switch g.Module + "." + g.Name {
	case "collections.OrderedDict", "builtins.dict", "collections.defaultdict", "collections.Counter":
		return plainDict(m, fn, g, args, arg0(), off)
	case "builtins.list":
		items, _ := Items(arg0())
		if err := m.Charge(len(items), off); err != nil {
			return nil, err
		}
		return &List{Items: append([]any(nil), items...)}, nil
	case "builtins.tuple":
		items, _ := Items(arg0())
		if err := m.Charge(len(items), off); err != nil {
			return nil, err
		}
		return append(Tuple{}, items...), nil
	case "builtins.set", "builtins.frozenset":
		var items []any
		switch a := arg0().(type) {
		case *Set:
			items = a.Items
		default:
			items, _ = Items(a)
		}
		if err := m.Charge(len(items), off); err != nil {
			return nil, err
		}
		return &Set{Items: append([]any(nil), items...), Frozen: g.Name == "frozenset"}, nil
	case "builtins.complex":
		re, ok1 := Float64(arg0())
		im := 0.0
		ok2 := true
		if len(args) > 1 {
			im, ok2 = Float64(args[1])
		}
		if ok1 && ok2 && len(args) <= 2 {
			return Complex{re, im}, nil
		}
	case "builtins.bytearray", "builtins.bytes":
		switch a := arg0().(type) {
		case Bytes:
			return a, nil
		case nil:
			if len(args) == 0 {
				return Bytes{}, nil
			}
		case string:
			if err := m.Charge(len(a), off); err != nil {
				return nil, err
			}
			return Latin1(a), nil
		}
	case "_codecs.encode":
		if v, ok, err := codecsEncode(m, args, arg0(), off); ok {
			return v, err
		}
	case "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct":
		// _reconstruct(ndarray, (0,), b"b"): an empty array that BUILD
		// fills (ndarray.__reduce__).
		if len(args) > 0 {
			return &NDArray{Class: args[0], Args: args}, nil
		}
	case "numpy.dtype":
		if s, ok := arg0().(string); ok {
			return &numpyDType{descr: s, order: '='}, nil
		}
	case "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar":
		if len(args) == 2 {
			if dt, ok := args[0].(*numpyDType); ok {
				var raw []byte
				switch b := args[1].(type) {
				case Bytes:
					raw = b
				case string: // protocol < 3 from Python 2
					raw = Latin1(b)
				}
				if v, ok := dt.decode(raw); ok {
					return v, nil
				}
			}
		}
	}
	return &Object{Class: fn, Args: args}, nil
}

// plainDict is dict(arg0), OrderedDict(arg0), defaultdict(factory) or
// Counter(arg0): a copy of a dict or of a sequence of pairs, an opaque
// *Object where an item is not a pair.
func plainDict(m *Machine, fn any, g *Global, args Tuple, arg0 any, off int64) (any, error) {
	d := NewDict()
	if g.Name == "defaultdict" {
		return d, nil // the one argument is the default factory
	}
	switch a := arg0.(type) {
	case *Dict:
		if err := m.Charge(a.Len(), off); err != nil {
			return nil, err
		}
		d.Keys = append([]any(nil), a.Keys...)
		d.Vals = append([]any(nil), a.Vals...)
	case Tuple, *List:
		items, _ := Items(a)
		if err := m.Charge(len(items), off); err != nil {
			return nil, err
		}
		for _, it := range items {
			kv, ok := Items(it)
			if !ok || len(kv) != 2 {
				return &Object{Class: fn, Args: args}, nil
			}
			d.Set(kv[0], kv[1])
		}
	}
	return d, nil
}

// codecsEncode is _codecs.encode(str, "latin1"), how protocol 2 writes
// Python 3 bytes; ok is false for any other call of it.
func codecsEncode(m *Machine, args Tuple, arg0 any, off int64) (v any, ok bool, err error) {
	if s, ok := arg0.(string); ok && len(args) == 2 {
		if enc, _ := args[1].(string); enc == "latin1" || enc == "latin-1" {
			if err := m.Charge(len(s), off); err != nil {
				return nil, true, err
			}
			sp, has := m.SpanOf(s)
			if i, r := notLatin1(s); i >= 0 {
				at := int64(-1)
				if has {
					at = sp.Off + int64(i)
				}
				return &Invalid{Msg: "_codecs.encode(str, \"latin1\") of a str with " + notLatin1What(r) + " (Python's unpickler fails on it too)", Off: at}, true, nil
			}
			b := Latin1(s)
			if has {
				m.SetSpan(b, sp)
			}
			return b, true, nil
		}
	}
	if l, ok := arg0.(Large); ok && !l.Bytes && len(args) == 2 {
		if enc, _ := args[1].(string); enc == "latin1" || enc == "latin-1" {
			if l.BadAt >= 0 {
				return &Invalid{Msg: "_codecs.encode(str, \"latin1\") of a str that is not Latin-1 as UTF-8 (Python's unpickler fails on it too)", Off: l.BadAt}, true, nil
			}
			// Too long to keep: its bytes are its stream span when
			// that is raw; N counts UTF-8 bytes otherwise, Latin1
			// the bytes it encodes to.
			l.Bytes = true
			return l, true, nil
		}
	}
	return nil, false, nil
}

// NewObj interprets cls.__new__(cls, *args): the containers get their
// empty value (SETITEMS/APPENDS fill them), anything else is opaque.
func (e PlainEnv) NewObj(m *Machine, cls any, args Tuple, kwargs any, off int64) (any, error) {
	if plainData(cls) {
		return nil, m.Errorf(off, "pickle NEWOBJ of a %s, which is not a class", TypeName(cls))
	}
	if g, ok := cls.(*Global); ok {
		switch g.Module + "." + g.Name {
		case "collections.OrderedDict", "builtins.dict", "collections.defaultdict", "collections.Counter":
			return NewDict(), nil
		case "builtins.list":
			return &List{}, nil
		case "builtins.set":
			return &Set{}, nil
		case "builtins.tuple", "builtins.frozenset", "builtins.complex":
			return e.Call(m, cls, args, off)
		}
	}
	return &Object{Class: cls, Args: args, Kwargs: kwargs}, nil
}

// Build applies BUILD's state to obj: an *Object and a *Dict (a dict
// subclass) record it (every state, in order: nothing is merged or
// dropped); a value with a setState method (numpy dtypes) takes it. An
// empty state (None, False, 0, an empty str or container) is a no-op, as
// in Python. Any other value refuses the pickle: Python would fail there
// too (a tuple, list, str... has no __dict__), and keeping the state
// nowhere would hide what it holds.
func (PlainEnv) Build(m *Machine, obj, state any, off int64) error {
	switch o := obj.(type) {
	case *Object:
		o.State = append(o.State, state)
		return nil
	case *Dict:
		o.Attrs = append(o.Attrs, state)
		return nil
	case *NDArray:
		o.State = append(o.State, state)
		return nil
	case interface{ setState(any) }:
		o.setState(state)
		return nil
	case *Refused:
		return nil // refused where it is used
	}
	if Empty(state) {
		return nil
	}
	return m.Errorf(off, "pickle BUILD gives state %s to a %s, which holds none", Repr(state, 60), TypeName(obj))
}

// Persistent refuses every persistent id: plain data has none.
func (PlainEnv) Persistent(m *Machine, pid any, off int64) (any, error) {
	return &Refused{What: "persistent id " + Repr(pid, 60), Off: off}, nil
}

// plainData reports whether v is a plain data value (None, a number, a
// str, bytes or a container), which Python cannot call: a pickle that
// calls one fails there, and keeping it as an opaque class would hide
// what it holds.
func plainData(v any) bool {
	switch v.(type) {
	case nil, bool, int64, *big.Int, float64, string, Bytes, Tuple, *List, *Set, *Dict, Complex, Large:
		return true
	}
	return false
}

// Empty reports whether v is false in Python's sense for the plain types:
// None, False, 0, 0.0, and an empty str, bytes or container.
func Empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case int64:
		return x == 0
	case float64:
		return x == 0
	case string:
		return x == ""
	case Bytes:
		return len(x) == 0
	case Tuple:
		return len(x) == 0
	case *List:
		return len(x.Items) == 0
	case *Set:
		return len(x.Items) == 0
	case *Dict:
		return x.Len() == 0
	}
	return false
}

// NumpyDType returns the descr ("f4", "i8", "O8"...) and byte order
// ('<', '>', '|', or '=' when no BUILD set it) of a numpy.dtype value.
func NumpyDType(v any) (descr string, order byte, ok bool) {
	d, ok := v.(*numpyDType)
	if !ok {
		return "", 0, false
	}
	return d.descr, d.order, true
}

// notLatin1 returns the byte index in s of the first rune that is not a
// Latin-1 code point (>= 256, or invalid UTF-8) and the rune, or -1.
func notLatin1(s string) (int, rune) {
	for i, r := range s {
		if r >= 256 {
			if r == utf8.RuneError {
				if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
					return i, -1
				}
			}
			return i, r
		}
	}
	return -1, 0
}

func notLatin1What(r rune) string {
	if r < 0 {
		return "invalid UTF-8"
	}
	return fmt.Sprintf("code point U+%04X, which is not Latin-1", r)
}

// Latin1 encodes s (all runes < 256) as Latin-1 bytes.
func Latin1(s string) Bytes {
	b := make(Bytes, 0, len(s))
	for _, r := range s {
		b = append(b, byte(r))
	}
	return b
}

// numpyDType is numpy.dtype(descr), with the byte order its BUILD state
// sets.
type numpyDType struct {
	descr string
	order byte
}

func (d *numpyDType) String() string { return "dtype('" + d.descr + "')" }

// PyType names the Python type.
func (d *numpyDType) PyType() string { return "numpy.dtype" }

func (d *numpyDType) setState(state any) {
	// (version, byteorder, subdescr, names, fields, elsize, alignment, flags)
	if t, ok := state.(Tuple); ok && len(t) > 1 {
		if s, ok := t[1].(string); ok && len(s) == 1 {
			d.order = s[0]
		}
	}
}

// decode reads one numpy scalar of this dtype from raw.
func (d *numpyDType) decode(raw []byte) (any, bool) {
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
		return half(bo.Uint16(raw)), true
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

// half converts IEEE half-precision bits to float64.
func half(h uint16) float64 {
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
