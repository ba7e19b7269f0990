package source

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
)

// File is one of the files of a model directory beside its checkpoint
// (config.json, generation_config.json, tokenizer files...): its name (one
// path component) and its bytes.
type File struct {
	Name string
	Src  backing.Source // owned by the Checkpoint: closed by its Close
	// SHA256 is the sha256 (hex) the SOURCE states for the file's bytes
	// (an ollama:// layer's digest), "" when it states none.
	SHA256 string
}

// MaxBeside caps the files taken from beside a checkpoint.
const MaxBeside = 4096

// besideFiles is what Beside found, once.
type besideFiles struct {
	once  sync.Once
	files []File
	err   error
}

// Beside returns the regular files of the model directory beside the
// checkpoint, for every SOURCE kind alike: when SOURCE is a directory or
// an s3:// prefix (or a *.index.json weight map, whose directory it
// stands for), every file directly in it (symbolic links followed,
// subdirectories ignored) that is neither one of the checkpoint's
// sources, nor a weight map, nor model.safetensors, nor a checkpoint by
// content; none for a checkpoint file, one object, or an http(s):// URL
// (which cannot be listed). They are found and opened on the first call
// and kept: later calls return the same files, which Close closes. It is
// what every command reads them through: the .safetensors/ export places
// them beside model.safetensors, and a reader of the checkpoint's
// configuration (config.json) finds it there.
func (c *Checkpoint) Beside(ctx context.Context) ([]File, error) {
	b := c.beside
	if b == nil {
		return nil, nil // not from Load, or closed
	}
	b.once.Do(func() {
		if c.Remote != nil {
			b.files, b.err = remoteBeside(ctx, c, c.path, nil)
		} else {
			b.files, b.err = localBeside(c.path, c.Index, nil)
		}
	})
	return b.files, b.err
}

// DigestedBeside returns the files beside the checkpoint whose sha256
// the SOURCE states (an ollama:// model's metadata layers), without any
// I/O: none for a SOURCE that states none, whose files beside are not
// even looked for.
func (c *Checkpoint) DigestedBeside() []File {
	if !c.ollama || c.beside == nil {
		return nil
	}
	var out []File
	for _, f := range c.beside.files { // found by loadOllama
		if f.SHA256 != "" {
			out = append(out, f)
		}
	}
	return out
}

// BesideNamed opens only the files of these names beside the checkpoint
// (Beside's files, picked by name: the quantization configuration), so
// that a remote SOURCE makes no request for the others. The caller
// closes them (Src.Close); Beside is not changed.
func (c *Checkpoint) BesideNamed(ctx context.Context, names ...string) ([]File, error) {
	if c.beside == nil {
		return nil, nil // not from Load, or closed
	}
	only := func(name string) bool { return slices.Contains(names, name) }
	if c.Remote != nil {
		return remoteBeside(ctx, c, c.path, only)
	}
	return localBeside(c.path, c.Index, only)
}

func closeBeside(files []File) {
	for _, f := range files {
		f.Src.Close()
	}
}

// besideName reports whether a file called name beside a checkpoint can
// be one of Beside's: one path component, not a weight map, not the
// export's own name.
func besideName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= 255 && !strings.ContainsAny(name, "/\x00") &&
		!strings.HasSuffix(name, ".index.json") && name != "model.safetensors"
}

// isCheckpoint reports whether src holds a checkpoint by content; a
// read that fails is that error (index.ReadHead), never "not one".
func isCheckpoint(src backing.Source) (bool, error) {
	head, err := index.ReadHead(src, index.SniffLen)
	if err != nil {
		return false, err
	}
	_, ok := formats.Detect(head)
	return ok, nil
}

// localBeside is Beside for a local path.
func localBeside(source string, idx *index.Index, only func(name string) bool) ([]File, error) {
	st, err := os.Stat(source)
	if err != nil {
		return nil, nil // not a local path
	}
	dir := source
	if !st.IsDir() {
		if !strings.HasSuffix(source, ".index.json") {
			return nil, nil
		}
		dir = filepath.Dir(source)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	isSource := map[string]bool{}
	for _, s := range idx.Sources {
		if s == "" {
			continue // a member
		}
		if abs, err := filepath.Abs(s); err == nil {
			isSource[abs] = true
		}
	}
	var out []File
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(dir, name)
		if e.IsDir() || !besideName(name) || (only != nil && !only(name)) {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil && isSource[abs] {
			continue
		}
		if fst, err := os.Stat(p); err != nil || !fst.Mode().IsRegular() {
			continue // a dangling link, a subdirectory through a link, a device...
		}
		if len(out) >= MaxBeside {
			closeBeside(out)
			return nil, fmt.Errorf("%s: more than %d files beside the checkpoint", dir, MaxBeside)
		}
		src, err := backing.Open(p, backing.Options{Mode: backing.Pread})
		if err != nil {
			closeBeside(out)
			return nil, err
		}
		isCk, err := isCheckpoint(src)
		if err != nil {
			src.Close()
			closeBeside(out)
			return nil, err
		}
		if isCk {
			src.Close() // a checkpoint the index does not use
			continue
		}
		out = append(out, File{Name: name, Src: src})
	}
	return out, nil
}

// remoteBeside is Beside for a remote SOURCE: when its store lists
// (Scheme.Listable: s3://, hf://), the objects directly under the prefix
// it names; nothing for one object or an HTTP(S) URL.
func remoteBeside(ctx context.Context, ck *Checkpoint, source string, only func(name string) bool) ([]File, error) {
	c, idx, key := ck.Remote, ck.Index, ck.RemoteKey
	if c == nil || !ck.RemoteListable {
		return nil, nil
	}
	prefix := key
	switch {
	case strings.HasSuffix(key, ".index.json"):
		prefix = path.Dir(key)
		if prefix == "." {
			prefix = ""
		}
	case key != "" && !strings.HasSuffix(key, "/"):
		isDir, err := c.Stat(ctx, key)
		if err != nil {
			return nil, err
		}
		if !isDir {
			return nil, nil // one object
		}
	}
	if prefix = strings.TrimSuffix(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	ents, err := c.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	isSource := map[string]bool{}
	for _, s := range idx.Sources {
		isSource[s] = true
	}
	var out []File
	for _, e := range ents {
		name := e.Name
		if strings.Contains(name, "/") || !besideName(name) || (only != nil && !only(name)) || isSource[c.URL(prefix+name)] {
			continue
		}
		if len(out) >= MaxBeside {
			closeBeside(out)
			return nil, fmt.Errorf("%s: more than %d objects beside the checkpoint", source, MaxBeside)
		}
		src, err := c.Open(ctx, prefix+name)
		if err != nil {
			closeBeside(out)
			return nil, err
		}
		isCk, err := isCheckpoint(src)
		if err != nil {
			src.Close()
			closeBeside(out)
			return nil, err
		}
		if isCk || isSource[src.Name()] {
			src.Close() // a checkpoint the index does not use
			continue
		}
		out = append(out, File{Name: name, Src: src})
	}
	return out, nil
}
