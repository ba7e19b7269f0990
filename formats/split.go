package formats

import (
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/gguf"
)

// splitName is llama.cpp's split file naming: PREFIX-%05d-of-%05d.gguf.
var splitName = regexp.MustCompile(`^(.*)-([0-9]{5,})-of-([0-9]{5,})\.gguf$`)

// ggufSplit is the gguf row's Join: the parts of a directory must be
// exactly the parts of one split model, merged in split.no order (a
// lone part of a split model is refused); the one file a SOURCE names,
// when it is a part of a split model, is merged with the other parts
// found beside it (ggufSiblings).
type ggufSplit struct{}

func (ggufSplit) join(l *loader, dir string, parts []part, alone bool) (*index.Index, error) {
	no, count, ok := gguf.SplitInfo(parts[0].idx)
	switch {
	case alone && ok && count > 1:
		return l.ggufSiblings(parts[0], no, count)
	case alone:
	case len(parts) == 1 && ok && count > 1:
		return nil, index.ErrorAt(parts[0].path, "", "part %d of %d of a split GGUF model, and the other parts are not in the directory", no+1, count)
	case len(parts) > 1:
		var err error
		if parts, err = orderGGUFSplit(parts); err != nil {
			return nil, err
		}
	}
	return l.merge(parts, nil)
}

// ggufSiblings finds, opens and parses the other parts of the split GGUF
// model that p is part no (0-based) of.
func (l *loader) ggufSiblings(p part, no, count int) (*index.Index, error) {
	base := filepath.Base(p.path)
	m := splitName.FindStringSubmatch(base)
	want := func(prefix string, i int) string { return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, count) }
	if m == nil || base != want(m[1], no) {
		return nil, index.ErrorAt(p.path, "", "part %d of %d of a split GGUF model, but its name is not PREFIX-%05d-of-%05d.gguf, so the other parts cannot be found", no+1, count, no+1, count)
	}
	dir := filepath.Dir(p.path)
	parts := make([]part, 0, count)
	for i := 0; i < count; i++ {
		if i == no {
			parts = append(parts, p)
			continue
		}
		sp := filepath.Join(dir, want(m[1], i))
		f, err := l.openFile(sp)
		if err != nil {
			return nil, index.ErrorAt(p.path, "", "part %d of %d of a split GGUF model; cannot open part %d: %v", no+1, count, i+1, err)
		}
		idx, err := ParseFile(f)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{path: sp, f: f, idx: idx})
	}
	parts, err := orderGGUFSplit(parts)
	if err != nil {
		return nil, err
	}
	return l.merge(parts, nil)
}

// orderGGUFSplit checks that parts are exactly the parts of one split GGUF
// model and returns them in split.no order.
func orderGGUFSplit(parts []part) ([]part, error) {
	byNo := make([]*part, len(parts))
	for i := range parts {
		p := &parts[i]
		no, count, ok := gguf.SplitInfo(p.idx)
		if !ok {
			return nil, index.ErrorAt(p.path, "", "not a part of a split GGUF model, but other GGUF files are beside it (%s): mount one file", display(filepath.Base(parts[(i+1)%len(parts)].path)))
		}
		if count != len(parts) || no >= count {
			return nil, index.ErrorAt(p.path, "split.count", "part %d of %d of a split GGUF model, but %d GGUF files are together", no+1, count, len(parts))
		}
		if byNo[no] != nil {
			return nil, index.ErrorAt(p.path, "split.no", "part %d of %d of a split GGUF model, and so is %s", no+1, count, display(filepath.Base(byNo[no].path)))
		}
		byNo[no] = p
	}
	out := make([]part, len(parts))
	total := 0
	for i, p := range byNo {
		out[i] = *p
		total += len(p.idx.Tensors)
	}
	if n, ok := gguf.Int(out[0].idx.Metadata["split.tensors.count"]); ok && n != int64(total) {
		return nil, index.ErrorAt(out[0].path, "split.tensors.count", "the split GGUF model should have %d tensors, its %d parts have %d", n, len(out), total)
	}
	return out, nil
}
