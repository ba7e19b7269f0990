package fs

import (
	"slices"
	"sort"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// listFiles returns the tensors place p holds (by index), sorted by
// tensor name, then path: index.json's order.
func (r *Root) listFiles(p place) []uint32 {
	in := r.placeIn(p)
	n := 0
	for _, m := range r.paths.fileIn {
		if m&in != 0 {
			n++
		}
	}
	out := make([]uint32, 0, n)
	for i, m := range r.paths.fileIn {
		if m&in != 0 {
			out = append(out, uint32(i))
		}
	}
	ts := r.idx.Tensors
	less := func(a, b uint32) int {
		if c := strings.Compare(ts[a].Name, ts[b].Name); c != 0 {
			return c
		}
		return strings.Compare(tensorPath(&ts[a]), tensorPath(&ts[b]))
	}
	if !slices.IsSortedFunc(out, less) {
		slices.SortStableFunc(out, less)
	}
	return out
}

// indexDoc is index.json's document without its tensor lists, which
// the mount writes a unit at a time (indexFile): index.Index.DocFields,
// the fields `ls --json` writes around its tensors.
func (r *Root) indexDoc() index.Document {
	d := r.idx.DocFields()
	if r.opts.View != dtype.Invalid {
		d.View = r.opts.View.String()
	}
	return d
}

// docOf describes tensor ti's file in place p (placeTop, or placeNative
// under .native/): the tensor as stored (index.Index.DocTensorOf), but
// for a file served through a view (converted, strided or big-endian),
// whose dtype and size are the file's and which is no range of a source.
func (r *Root) docOf(p place, ti uint32) index.DocTensor {
	f := r.fileIn(ti, p)
	f.size = r.fileSize(0, &f)
	d := r.idx.DocTensorOf(f.t)
	d.Path = tensorPath(f.t)
	if p == placeNative {
		d.Path = nativeDir + "/" + d.Path
	}
	if f.form != formDirect {
		d.DType, d.Size = f.dtype.Name(), f.size
		d.Source, d.Offset, d.Chunks = "", nil, nil
	}
	return d
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
