package formats

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// MaxSiblings caps the files one checkpoint file may open beside it
// (ONNX external data written one file per tensor).
const MaxSiblings = index.MaxShards

// siblings is the index.Opener a loader passes to a row's Parse
// (index.Env's Siblings): it opens files of dir (the checkpoint file's directory)
// by relative path, confined to dir, once each, and remembers them in
// the order first opened (the part's Sources after its file).
type siblings struct {
	l      *loader
	dir    string
	byPath map[string]backing.Source
	opened []backing.Source
}

func (l *loader) siblingsOf(file string) *siblings {
	return &siblings{l: l, dir: filepath.Dir(file), byPath: map[string]backing.Source{}}
}

// open is the index.Opener.
func (s *siblings) open(rel string) (index.File, error) {
	p, err := s.confine(rel)
	if err != nil {
		return nil, err
	}
	if f, ok := s.byPath[p]; ok {
		return f, nil
	}
	if len(s.opened) >= MaxSiblings {
		return nil, fmt.Errorf("more than %d files beside it", MaxSiblings)
	}
	f, err := s.l.openFile(p)
	if err != nil {
		return nil, err
	}
	s.byPath[p] = f
	s.opened = append(s.opened, f)
	return f, nil
}

// confine returns the path of rel in s.dir, or why it is refused: empty,
// absolute, a NUL byte, ".." leading out (lexically), or on the local
// filesystem a path whose symbolic links lead out of the directory.
func (s *siblings) confine(rel string) (string, error) {
	q := fmt.Sprintf("%q", rel)
	switch {
	case rel == "":
		return "", fmt.Errorf("an empty file name")
	case strings.ContainsRune(rel, 0):
		return "", fmt.Errorf("file name %s holds a NUL byte", q)
	case strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, `\`) || filepath.IsAbs(rel):
		return "", fmt.Errorf("file %s is an absolute path; external files must be in the checkpoint's directory", q)
	}
	clean := path.Clean(strings.ReplaceAll(rel, `\`, "/"))
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || !filepath.IsLocal(clean) {
		return "", fmt.Errorf("file %s leads out of the checkpoint's directory", q)
	}
	p := filepath.Join(s.dir, filepath.FromSlash(clean))
	if s.l.tree != nil {
		return p, nil // a remote tree: no symbolic links
	}
	rd, err := filepath.EvalSymlinks(s.dir)
	if err != nil {
		return "", err
	}
	rp, err := filepath.EvalSymlinks(p)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("file %s is missing: the checkpoint's directory has no such file (removed, or never copied beside it)", q)
		}
		return "", fmt.Errorf("file %s: %v", q, err)
	}
	if r, err := filepath.Rel(rd, rp); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("file %s is a symbolic link out of the checkpoint's directory (to %s)", q, rp)
	}
	return p, nil
}

// parse parses f (at path) with fm, with an opener of siblings confined
// to f's directory. The part holds the
// files it opened; they are the loader's to close.
func (l *loader) parse(fm *Format, path string, f backing.Source) (part, error) {
	s := l.siblingsOf(path)
	idx, err := fm.Parse(f, index.Env{Siblings: s.open, Members: l.parseMember})
	if err != nil {
		l.closePrepared(f)
	}
	return part{path: path, f: f, idx: idx, siblings: s.opened}, err
}

// parseFile is ParseFile with the siblings of path openable.
func (l *loader) parseFile(path string, f backing.Source) (part, error) {
	s := l.siblingsOf(path)
	idx, err := parseFile(f, index.Env{Siblings: s.open, Members: l.parseMember})
	if err != nil {
		l.closePrepared(f)
	}
	return part{path: path, f: f, idx: idx, siblings: s.opened}, err
}
