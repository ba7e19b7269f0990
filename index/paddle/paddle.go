package paddle

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
	"github.com/lazyweights/tensorfs/index/torch"
)

// ErrNotPaddle is what Parse returns (wrapped) for a pickle of a dict
// that holds no numpy array: not a checkpoint, which the caller reports
// as an unknown file rather than a broken Paddle one.
var ErrNotPaddle = errors.New("a pickle without numpy arrays, not a PaddlePaddle checkpoint")

// Sniff reports whether head starts a pickle of protocol 2 to 4 whose
// value begins as a dict (EMPTY_DICT after PROTO, and FRAME in protocol
// 4).
func Sniff(head []byte) bool {
	if len(head) < 3 || head[0] != pickle.OpPROTO || head[1] < 2 || head[1] > 4 {
		return false
	}
	i := 2
	if head[i] == pickle.OpFRAME {
		i += 9
	}
	return len(head) > i && head[i] == pickle.OpEMPTY_DICT
}

// unpackInfo is the key under which paddle.save lists split parameters.
const unpackInfo = "UnpackBigParamInfor@@"

// Parse reads a paddle.save file (see the package comment).
func Parse(f index.File) (*index.Index, error) {
	idx, root, err := torch.ParsePickle(f, &env{}, "paddle")
	if err != nil {
		return nil, err
	}
	if _, ok := root.(*pickle.Dict); !ok || len(idx.Tensors) == 0 {
		return nil, fmt.Errorf("%s: %w", f.Name(), ErrNotPaddle)
	}
	if err := join(f.Name(), idx); err != nil {
		return nil, err
	}
	return idx, nil
}

// evalFn is builtins.eval as the pickle names it: never called.
type evalFn struct{}

// env interprets paddle.save's pickles: plain data and numpy arrays
// (pickle.PlainEnv) and the two forms paddle.save reduces tensors to.
type env struct{ pickle.PlainEnv }

func (*env) Claims(module, name string) bool { return module == "builtins" && name == "eval" }

func (e *env) Global(m *pickle.Machine, module, name string, off int64) (any, error) {
	if module == "builtins" && name == "eval" {
		return &evalFn{}, nil
	}
	return e.PlainEnv.Global(m, module, name, off)
}

func (e *env) Call(m *pickle.Machine, fn any, args pickle.Tuple, off int64) (any, error) {
	if _, ok := fn.(*evalFn); ok {
		// paddle.save's reduce_LoDTensor: (eval, ('data', {'data': data})).
		if len(args) == 2 && args[0] == "data" {
			if d, ok := args[1].(*pickle.Dict); ok && len(d.Keys) == 1 && d.Keys[0] == "data" {
				if a, ok := d.Vals[0].(*pickle.NDArray); ok {
					return a, nil
				}
			}
		}
		return nil, m.Errorf(off, "refused global builtins.eval: called with %s, not the ('data', {'data': array}) of paddle.save (it is never called)", pickle.Repr(args, 60))
	}
	if g, ok := fn.(*pickle.Global); ok && g.Module == "builtins" && g.Name == "tuple" && len(args) == 1 {
		// paddle.save's reduce_varbase: (tuple, ((name, data),)), which
		// paddle.load gives back as the tensor.
		if pair, ok := args[0].(pickle.Tuple); ok && len(pair) == 2 {
			if _, ok := pair[0].(string); ok {
				if a, ok := pair[1].(*pickle.NDArray); ok {
					return a, nil
				}
			}
		}
	}
	return e.PlainEnv.Call(m, fn, args, off)
}

// join makes each parameter listed under UnpackBigParamInfor@@ one
// tensor of its slices, and takes the list out of the metadata.
func join(file string, idx *index.Index) error {
	raw, ok := idx.Metadata[unpackInfo]
	if !ok {
		return nil
	}
	where := "key " + strconv.Quote(unpackInfo)
	info, ok := raw.(map[string]any)
	if !ok {
		return index.ErrorAt(file, where, "is a %T, not a dict of {name: {'OriginShape': ..., 'slices': [...]}}", raw)
	}
	byName := make(map[string]int, len(idx.Tensors))
	for i, t := range idx.Tensors {
		byName[t.Name] = i
	}
	keys := make([]string, 0, len(info))
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	drop := map[int]bool{}
	var joined []index.Tensor
	for _, key := range keys {
		where := "parameter " + strconv.Quote(key) + " of " + unpackInfo
		ent, _ := info[key].(map[string]any)
		shape, ok1 := ints(ent["OriginShape"])
		names, ok2 := ent["slices"].([]any)
		if !ok1 || !ok2 || len(names) == 0 || len(shape) > index.MaxDims {
			return index.ErrorAt(file, where, "is not {'OriginShape': (ints), 'slices': [names]}")
		}
		n, ok := index.Elements(shape)
		if !ok {
			return index.ErrorAt(file, where, "OriginShape %v overflows", shape)
		}
		var parts []index.Part
		var first *index.Tensor
		elems := int64(0)
		for _, nv := range names {
			name, _ := nv.(string)
			i, ok := byName[name]
			if !ok || drop[i] {
				return index.ErrorAt(file, where, "slice %s is not an array of the file (or is listed twice)", pickle.Repr(nv, 80))
			}
			t := &idx.Tensors[i]
			if first == nil {
				first = t
			}
			if len(t.Shape) != 1 || t.Strides != nil || t.DType != first.DType || t.BigEndian != first.BigEndian {
				return index.ErrorAt(file, where, "slice %q is %s%v, not a flat piece like %q (%s)", name, t.DType, t.Shape, first.Name, first.DType)
			}
			drop[i] = true
			elems += t.Shape[0]
			if t.Size == 0 {
				continue
			}
			if l := len(parts) - 1; l >= 0 && parts[l].Source == t.Source && parts[l].Offset+parts[l].Size == t.Offset {
				parts[l].Size += t.Size
			} else {
				parts = append(parts, index.Part{Source: t.Source, Offset: t.Offset, Size: t.Size})
			}
		}
		if elems != n {
			return index.ErrorAt(file, where, "slices hold %d elements, OriginShape %v needs %d", elems, shape, n)
		}
		size, ok := first.DType.ByteSize(n)
		if !ok || size > math.MaxInt64 {
			return index.ErrorAt(file, where, "OriginShape %v of %s overflows", shape, first.DType)
		}
		t := index.Tensor{Name: key, DType: first.DType, Shape: shape, Size: size, BigEndian: first.BigEndian}
		switch len(parts) {
		case 0:
		case 1:
			t.Source, t.Offset = parts[0].Source, parts[0].Offset
		default:
			src := len(idx.Sources)
			idx.Sources = append(idx.Sources, idx.Sources[0]+":"+key)
			idx.Members = append(idx.Members, index.Member{Source: src, File: parts[0].Source, Name: key,
				Size: size, Kind: index.ConcatTiles(parts)})
			t.Source = src
		}
		joined = append(joined, t)
	}
	ts := make([]index.Tensor, 0, len(idx.Tensors)-len(drop)+len(joined))
	for i, t := range idx.Tensors {
		if !drop[i] {
			ts = append(ts, t)
		}
	}
	ts = append(ts, joined...)
	if name, dup := index.SortTensors(ts); dup {
		return index.ErrorAt(file, index.TensorWhere(name), "a joined parameter has the name of another array")
	}
	idx.Tensors = ts
	delete(idx.Metadata, unpackInfo)
	return nil
}

// ints reads a metadata tuple of non-negative integers (OriginShape).
func ints(v any) ([]int64, bool) {
	items, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(items))
	for i, x := range items {
		switch n := x.(type) {
		case int64:
			out[i] = n
		case int:
			out[i] = int64(n)
		default:
			return nil, false
		}
		if out[i] < 0 {
			return nil, false
		}
	}
	return out, true
}
