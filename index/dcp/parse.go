package dcp

import (
	"archive/zip"
	"cmp"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
	"github.com/lazyweights/tensorfs/index/torch"
)

// Dir is the directory ParseDir reads: its path, its regular files (as
// the loader lists them), how to open one, and, for a local directory,
// the check that a file does not lead out of it (a symbolic link).
type Dir struct {
	Path   string
	Files  []string
	Open   func(path string) (index.File, error)
	Inside func(path string) error // nil: no check (a remote prefix)
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
	l := &loader{dir: d, meta: meta.Name(), byName: byName, fileIdx: map[string]int{}}
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
	dir     Dir
	meta    string            // the .metadata's name, for messages
	byName  map[string]string // the directory's files by base name
	files   []index.File      // opened: the .distcp files
	paths   []string
	fileIdx map[string]int // relative path -> index in files
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

// itemFile returns the item's bytes as a File, after checking it lies in
// its file.
func (l *loader) itemFile(it Item, where string) (int, section, error) {
	fi, err := l.file(it.RelativePath, where)
	if err != nil {
		return 0, section{}, err
	}
	f := l.files[fi]
	if it.Offset > f.Size() || it.Length > f.Size()-it.Offset {
		return 0, section{}, index.ErrorAt(l.metaPath(), where, "the item, bytes [%d, +%d) of %s, is past the file's end (%d bytes)", it.Offset, it.Length, index.Printable(it.RelativePath), f.Size())
	}
	name := fmt.Sprintf("%s (item at byte %d)", f.Name(), it.Offset)
	return fi, section{io.NewSectionReader(f, it.Offset, it.Length), name}, nil
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
	type member struct {
		t     int // in idx.Tensors
		tiles *index.Tiles
	}
	var members []member
	var empty []int // tensors of no elements and no chunk
	notRead := map[string]any{}
	for _, tm := range md.Tensors {
		where := "tensor " + quote(tm.FQN)
		name := md.name(tm.FQN)
		fqns[name] = tm.FQN
		if why, ok := md.NotRead[tm.FQN]; ok {
			notRead[name] = why
			continue
		}
		n, _ := index.Elements(tm.Size)
		size, ok := tm.DType.ByteSize(n)
		if !ok {
			return nil, index.ErrorAt(l.metaPath(), where, "the size %v overflows", tm.Size)
		}
		t := index.Tensor{Name: name, DType: tm.DType, Shape: tm.Size, Size: size}
		tiles := &index.Tiles{Shape: tm.Size, ElemSize: int64(tm.DType.ElemSize())}
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
		if err := checkOverlap(tiles.Chunks); err != nil {
			return nil, index.ErrorAt(l.metaPath(), where, "%v", err)
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
			members = append(members, member{t: len(idx.Tensors), tiles: tiles})
		}
		idx.Tensors = append(idx.Tensors, t)
	}
	for _, fqn := range md.Bytes {
		name := md.name(fqn)
		fqns[name] = fqn
		it, ok := md.Storage[itemKey(fqn, nil)]
		if !ok {
			return nil, index.ErrorAt(l.metaPath(), "key "+quote(fqn), "storage_data has no item for the value")
		}
		v, err := l.value(it, "value "+quote(fqn))
		if err != nil {
			return nil, err
		}
		if _, dup := idx.Metadata[name]; dup {
			return nil, index.ErrorAt(l.metaPath(), "key "+quote(fqn), "two values are named %q", name)
		}
		idx.Metadata[name] = v
	}
	if len(empty) > 0 && len(l.paths) == 0 {
		return nil, index.ErrorAt(l.metaPath(), "tensor "+quote(fqns[idx.Tensors[empty[0]].Name]), "no chunk of any tensor or value is stored: the checkpoint has no data file")
	}
	for _, i := range empty {
		idx.Tensors[i].Source, idx.Tensors[i].Offset = 0, 0
	}
	idx.Sources = slices.Clone(l.paths) // every file is open: members come after
	for _, m := range members {
		t := &idx.Tensors[m.t]
		src := len(idx.Sources)
		idx.Sources = append(idx.Sources, l.dir.Path+":"+t.Name)
		idx.Members = append(idx.Members, index.Member{Source: src, File: m.tiles.Chunks[0].Source, Name: t.Name, Size: t.Size, Kind: m.tiles})
		t.Source, t.Offset = src, 0
	}
	keys := make(map[string]any, len(fqns))
	for name, fqn := range fqns {
		keys[name] = fqn
	}
	idx.Metadata["dcp.keys"] = keys
	if len(notRead) > 0 {
		idx.Metadata["dcp.not_read"] = notRead
	}
	return idx, nil
}

// checkOverlap refuses chunks that overlap (elements counted twice; with
// the count equal to the tensor's, a hole somewhere else).
func checkOverlap(cs []index.Chunk) error {
	if len(cs) < 2 {
		return nil
	}
	order := make([]int, 0, len(cs))
	for i, c := range cs {
		if e, _ := index.Elements(c.Shape); e > 0 {
			order = append(order, i)
		}
	}
	if len(order) < 2 || len(cs[order[0]].Start) == 0 {
		return nil
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(cs[a].Start[0], cs[b].Start[0]) })
	for x, i := range order {
		a := &cs[i]
		for _, j := range order[x+1:] {
			b := &cs[j]
			if b.Start[0] >= a.Start[0]+a.Shape[0] {
				break
			}
			meet := true
			for k := range a.Start {
				if a.Start[k]+a.Shape[k] <= b.Start[k] || b.Start[k]+b.Shape[k] <= a.Start[k] {
					meet = false
					break
				}
			}
			if meet {
				return fmt.Errorf("the chunks at %v and %v overlap", a.Start, b.Start)
			}
		}
	}
	return nil
}

// chunk locates a tensor chunk's bytes: its item is a torch.save zip of
// the chunk, whose one storage is stored (not deflated) and holds the
// chunk's elements contiguously, row-major.
func (l *loader) chunk(tm TensorMeta, c ChunkMeta, it Item, where string) (int, int64, error) {
	fi, sec, err := l.itemFile(it, where)
	if err != nil {
		return 0, 0, err
	}
	head := make([]byte, 9)
	if n, _ := sec.ReadAt(head, 0); n < 4 || string(head[:4]) != "PK\x03\x04" {
		if n == 9 && head[8] == '{' {
			return 0, 0, index.ErrorAt(sec.name, where, "the item is in the safetensors format (a torch >= 2.8 .distcp): tensorfs does not read it")
		}
		return 0, 0, index.ErrorAt(sec.name, where, "the item is not a torch.save zip file")
	}
	sub, err := torch.Parse(sec)
	if err != nil {
		return 0, 0, err
	}
	if sub.Format != "pytorch" || len(sub.Tensors) != 1 || len(sub.Members) != 0 {
		return 0, 0, index.ErrorAt(sec.name, where, "want one tensor stored uncompressed, found %d tensors in %d members", len(sub.Tensors), len(sub.Members))
	}
	t := &sub.Tensors[0]
	if t.DType != tm.DType || !slices.Equal(t.Shape, c.Sizes) && !(len(t.Shape) == 0 && len(c.Sizes) == 0) {
		return 0, 0, index.ErrorAt(sec.name, where, "the item holds a %s tensor of shape %v; the metadata says %s %v", t.DType, t.Shape, tm.DType, c.Sizes)
	}
	if t.BigEndian || !rowMajor(t) {
		return 0, 0, index.ErrorAt(sec.name, where, "the chunk is not stored contiguously, row-major, little-endian")
	}
	if t.Offset < 0 || t.Size > it.Length || t.Offset > it.Length-t.Size {
		return 0, 0, index.ErrorAt(sec.name, where, "the chunk's bytes lie outside the item")
	}
	return fi, it.Offset + t.Offset, nil
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
func (l *loader) value(it Item, where string) (any, error) {
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
	zr, err := zip.NewReader(sec, it.Length)
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
