package main

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// checkpoint is a loaded SOURCE: the index and the open backing files.
type checkpoint struct {
	idx     *index.Index
	sources []backing.Source // sources[i] reads idx.Sources[i]
}

// loadCheckpoint parses and validates SOURCE completely (index.Load),
// reading files in the given backing mode.
//
// The parsers read a source that has a descriptor with pread on it rather
// than through the source (parseFile): they read headers scattered
// through the file (a zip's local header before every member), and
// through a mapping the kernel maps the cached pages around each fault
// too, so a checkpoint of many small tensors sat whole in the server's
// resident set right after mounting.
func loadCheckpoint(path string, mode backing.Mode) (*checkpoint, error) {
	open := func(p string) (index.File, error) {
		src, err := backing.Open(p, backing.Options{Mode: mode})
		if err != nil {
			return nil, err
		}
		if fs, ok := src.(backing.FdSource); ok {
			if fd, ok := fs.Fd(); ok {
				return &parseFile{Source: src, fd: int(fd)}, nil
			}
		}
		return src, nil
	}
	idx, files, err := index.Load(path, open)
	if err != nil {
		var pe *iofs.PathError
		if errors.As(err, &pe) && !errors.As(err, new(*index.FormatError)) {
			return nil, fmt.Errorf("%s: %v", pe.Path, pe.Err)
		}
		return nil, err
	}
	c := &checkpoint{idx: idx, sources: make([]backing.Source, len(files))}
	for i, f := range files {
		if pf, ok := f.(*parseFile); ok {
			f = pf.Source
		}
		src, ok := f.(backing.Source)
		if !ok {
			for _, f := range files {
				if cl, ok := f.(interface{ Close() error }); ok {
					cl.Close()
				}
			}
			return nil, fmt.Errorf("%s: internal error: the loader returned a %T, not a backing source", path, f)
		}
		c.sources[i] = src
	}
	return c, nil
}

// parseFile is a source as the parsers see it: ReadAt is pread(2) on the
// source's descriptor, which leaves a mapping of it untouched.
type parseFile struct {
	backing.Source
	fd int
}

func (p *parseFile) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: read at negative offset %d", p.Name(), off)
	}
	n := 0
	for n < len(b) {
		m, err := unix.Pread(p.fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, &iofs.PathError{Op: "read", Path: p.Name(), Err: err}
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

func (c *checkpoint) close() {
	for _, s := range c.sources {
		s.Close()
	}
	c.sources = nil
}

// find returns the tensor with exactly this name, or else the one at this
// path in the mounted tree.
func (c *checkpoint) find(name string) (*index.Tensor, bool) {
	ts := c.idx.Tensors
	i := sort.Search(len(ts), func(i int) bool { return ts[i].Name >= name })
	if i < len(ts) && ts[i].Name == name {
		return &ts[i], true
	}
	for i := range ts {
		if ts[i].Path == name {
			return &ts[i], true
		}
	}
	return nil, false
}
