package pickle

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Values built by the machine. Python None is nil, bool is bool, int is
// int64 or *big.Int, float is float64, str is string; the types below are
// the rest. Containers are pointers, so a value the pickle shares (memo
// GET, DUP) is the same Go pointer wherever it appears: a client walking
// the values must budget for that fan-out (see Budget).
type (
	// Tuple is a Python tuple.
	Tuple []any
	// List is a Python list.
	List struct{ Items []any }
	// Set is a Python set or frozenset, in pickle order.
	Set struct {
		Items  []any
		Frozen bool
	}
	// Bytes is a Python bytes or bytearray.
	Bytes []byte
	// Complex is a Python complex.
	Complex struct{ Re, Im float64 }
	// Global is a class or function named by GLOBAL, STACK_GLOBAL or INST.
	// Module is normalised (Python 2 __builtin__ -> builtins).
	Global struct{ Module, Name string }
	// Object is an instance of a class the Env does not interpret, or the
	// result of a call it does not know: never called, only described.
	Object struct {
		Class  any
		Args   []any
		Kwargs any
		// State holds the BUILD states applied to the object, in order
		// (usually one, a *Dict of its attributes). None is never dropped
		// or merged: Python's __dict__.update would overwrite repeated
		// attributes, the client sees every value.
		State []any
		Items *Dict // SETITEM(S) on the object (dict subclasses)
		List  []any // APPEND(S) on the object (list subclasses)
	}
	// Large stands for a str or bytes value longer than MaxValue, which
	// the machine skips over instead of keeping.
	// Off is the stream offset of its first byte; Raw, Latin1 and BadAt
	// as in Span.
	Large struct {
		N      uint64
		Bytes  bool
		Off    int64
		Raw    bool
		Latin1 int64
		BadAt  int64
	}
	// NDArray is a numpy array as numpy.core.multiarray._reconstruct
	// (or numpy._core's) and BUILD make it: State holds the BUILD states,
	// in order; ndarray.__setstate__ takes (version, shape, dtype,
	// is_fortran, rawdata) or (shape, dtype, is_fortran, rawdata). Class
	// is the ndarray class (or subclass) it names. The client reads the
	// state (NumpyDType, Machine.SpanOf).
	NDArray struct {
		Class any
		Args  Tuple
		State []any
	}
	// Invalid is a value Python's unpickler would fail to make (a str
	// that is not Latin-1 given to _codecs.encode(s, "latin1")): the
	// client refuses the file where it meets it, saying Msg and where.
	// Off is the stream offset of the offending byte, or -1.
	Invalid struct {
		Msg string
		Off int64
	}
	// Refused is a value the pickle holds that its client cannot use (a
	// persistent id without an Env that resolves it, a quantized tensor).
	// Off is its stream offset, or -1.
	Refused struct {
		What string
		Off  int64
	}
)

// Dict is a Python dict as the pickle builds it: every (key, value) pair
// the pickle sets, in order. A key set twice is kept twice: Python would
// keep the last value (for keys it finds equal) but a checkpoint's dicts
// never repeat a key, so a repeat is a crafted file and dropping the
// earlier value would hide data. Keys are never compared, so a dict keyed
// by objects (tensors as optimizer state keys, which Python keys by
// identity) keeps every entry; the client names them (the name rule is
// its own).
type Dict struct {
	Keys, Vals []any
	// Attrs are the BUILD states of a dict subclass (OrderedDict's
	// _metadata), in order.
	Attrs []any
}

// NewDict returns an empty Dict.
func NewDict() *Dict { return &Dict{} }

// Set appends the pair (k, v).
func (d *Dict) Set(k, v any) {
	d.Keys = append(d.Keys, k)
	d.Vals = append(d.Vals, v)
}

// Len is the number of pairs.
func (d *Dict) Len() int { return len(d.Keys) }

func (l Large) String() string {
	if l.Bytes {
		return fmt.Sprintf("<%d-byte bytes>", l.N)
	}
	return fmt.Sprintf("<%d-byte str>", l.N)
}

// Clip shortens s for an error message.
func Clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// TypeName names v's Python type for messages.
func TypeName(v any) string {
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
	case Bytes:
		return "bytes"
	case Tuple:
		return "tuple"
	case *List:
		return "list"
	case *Dict:
		return "dict"
	case *Set:
		return "set"
	case Complex:
		return "complex"
	case *Global:
		return o.Module + "." + o.Name
	case *Object:
		return Repr(o.Class, 60) + " object"
	case *NDArray:
		return "numpy.ndarray"
	case Large:
		if o.Bytes {
			return "bytes"
		}
		return "str"
	case *Refused:
		return o.What
	case *Invalid:
		return "invalid value"
	case PyTyper:
		return o.PyType()
	}
	return "object" // a client's value without PyType: never a Go type name
}

// PyTyper is implemented by the values a client's Env builds (a torch
// tensor, a numpy dtype) to name their Python type in messages.
type PyTyper interface {
	PyType() string
}

// Repr is a bounded, Python-like repr of v (for dict keys that are not
// str or int, and for opaque values in metadata).
func Repr(v any, max int) string {
	var b strings.Builder
	reprTo(&b, v, max, 0)
	s := b.String()
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

func reprTo(b *strings.Builder, v any, max, depth int) {
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
			reprTo(b, x, max, depth+1)
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
		if o.BitLen() > 4*max+64 { // more digits than fit: printing costs
			fmt.Fprintf(b, "<int of %d bits>", o.BitLen())
			break
		}
		b.WriteString(o.String())
	case float64:
		b.WriteString(floatRepr(o))
	case string:
		b.WriteString(strconv.Quote(o))
	case Bytes:
		n := len(o)
		if n > 32 {
			n = 32
		}
		b.WriteString("b" + strconv.Quote(string(o[:n])))
		if len(o) > n {
			fmt.Fprintf(b, "...(%d bytes)", len(o))
		}
	case Complex:
		fmt.Fprintf(b, "(%s%+gj)", floatRepr(o.Re), o.Im)
	case Tuple:
		seq("(", ")", o)
	case *List:
		seq("[", "]", o.Items)
	case *Set:
		seq("{", "}", o.Items)
	case *Dict:
		b.WriteString("{")
		for i := range o.Keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if b.Len() > max {
				b.WriteString("...")
				break
			}
			reprTo(b, o.Keys[i], max, depth+1)
			b.WriteString(": ")
			reprTo(b, o.Vals[i], max, depth+1)
		}
		b.WriteString("}")
	case *Global:
		b.WriteString(o.Module + "." + o.Name)
	case *Object:
		reprTo(b, o.Class, max, depth+1)
		seq("(", ")", o.Args)
	case *NDArray:
		b.WriteString("numpy.ndarray")
	case *Refused:
		b.WriteString(o.What)
	case *Invalid:
		b.WriteString("<invalid: " + o.Msg + ">")
	case fmt.Stringer:
		b.WriteString(o.String())
	default:
		fmt.Fprintf(b, "<%T>", v)
	}
}

func floatRepr(f float64) string {
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

// Float64 returns v as a float64 when it is a Python int or float.
func Float64(v any) (float64, bool) {
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

// Int returns v as an int64 when it is a Python int (or bool).
func Int(v any) (int64, bool) {
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

// Items returns the elements of a tuple or list.
func Items(v any) ([]any, bool) {
	switch x := v.(type) {
	case Tuple:
		return x, true
	case *List:
		return x.Items, true
	}
	return nil, false
}

// GenericCall interprets the calls that plain Python data needs
// (containers, complex, bytes, collections, numpy scalars) and returns an
