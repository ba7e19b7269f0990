package dcp

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
	"github.com/lazyweights/tensorfs/index/torch"
	"github.com/lazyweights/tensorfs/tiling"
)

// Dir is the directory ParseDir reads: its path, its regular files (as
// the loader lists them), how to open one, and, for a local directory,
// the check that a file does not lead out of it (a symbolic link).
type Dir struct {
	Path   string
	Files  []string
	Open   func(path string) (index.File, error)
	Inside func(path string) error // nil: no check (a remote prefix)
	// MaxDecoded, when positive, is the largest storage a zstd item may
	// decode to (what the inflate cache can hold): a chunk said to be
	// larger is refused before any decoding, so that no .metadata can
	// make opening decode more than the cache could serve.
	MaxDecoded int64
}

// MetadataFile returns the path of the .metadata among files, if any.
func MetadataFile(files []string) (string, bool) {
	for _, p := range files {
		if filepath.Base(p) == MetadataName {
			return p, true
		}
	}
	return "", false
}

// ParseDir reads the distributed checkpoint of d, whose .metadata is
// meta (Sniff accepted it; the caller closes it). The Index has Format
// "dcp", the .distcp files it reads as its first Sources (files[i] is
// Sources[i], opened here and closed again on error), then one member
// of kind Tiles per tensor tiled from several chunks, which the
// caller opens (a backing.Tiled over the files); tensors are unsorted
// and have no paths.
func ParseDir(d Dir, meta index.File) (*index.Index, []index.File, error) {
	md, err := ReadMetadata(meta)
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string]string, len(d.Files))
	for _, p := range d.Files {
		byName[filepath.Base(p)] = p
	}
	l := &loader{dir: d, meta: meta.Name(), metaSize: meta.Size(), byName: byName, fileIdx: map[string]int{},
		chunks: map[Item]chunkItem{}, values: map[Item]valueItem{},
		valueLeft: pickle.MetaBytesFloor + pickle.MetaBytesPerByte*meta.Size()}
	idx, err := l.build(md)
	if err != nil {
		for _, f := range l.files {
			if c, ok := f.(io.Closer); ok {
				c.Close()
			}
		}
		return nil, nil, err
	}
	return idx, l.files, nil
}

// loader builds the Index of a distributed checkpoint.
type loader struct {
	dir      Dir
	meta     string // the .metadata's name, for messages
	metaSize int64
	byName   map[string]string // the directory's files by base name
	files    []index.File      // opened: the .distcp files
	paths    []string
	fileIdx  map[string]int // relative path -> index in files
	// Each item is read once however many chunks or values name it.
	chunks map[Item]chunkItem
	values map[Item]valueItem
	// zmembers are the zstd items' storages (index.Zstd), sources
	// after the files: a chunk in one has fi -1-k for zmembers[k].
	zmembers []index.Member
	// blobs are the safetensors blobs read (nil: the item there is not one).
	blobs map[blobKey]*blob
	// valueLeft is the bytes of values still allowed: a floor and
	// MetaBytesPerByte per byte of the .metadata and of each item read,
	// charged per value (bytes, not visits: values naming one item each
	// pay for it).
	valueLeft int64
}

// chunkItem is what a chunk's item holds: its one tensor (or why not).
type chunkItem struct {
	fi  int
	sec string // the item's name, for messages
	t   index.Tensor
	err error
}

// valueItem is a non-tensor item read: its value and what it costs.
type valueItem struct {
	v    any
	cost int64
}

// file opens (once) the file an item names, after checking that the name
// stays inside the directory.
func (l *loader) file(rel, where string) (int, error) {
	if i, ok := l.fileIdx[rel]; ok {
		return i, nil
	}
	if rel == "" || rel == "." || rel == ".." || strings.ContainsAny(rel, "/\\\x00") || filepath.IsAbs(rel) {
		return 0, index.ErrorAt(l.metaPath(), where, "the item's relative_path %q is not a file name inside the checkpoint's directory", rel)
	}
	p, ok := l.byName[rel]
	if !ok {
		return 0, index.ErrorAt(l.metaPath(), where, "the item is in %s, which is not in the directory", index.Printable(rel))
	}
	if l.dir.Inside != nil {
		if err := l.dir.Inside(p); err != nil {
			return 0, index.ErrorAt(l.metaPath(), where, "%v", err)
		}
	}
	f, err := l.dir.Open(p)
	if err != nil {
		return 0, err
	}
	l.files = append(l.files, f)
	l.paths = append(l.paths, p)
	l.fileIdx[rel] = len(l.files) - 1
	return len(l.files) - 1, nil
}

func (l *loader) metaPath() string { return l.meta }

// section is one item of a .distcp file, as a File for the parsers.
type section struct {
	*io.SectionReader
	name string
}

func (s section) Name() string { return s.name }

// smallItem is the size of an item read into memory at once.
const smallItem = 64 << 10

// itemFile returns the item's bytes as a File, after checking it lies in
// its file.
func (l *loader) itemFile(it Item, where string) (int, section, error) {
	fi, name, err := l.itemRange(it, where)
	if err != nil {
		return 0, section{}, err
	}
	f := l.files[fi]
	if it.Length <= smallItem {
		// One read, not one per zip record and pickle: a tensor in
		// 65,536 chunks is 65,536 items.
		buf := make([]byte, it.Length)
		if n, err := f.ReadAt(buf, it.Offset); int64(n) == it.Length && (err == nil || err == io.EOF) {
			return fi, section{io.NewSectionReader(bytes.NewReader(buf), 0, it.Length), name}, nil
		}
	}
	return fi, section{io.NewSectionReader(f, it.Offset, it.Length), name}, nil
}

// itemRange returns the file of it, checked to hold it, and its name for
// messages, reading none of it.
func (l *loader) itemRange(it Item, where string) (int, string, error) {
	fi, err := l.file(it.RelativePath, where)
	if err != nil {
		return 0, "", err
	}
	f := l.files[fi]
	if it.Offset > f.Size() || it.Length > f.Size()-it.Offset {
		return 0, "", index.ErrorAt(l.metaPath(), where, "the item, bytes [%d, +%d) of %s, is past the file's end (%d bytes)", it.Offset, it.Length, index.Printable(it.RelativePath), f.Size())
	}
	return fi, fmt.Sprintf("%s (item at byte %d)", f.Name(), it.Offset), nil
}

// name returns the tensor name of a key: its planner_data path joined
// with '/', or the key itself.
func (md *Metadata) name(fqn string) string {
	if p, ok := md.Planner[fqn]; ok {
		return strings.Join(p, "/")
	}
	return fqn
}

// build makes the Index.
func (l *loader) build(md *Metadata) (*index.Index, error) {
	idx := &index.Index{Format: "dcp", Metadata: map[string]any{}}
	fqns := map[string]string{}
	var members []tiledTensor
	var empty []int // tensors of no elements and no chunk
	notRead := map[string]string{}
	var tensorNames index.UniqueNames
	for _, tm := range md.Tensors {
		where := "tensor " + quote(tm.FQN)
		name := tensorNames.Take(md.name(tm.FQN))
		fqns[name] = tm.FQN
		if why, ok := md.NotRead[tm.FQN]; ok {
			notRead[name] = why
			continue
		}
		n, _ := index.Elements(tm.Size)
		size, ok := tm.bytes(tm.Size)
		if !ok {
			return nil, index.ErrorAt(l.metaPath(), where, "the size %v overflows", tm.Size)
		}
		t := index.Tensor{Name: name, DType: tm.DType, Shape: tm.ElemShape(tm.Size), Size: size}
		if it, ok := l.untransformed(md, tm); ok {
			// Stored through a transform tensorfs does not know: this
			// tensor is listed, not served; the rest are.
			fi, err := l.file(it.RelativePath, where)
			if err != nil {
				return nil, err
			}
			idx.Unserved = append(idx.Unserved, index.Unserved{Name: name, Type: tm.DType.String(), Shape: t.Shape, Source: fi, Offset: -1,
				Why: fmt.Sprintf("stored through the transforms %s (torch _StorageInfo.transform_descriptors), which tensorfs does not read", it.Transform)})
			continue
		}
		tiles, err := l.tiles(md, tm, n, where)
		if err != nil {
			return nil, err
		}
		if orig, ok := md.Reformulated[tm.FQN]; ok {
			cs, why := unreformulate(tm.Size, orig, tiles.ElemSize, tiles.Chunks)
			if why != "" {
				notRead[name] = why
				continue
			}
			if err := checkOverlap(orig, cs); err != nil {
				return nil, index.ErrorAt(l.metaPath(), where, "reformulated: %v", err)
			}
			tiles.Shape, tiles.Chunks, t.Shape = orig, cs, tm.ElemShape(orig)
		}
		var whole *index.Chunk // the one chunk holding every element
		for i := range tiles.Chunks {
			if e, _ := index.Elements(tiles.Chunks[i].Shape); e == n {
				whole = &tiles.Chunks[i]
				break
			}
		}
		switch {
		case whole != nil:
			t.Source, t.Offset = whole.Source, whole.Offset
		case n == 0:
			empty = append(empty, len(idx.Tensors)) // no chunk: any file will do
		default:
			members = append(members, tiledTensor{t: len(idx.Tensors), tiles: tiles})
		}
		idx.Tensors = append(idx.Tensors, t)
	}
	if err := l.byteValues(md, idx, fqns); err != nil {
		return nil, err
	}
	if len(empty) > 0 && len(l.paths) == 0 {
		return nil, index.ErrorAt(l.metaPath(), "tensor "+quote(fqns[idx.Tensors[empty[0]].Name]), "no chunk of any tensor or value is stored: the checkpoint has no data file")
	}
	for _, i := range empty {
		idx.Tensors[i].Source, idx.Tensors[i].Offset = 0, 0
	}
	l.sources(idx, members)
	idx.Keys = fqns // beside Metadata: no key of the checkpoint can take its place
	if len(notRead) > 0 {
		// Apart from Metadata: a key of the checkpoint could be
		// "dcp.not_read".
		idx.NotRead = notRead
		idx.Notes = append(idx.Notes, fmt.Sprintf("%d tensors saved by Megatron in a reformulated shape are listed, not read (index.json not_read says why)", len(notRead)))
	}
	slices.SortFunc(idx.Unserved, func(a, b index.Unserved) int { return strings.Compare(a.Name, b.Name) })
	return idx, nil
}

// tiledTensor is a tensor of several chunks: a member of its own.
type tiledTensor struct {
	t     int // in idx.Tensors
	tiles *index.Tiles
}

// tiles places the chunks of tm (of n elements), checking that they
// cover it exactly once.
func (l *loader) tiles(md *Metadata, tm TensorMeta, n int64, where string) (*index.Tiles, error) {
	tiles := &index.Tiles{Shape: tm.Size, ElemSize: int64(tm.DType.ElemSize())}
	if tm.X2 {
		tiles.ElemSize = 1 // tiled in torch's elements, bytes of two F4 each
	}
	var covered int64
	for _, c := range tm.Chunks {
		cw := fmt.Sprintf("%s, chunk at %v", where, c.Offsets)
		it, ok := md.Storage[itemKey(tm.FQN, c.Offsets)]
		if cn, _ := index.Elements(c.Sizes); !ok && cn == 0 {
			continue // an empty chunk holds nothing: its item may be left out
		}
		if !ok {
			return nil, index.ErrorAt(l.metaPath(), cw, "storage_data has no item for the chunk")
		}
		src, off, err := l.chunk(tm, c, it, cw)
		if err != nil {
			return nil, err
		}
		cn, _ := index.Elements(c.Sizes)
		covered += cn
		tiles.Chunks = append(tiles.Chunks, index.Chunk{Source: src, Offset: off, Start: c.Offsets, Shape: c.Sizes})
	}
	if covered != n {
		return nil, index.ErrorAt(l.metaPath(), where, "the chunks hold %d elements of the tensor's %d: they leave holes or overlap", covered, n)
	}
	if err := checkOverlap(tm.Size, tiles.Chunks); err != nil {
		return nil, index.ErrorAt(l.metaPath(), where, "%v", err)
	}
	return tiles, nil
}

// byteValues reads the checkpoint's non-tensor values into idx.Metadata.
func (l *loader) byteValues(md *Metadata, idx *index.Index, fqns map[string]string) error {
	var valueNames index.UniqueNames
	for _, fqn := range md.Bytes {
		name := valueNames.Take(md.name(fqn))
		fqns[name] = fqn
		it, ok := md.Storage[itemKey(fqn, nil)]
		if !ok {
			return index.ErrorAt(l.metaPath(), "key "+quote(fqn), "storage_data has no item for the value")
		}
		v, err := l.value(it, "value "+quote(fqn))
		if err != nil {
			return err
		}
		idx.Metadata[name] = v
	}
	return nil
}

// sources lists idx's sources: every file, then the zstd items' storages,
// then the tiled tensors (which may read them), renumbering the sources
// the tensors and chunks name.
func (l *loader) sources(idx *index.Index, members []tiledTensor) {
	idx.Sources = slices.Clone(l.paths) // every file is open: members come after
	// The zstd items' storages, then the tiled tensors (which may read
	// them).
	zbase := len(idx.Sources)
	src := func(fi int) int {
		if fi < 0 {
			return zbase - 1 - fi
		}
		return fi
	}
	for k, zm := range l.zmembers {
		zm.Source = zbase + k
		idx.Sources = append(idx.Sources, l.paths[zm.File]+":"+zm.Name)
		idx.Members = append(idx.Members, zm)
	}
	for i := range idx.Tensors {
		idx.Tensors[i].Source = src(idx.Tensors[i].Source)
	}
	for _, m := range members {
		for i := range m.tiles.Chunks {
			m.tiles.Chunks[i].Source = src(m.tiles.Chunks[i].Source)
		}
	}
	for _, m := range members {
		t := &idx.Tensors[m.t]
		ms := len(idx.Sources)
		idx.Sources = append(idx.Sources, l.dir.Path+":"+t.Name)
		idx.Members = append(idx.Members, index.Member{Source: ms, File: m.tiles.Chunks[0].Source, Name: t.Name, Size: t.Size, Kind: m.tiles})
		t.Source, t.Offset = ms, 0
	}
}

// untransformed returns an item of tm's chunks stored through a
// transform tensorfs does not read, if any.
func (l *loader) untransformed(md *Metadata, tm TensorMeta) (Item, bool) {
	for _, c := range tm.Chunks {
		if it, ok := md.Storage[itemKey(tm.FQN, c.Offsets)]; ok && it.Transform != "" && it.Transform != TransformZstd {
			return it, true
		}
	}
	return Item{}, false
}

// checkOverlap refuses chunks that overlap (elements counted twice; with
// the count equal to the tensor's, a hole somewhere else), in O(n log n)
// for n chunks along any dim (tiling.Check).
func checkOverlap(shape []int64, cs []index.Chunk) error {
	if len(cs) < 2 {
		return nil
	}
	boxes := make([]tiling.Box, len(cs))
	for i, c := range cs {
		boxes[i] = tiling.Box{Start: c.Start, Shape: c.Shape}
	}
	return tiling.Check(shape, boxes)
}

// chunk locates a tensor chunk's bytes: its item is a torch.save zip of
// the chunk, whose one storage is stored (not deflated) and holds the
// chunk's elements contiguously, row-major. An item is parsed once,
// however many chunks name it.
func (l *loader) chunk(tm TensorMeta, c ChunkMeta, it Item, where string) (int, int64, error) {
	ci, ok := l.chunks[it]
	if !ok && it.Transform == "" {
		// A safetensors blob holds many tensors at one item offset:
		// found by key, not by item.
		b, err := l.blob(it, where)
		if err != nil {
			return 0, 0, err
		}
		if b != nil {
			return l.blobChunk(b, tm, c, it, where)
		}
	}
	if !ok {
		if it.Transform == TransformZstd {
			want, ok := tm.bytes(c.Sizes)
			switch {
			case !ok || want > 1<<60:
				ci = l.readZstdChunk(it, 1<<60, where)
			case want > lazyZstdAbove: // decoded once, on first read
				ci = l.lazyZstdChunk(it, want, tm.DType, tm.ElemShape(c.Sizes), fmt.Sprintf("%s chunk at %v", tm.FQN, c.Offsets), where)
			default:
				ci = l.readZstdChunk(it, want, where)
			}
		} else {
			ci = l.readChunk(it, where)
		}
		l.chunks[it] = ci
	}
	if ci.err != nil {
		return 0, 0, ci.err
	}
	base := it.Offset
	if ci.fi < 0 {
		base = 0 // an offset in the member
	}
	t := &ci.t
	if cs := tm.ElemShape(c.Sizes); t.DType != tm.DType || !slices.Equal(t.Shape, cs) && !(len(t.Shape) == 0 && len(cs) == 0) {
		return 0, 0, index.ErrorAt(ci.sec, where, "the item holds a %s tensor of shape %v; the metadata says %s %v", t.DType, t.Shape, tm.DType, cs)
	}
	return ci.fi, base + t.Offset, nil
}

// readChunk reads the one tensor of a chunk's item.
func (l *loader) readChunk(it Item, where string) chunkItem {
	fi, sec, err := l.itemFile(it, where)
	if err != nil {
		return chunkItem{err: err}
	}
	ci := chunkItem{fi: fi, sec: sec.name}
	head := make([]byte, 9)
	if n, _ := sec.ReadAt(head, 0); n < 4 || string(head[:4]) != "PK\x03\x04" {
		if n == 9 && head[8] == '{' {
			ci.err = index.ErrorAt(sec.name, where, "the item is in the safetensors format (a torch >= 2.8 .distcp): tensorfs does not read it")
			return ci
		}
		ci.err = index.ErrorAt(sec.name, where, "the item is not a torch.save zip file")
		return ci
	}
	sub, err := torch.Parse(sec)
	if err != nil {
		ci.err = err
		return ci
	}
	if sub.Format != "pytorch" || len(sub.Tensors) != 1 || len(sub.Members) != 0 {
		ci.err = index.ErrorAt(sec.name, where, "want one tensor stored uncompressed, found %d tensors in %d members", len(sub.Tensors), len(sub.Members))
		return ci
	}
	t := &sub.Tensors[0]
	if t.BigEndian || !rowMajor(t) {
		ci.err = index.ErrorAt(sec.name, where, "the chunk is not stored contiguously, row-major, little-endian")
		return ci
	}
	if t.Offset < 0 || t.Size > it.Length || t.Offset > it.Length-t.Size {
		ci.err = index.ErrorAt(sec.name, where, "the chunk's bytes lie outside the item")
		return ci
	}
	ci.t = *t
	return ci
}

// rowMajor reports whether t's elements are contiguous in row-major order.
func rowMajor(t *index.Tensor) bool {
	if t.Strides == nil {
		return true
	}
	want := int64(1)
	for k := len(t.Shape) - 1; k >= 0; k-- {
		if t.Shape[k] != 1 && t.Strides[k] != want {
			return false
		}
		want *= t.Shape[k]
	}
	return true
}

// MaxValue caps the bytes of a non-tensor item that is read.
const MaxValue = 1 << 20

// value reads a non-tensor item (torch.save of a Python object) as plain
// data where the restricted unpickler can (numbers, strings, None and
// containers of them); anything else is described by its repr and size.
// An item is read once, however many values name it; each value pays
// for its bytes (valueCost) from the budget of values, past which it is
// described as not read.
func (l *loader) value(it Item, where string) (any, error) {
	vi, ok := l.values[it]
	if !ok {
		v, err := l.readValue(it, where)
		if err != nil {
			return nil, err
		}
		vi = valueItem{v: v, cost: valueCost(v, 0)}
		l.values[it] = vi
		l.valueLeft += pickle.MetaBytesPerByte * it.Length
	}
	if vi.cost > l.valueLeft {
		return map[string]any{"value": fmt.Sprintf("not read: the checkpoint's values take more bytes than its files allow (%d bytes of metadata and items; shared items multiply)", l.valueBytes()), "bytes": it.Length}, nil
	}
	l.valueLeft -= vi.cost
	return vi.v, nil
}

// valueBytes is the budget of values in all: what the floor and the
// bytes read allow.
func (l *loader) valueBytes() int64 {
	n := pickle.MetaBytesFloor + pickle.MetaBytesPerByte*l.metaSize
	for it := range l.values {
		n += pickle.MetaBytesPerByte * it.Length
	}
	return n
}

// valueCost is the bytes a plain value holds (its strings and keys, 16
// per element).
func valueCost(v any, depth int) int64 {
	switch x := v.(type) {
	case string:
		return 16 + int64(len(x))
	case []any:
		n := int64(16)
		for _, e := range x {
			n += valueCost(e, depth+1)
		}
		return n
	case map[string]any:
		n := int64(16)
		for k, e := range x {
			n += 16 + int64(len(k)) + valueCost(e, depth+1)
		}
		return n
	}
	return 16
}

// readValue reads a non-tensor item.
func (l *loader) readValue(it Item, where string) (any, error) {
	_, sec, err := l.itemFile(it, where)
	if err != nil {
		return nil, err
	}
	described := func(what string) any {
		return map[string]any{"value": what, "bytes": it.Length}
	}
	if it.Length > MaxValue {
		return described("not read"), nil
	}
	var zf io.ReaderAt = sec
	zsize := it.Length
	switch it.Transform {
	case "":
	case TransformZstd:
		data, err := zstdValue(sec)
		if err != nil {
			return described("not read: " + err.Error()), nil
		}
		zf, zsize = bytes.NewReader(data), int64(len(data))
	default:
		return described("not read: stored through the transforms " + it.Transform + ", which tensorfs does not read"), nil
	}
	zr, err := zip.NewReader(zf, zsize)
	if err != nil {
		return described("not a torch.save zip file"), nil
	}
	for _, zf := range zr.File {
		if !strings.HasSuffix(zf.Name, "/data.pkl") || strings.Count(zf.Name, "/") != 1 {
			continue
		}
		if zf.UncompressedSize64 > MaxValue {
			return described("not read"), nil
		}
		rc, err := zf.Open()
		if err != nil {
			return described("not read"), nil
		}
		data, err := io.ReadAll(io.LimitReader(rc, MaxValue))
		rc.Close()
		if err != nil {
			return described("not read"), nil
		}
		m := pickle.NewMachine(strings.NewReader(string(data)), int64(len(data)), pickle.PlainEnv{})
		v, err := m.Run()
		if err != nil {
			return described("not read: " + err.Error()), nil
		}
		if p, ok := plain(v, 0); ok {
			return p, nil
		}
		return described(pickle.Repr(v, 200)), nil
	}
	return described("not a torch.save zip file"), nil
}

// plain converts plain Python data to JSON-encodable values.
func plain(v any, depth int) (any, bool) {
	if depth > 16 {
		return nil, false
	}
	switch x := v.(type) {
	case nil, bool, int64, string:
		return x, true
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case pickle.Tuple:
		return plainList(x, depth)
	case *pickle.List:
		return plainList(x.Items, depth)
	case *pickle.Dict:
		out := make(map[string]any, x.Len())
		for i, k := range x.Keys {
			var ks string
			switch kk := k.(type) {
			case string:
				ks = kk
			case int64:
				ks = fmt.Sprint(kk)
			default:
				return nil, false
			}
			if _, dup := out[ks]; dup {
				return nil, false
			}
			pv, ok := plain(x.Vals[i], depth+1)
			if !ok {
				return nil, false
			}
			out[ks] = pv
		}
		return out, true
	}
	return nil, false
}

func plainList(items []any, depth int) (any, bool) {
	out := make([]any, len(items))
	for i, it := range items {
		p, ok := plain(it, depth+1)
		if !ok {
			return nil, false
		}
		out[i] = p
	}
	return out, true
}
