package formats

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// Tree is the namespace Load finds a SOURCE's files in: the local
// filesystem for Load, a bucket prefix or an HTTP server for LoadTree
// (backing/remote.Tree). Paths are '/'-separated and absolute; Load joins
// them with path/filepath, which keeps such paths as they are.
type Tree interface {
	// IsDir reports whether path is a directory (true) or a regular
	// file (false); anything else is an error.
	IsDir(path string) (bool, error)
	// Files lists the regular files directly in the directory dir (links
	// to regular files included), as paths.
	Files(dir string) ([]string, error)
}

// Displayer is implemented by Trees whose paths are not what a user
// knows (an object's tree path "/key" is shown as s3://bucket/key):
// messages of LoadTree name Display(path).
type Displayer interface {
	Display(path string) string
}

// LoadTree is Load over tree instead of the local filesystem: SOURCE path
// is a file or directory of tree, and open opens tree paths. The Sources
// of the result are the opened files' Name()s, and a *FormatError that
// names a tree path names tree.Display(path) instead.
func LoadTree(path string, tree Tree, open Opener, o Options) (*index.Index, []backing.Source, error) {
	idx, files, err := loadTree(path, tree, open, o)
	if err != nil {
		if d, ok := tree.(Displayer); ok {
			var fe *index.FormatError
			if errors.As(err, &fe) && len(fe.File) > 0 && fe.File[0] == '/' {
				fe.File = d.Display(fe.File)
			}
		}
		return nil, nil, err
	}
	for i := range files {
		if i < len(idx.Sources) && idx.Sources[i] == "" {
			continue // a member: SourceName joins its file's name
		}
		idx.Sources[i] = files[i].Name()
	}
	return idx, files, nil
}

// loadTree is Load's body over tree, without making Sources absolute.
func loadTree(path string, tree Tree, open Opener, o Options) (*index.Index, []backing.Source, error) {
	isDir, err := tree.IsDir(path)
	if err != nil {
		return nil, nil, err
	}
	l := &loader{open: open, tree: tree, inflate: o.Inflate, report: o.Report}
	if d, ok := tree.(Displayer); ok && o.Report != nil {
		l.report = func(err error) {
			var fe *index.FormatError
			if errors.As(err, &fe) && len(fe.File) > 0 && fe.File[0] == '/' {
				fe.File = d.Display(fe.File)
			}
			o.Report(err)
		}
	}
	var idx *index.Index
	if isDir {
		idx, err = l.dir(path)
	} else {
		idx, err = l.file(path)
	}
	if err == nil {
		err = finish(idx, l.files)
	}
	if err != nil {
		l.closeAll()
		return nil, nil, err
	}
	return idx, l.files, nil
}

// osTree is the local filesystem.
type osTree struct{}

func (osTree) IsDir(path string) (bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return false, index.ErrorAt(path, "", "not a regular file or a directory")
	}
	return st.IsDir(), nil
}

// Dirs lists the subdirectories directly in dir (not links to them),
// sorted by name.
func (osTree) Dirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, filepath.Join(dir, e.Name()))
		}
	}
	return dirs, nil
}

func (osTree) Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSymlink != 0 || !e.Type().IsRegular() {
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() {
				continue // a dangling link, a subdirectory, a device...
			}
		}
		files = append(files, p)
	}
	return files, nil
}
