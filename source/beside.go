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
	once    sync.Once
	files   []File
	skipped []error
	err     error
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
			b.files, b.skipped, b.err = remoteBeside(ctx, c, c.path, nil)
		} else {
			b.files, b.skipped, b.err = localBeside(c.path, c.Index, nil)
		}
	})
	return b.files, b.err
}

// BesideSkipped returns, one error each, the files beside the checkpoint
// that Beside left out because they could not be opened or read (a
// file without read permission, an object the store refuses), and past
// MaxBeside files that there were more: none costs the others, nor the
// checkpoint. Its lines name the file and the problem; the caller logs
// them. Nil before Beside.
func (c *Checkpoint) BesideSkipped() []error {
	if c.beside == nil {
		return nil
	}
	return c.beside.skipped
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

// DigestedFiles returns what else than its sources a checkpoint's
// SOURCE states the sha256 of, for check --data to hash whole:
// DigestedBeside's files, and an oci:// artifact's layers that are not
// the checkpoint's own files — its raw layers beside the checkpoint
// (config.json, tokenizer files: Beside's files whose store states
// their digest), and its blobs that are no file (oci.Store.WholeBlobs):
// its uncompressed tar layers' read whole (the tar headers and the
// padding between files are in no file's bytes) and the manifest's
// config blob, named SOURCE@sha256:HEX/blobs/DIGEST.
// An oci:// SOURCE's are opened here (requests); Close closes them. A
// blob that cannot be opened is err, naming it.
func (c *Checkpoint) DigestedFiles(ctx context.Context) ([]File, error) {
	out := c.DigestedBeside()
	if !c.oci || c.Remote == nil {
		return out, nil
	}
	beside, err := c.Beside(ctx)
	if err != nil {
		return nil, err
	}
	for _, f := range beside {
		if d, ok := f.Src.(interface{ SHA256() (string, bool) }); ok {
			if h, ok := d.SHA256(); ok {
				out = append(out, File{Name: f.Name, Src: f.Src, SHA256: h})
			}
		}
	}
	if c.digested == nil {
		for _, key := range c.ociWhole {
			src, err := c.Remote.Open(ctx, key)
			if err != nil {
				return nil, err
			}
			h, _ := src.SHA256()
			c.digested = append(c.digested, File{Name: path.Base(key), Src: src, SHA256: h})
		}
	}
	return append(out, c.digested...), nil
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
	var files []File
	var skipped []error
	var err error
	if c.Remote != nil {
		files, skipped, err = remoteBeside(ctx, c, c.path, only)
	} else {
		files, skipped, err = localBeside(c.path, c.Index, only)
	}
	if err == nil && len(skipped) > 0 {
		// A file asked for by name must be read: it is not left out.
		closeBeside(files)
		return nil, skipped[0]
	}
	return files, err
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

// localBeside is Beside for a local path: the files, and those left out
// (skipped: one that cannot be opened or read, the files past
// MaxBeside); err when the directory cannot be listed.
func localBeside(source string, idx *index.Index, only func(name string) bool) (out []File, skipped []error, err error) {
	st, err := os.Stat(source)
	if err != nil {
		return nil, nil, nil // not a local path
	}
	dir := source
	if !st.IsDir() {
		if !strings.HasSuffix(source, ".index.json") {
			return nil, nil, nil
		}
		dir = filepath.Dir(source)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
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
			skipped = append(skipped, fmt.Errorf("%s: more than %d files beside the checkpoint: %s and the files after it left out", dir, MaxBeside, index.Printable(name)))
			break
		}
		src, err := openBeside(p)
		if err != nil {
			skipped = append(skipped, besideSkip(p, err))
			continue
		}
		isCk, err := isCheckpoint(src)
		if err != nil {
			src.Close()
			skipped = append(skipped, besideSkip(p, err))
			continue
		}
		if isCk {
			src.Close() // a checkpoint the index does not use
			continue
		}
		out = append(out, File{Name: name, Src: src})
	}
	return out, skipped, nil
}

// openBeside opens a local file beside the checkpoint (a variable for
// tests: root reads every file, so a test cannot make one unreadable).
var openBeside = func(path string) (backing.Source, error) {
	return backing.Open(path, backing.Options{Mode: backing.Pread})
}

// besideSkip is the line for a file beside the checkpoint left out.
func besideSkip(name string, err error) error {
	return fmt.Errorf("%s: left out of the model directory's files: %v", index.Printable(name), err)
}

// remoteBeside is Beside for a remote SOURCE: when its store lists
// (Scheme.Listable: s3://, hf://), the objects directly under the prefix
// it names; nothing for one object or an HTTP(S) URL.
func remoteBeside(ctx context.Context, ck *Checkpoint, source string, only func(name string) bool) (out []File, skipped []error, err error) {
	c, idx, key := ck.Remote, ck.Index, ck.RemoteKey
	if c == nil || !ck.RemoteListable {
		return nil, nil, nil
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
			return nil, nil, err
		}
		if !isDir {
			return nil, nil, nil // one object
		}
	}
	if prefix = strings.TrimSuffix(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	ents, err := c.List(ctx, prefix)
	if err != nil {
		return nil, nil, err
	}
	isSource := map[string]bool{}
	for _, s := range idx.Sources {
		isSource[s] = true
	}
	for _, e := range ents {
		name := e.Name
		if strings.Contains(name, "/") || !besideName(name) || (only != nil && !only(name)) || isSource[c.URL(prefix+name)] {
			continue
		}
		if len(out) >= MaxBeside {
			skipped = append(skipped, fmt.Errorf("%s: more than %d objects beside the checkpoint: %s and the objects after it left out", source, MaxBeside, index.Printable(name)))
			break
		}
		src, err := c.Open(ctx, prefix+name)
		if err != nil {
			if ctx.Err() != nil {
				closeBeside(out)
				return nil, nil, err // canceled: not one object's problem
			}
			skipped = append(skipped, besideSkip(c.URL(prefix+name), err))
			continue
		}
		isCk, err := isCheckpoint(src)
		if err != nil {
			src.Close()
			if ctx.Err() != nil {
				closeBeside(out)
				return nil, nil, err
			}
			skipped = append(skipped, besideSkip(c.URL(prefix+name), err))
			continue
		}
		if isCk || isSource[src.Name()] {
			src.Close() // a checkpoint the index does not use
			continue
		}
		out = append(out, File{Name: name, Src: src})
	}
	return out, skipped, nil
}
