package torch

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// The tree walk: from the value a torch pickle builds to tensors (named by
// their keys joined with "/") and metadata (the non-tensor values, nested
// like the checkpoint).
//
// Naming: dict entries by key (str as is, int in decimal, a tensor or
// storage by its storage key, True/False/None and anything else by a
// Python-like repr); list, tuple and set elements by index; an opaque
// object (nn.Module, argparse.Namespace, a TorchScript module, an old
// optimizer) by the entries of its dict state and of any SETITEM(S)/
// APPEND(S) on it, and its constructor arguments by index; a bare tensor
// (or one storage) by the source file's base name without its extension.
//
// Nothing is dropped: within one container, an entry whose name is
// already taken (two tensor keys sharing a storage, the str "1" and the
// int 1, a key the pickle sets twice, an object attribute "0" beside its
// first constructor argument) is named NAME#1, then NAME#2..., the first
// free one, in the pickle's order. The same applies to whole tensor
// names (a key holding "/" can spell another path). Python keys a dict
// of tensors by identity, so such keys are distinct there too. A key is a
// name, not an entry: a tensor used as a key (an old optimizer's state,
// {param: {"exp_avg": ...}}) is served where it is a value (the model,
// the optimizer's param_groups), not under its key.
//
// Shared references (tied weights) give one tensor per name. A container
// that holds itself is walked once per path (the repeated edge is
// skipped). Every path costs: the walk charges a pickle.Budget of the
// pickle's size for each result (tensor or metadata value), each byte of
// a tensor name and each byte of metadata, so a few bytes that share one
// value 2^19 times are refused with the limit named, in time and memory
// that follow the file.

// ptSpan locates a storage's bytes: the range [off, off+size) of source
// src (0: the file; a deflated storage member is a source of its own)
// holding its elements, or a message saying why it cannot be served.
type ptSpan func(st *torchStorage) (src int, off, size int64, msg string)

type ptWalker struct {
	st        ptStream
	file      string
	base      string // name of a bare tensor
	span      ptSpan
	m         *pickle.Machine // where inline numpy data lie (SpanOf); may be nil
	bigEndian bool
	tensors   []index.Tensor
	unserved  []index.Unserved // tensors of dtypes tensorfs has no type for
	members   []index.Member   // Sources 1, 2, ... (see torch_numpy.go)
	// pkl is the deflated data.pkl as a member, made on first use
	// (streamSource); nil when the stream is a range of the file.
	pkl       *index.Member
	pklSource int // its Source once made; 0 before
	budget    *pickle.Budget
	onPath    map[any]bool
	path      []string // components of the value being walked
	pathLen   int      // len(strings.Join(path, "/"))
	bigs      map[*big.Int]string
}

func newPtWalker(st ptStream, span ptSpan) *ptWalker {
	return &ptWalker{st: st, file: st.file, base: index.BaseName(st.file), span: span,
		budget: pickle.NewBudget(st.budgetSize()), onPath: map[any]bool{}}
}

// keyName is a dict key as a name component (before ptDistinct makes it
// distinct).
func (w *ptWalker) keyName(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case *big.Int:
		return w.bigString(x)
	case *torchTensor:
		return x.storage.key
	case *torchStorage:
		return x.key
	}
	return pickle.Repr(k, 200)
}

func (w *ptWalker) name() string {
	if len(w.path) == 0 {
		return w.base
	}
	return strings.Join(w.path, "/")
}

// child walks v as the entry key of the value being walked.
func (w *ptWalker) child(v any, key string, depth int) (any, bool, error) {
	old := w.pathLen
	if len(w.path) > 0 {
		w.pathLen++
	}
	w.pathLen += len(key)
	w.path = append(w.path, key)
	m, has, err := w.walk(v, depth+1)
	w.path = w.path[:len(w.path)-1]
	w.pathLen = old
	return m, has, err
}

// ptChild is one named entry of a container.
type ptChild struct {
	key string
	val any
}

// ptChildren are a container's entries, named distinctly by done.
type ptChildren struct {
	list []ptChild
}

func (c *ptChildren) add(key string, v any) {
	c.list = append(c.list, ptChild{key, v})
}

// done makes the names distinct (ptDistinct) and returns the entries.
func (c *ptChildren) done() []ptChild {
	names := make([]string, len(c.list))
	for i := range c.list {
		names[i] = c.list[i].key
	}
	if ptDistinct(names) {
		for i := range c.list {
			c.list[i].key = names[i]
		}
	}
	return c.list
}

// ptDistinct makes names distinct in place, in order: a name an earlier
// one already took gets the first free suffix #1, #2, ... It reports
// whether it changed any. Names that are already distinct (the usual
// case) cost one set of 64-bit hashes, not of the names.
func ptDistinct(names []string) bool {
	if len(names) < 2 {
		return false
	}
	seed := maphash.MakeSeed()
	seen := make(map[uint64]struct{}, len(names))
	clash := false
	for _, n := range names {
		h := maphash.String(seed, n)
		if _, ok := seen[h]; ok {
			clash = true // a repeated name, or (rarely) two names that hash alike
			break
		}
		seen[h] = struct{}{}
	}
	if !clash {
		return false
	}
	var u index.UniqueNames
	changed := false
	for i := range names {
		n := u.Take(names[i])
		changed = changed || n != names[i]
		names[i] = n
	}
	return changed
}

// budgetErr is a budget error located at the value being walked.
func (w *ptWalker) budgetErr(err error) error {
	return index.ErrorAt(w.file, "at "+strconv.Quote(pickle.Clip(w.name())), "%v", err)
}

// meta charges n bytes of metadata.
func (w *ptWalker) meta(n int) error {
	if err := w.budget.MetaBytes(int64(n)); err != nil {
		return w.budgetErr(err)
	}
	return nil
}

// walk visits v at path; it returns v's metadata (JSON-encodable) and
// whether there is any.
func (w *ptWalker) walk(v any, depth int) (any, bool, error) {
	if err := w.budget.Results(1); err != nil {
		return nil, false, w.budgetErr(err)
	}
	if depth > index.MaxNesting {
		return nil, false, index.ErrorAt(w.file, index.TensorWhere(w.name()), "containers nest deeper than %d", index.MaxNesting)
	}
	switch x := v.(type) {
	case *torchTensor:
		if err := w.tensor(x); err != nil {
			return nil, false, err
		}
		return nil, false, w.tensorState(x, depth)
	case *torchStorage:
		n := x.numel
		return nil, false, w.tensor(&torchTensor{storage: x, dt: x.typ.dt, dtName: x.typ.name, shape: []int64{n}, strides: []int64{1}})
	case *pickle.NDArray:
		return w.ndarray(x, depth)
	case *torchUnserved:
		name, err := w.tensorName()
		if err != nil {
			return nil, false, err
		}
		why := x.why
		if why == "" {
			why = "tensorfs has no dtype for " + x.dtName
		}
		w.unserved = append(w.unserved, index.Unserved{Name: name, Type: x.dtName, Shape: append([]int64{}, x.shape...), Offset: -1, Why: why})
		return nil, false, nil
	case *pickle.Refused:
		return nil, false, &index.FormatError{File: w.file, Offset: w.st.fileOff(x.Off), Where: index.TensorWhere(w.name()), Msg: x.What + " is not supported"}
	case *pickle.Invalid:
		return nil, false, w.errAtStream(x.Off, x.Msg)
	case *pickle.Dict, *pickle.List, *pickle.Set, *pickle.Object:
		if w.onPath[v] {
			return "<recursive reference>", true, nil
		}
		w.onPath[v] = true
		defer delete(w.onPath, v)
	}
	switch x := v.(type) {
	case *pickle.Dict:
		var children ptChildren
		for i := range x.Keys {
			children.add(w.keyName(x.Keys[i]), x.Vals[i])
		}
		meta, has, err := w.mapping(children.done(), depth)
		if err != nil {
			return nil, false, err
		}
		for _, a := range x.Attrs { // attributes of a dict subclass: tensors only
			if _, _, err := w.walk(a, depth+1); err != nil {
				return nil, false, err
			}
		}
		return meta, has, nil
	case pickle.Tuple:
		return w.sequence(x, depth)
	case *pickle.List:
		return w.sequence(x.Items, depth)
	case *pickle.Set:
		return w.sequence(x.Items, depth)
	case *pickle.Object:
		return w.object(x, depth)
	}
	if b, ok := v.(*big.Int); ok {
		s := w.bigString(b)
		if err := w.meta(len(s)); err != nil {
			return nil, false, err
		}
		return json.Number(s), true, nil
	}
	leaf, n := ptMetaLeaf(v)
	if err := w.meta(n); err != nil {
		return nil, false, err
	}
	return leaf, true, nil
}

// tensorState walks the Python attributes of tensor t for tensors only,
// as NAME#state beside the tensor NAME.
func (w *ptWalker) tensorState(t *torchTensor, depth int) error {
	for _, st := range t.state {
		if len(w.path) == 0 {
			if _, _, err := w.child(st, w.base+"#state", depth); err != nil {
				return err
			}
			continue
		}
		last, oldLen := w.path[len(w.path)-1], w.pathLen
		w.path = w.path[:len(w.path)-1]
		w.pathLen -= len(last)
		if len(w.path) > 0 {
			w.pathLen--
		}
		_, _, err := w.child(st, last+"#state", depth)
		w.path, w.pathLen = append(w.path, last), oldLen
		if err != nil {
			return err
		}
	}
	return nil
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
			if err := w.meta(len(c.key)); err != nil {
				return nil, false, err
			}
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

// object walks an opaque object: its dict entries (states and SETITEMS),
// list entries (APPENDS) and constructor arguments, all at the object's
// own level, named distinctly.
func (w *ptWalker) object(o *pickle.Object, depth int) (any, bool, error) {
	var children ptChildren
	addDict := func(d *pickle.Dict) {
		for i := range d.Keys {
			children.add(w.keyName(d.Keys[i]), d.Vals[i])
		}
	}
	var rest []any // non-dict state, walked for tensors only
	if o.Items != nil {
		addDict(o.Items)
	}
	switch k := o.Kwargs.(type) {
	case nil:
	case *pickle.Dict:
		addDict(k)
	default:
		rest = append(rest, k)
	}
	if _, ok := o.Class.(*pickle.Global); !ok && o.Class != nil {
		rest = append(rest, o.Class) // a callable value: walked for tensors
	}
	for _, st := range o.State {
		switch s := st.(type) {
		case nil:
		case *pickle.Dict:
			addDict(s)
		case pickle.Tuple:
			// (dict state, slots state) as object.__reduce_ex__ writes it.
			if len(s) == 2 && ptDictOrNone(s[0]) && ptDictOrNone(s[1]) {
				for _, x := range s {
					if d, ok := x.(*pickle.Dict); ok {
						addDict(d)
					}
				}
			} else {
				rest = append(rest, s)
			}
		default:
			rest = append(rest, s)
		}
	}
	for i, x := range o.List {
		children.add(strconv.Itoa(i), x)
	}
	hasDict := len(children.list) > 0
	for i, a := range o.Args {
		if _, ok := a.(*pickle.Global); ok {
			continue
		}
		children.add(strconv.Itoa(i), a)
	}
	list := children.done()
	if !hasDict {
		// No named state: walk for tensors, describe the object by repr.
		for _, c := range list {
			if _, _, err := w.child(c.val, c.key, depth); err != nil {
				return nil, false, err
			}
		}
		for _, r := range rest {
			if _, _, err := w.walk(r, depth+1); err != nil {
				return nil, false, err
			}
		}
		s := pickle.Repr(o, 200)
		return s, true, w.meta(len(s))
	}
	meta, has, err := w.mapping(list, depth)
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
			s := pickle.Repr(o.Class, 200)
			if err := w.meta(len(s)); err != nil {
				return nil, false, err
			}
			m["__class__"] = s
		}
	}
	return meta, has, nil
}

func ptDictOrNone(v any) bool {
	_, ok := v.(*pickle.Dict)
	return ok || v == nil
}

// bigString is b in decimal, converted once per value: a 64 KiB integer
// takes about 12 ms to print, and a shared one is reached by many paths.
func (w *ptWalker) bigString(b *big.Int) string {
	if s, ok := w.bigs[b]; ok {
		return s
	}
	if w.bigs == nil {
		w.bigs = map[*big.Int]string{}
	}
	s := b.String()
	w.bigs[b] = s
	return s
}

// ptMetaLeaf is a non-container value as JSON-encodable metadata, and
// the bytes it renders to (roughly: strings as stored).
func ptMetaLeaf(v any) (any, int) {
	switch x := v.(type) {
	case nil, bool, int64:
		return x, 8
	case string:
		return x, len(x)
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN", 8
		case math.IsInf(x, 1):
			return "Infinity", 8
		case math.IsInf(x, -1):
			return "-Infinity", 8
		}
		return x, 8
	case *big.Int:
		s := x.String()
		return json.Number(s), len(s)
	case *pickle.Global:
		s := x.Module + "." + x.Name
		return s, len(s)
	}
	s := pickle.Repr(v, 200)
	return s, len(s)
}

// tensorName checks the count of tensors and the length and budget of
// the name of the tensor being walked, before building it.
func (w *ptWalker) tensorName() (string, error) {
	if len(w.tensors) >= index.MaxTensors {
		return "", index.ErrorAt(w.file, "", "more than %d tensors", index.MaxTensors)
	}
	nl := w.pathLen
	if len(w.path) == 0 {
		nl = len(w.base)
	}
	if nl > index.MaxNameLength {
		return "", index.ErrorAt(w.file, "", "a tensor name is %d bytes long (at most %d)", nl, index.MaxNameLength)
	}
	if err := w.budget.NameBytes(int64(nl)); err != nil {
		return "", index.ErrorAt(w.file, "", "%v", err)
	}
	if err := w.budget.Tensors(1); err != nil {
		return "", index.ErrorAt(w.file, "", "%v", err)
	}
	return w.name(), nil
}

// tensor checks t against its storage and the file, and records it.
func (w *ptWalker) tensor(t *torchTensor) error {
	name, err := w.tensorName()
	if err != nil {
		return err
	}
	where := index.TensorWhere(name)
	es, shape := t.dt.ElemSize(), t.shape
	if t.x2 { // bytes of two F4 elements: es, t.offset and t.strides count them
		es = 1
		var ok bool
		if shape, ok = x2Shape(t.shape); !ok {
			return index.ErrorAt(w.file, where, "shape %v of %s overflows", t.shape, t.dtName)
		}
	}
	if !t.dt.Valid() || es <= 0 {
		return index.ErrorAt(w.file, where, "dtype %s is not supported", t.dtName)
	}
	n, ok := index.Elements(t.shape)
	if !ok {
		return index.ErrorAt(w.file, where, "shape %v overflows", t.shape)
	}
	ne, ok := index.Elements(shape)
	if !ok {
		return index.ErrorAt(w.file, where, "shape %v overflows", t.shape)
	}
	size, ok := t.dt.ByteSize(ne)
	if !ok {
		return index.ErrorAt(w.file, where, "shape %v of %s overflows", t.shape, t.dt)
	}
	src, off0, stBytes, msg := w.span(t.storage)
	if msg != "" {
		return index.ErrorAt(w.file, where, "%s", msg)
	}
	out := index.Tensor{Name: name, DType: t.dt, Shape: append([]int64{}, shape...), Source: src, Offset: off0, Size: size}
	if n > 0 {
		last := t.offset // index of the last reachable element
		for i, d := range t.shape {
			s := t.strides[i]
			if s < 0 {
				return index.ErrorAt(w.file, where, "negative stride %d in dimension %d", s, i)
			}
			if s != 0 && d-1 > (math.MaxInt64-last)/s {
				return index.ErrorAt(w.file, where, "view reaches past its storage (strides overflow)")
			}
			last += (d - 1) * s
		}
		if last >= math.MaxInt64/es || (last+1)*es > stBytes {
			return index.ErrorAt(w.file, where, "view reaches past its storage (element %d of a %d-byte %s storage %q)", last, stBytes, t.storage.typ.name, t.storage.key)
		}
		out.Offset = off0 + t.offset*es
		if !index.RowMajor(t.shape, t.strides) {
			out.Strides = append([]int64{}, t.strides...)
		}
		out.BigEndian = w.bigEndian && t.dt.Info().Unit > 1
	}
	w.tensors = append(w.tensors, out)
	return nil
}

// ptFinish walks root, sorts the tensors and returns the Index.
func ptFinish(w *ptWalker, root any, format string) (*index.Index, error) {
	file := w.file
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
	names := make([]string, len(ts))
	for i := range ts {
		names[i] = ts[i].Name
	}
	if ptDistinct(names) { // whole names, in walk order
		for i := range ts {
			if len(names[i]) > index.MaxNameLength {
				return nil, index.ErrorAt(file, "", "a tensor name is %d bytes long (at most %d)", len(names[i]), index.MaxNameLength)
			}
			ts[i].Name = names[i]
		}
	}
	if name, dup := index.SortTensors(ts); dup {
		return nil, index.ErrorAt(file, index.TensorWhere(name), "two tensors have this name")
	}
	if ts == nil {
		ts = []index.Tensor{}
	}
	srcs := []string{file}
	for range w.members {
		srcs = append(srcs, "") // SourceName joins file and name
	}
	us := w.unserved
	sort.Slice(us, func(i, j int) bool { return us[i].Name < us[j].Name })
	return &index.Index{Format: format, Sources: srcs, Metadata: md, Tensors: ts, Members: w.members, Unserved: us}, nil
}

// streamSource returns the source and offset of stream offset off: the
// file where the stream is a range of it, else the deflated data.pkl as
// a member.
func (w *ptWalker) streamSource(off int64) (int, int64, error) {
	if fo := w.st.fileOff(off); fo >= 0 {
		return 0, fo, nil
	}
	if w.pkl == nil || off < 0 {
		return 0, 0, index.ErrorAt(w.file, index.TensorWhere(w.name()), "internal error: no place for byte %d of the pickle", off)
	}
	if w.pklSource == 0 {
		m := *w.pkl
		m.Source = 1 + len(w.members)
		w.members = append(w.members, m)
		w.pklSource = m.Source
	}
	return w.pklSource, off, nil
}

// errAtStream is a FormatError at stream offset off (-1: none) naming
// the value being walked.
func (w *ptWalker) errAtStream(off int64, msg string) error {
	where := index.TensorWhere(w.name())
	if fo := w.st.fileOff(off); fo >= 0 || off < 0 {
		return &index.FormatError{File: w.file, Offset: fo, Where: where, Msg: msg}
	}
	return index.ErrorAt(w.file, fmt.Sprintf("%s, %s at byte %d", where, w.st.where, off), "%s", msg)
}

// ptElemSize is the byte size of one element of a storage.
func ptElemSize(st *torchStorage) int64 {
	if st.typ.dt == dtype.Invalid {
		return 0
	}
	return st.typ.dt.ElemSize()
}
