package torch

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// What torch's pickles name, interpreted without calling anything.

// torchStorageDTypes maps torch's storage classes to their element dtype.
var torchStorageDTypes = map[string]dtype.DType{
	"FloatStorage":         dtype.F32,
	"HalfStorage":          dtype.F16,
	"BFloat16Storage":      dtype.BF16,
	"DoubleStorage":        dtype.F64,
	"LongStorage":          dtype.I64,
	"IntStorage":           dtype.I32,
	"ShortStorage":         dtype.I16,
	"CharStorage":          dtype.I8,
	"ByteStorage":          dtype.U8,
	"BoolStorage":          dtype.Bool,
	"ComplexFloatStorage":  dtype.C64,
	"ComplexDoubleStorage": dtype.C128,
	// Untyped storages hold bytes; a _rebuild_tensor_v3 names the dtype.
	"UntypedStorage":  dtype.U8,
	"_UntypedStorage": dtype.U8,
}

// torchDTypes maps torch's dtype objects (torch.float32 ...) to dtypes;
// Invalid marks a dtype torch has and tensorfs cannot serve.
var torchDTypes = map[string]dtype.DType{
	"float32": dtype.F32, "float": dtype.F32,
	"float64": dtype.F64, "double": dtype.F64,
	"float16": dtype.F16, "half": dtype.F16,
	"bfloat16": dtype.BF16,
	"int64":    dtype.I64, "long": dtype.I64,
	"int32": dtype.I32, "int": dtype.I32,
	"int16": dtype.I16, "short": dtype.I16,
	"int8":  dtype.I8,
	"uint8": dtype.U8, "uint16": dtype.U16, "uint32": dtype.U32, "uint64": dtype.U64,
	"bool":      dtype.Bool,
	"complex64": dtype.C64, "cfloat": dtype.C64,
	"complex128": dtype.C128, "cdouble": dtype.C128,
	"complex32": dtype.C32, "chalf": dtype.C32,
	"float8_e4m3fn": dtype.F8E4M3, "float8_e5m2": dtype.F8E5M2,
	"float8_e8m0fnu":  dtype.F8E8M0,
	"float8_e4m3fnuz": dtype.F8E4M3FNUZ, "float8_e5m2fnuz": dtype.F8E5M2FNUZ,
	// float4_e2m1fn_x2: one element of torch's is a byte holding two F4
	// elements, the even one in the low nibble (rebuild, tensor).
	"float4_e2m1fn_x2": dtype.F4,
	"qint8":            dtype.Invalid, "quint8": dtype.Invalid, "qint32": dtype.Invalid,
	"quint4x2": dtype.Invalid, "quint2x4": dtype.Invalid,
	"bits8": dtype.Invalid, "bits16": dtype.Invalid, "bits1x8": dtype.Invalid,
	"bits2x4": dtype.Invalid, "bits4x2": dtype.Invalid,
}

// torchStorageType is torch.FloatStorage and friends. dt is Invalid for a
// storage class tensorfs cannot serve (quantized).
type torchStorageType struct {
	name string
	dt   dtype.DType
}

func (s *torchStorageType) String() string { return "torch." + s.name }

// PyType names the Python type in messages.
func (s *torchStorageType) PyType() string { return "torch." + s.name + " class" }

// torchDType is a torch dtype object (torch.float32).
type torchDType struct {
	name string
	dt   dtype.DType
}

func (d *torchDType) String() string { return "torch." + d.name }

// PyType names the Python type in messages.
func (d *torchDType) PyType() string { return "torch.dtype" }

// torchDevice is torch.device(...), kept as its string form.
type torchDevice string

func (d torchDevice) String() string { return string(d) }

// PyType names the Python type in messages.
func (d torchDevice) PyType() string { return "torch.device" }

// torchStorage is a storage named by a persistent id. In legacy files a
// storage may be a view of a root storage (root != nil): elements
// [viewOff, viewOff+numel) of it.
type torchStorage struct {
	key      string
	typ      *torchStorageType
	numel    int64
	location string
	root     *torchStorage
	viewOff  int64
}

func (s *torchStorage) String() string { return "storage " + strconv.Quote(s.key) }

// PyType names the Python type in messages.
func (s *torchStorage) PyType() string { return "torch." + s.typ.name }

// torchTensor is what _rebuild_tensor* builds: a view of a storage.
type torchTensor struct {
	storage *torchStorage
	dt      dtype.DType
	dtName  string
	offset  int64 // in elements
	shape   []int64
	strides []int64 // in elements, as torch has them (may be negative)
	state   []any   // Python attributes (__dict__) set on the tensor, if any
	// x2: a float4_e2m1fn_x2 tensor, whose offset, shape and strides
	// count bytes of two F4 elements each; served as F4 with the last
	// dimension doubled (a 0-d one as F4 [2]), as safetensors stores it.
	x2 bool
}

func (t *torchTensor) String() string { return fmt.Sprintf("tensor(%s%v)", t.dtName, t.shape) }

// PyType names the Python type in messages.
func (t *torchTensor) PyType() string { return "torch.Tensor" }

// torchRefusals names the tensor rebuilds tensorfs refuses, by function.
var torchRefusals = map[string]string{
	"_rebuild_qtensor":                  "a quantized tensor",
	"_rebuild_sparse_tensor":            "a sparse tensor",
	"_rebuild_sparse_csr_tensor":        "a sparse CSR tensor",
	"_rebuild_meta_tensor_no_storage":   "a meta tensor (it has no data)",
	"_rebuild_device_tensor_from_numpy": "a device tensor saved through numpy",
	"_rebuild_xla_tensor":               "an XLA tensor",
	"_rebuild_mlc_tensor":               "an MLC tensor",
	"_rebuild_nested_tensor":            "a nested tensor",
	"_rebuild_wrapper_subclass":         "a wrapper tensor subclass",
}

// torchEnv interprets torch's pickles (data.pkl, legacy main pickle).
type torchEnv struct {
	pickle.PlainEnv
	storages map[string]*torchStorage // root storages by key
	views    map[string]*torchStorage // legacy storage views by view key
	depth    int                      // nesting of _rebuild_from_type calls
}

func newTorchEnv() *torchEnv {
	return &torchEnv{storages: map[string]*torchStorage{}, views: map[string]*torchStorage{}}
}

func (e *torchEnv) Global(m *pickle.Machine, module, name string, off int64) (any, error) {
	switch module {
	case "torch", "torch.cuda", "torch.storage":
		if dt, ok := torchStorageDTypes[name]; ok {
			return &torchStorageType{name: name, dt: dt}, nil
		}
		if strings.HasSuffix(name, "Storage") {
			return &torchStorageType{name: name}, nil
		}
	}
	if module == "torch" {
		if dt, ok := torchDTypes[name]; ok {
			return &torchDType{name: name, dt: dt}, nil
		}
	}
	return &pickle.Global{Module: module, Name: name}, nil
}

func (e *torchEnv) Call(m *pickle.Machine, fn any, args pickle.Tuple, off int64) (any, error) {
	g, ok := fn.(*pickle.Global)
	if !ok {
		return e.PlainEnv.Call(m, fn, args, off)
	}
	switch g.Module + "." + g.Name {
	case "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2":
		return e.rebuild(m, g.Name, args, nil, off)
	case "torch._utils._rebuild_tensor_v3":
		if len(args) < 7 {
			return nil, m.Errorf(off, "%s wants 7 arguments, got %d", g.Name, len(args))
		}
		return e.rebuild(m, g.Name, args, args[6], off)
	case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
		"torch.nn.parameter.Parameter", "torch.nn.Parameter", "torch.nn.parameter.Buffer",
		// torch < 0.4 pickled a Variable (and a Parameter, its subclass)
		// as Variable(data) with BUILD state (requires_grad, volatile,
		// hooks); torch.load gives the tensor.
		"torch.autograd.variable.Variable", "torch.autograd.Variable":
		if len(args) == 0 {
			return nil, m.Errorf(off, "%s without arguments", g.Name)
		}
		if g.Name == "_rebuild_parameter_with_state" && len(args) > 3 {
			return torchWithState(fn, args, args[0], args[3]), nil
		}
		return args[0], nil
	case "torch._tensor._rebuild_from_type_v2", "torch._tensor._rebuild_from_type":
		// (func, new_type, args, state): the tensor is func(*args).
		if len(args) < 3 {
			return nil, m.Errorf(off, "%s wants 3 or 4 arguments, got %d", g.Name, len(args))
		}
		inner, ok := args[2].(pickle.Tuple)
		if !ok {
			return nil, m.Errorf(off, "%s: arguments are a %s, not a tuple", g.Name, pickle.TypeName(args[2]))
		}
		if e.depth >= index.MaxNesting {
			return nil, m.Errorf(off, "%s nests deeper than %d", g.Name, index.MaxNesting)
		}
		e.depth++
		defer func() { e.depth-- }()
		v, err := e.Call(m, args[0], inner, off)
		if err != nil || len(args) < 4 {
			return v, err
		}
		return torchWithState(fn, args, v, args[3]), nil
	case "torch.Size":
		if len(args) == 0 {
			return pickle.Tuple{}, nil
		}
		items, ok := pickle.Items(args[0])
		if !ok {
			return nil, m.Errorf(off, "torch.Size of a %s", pickle.TypeName(args[0]))
		}
		if err := m.Charge(len(items), off); err != nil {
			return nil, err
		}
		return append(pickle.Tuple{}, items...), nil
	case "torch.device":
		if err := m.Charge(len(args), off); err != nil {
			return nil, err
		}
		var parts []string
		for _, a := range args {
			switch x := a.(type) {
			case string:
				parts = append(parts, x)
			case int64:
				parts = append(parts, strconv.FormatInt(x, 10))
			}
		}
		return torchDevice(strings.Join(parts, ":")), nil
	case "torch.storage._load_from_bytes":
		return &pickle.Refused{What: "a storage pickled as bytes (saved with pickle, not torch.save)", Off: off}, nil
	case "torch.nn.parameter.UninitializedParameter", "torch.nn.parameter.UninitializedBuffer":
		return &pickle.Refused{What: "an uninitialized (lazy) parameter", Off: off}, nil
	}
	if g.Module == "torch._utils" && strings.HasPrefix(g.Name, "_rebuild_") {
		what, ok := torchRefusals[g.Name]
		if !ok {
			what = "a tensor rebuilt by torch._utils." + g.Name
		}
		return &pickle.Refused{What: what + " (torch._utils." + g.Name + ")", Off: off}, nil
	}
	return e.PlainEnv.Call(m, fn, args, off)
}

// torchWithState gives tensor t the Python attributes state (a
// Parameter's or tensor subclass's __dict__) so that the walk serves the
// tensors among them. Anything but a tensor stays the opaque call
// fn(*args), walked whole.
func torchWithState(fn any, args pickle.Tuple, t, state any) any {
	if pickle.Empty(state) {
		return t
	}
	switch x := t.(type) {
	case *torchTensor:
		x.state = append(x.state, state)
		return x
	case *pickle.Refused:
		return x
	}
	return &pickle.Object{Class: fn, Args: args}
}

func (e *torchEnv) NewObj(m *pickle.Machine, cls any, args pickle.Tuple, kwargs any, off int64) (any, error) {
	if g, ok := cls.(*pickle.Global); ok {
		switch g.Module + "." + g.Name {
		case "torch.nn.parameter.Parameter", "torch.nn.Parameter", "torch.nn.parameter.Buffer",
			"torch.autograd.variable.Variable", "torch.autograd.Variable":
			if len(args) > 0 {
				return args[0], nil
			}
		case "torch.Size":
			return e.Call(m, cls, args, off)
		}
	}
	return e.PlainEnv.NewObj(m, cls, args, kwargs, off)
}

// Build applies BUILD's state to obj. A tensor takes what torch's
// Tensor.__setstate__ takes: (requires_grad, volatile, backward_hooks) of
// a torch < 0.4 Parameter or Variable, (storage, offset, size, stride) of
// a legacy tensor (set_), and a legacy Variable's (data, grad, hooks,
// requires_grad, volatile). None of it is bytes of the tensor except
// set_'s view and the Variable's data: requires_grad, volatile and the
// legacy grad are dropped, as torch drops them (requires_grad is an
// autograd flag, not data); non-empty hooks are kept as the tensor's
// state, walked for tensors only. Anything else refuses the pickle, as it
// fails in torch.
func (e *torchEnv) Build(m *pickle.Machine, obj, state any, off int64) error {
	t, ok := obj.(*torchTensor)
	if !ok {
		return e.PlainEnv.Build(m, obj, state, off)
	}
	if pickle.Empty(state) {
		return nil
	}
	st, ok := state.(pickle.Tuple)
	switch {
	case ok && len(st) == 3:
		t.hooks(st[2])
		return nil
	case ok && len(st) == 4:
		v, err := e.rebuild(m, "Tensor.__setstate__", st, nil, off)
		if err != nil {
			return err
		}
		switch x := v.(type) {
		case *torchTensor:
			x.state = t.state
			*t = *x
			return nil
		case *pickle.Refused:
			return m.Errorf(off, "%s is not supported", x.What)
		}
	case ok && len(st) == 5:
		data, isTensor := st[0].(*torchTensor)
		if !isTensor {
			if r, refused := st[0].(*pickle.Refused); refused {
				return m.Errorf(off, "%s is not supported", r.What)
			}
			return m.Errorf(off, "pickle BUILD gives a legacy Variable state whose data is %s, not a tensor", pickle.Repr(st[0], 40))
		}
		keep := t.state
		*t = *data
		t.state = append(append([]any(nil), keep...), data.state...)
		t.hooks(st[2])
		return nil
	}
	return m.Errorf(off, "pickle BUILD gives state %s to a torch.Tensor, which takes (requires_grad, volatile, hooks), a legacy (storage, offset, size, stride) or a legacy Variable's 5 fields", pickle.Repr(state, 60))
}

// hooks keeps a legacy state's backward hooks when there are any: they
// are walked for tensors only (torch expects none and keeps them as an
// attribute).
func (t *torchTensor) hooks(h any) {
	if !pickle.Empty(h) {
		t.state = append(t.state, h)
	}
}

// persistent resolves ('storage', type, key, location, numel) (zip) and
// ('storage', type, root_key, location, numel, view_metadata) (legacy).
func (e *torchEnv) Persistent(m *pickle.Machine, pid any, off int64) (any, error) {
	t, ok := pid.(pickle.Tuple)
	if !ok || len(t) == 0 {
		return nil, m.Errorf(off, "unsupported persistent id %s", pickle.Repr(pid, 60))
	}
	kind, _ := t[0].(string)
	switch kind {
	case "module":
		// Legacy whole-module saves: ('module', class, source file, source).
		if len(t) >= 2 {
			return t[1], nil
		}
	case "storage":
		if len(t) < 5 {
			return nil, m.Errorf(off, "storage persistent id has %d fields, want 5 or 6", len(t))
		}
		typ, ok := t[1].(*torchStorageType)
		if !ok {
			return nil, m.Errorf(off, "storage persistent id names %s, not a torch storage class", pickle.Repr(t[1], 60))
		}
		key, ok := torchKey(t[2])
		if !ok {
			return nil, m.Errorf(off, "storage key %s is not a string", pickle.Repr(t[2], 60))
		}
		numel, ok := pickle.Int(t[4])
		if !ok || numel < 0 {
			return nil, m.Errorf(off, "storage %q has size %s", key, pickle.Repr(t[4], 40))
		}
		loc, _ := t[3].(string)
		st := e.storages[key]
		if st == nil {
			st = &torchStorage{key: key, typ: typ, numel: numel, location: loc}
			e.storages[key] = st
		} else if st.typ.name != typ.name || st.numel != numel {
			return nil, m.Errorf(off, "storage %q is declared twice, as %s[%d] and %s[%d]", key, st.typ, st.numel, typ, numel)
		}
		if len(t) < 6 || t[5] == nil {
			return st, nil
		}
		// Legacy storage view: (view_key, offset, view_size) in elements.
		vm, ok := t[5].(pickle.Tuple)
		if !ok || len(vm) != 3 {
			return nil, m.Errorf(off, "storage %q has view metadata %s", key, pickle.Repr(t[5], 60))
		}
		vkey, ok1 := torchKey(vm[0])
		voff, ok2 := pickle.Int(vm[1])
		vsize, ok3 := pickle.Int(vm[2])
		if !ok1 || !ok2 || !ok3 || voff < 0 || vsize < 0 {
			return nil, m.Errorf(off, "storage %q has view metadata %s", key, pickle.Repr(t[5], 60))
		}
		if v := e.views[vkey]; v != nil {
			if v.root != st || v.viewOff != voff || v.numel != vsize {
				return nil, m.Errorf(off, "storage view %q is declared twice differently", vkey)
			}
			return v, nil
		}
		v := &torchStorage{key: vkey, typ: typ, numel: vsize, location: loc, root: st, viewOff: voff}
		e.views[vkey] = v
		return v, nil
	}
	return nil, m.Errorf(off, "unsupported persistent id %s", pickle.Repr(pid, 60))
}

func torchKey(v any) (string, bool) {
	switch k := v.(type) {
	case string:
		return k, true
	case int64:
		return strconv.FormatInt(k, 10), true
	}
	return "", false
}

// rebuild interprets _rebuild_tensor(storage, storage_offset, size, stride,
// ...) and its v2/v3 forms. dtArg is v3's dtype argument, else nil.
func (e *torchEnv) rebuild(m *pickle.Machine, fn string, args pickle.Tuple, dtArg any, off int64) (any, error) {
	if len(args) < 4 {
		return nil, m.Errorf(off, "%s wants at least 4 arguments, got %d", fn, len(args))
	}
	var st *torchStorage
	switch s := args[0].(type) {
	case *torchStorage:
		st = s
	case *pickle.Refused:
		return s, nil
	default:
		return nil, m.Errorf(off, "%s: first argument is a %s, not a storage", fn, pickle.TypeName(args[0]))
	}
	t := &torchTensor{storage: st, dt: st.typ.dt, dtName: st.typ.name}
	if st.typ.dt == dtype.Invalid {
		return &pickle.Refused{What: "a tensor of storage class " + st.typ.String(), Off: off}, nil
	}
	if dtArg != nil {
		d, ok := dtArg.(*torchDType)
		if !ok {
			return nil, m.Errorf(off, "%s: dtype argument is %s", fn, pickle.Repr(dtArg, 60))
		}
		t.dt, t.dtName = d.dt, d.name
	}
	var ok bool
	if t.offset, ok = pickle.Int(args[1]); !ok || t.offset < 0 {
		return nil, m.Errorf(off, "%s: storage offset %s", fn, pickle.Repr(args[1], 40))
	}
	var err error
	if t.shape, err = e.ints(m, fn, "size", args[2], off); err != nil {
		return nil, err
	}
	if t.strides, err = e.ints(m, fn, "stride", args[3], off); err != nil {
		return nil, err
	}
	if len(t.shape) > index.MaxDims {
		return nil, m.Errorf(off, "%s: %d dimensions (at most %d)", fn, len(t.shape), index.MaxDims)
	}
	if len(t.strides) != len(t.shape) {
		return nil, m.Errorf(off, "%s: %d strides for %d dimensions", fn, len(t.strides), len(t.shape))
	}
	for _, d := range t.shape {
		if d < 0 {
			return nil, m.Errorf(off, "%s: negative dimension in size %v", fn, t.shape)
		}
	}
	if t.dt == dtype.Invalid {
		// A dtype tensorfs has no type for (float4_e2m1fn_x2, bits8 ...):
		// listed, not served, never a reason to refuse the file.
		return &torchUnserved{dtName: "torch." + t.dtName, shape: t.shape, off: off}, nil
	}
	if t.dt == dtype.F4 {
		// F4 packs two elements a byte and is served as one range: a
		// non-contiguous view (a transpose, a column slice) is listed.
		if !index.RowMajor(t.shape, t.strides) {
			return &torchUnserved{dtName: "torch." + t.dtName, shape: t.shape, off: off,
				why: fmt.Sprintf("a non-contiguous view (strides %v) of torch.%s: tensorfs serves F4 as one range only", t.strides, t.dtName)}, nil
		}
		t.x2 = true
	}
	return t, nil
}

// x2Shape is the F4 shape of a float4_e2m1fn_x2 tensor of shape s: the
// last dimension doubled, [2] for a 0-d one.
func x2Shape(s []int64) ([]int64, bool) {
	if len(s) == 0 {
		return []int64{2}, true
	}
	out := append([]int64{}, s...)
	if out[len(out)-1] > math.MaxInt64/2 {
		return nil, false
	}
	out[len(out)-1] *= 2
	return out, true
}

// torchUnserved is a tensor of a dtype tensorfs has no type for: the
// walk lists it in Index.Unserved and serves the rest.
type torchUnserved struct {
	dtName string
	shape  []int64
	off    int64  // stream offset of its rebuild call
	why    string // "": tensorfs has no dtype for it
}

// PyType names the Python type in messages.
func (u *torchUnserved) PyType() string { return "torch.Tensor" }

func (e *torchEnv) ints(m *pickle.Machine, fn, what string, v any, off int64) ([]int64, error) {
	items, ok := pickle.Items(v)
	if !ok {
		return nil, m.Errorf(off, "%s: %s is a %s, not a tuple", fn, what, pickle.TypeName(v))
	}
	if len(items) > index.MaxDims {
		return nil, m.Errorf(off, "%s: %s has %d entries (at most %d)", fn, what, len(items), index.MaxDims)
	}
	out := make([]int64, len(items))
	for i, x := range items {
		n, ok := pickle.Int(x)
		if !ok {
			return nil, m.Errorf(off, "%s: %s holds %s", fn, what, pickle.Repr(x, 40))
		}
		out[i] = n
	}
	return out, nil
}
