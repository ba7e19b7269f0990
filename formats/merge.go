package formats

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// merge joins parsed parts, in order, into one Index (see Load) and makes
// their files the loader's result files.
func (l *loader) merge(parts []part, meta map[string]any) (*index.Index, error) {
	out := &index.Index{Format: parts[0].idx.Format}
	if len(parts) == 1 && meta == nil {
		out.Metadata = parts[0].idx.Metadata
	} else {
		out.Metadata = make(map[string]any, len(meta))
		for k, v := range meta {
			out.Metadata[k] = v
		}
	}
	total := 0
	for _, p := range parts {
		total += len(p.idx.Tensors)
	}
	if total > index.MaxTensors {
		return nil, index.ErrorAt(parts[0].path, "", "%d tensors in %d files is over the limit of %d", total, len(parts), index.MaxTensors)
	}
	out.Tensors = make([]index.Tensor, 0, total)
	files := make([]backing.Source, 0, len(parts))
	var members []backing.Source // opened here: closed on error
	fail := func(err error) (*index.Index, error) {
		for _, m := range members {
			closeFile(m)
		}
		return nil, err
	}
	for _, p := range parts {
		nfiles := 1 + len(p.siblings)
		if len(p.idx.Sources) != nfiles+len(p.idx.Members) {
			return fail(index.ErrorAt(p.path, "", "internal error: the %s parser returned %d sources for %d files", p.idx.Format, len(p.idx.Sources), nfiles))
		}
		for i, f := range p.siblings {
			if p.idx.Sources[1+i] != f.Name() {
				return fail(index.ErrorAt(p.path, "", "internal error: the %s parser named source %d %q, not the file it opened (%s)", p.idx.Format, 1+i, p.idx.Sources[1+i], f.Name()))
			}
		}
		base := len(out.Sources)
		out.Sources = append(out.Sources, p.idx.Sources...)
		files = append(files, p.f)
		files = append(files, p.siblings...)
		for i, m := range p.idx.Members {
			if m.Source != nfiles+i || m.File < 0 || m.File >= m.Source {
				return fail(index.ErrorAt(p.path, "", "internal error: the %s parser returned member %d as source %d of source %d", p.idx.Format, i, m.Source, m.File))
			}
			src, err := l.openMember(p.idx.SourceName(m.Source), files[base:], &m)
			if err != nil {
				return fail(err)
			}
			members = append(members, src)
			files = append(files, src)
		}
		p.idx.Rebase(base) // the part's sources placed after base others
		out.Members = append(out.Members, p.idx.Members...)
		for _, n := range p.idx.Notes {
			out.Notes = append(out.Notes, index.Printable(p.path+": "+n))
		}
		out.Tensors = append(out.Tensors, p.idx.Tensors...)
		out.Unserved = append(out.Unserved, p.idx.Unserved...)
		if len(parts) > 1 || meta != nil {
			for k, v := range p.idx.Metadata {
				if _, ok := out.Metadata[k]; !ok {
					out.Metadata[k] = v
				}
			}
		}
		for _, f := range append([]backing.Source{p.f}, p.siblings...) {
			if i := slices.Index(l.spare, f); i >= 0 {
				l.spare = slices.Delete(l.spare, i, i+1)
			}
		}
	}
	if len(parts) > 1 {
		slices.SortStableFunc(out.Unserved, func(a, b index.Unserved) int { return cmp.Compare(a.Name, b.Name) })
	}
	l.files = append(l.files, files...)
	return out, nil
}

// finish sorts the tensors by name, refuses duplicates, checks what every
// parser promises (so that a parser bug is an error here, not a crash when
// serving) and assigns paths.
func finish(idx *index.Index, files []backing.Source) error {
	slices.SortStableFunc(idx.Tensors, func(a, b index.Tensor) int { return cmp.Compare(a.Name, b.Name) })
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if t.Source < 0 || t.Source >= len(idx.Sources) || t.Source >= len(files) {
			return index.ErrorAt("", "tensor "+strconv.Quote(t.Name), "internal error: source %d of %d", t.Source, len(idx.Sources))
		}
		src := idx.SourceName(t.Source)
		if i > 0 && idx.Tensors[i-1].Name == t.Name {
			where := "tensor " + strconv.Quote(t.Name)
			other := idx.SourceName(idx.Tensors[i-1].Source)
			if other == src {
				return index.ErrorAt(src, where, "two tensors have this name")
			}
			return index.ErrorAt(src, where, "this tensor is also in %s", other)
		}
		if err := index.CheckTensor(t, src, files[t.Source].Size()); err != nil {
			return err
		}
	}
	return index.AssignPaths(idx)
}
