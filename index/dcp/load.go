package dcp

import (
	"archive/zip"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/pickle"
)

// Load is index.Load that also reads a directory holding a distributed
// checkpoint (a .metadata file naming torch.distributed.checkpoint's
// classes): see the package comment. Any other SOURCE goes to index.Load.
//
// SOURCE may also be the .metadata file itself: its directory is read.
func Load(path string, open index.Opener) (*index.Index, []index.File, error) {
	st, err := os.Stat(path)
	dir := path
	if err == nil && !st.IsDir() && filepath.Base(path) == MetadataName {
		dir = filepath.Dir(path)
	} else if err != nil || !st.IsDir() {
		return index.Load(path, open)
	}
	idx, files, ok, err := load(dir, localTree{}, open)
	if !ok {
		return index.Load(path, open)
	}
	if err != nil {
		return nil, nil, err
	}
	for i, s := range idx.Sources {
		if idx.Member(i) != nil {
			continue
		}
		if abs, err := filepath.Abs(s); err == nil {
			idx.Sources[i] = abs
		}
	}
	return idx, files, nil
}

// LoadTree is index.LoadTree that also reads a distributed checkpoint
// (remote prefixes: s3://, http(s)://).
func LoadTree(path string, tree index.Tree, open index.Opener) (*index.Index, []index.File, error) {
	isDir, err := tree.IsDir(path)
	if err != nil || !isDir {
		return index.LoadTree(path, tree, open)
	}
	idx, files, ok, err := load(path, tree, open)
	if !ok {
		return index.LoadTree(path, tree, open)
	}
	if err != nil {
		if d, ok := tree.(index.Displayer); ok {
			var fe *index.FormatError
			if errors.As(err, &fe) && len(fe.File) > 0 && fe.File[0] == '/' {
				fe.File = d.Display(fe.File)
			}
		}
		return nil, nil, err
	}
	for i := range files {
		if idx.Member(i) == nil {
			idx.Sources[i] = files[i].Name()
		}
	}
	return idx, files, nil
}

// localTree marks the local filesystem, where relative paths are checked
// for symbolic links that leave the directory.
type localTree struct{}

func (localTree) IsDir(path string) (bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return st.IsDir(), nil
}

func (localTree) Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

func closeFile(f index.File) {
	if c, ok := f.(io.Closer); ok {
		c.Close()
	}
}

// load reads dir as a distributed checkpoint; ok is false when it is not
// one (no .metadata naming DCP's classes), and nothing is left open.
func load(dir string, tree index.Tree, open index.Opener) (idx *index.Index, files []index.File, ok bool, err error) {
	names, err := tree.Files(dir)
	if err != nil {
		return nil, nil, true, err
	}
	byName := map[string]string{}
	for _, p := range names {
		byName[filepath.Base(p)] = p
	}
	mp, has := byName[MetadataName]
	if !has {
		return nil, nil, false, nil
	}
	mf, err := open(mp)
	if err != nil {
		return nil, nil, true, err
	}
	defer closeFile(mf)
	head := make([]byte, SniffLen)
	n, _ := mf.ReadAt(head, 0)
	if !Sniff(head[:n]) {
		return nil, nil, false, nil
	}
	md, err := ReadMetadata(mf)
	if err != nil {
		return nil, nil, true, err
	}
	l := &loader{dir: dir, tree: tree, open: open, byName: byName, fileIdx: map[string]int{}}
	idx, err = l.build(md)
	if err != nil {
		for _, f := range l.files {
			closeFile(f)
		}
		return nil, nil, true, err
	}
	return idx, l.files, true, nil
}

// loader builds the Index of a distributed checkpoint.
type loader struct {
	dir     string
	tree    index.Tree
	open    index.Opener
	byName  map[string]string // the directory's files by base name
	files   []index.File      // opened: the .distcp files, then the tiled members
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
	if _, local := l.tree.(localTree); local {
		if err := insideDir(l.dir, p); err != nil {
			return 0, index.ErrorAt(l.metaPath(), where, "%v", err)
		}
	}
	f, err := l.open(p)
	if err != nil {
		return 0, err
	}
	l.files = append(l.files, f)
	l.paths = append(l.paths, p)
	l.fileIdx[rel] = len(l.files) - 1
	return len(l.files) - 1, nil
}

// insideDir refuses a file that is a symbolic link leading out of dir.
func insideDir(dir, p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	rd, err1 := filepath.EvalSymlinks(dir)
	rp, err2 := filepath.EvalSymlinks(p)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%s is a symbolic link that cannot be followed", filepath.Base(p))
	}
	if rel, err := filepath.Rel(rd, rp); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is a symbolic link out of the checkpoint's directory (to %s)", filepath.Base(p), rp)
	}
	return nil
}

func (l *loader) metaPath() string { return filepath.Join(l.dir, MetadataName) }

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
		for ci, c := range tm.Chunks {
			cw := fmt.Sprintf("%s, chunk at %v", where, c.Offsets)
			it, ok := md.Storage[itemKey(tm.FQN, c.Offsets)]
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
			_ = ci
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
		if whole != nil {
			t.Source, t.Offset = whole.Source, whole.Offset
		} else {
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
	idx.Sources = slices.Clone(l.paths) // every file is open: members come after
	for _, m := range members {
		t := &idx.Tensors[m.t]
		src := len(idx.Sources)
		tiles := make([]backing.Tile, len(m.tiles.Chunks))
		for i, c := range m.tiles.Chunks {
			var f backing.ReaderAt = l.files[c.Source]
			if s, ok := f.(backing.Source); ok {
				f = backing.Unwrap(s)
			}
			tiles[i] = backing.Tile{Src: f, Offset: c.Offset, Start: c.Start, Shape: c.Shape}
		}
		name := l.dir + ":" + t.Name
		ts, err := backing.NewTiled(name, m.tiles.Shape, m.tiles.ElemSize, tiles)
		if err != nil {
			return nil, index.ErrorAt(l.metaPath(), "tensor "+quote(fqns[t.Name]), "%v", err)
		}
		idx.Sources = append(idx.Sources, name)
		l.files = append(l.files, ts)
		idx.Members = append(idx.Members, index.Member{Source: src, File: m.tiles.Chunks[0].Source, Name: t.Name, Method: index.MethodTiles, Size: t.Size, Tiles: m.tiles})
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
	if err := index.Finish(idx, l.files); err != nil {
		return nil, err
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
	sub, err := index.ParseFile(sec)
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
