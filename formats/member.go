package formats

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// openMember is the one place a member of an index becomes a backing
// source, whatever its kind: files are the sources numbered as m's
// fields number them (m.File, a part's or a chunk's Source); name is the
// source's name (index.SourceName). A deflated or zstd member or Latin-1 str is
// decoded on first read (backing.InflateCache), within the limits of the
// cache in Options.Inflate; a tiled tensor (or a concatenation) is read
// through from its files; a quantized weight's values are computed
// from its parts on each read (quant.go).
func (l *loader) openMember(name string, files []backing.Source, m *index.Member) (backing.Source, error) {
	if m.File < 0 || m.File >= len(files) {
		return nil, index.ErrorAt(name, "member "+m.Name, "internal error: source %d of %d", m.File, len(files))
	}
	if src := l.takePrepared(files[m.File], m); src != nil {
		return src, nil
	}
	switch k := m.Kind.(type) {
	case *index.Deflated:
		bm := backing.Member{Name: m.Name, Size: m.Size, Codec: backing.Deflated{Offset: k.Offset, CompressedSize: k.CompressedSize, CRC32: k.CRC32}}
		return l.inflateMember(files[m.File], bm, "member "+m.Name)
	case *index.Zstd:
		bm := backing.Member{Name: m.Name, Size: m.Size, Codec: backing.Zstd{Offset: k.Offset, CompressedSize: k.CompressedSize, CRC32: k.CRC32, Skip: k.Skip}}
		return l.inflateMember(files[m.File], bm, "member "+m.Name)
	case *index.Latin1:
		bm := backing.Member{Name: m.Name, Size: m.Size, Codec: backing.Latin1{Offset: k.Offset, Len: k.Len}}
		return l.inflateMember(files[m.File], bm, "tensor "+strconv.Quote(m.Name))
	case *index.Decoded:
		if k.Decode == nil {
			return nil, index.ErrorAt(name, "tensor "+strconv.Quote(m.Name), "internal error: a decoded member without its decoder")
		}
		bm := backing.Member{Name: m.Name, Size: m.Size, Codec: backing.Decoded{Decode: k.Decode}}
		return l.inflateMember(files[m.File], bm, "tensor "+strconv.Quote(m.Name))
	case *index.Tiles:
		return openTiles(name, files, k)
	case *index.Dequantized:
		return openDequantized(name, files, m, k)
	}
	return nil, index.ErrorAt(name, "member "+m.Name, "internal error: member of kind %T", m.Kind)
}

// openTiles opens a Tiles member: a backing.Tiled over its chunks'
// files, named name (read without the parsing view: a mapped file is
// read through its mapping).
func openTiles(name string, files []backing.Source, k *index.Tiles) (backing.Source, error) {
	tiles := make([]backing.Tile, len(k.Chunks))
	for i, c := range k.Chunks {
		if c.Source < 0 || c.Source >= len(files) {
			return nil, fmt.Errorf("internal error: chunk source %d of %d", c.Source, len(files))
		}
		tiles[i] = backing.Tile{Src: backing.Unwrap(files[c.Source]), Offset: c.Offset, Start: c.Start, Shape: c.Shape}
	}
	return backing.NewTiled(name, k.Shape, k.ElemSize, tiles)
}

// inflateMember opens bm, a member of f decoded on first read.
func (l *loader) inflateMember(f index.File, bm backing.Member, where string) (backing.Source, error) {
	if l.inflate == nil {
		return nil, index.ErrorAt(f.Name(), where, "internal error: no inflate cache (formats.Options.Inflate) to decode this member")
	}
	src, err := l.inflate.OpenMember(f, bm)
	if err != nil {
		var me *backing.MemberError
		if errors.As(err, &me) {
			return nil, index.ErrorAt(f.Name(), where, "%s", me.Msg)
		}
		return nil, err
	}
	return src, nil
}

// preparedKey is where a member lies: its file's name (files may be of
// types that are not comparable) and its kind's place in it.
type preparedKey struct {
	file      string
	off, size int64
}

// memberKey returns the key of m, a member of file, when it is of a
// kind a parser may open while parsing (index.MemberOpener).
func memberKey(file index.File, m *index.Member) (preparedKey, bool) {
	if k, ok := m.Kind.(*index.Deflated); ok {
		return preparedKey{file.Name(), k.Offset, m.Size}, true
	}
	return preparedKey{}, false
}

// parseMember is the index.MemberOpener the loader passes to a row's
// Parse (index.Env's Members): it opens m of file through the cache of
// decoded members, decodes it whole (a bad member is one line naming
// file and member, before the parser reads any of it) and keeps the
// source for openMember.
func (l *loader) parseMember(file index.File, m *index.Member) (index.File, error) {
	key, ok := memberKey(file, m)
	if !ok {
		return nil, index.ErrorAt(file.Name(), "member "+m.Name, "internal error: a parser opened a member of kind %T", m.Kind)
	}
	if src, ok := l.prepared[key]; ok {
		return src, nil
	}
	one := *m
	one.File = 0
	src, err := l.openMember(file.Name(), []backing.Source{asSource(file)}, &one)
	if err != nil {
		return nil, err
	}
	if err := inflateNow(file, m, src); err != nil {
		closeFile(src)
		return nil, err
	}
	if l.prepared == nil {
		l.prepared = map[preparedKey]backing.Source{}
	}
	l.prepared[key] = src
	return src, nil
}

// takePrepared returns the source a parser opened for m of file, which
// is the caller's from then on, or nil.
func (l *loader) takePrepared(file index.File, m *index.Member) backing.Source {
	key, ok := memberKey(file, m)
	if !ok {
		return nil
	}
	src := l.prepared[key]
	delete(l.prepared, key)
	return src
}

// closePrepared closes the members parsers opened in file (all when
// file is nil) that no source of the result took.
func (l *loader) closePrepared(file index.File) {
	for k, src := range l.prepared {
		if file == nil || k.file == file.Name() {
			closeFile(src)
			delete(l.prepared, k)
		}
	}
}

// inflateNow decodes src, member m of file, whole now (backing.InflateNow),
// its failure one line naming file and member.
func inflateNow(file index.File, m *index.Member, src backing.Source) error {
	if err := backing.InflateNow(src); err != nil {
		where := "member " + m.Name
		var me *backing.MemberError
		if errors.As(err, &me) {
			return index.ErrorAt(file.Name(), where, "%s", me.Msg)
		}
		return index.ErrorAt(file.Name(), where, "%v", err)
	}
	return nil
}
