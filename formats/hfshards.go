package formats

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/dcp"
	"github.com/lazyweights/tensorfs/tiling"
)

// The Hugging Face storage writer of torch's distributed checkpoint
// (HuggingFaceStorageWriter, save_distributed=True) writes each rank's
// pieces as safetensors files (shard-0000R-model-0000I-of-0000N), with
// no .metadata and no index: each file's __metadata__ DCP_SHARDING_INFO
// places its pieces (saved_offsets) in their tensors. A directory of
// safetensors files of which one has DCP_SHARDING_INFO is read as the
// whole tensors the pieces make; a whole tensor is the box the pieces
// span, which they must fill exactly once.

// storagePieces is the safetensors row's Join: a directory's files merged
// in order, then the pieces DCP_SHARDING_INFO places replaced by their
// whole tensors (assemblePieces); one file alone is merged as it is.
type storagePieces struct{}

func (storagePieces) join(l *loader, dir string, parts []part, alone bool) (*index.Index, error) {
	if alone {
		return l.merge(parts, nil)
	}
	info, placed, err := shardingInfo(parts)
	if err != nil {
		return nil, err
	}
	idx, err := l.merge(parts, nil)
	if err != nil || !placed {
		return idx, err
	}
	if err := l.assemblePieces(dir, idx, parts, info); err != nil {
		return nil, err
	}
	return idx, nil
}

// shardingInfo returns each part's DCP_SHARDING_INFO (nil for a part
// without), and whether any part has one.
func shardingInfo(parts []part) ([]map[string][]int64, bool, error) {
	out := make([]map[string][]int64, len(parts))
	placed := false
	for i, p := range parts {
		s, ok := p.idx.Metadata[dcp.ShardingInfoKey].(string)
		if !ok {
			continue
		}
		m, err := dcp.ParseShardingInfo(s)
		if err != nil {
			return nil, false, index.ErrorAt(p.path, "__metadata__", "%v", err)
		}
		out[i], placed = m, true
	}
	return out, placed, nil
}

// assemblePieces replaces, in idx (merged from parts, one source each,
// its files the last len(idx.Sources) of l.files), the pieces that
// DCP_SHARDING_INFO places by their whole tensors: one piece filling
// its tensor is the tensor, several are a Tiles member.
func (l *loader) assemblePieces(dir string, idx *index.Index, parts []part, info []map[string][]int64) error {
	if len(idx.Sources) != len(parts) || len(idx.Members) != 0 {
		return index.ErrorAt(dir, "", "internal error: %d sources for %d safetensors files", len(idx.Sources), len(parts))
	}
	type piece struct {
		t    index.Tensor
		offs []int64
	}
	byName := map[string][]piece{}
	var names []string
	for _, t := range idx.Tensors {
		var offs []int64
		if m := info[t.Source]; m != nil {
			o, ok := m[t.Name]
			if !ok {
				return index.ErrorAt(parts[t.Source].path, "tensor "+strconv.Quote(t.Name), "%s does not place this tensor", dcp.ShardingInfoKey)
			}
			if len(o) != len(t.Shape) {
				return index.ErrorAt(parts[t.Source].path, "tensor "+strconv.Quote(t.Name), "%s gives %d offsets for a tensor of %d dims", dcp.ShardingInfoKey, len(o), len(t.Shape))
			}
			offs = o
		} else {
			offs = make([]int64, len(t.Shape))
		}
		if _, ok := byName[t.Name]; !ok {
			names = append(names, t.Name)
		}
		byName[t.Name] = append(byName[t.Name], piece{t, offs})
	}
	files := l.files[len(l.files)-len(idx.Sources):]
	var tensors []index.Tensor
	for _, name := range names {
		ps := byName[name]
		first := ps[0].t
		where := "tensor " + strconv.Quote(name)
		path := parts[first.Source].path
		shape := make([]int64, len(first.Shape))
		for _, p := range ps {
			if p.t.DType != first.DType || len(p.t.Shape) != len(shape) || !p.t.Contiguous() {
				return index.ErrorAt(parts[p.t.Source].path, where, "a piece of %s %v; another (in %s) is %s %v", p.t.DType, p.t.Shape, display(parts[first.Source].path), first.DType, first.Shape)
			}
			for k := range shape {
				end := p.offs[k] + p.t.Shape[k]
				if end < p.offs[k] {
					return index.ErrorAt(parts[p.t.Source].path, where, "the piece at %v of shape %v overflows", p.offs, p.t.Shape)
				}
				shape[k] = max(shape[k], end)
			}
		}
		n, ok := index.Elements(shape)
		if !ok {
			return index.ErrorAt(path, where, "the pieces span %v, which overflows", shape)
		}
		size, ok := first.DType.ByteSize(n)
		if !ok {
			return index.ErrorAt(path, where, "the pieces span %v, which overflows", shape)
		}
		var covered int64
		boxes := make([]tiling.Box, len(ps))
		for i, p := range ps {
			e, _ := index.Elements(p.t.Shape)
			covered += e
			boxes[i] = tiling.Box{Start: p.offs, Shape: p.t.Shape}
		}
		if covered != n {
			return index.ErrorAt(path, where, "the pieces placed by %s hold %d elements of the %d their span %v has: they leave holes or overlap", dcp.ShardingInfoKey, covered, n, shape)
		}
		if len(ps) == 1 {
			t := first
			t.Shape = shape
			tensors = append(tensors, t)
			continue
		}
		if err := tiling.Check(shape, boxes); err != nil {
			return index.ErrorAt(path, where, "the pieces placed by %s: %v", dcp.ShardingInfoKey, err)
		}
		tiles := &index.Tiles{Shape: shape, ElemSize: int64(first.DType.ElemSize())}
		for _, p := range ps {
			tiles.Chunks = append(tiles.Chunks, index.Chunk{Source: p.t.Source, Offset: p.t.Offset, Start: p.offs, Shape: p.t.Shape})
		}
		src := len(idx.Sources)
		idx.Sources = append(idx.Sources, dir+":"+name)
		m := index.Member{Source: src, File: first.Source, Name: name, Size: size, Kind: tiles}
		f, err := l.openMember(idx.SourceName(src), files, &m)
		if err != nil {
			return index.ErrorAt(path, where, "%v", err)
		}
		files = append(files, f)
		l.files = append(l.files, f)
		idx.Members = append(idx.Members, m)
		tensors = append(tensors, index.Tensor{Name: name, DType: first.DType, Shape: shape, Source: src, Size: size})
	}
	slices.SortFunc(tensors, func(a, b index.Tensor) int { return cmp.Compare(a.Name, b.Name) })
	idx.Tensors = tensors
	delete(idx.Metadata, dcp.ShardingInfoKey) // read: the pieces are placed
	return nil
}
