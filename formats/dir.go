package formats

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/dcp"
	"github.com/lazyweights/tensorfs/index/paddle"
)

// dir loads a SOURCE that is a directory: the first row of Layouts that
// claims it and finds a checkpoint, else the message that says why none
// is there.
func (l *loader) dir(dir string) (*index.Index, error) {
	tree := l.tree
	if tree == nil {
		tree = osTree{}
	}
	files, err := tree.Files(dir)
	if err != nil {
		return nil, err
	}
	d := &Dir{Path: dir, Files: files, l: l}
	defer d.releaseAll()
	for i := range Layouts {
		claimed, err := Layouts[i].Claim(d)
		if err != nil {
			return nil, err
		}
		if !claimed {
			continue
		}
		if idx, err := Layouts[i].Load(d); idx != nil || err != nil {
			return idx, err
		}
	}
	if d.broken > 0 {
		return nil, index.ErrorAt(dir, "", "none of the %d checkpoint files in the directory can be read", d.broken)
	}
	if d.lfs != "" {
		return nil, index.ErrorAt(dir, "", "no checkpoint in the directory: %s is a Git LFS pointer, not the file itself (not downloaded); run `git lfs pull` in the repository (or download the files directly)", display(filepath.Base(d.lfs)))
	}
	if d.refused != "" {
		return nil, index.ErrorAt(dir, "", "no checkpoint in the directory: %s", d.refused)
	}
	if subs := l.checkpointSubdirs(tree, dir); subs != "" {
		looked := fmt.Sprintf("%d files", len(files))
		if len(files) == 1 {
			looked = "1 file"
		}
		return nil, index.ErrorAt(dir, "", "no checkpoint in the directory itself (%s looked at), but in its subdirectories %s: open one of them", looked, subs)
	}
	return nil, index.ErrorAt(dir, "", "no checkpoint in the directory (%d files looked at; want a *.index.json weight map or safetensors, PyTorch, GGUF, .npy, .npz, ONNX, HDF5 (Keras) or PaddlePaddle files)", len(files))
}

// loadShards reads the files of a directory that are checkpoints by
// content, all of one format, joined by their format's Join (merged in
// file name order without one); nil when there are none, with what it
// saw noted in d for the message.
func loadShards(d *Dir) (*index.Index, error) {
	s := &shardSet{d: d, order: map[string]int{}, owned: map[string]bool{}}
	if err := s.sniff(); err != nil {
		return nil, err
	}
	for _, pd := range s.later {
		if s.owned[filepath.Clean(pd.p)] {
			d.l.release(pd.f) // a model's external data
			continue
		}
		if err := s.add(pd); err != nil {
			return nil, err
		}
	}
	parts, err := s.oneFormat()
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return d.l.join(d.Path, parts, false)
}

// shardSet is loadShards' state. Files are sniffed in order; those of a
// format that opens files beside it (ONNX external data) are parsed at
// once, the others after all are sniffed: a file a model names as its
// own (its external data) is that model's, never a checkpoint of its
// own, however its first bytes look. parts keep the files' order.
type shardSet struct {
	d     *Dir
	parts []part
	later []pendingShard
	order map[string]int  // a part's file's place in files
	owned map[string]bool // the files the parts' parsers opened beside them
}

// pendingShard is a file sniffed as a checkpoint of format fm, the i-th
// of the directory's files, not parsed yet.
type pendingShard struct {
	p  string
	f  backing.Source
	fm *Format
	i  int
}

// sniff sniffs the directory's files in order, noting in d what it saw
// of the files that are not checkpoints, and parses those of a format
// that opens files beside it; it keeps the others for later.
func (s *shardSet) sniff() error {
	d := s.d
	l, dir, files := d.l, d.Path, d.Files
	for i, p := range files {
		f, err := l.openFile(p)
		if err != nil {
			return err
		}
		fm, err := sniff(f)
		if err != nil {
			return err
		}
		if fm == nil {
			if d.lfs == "" {
				isLFS, err := isLFSPointerFile(f)
				if err != nil {
					return err
				}
				if isLFS {
					d.lfs = p
				}
			}
			if d.refused == "" && len(s.parts) == 0 && len(s.later) == 0 {
				if msg, ok := describeRefusedFile(f, nil); ok { // refused.go
					d.refused = display(filepath.Base(p)) + " is " + msg
				}
			}
			l.release(f)
			continue
		}
		if len(s.parts)+len(s.later) >= index.MaxShards {
			return index.ErrorAt(dir, "", "more than %d checkpoint files", index.MaxShards)
		}
		pd := pendingShard{p, f, fm, i}
		if !fm.OpensSiblings {
			s.later = append(s.later, pd)
			continue
		}
		if err := s.add(pd); err != nil {
			return err
		}
	}
	return nil
}

// add parses pd into a part; a file that cannot be read is an error,
// or (with Options.Report) left out and counted in d.broken.
func (s *shardSet) add(pd pendingShard) error {
	l := s.d.l
	pt, err := l.parse(pd.fm, pd.p, pd.f)
	if errors.Is(err, paddle.ErrNotPaddle) {
		l.release(pd.f) // a pickle of other data: not a checkpoint
		return nil
	}
	if err != nil {
		// With Options.Report, a shard that cannot be read is left
		// out and the others are checked too.
		if l.tolerate(err) != nil {
			return err
		}
		l.release(pd.f)
		s.d.broken++
		return nil
	}
	for _, sf := range pt.siblings {
		s.owned[filepath.Clean(sf.Name())] = true
	}
	s.order[pd.p] = pd.i
	s.parts = append(s.parts, pt)
	return nil
}

// oneFormat returns the parts in the files' order, all of the first
// one's format: another format is an error, or (with Options.Report)
// left out and counted in d.broken.
func (s *shardSet) oneFormat() ([]part, error) {
	l, dir, parts, order := s.d.l, s.d.Path, s.parts, s.order
	slices.SortStableFunc(parts, func(a, b part) int { return cmp.Compare(order[a.path], order[b.path]) })
	for i := 1; i < len(parts); i++ {
		if parts[i].idx.Format != parts[0].idx.Format {
			err := index.ErrorAt(dir, "", "mixes checkpoint formats: %s is %s, %s is %s", display(filepath.Base(parts[0].path)), parts[0].idx.Format, display(filepath.Base(parts[i].path)), parts[i].idx.Format)
			if l.tolerate(err) != nil {
				return nil, err
			}
			l.release(parts[i].f)
			for _, sf := range parts[i].siblings {
				l.release(sf)
			}
			s.d.broken++
			parts = slices.Delete(parts, i, i+1)
			i--
		}
	}
	return parts, nil
}

// join joins parsed parts of one format, in order, into one index: by
// their format row's Join where it has one, else merged in order. dir
// is their directory; alone says the SOURCE is the one file parts[0].
func (l *loader) join(dir string, parts []part, alone bool) (*index.Index, error) {
	if fm := formatOf(parts[0].idx); fm != nil && fm.Join != nil {
		return fm.Join.join(l, dir, parts, alone)
	}
	return l.merge(parts, nil)
}

// formatOf returns the row of Table whose format idx is, or nil.
func formatOf(idx *index.Index) *Format {
	for i := range Table {
		if Table[i].Name == idx.Format {
			return &Table[i]
		}
	}
	return nil
}

// Dirser is implemented by Trees that list a directory's subdirectories
// (the local filesystem): a directory with no checkpoint of its own then
// names those that hold one.
type Dirser interface {
	Dirs(dir string) ([]string, error)
}

// Bounds of checkpointSubdirs: subdirectories looked into, and files
// sniffed in all.
const (
	maxSubdirs     = 64
	maxSubdirFiles = 512
)

// checkpointSubdirs names the subdirectories of dir (one level down)
// that hold a checkpoint: a weight map, a distributed checkpoint's
// .metadata, or a file of a known format by its first bytes; at most
// four named, then how many more ("a/, b/ and 3 more"); "" for none or a
// tree that lists no subdirectories. It looks into at most maxSubdirs
// subdirectories and sniffs at most maxSubdirFiles files.
func (l *loader) checkpointSubdirs(tree Tree, dir string) string {
	ds, ok := tree.(Dirser)
	if !ok {
		return ""
	}
	subs, err := ds.Dirs(dir)
	if err != nil {
		return ""
	}
	budget := maxSubdirFiles
	holds := func(sub string) bool {
		files, err := tree.Files(sub)
		if err != nil {
			return false
		}
		if _, ok := dcp.MetadataFile(files); ok {
			return true
		}
		for _, p := range files {
			if strings.HasSuffix(filepath.Base(p), ".index.json") {
				return true
			}
		}
		for _, p := range files {
			if budget <= 0 {
				return false
			}
			budget--
			f, err := l.openFile(p)
			if err != nil {
				continue
			}
			fm, err := sniff(f)
			l.release(f)
			if err == nil && fm != nil {
				return true
			}
		}
		return false
	}
	var named []string
	more := 0
	for i, sub := range subs {
		if i == maxSubdirs {
			break
		}
		if !holds(sub) {
			continue
		}
		if len(named) == 4 {
			more++
			continue
		}
		named = append(named, display(filepath.Base(sub))+"/")
	}
	list := strings.Join(named, ", ")
	if more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return list
}
