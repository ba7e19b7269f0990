package index

import (
	"encoding/json"
	"math"
	"math/big"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// The tree walk: from the value a torch pickle builds to tensors (named by
// their keys joined with "/") and metadata (the non-tensor values, nested
// like the checkpoint).
//
// Naming: dict entries by key (str as is, int in decimal, True/False/None,
// anything else by a Python-like repr); list, tuple and set elements by
// index; an opaque object (nn.Module, argparse.Namespace, a TorchScript
// module) by the entries of its dict state and of any SETITEM(S)/APPEND(S)
// on it, and its constructor arguments by index; a bare tensor (or one
// storage) by the source file's base name without its extension.
//
// Shared references (tied weights) give one tensor per name. A container
// that holds itself is walked once per path (the repeated edge is skipped),
// and the whole walk visits at most ptMaxVisits(pickle size) values, so
// shared references cannot blow up exponentially.

// ptSpan locates a storage's bytes: the file range [off, off+size) holding
// its elements, or a message saying why it cannot be served.
type ptSpan func(st *torchStorage) (off, size int64, msg string)

type ptWalker struct {
	file      string
	base      string // name of a bare tensor
	span      ptSpan
	bigEndian bool
	tensors   []Tensor
	visits    int
	maxVisits int
	onPath    map[any]bool
	path      []string // components of the value being walked
}

// ptMaxVisits is the walk budget for a pickle of n bytes: every value
// costs at least one byte, so a tree needs at most n visits; more means
// shared references expanding.
func ptMaxVisits(n int64) int {
	const floor = 1 << 20
	if n > (1<<40) || 4*n+floor > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(4*n + floor)
}

// ptBaseName is a file's base name without its extension.
func ptBaseName(file string) string {
	b := filepath.Base(file)
	if e := filepath.Ext(b); e != "" && e != b {
		b = strings.TrimSuffix(b, e)
	}
	if b == "" || b == "." || b == "/" {
		return "tensor"
	}
	return b
}

// ptKeyName is a dict key as a name component.
func ptKeyName(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case *big.Int:
		return x.String()
	}
	return pklRepr(k, 200)
}

func ptWhere(name string) string { return "tensor " + strconv.Quote(name) }

func (w *ptWalker) name() string {
	if len(w.path) == 0 {
		return w.base
	}
	return strings.Join(w.path, "/")
}

// child walks v as the entry key of the value being walked.
func (w *ptWalker) child(v any, key string, depth int) (any, bool, error) {
	w.path = append(w.path, key)
	m, has, err := w.walk(v, depth+1)
	w.path = w.path[:len(w.path)-1]
	return m, has, err
}

// ptChild is one named entry of a container.
type ptChild struct {
	key string
	val any
}

// walk visits v at path; it returns v's metadata (JSON-encodable) and
// whether there is any.
func (w *ptWalker) walk(v any, depth int) (any, bool, error) {
	w.visits++
	if w.visits > w.maxVisits {
		return nil, false, ErrorAt(w.file, "", "pickle's shared references expand to more than %d values", w.maxVisits)
	}
	if depth > MaxNesting {
		return nil, false, ErrorAt(w.file, ptWhere(w.name()), "containers nest deeper than %d", MaxNesting)
	}
	switch x := v.(type) {
	case *torchTensor:
		return nil, false, w.tensor(x, w.name())
	case *torchStorage:
		n := x.numel
		return nil, false, w.tensor(&torchTensor{storage: x, dt: x.typ.dt, dtName: x.typ.name, shape: []int64{n}, strides: []int64{1}}, w.name())
	case *pklRefused:
		return nil, false, &FormatError{File: w.file, Offset: x.off, Where: ptWhere(w.name()), Msg: x.what + " is not supported"}
	case *pklDict, *pklList, *pklSet, *pklObject:
		if w.onPath[v] {
			return "<recursive reference>", true, nil
		}
		w.onPath[v] = true
		defer delete(w.onPath, v)
	}
	switch x := v.(type) {
	case *pklDict:
		children := make([]ptChild, len(x.keys))
		for i := range x.keys {
			children[i] = ptChild{ptKeyName(x.keys[i]), x.vals[i]}
		}
		meta, has, err := w.mapping(children, depth)
		if err != nil {
			return nil, false, err
		}
		if x.attrs != nil { // attributes of a dict subclass: tensors only
			if _, _, err := w.walk(x.attrs, depth+1); err != nil {
				return nil, false, err
			}
		}
		return meta, has, nil
	case pklTuple:
		return w.sequence(x, depth)
	case *pklList:
		return w.sequence(x.items, depth)
	case *pklSet:
		return w.sequence(x.items, depth)
	case *pklObject:
		return w.object(x, depth)
	}
	return ptMetaLeaf(v), true, nil
}

// mapping walks named children; the metadata is a map of the children
// that have any.
func (w *ptWalker) mapping(children []ptChild, depth int) (any, bool, error) {
	before := len(w.tensors)
	meta := map[string]any{}
	for _, c := range children {
		m, has, err := w.child(c.val, c.key, depth)
		if err != nil {
			return nil, false, err
		}
		if has {
			meta[c.key] = m
		}
	}
	if len(meta) == 0 && len(w.tensors) > before {
		return nil, false, nil
	}
	return meta, true, nil
}

// sequence walks elements by index; the metadata is an array when no
// element was a tensor (or held one), else a map from index.
func (w *ptWalker) sequence(items []any, depth int) (any, bool, error) {
	before := len(w.tensors)
	metas := make([]any, len(items))
	haves := make([]bool, len(items))
	for i, it := range items {
		m, has, err := w.child(it, strconv.Itoa(i), depth)
		if err != nil {
			return nil, false, err
		}
		metas[i], haves[i] = m, has
	}
	if len(w.tensors) == before && !slices.Contains(haves, false) {
		return metas, true, nil
	}
	meta := map[string]any{}
	for i := range items {
		if haves[i] {
			meta[strconv.Itoa(i)] = metas[i]
		}
	}
	if len(meta) == 0 {
		return nil, false, nil
	}
	return meta, true, nil
}

// object walks an opaque object: its dict entries (state and SETITEMS),
// list entries (APPENDS) and constructor arguments, all at the object's
// own level.
func (w *ptWalker) object(o *pklObject, depth int) (any, bool, error) {
	var children []ptChild
	addDict := func(d *pklDict) {
		for i := range d.keys {
			children = append(children, ptChild{ptKeyName(d.keys[i]), d.vals[i]})
		}
	}
	var rest []any // non-dict state, walked for tensors only
	if o.items != nil {
		addDict(o.items)
	}
	switch s := o.state.(type) {
	case nil:
	case *pklDict:
		addDict(s)
	case pklTuple:
		// (dict state, slots state) as object.__reduce_ex__ writes it.
		if len(s) == 2 && ptDictOrNone(s[0]) && ptDictOrNone(s[1]) {
			for _, x := range s {
				if d, ok := x.(*pklDict); ok {
					addDict(d)
				}
			}
		} else {
			rest = append(rest, s)
		}
	default:
		rest = append(rest, s)
	}
	for i, x := range o.list {
		children = append(children, ptChild{strconv.Itoa(i), x})
	}
	hasDict := len(children) > 0
	for i, a := range o.args {
		if _, ok := a.(*pklGlobal); ok {
			continue
		}
		children = append(children, ptChild{strconv.Itoa(i), a})
	}
	if !hasDict {
		// No named state: walk for tensors, describe the object by repr.
		for _, c := range children {
			if _, _, err := w.child(c.val, c.key, depth); err != nil {
				return nil, false, err
			}
		}
		for _, r := range rest {
			if _, _, err := w.walk(r, depth+1); err != nil {
				return nil, false, err
			}
		}
		return pklRepr(o, 200), true, nil
	}
	meta, has, err := w.mapping(children, depth)
	if err != nil {
		return nil, false, err
	}
	for _, r := range rest {
		if _, _, err := w.walk(r, depth+1); err != nil {
			return nil, false, err
		}
	}
	if m, ok := meta.(map[string]any); ok && has {
		if _, taken := m["__class__"]; !taken {
			m["__class__"] = pklRepr(o.class, 200)
		}
	}
	return meta, has, nil
}

func ptDictOrNone(v any) bool {
	_, ok := v.(*pklDict)
	return ok || v == nil
}

// ptMetaLeaf is a non-container value as JSON-encodable metadata.
func ptMetaLeaf(v any) any {
	switch x := v.(type) {
	case nil, bool, string, int64:
		return x
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		}
		return x
	case *big.Int:
		return json.Number(x.String())
	case *pklGlobal:
		return x.module + "." + x.name
	}
	return pklRepr(v, 200)
}

// ptRowMajor reports whether strides are the row-major contiguous strides
// of shape (dimensions of size 1 may have any stride; an empty tensor is
// contiguous).
func ptRowMajor(shape, strides []int64) bool {
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] == 0 {
			return true
		}
		if shape[i] != 1 && strides[i] != want {
			return false
		}
		want *= shape[i]
	}
	return true
}

// tensor checks t against its storage and the file, and records it.
func (w *ptWalker) tensor(t *torchTensor, name string) error {
	where := ptWhere(name)
	if len(w.tensors) >= MaxTensors {
		return ErrorAt(w.file, where, "more than %d tensors", MaxTensors)
	}
	if len(name) > MaxNameLength {
		return ErrorAt(w.file, "", "a tensor name is %d bytes long (at most %d)", len(name), MaxNameLength)
	}
	es := t.dt.ElemSize()
	if !t.dt.Valid() || es <= 0 {
		return ErrorAt(w.file, where, "dtype %s is not supported", t.dtName)
	}
	n, ok := Elements(t.shape)
	if !ok {
		return ErrorAt(w.file, where, "shape %v overflows", t.shape)
	}
	size, ok := t.dt.ByteSize(n)
	if !ok {
		return ErrorAt(w.file, where, "shape %v of %s overflows", t.shape, t.dt)
	}
	off0, stBytes, msg := w.span(t.storage)
	if msg != "" {
		return ErrorAt(w.file, where, "%s", msg)
	}
	out := Tensor{Name: name, DType: t.dt, Shape: append([]int64{}, t.shape...), Offset: off0, Size: size}
	if n > 0 {
		last := t.offset // index of the last reachable element
		for i, d := range t.shape {
			s := t.strides[i]
			if s < 0 {
				return ErrorAt(w.file, where, "negative stride %d in dimension %d", s, i)
			}
			if s != 0 && d-1 > (math.MaxInt64-last)/s {
				return ErrorAt(w.file, where, "view reaches past its storage (strides overflow)")
			}
			last += (d - 1) * s
		}
		if last >= math.MaxInt64/es || (last+1)*es > stBytes {
			return ErrorAt(w.file, where, "view reaches past its storage (element %d of a %d-byte %s storage %q)", last, stBytes, t.storage.typ.name, t.storage.key)
		}
		out.Offset = off0 + t.offset*es
		if !ptRowMajor(t.shape, t.strides) {
			out.Strides = append([]int64{}, t.strides...)
		}
		out.BigEndian = w.bigEndian && t.dt.Info().Unit > 1
	}
	w.tensors = append(w.tensors, out)
	return nil
}

// ptFinish sorts the walk's tensors, refuses duplicate names and returns
// the Index.
func ptFinish(file string, w *ptWalker, root any, format string) (*Index, error) {
	meta, has, err := w.walk(root, 0)
	if err != nil {
		return nil, err
	}
	md := map[string]any{}
	if has {
		if m, ok := meta.(map[string]any); ok {
			md = m
		} else {
			md["value"] = meta
		}
	}
	ts := w.tensors
	if name, dup := ptSortTensors(ts); dup {
		return nil, ErrorAt(file, ptWhere(name), "two tensors have this name")
	}
	if ts == nil {
		ts = []Tensor{}
	}
	return &Index{Format: format, Sources: []string{file}, Metadata: md, Tensors: ts}, nil
}

// ptSortTensors sorts ts by name and reports a name that appears twice.
func ptSortTensors(ts []Tensor) (string, bool) {
	slices.SortStableFunc(ts, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(ts); i++ {
		if ts[i].Name == ts[i-1].Name {
			return ts[i].Name, true
		}
	}
	return "", false
}

// ptElemSize is the byte size of one element of a storage.
func ptElemSize(st *torchStorage) int64 {
	if st.typ.dt == dtype.Invalid {
		return 0
	}
	return st.typ.dt.ElemSize()
}
