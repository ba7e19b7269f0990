package formats

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/dcp"
)

// Options are what Load and LoadTree need besides the files.
type Options struct {
	// Inflate decodes the compressed members of a checkpoint (npz and
	// torch zip members stored deflated, Latin-1 numpy strings in a
	// pickle) on first read. Callers share one cache per process (today
	// backing.DefaultInflateCache()) so that its memory limit holds for
	// all mounts; a checkpoint with such members fails to load without it.
	Inflate *backing.InflateCache
	// Report, when set, makes Load go on past the problems of a weight
	// map and its shards, each passed to Report as the error Load would
	// otherwise return (a *index.FormatError): a shard that cannot be
	// opened, parsed or is of another format is left out; a tensor of a
	// shard that the map does not list, or lists in another shard, is
	// kept; a tensor the map lists that its shard lacks is reported. In
	// a directory without a weight map, a checkpoint file that does not
	// parse (or is of another format than the first) is left out. What
	// is left must still load (at least one shard, no tensor twice).
	// `tensorfs check` reports every problem this way; nil fails at the
	// first, as every other command does.
	Report func(error)
}

// Opener opens one backing file by path: backing.Open provides it, or
// a view of it for parsing (backing.ForParsing, a remote source's
// ForParsing). A file that is not a backing.Source (a test's file in
// memory) is served as one whose Close closes it where it has a Close.
type Opener func(path string) (index.File, error)

// Load opens SOURCE (a checkpoint file, or a directory holding a sharded
// checkpoint) through open, detects the format(s) by content, parses and
// validates everything, merges shards into one Index whose Sources are the
// shard paths, sorts Tensors by Name and assigns Paths (AssignPaths). The
// returned sources are the files opened (as the Opener returned them) and
// the members made from them, sources[i] for Sources[i]; on error every
// file opened is closed.
//
// What SOURCE may be:
//
//   - A checkpoint file of any format. When it is one part of a split GGUF
//     model (metadata split.count > 1), the other parts are found beside it
//     by llama.cpp's naming, PREFIX-NNNNN-of-CCCCC.gguf, and merged.
//   - A weight map, *.index.json, as Hugging Face writes it ({"metadata":
//     {...}, "weight_map": {TENSOR: SHARD}}): the same as its directory
//     with that weight map.
//   - A directory with a weight map: the shards it names (relative paths
//     inside the directory, any format, all of one format) are parsed;
//     every tensor of the map must be in the shard it names, and every
//     tensor of a shard must be in the map. With several *.index.json
//     files, model.safetensors.index.json is used, else the only
//     *.safetensors.index.json, else pytorch_model.bin.index.json; other
//     combinations are refused. Files the map does not name are ignored.
//   - A directory without a weight map: every regular file in it (symbolic
//     links followed, subdirectories ignored) that is a checkpoint by
//     content; files that are not (README.md, config.json) are ignored,
//     and so are the files an ONNX model in it names as its external data
//     (they are the model's, whatever their first bytes look like).
//     They must be of one format. GGUF files must be the parts of one split
//     model, merged in split.no order; other sets of files are merged in
//     file name order.
//
// Merging: Sources are the shards' in order and each tensor's Source is
// renumbered; Format is the shards' format; Metadata is the weight map's
// "metadata" object, then each shard's metadata keys that are not there
// yet, shards in order (so for split GGUF the first part's values win);
// a tensor name found twice is refused. At most MaxShards shards and
// MaxTensors tensors. The Sources of the result are absolute paths.
func Load(path string, open Opener, o Options) (*index.Index, []backing.Source, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	l := &loader{open: open, inflate: o.Inflate, report: o.Report}
	var idx *index.Index
	switch {
	case st.IsDir():
		idx, err = l.dir(path)
	case st.Mode().IsRegular():
		idx, err = l.file(path)
	default:
		err = index.ErrorAt(path, "", "not a regular file or a directory (%s); tensorfs reads only regular files", backing.DescribeType(st.Mode()))
	}
	if err == nil {
		err = finish(idx, l.files)
	}
	l.closePrepared(nil) // opened by a parse whose result was not kept
	if err != nil {
		l.closeAll()
		return nil, nil, err
	}
	// Sources name the backing files for other processes too (the
	// user.tensorfs.source xattr, index.json): absolute, whatever the
	// working directory they are read from. Messages above keep the path
	// as the user gave it.
	for i, s := range idx.Sources {
		if s == "" {
			continue // a member: SourceName joins its file's name
		}
		if abs, err := filepath.Abs(s); err == nil {
			idx.Sources[i] = abs
		}
	}
	return idx, l.files, nil
}

// loader holds the files opened so far, so that all are closed on error.
type loader struct {
	open    Opener
	inflate *backing.InflateCache // Options.Inflate
	tree    Tree                  // where dir lists files; nil: the local filesystem
	files   []backing.Source      // checkpoint files and members, files[i] for the merged Sources[i] once merged
	spare   []backing.Source      // opened, not (yet) part of the result
	report  func(error)           // Options.Report
	// prepared are the members a parser opened and read while parsing
	// (parseMember), by the file and place they are in: openMember
	// serves them from the same source, decoded once.
	prepared map[preparedKey]backing.Source
}

// tolerate returns err, or nil after passing it to Options.Report when
// Load goes on past such problems (Report set).
func (l *loader) tolerate(err error) error {
	if l.report == nil {
		return err
	}
	l.report(err)
	return nil
}

// part is one parsed checkpoint file.
type part struct {
	path     string
	f        backing.Source
	idx      *index.Index
	siblings []backing.Source // the files its parser opened beside it: Sources[1:1+len]
}

// asSource returns f, a file of the caller's Opener (or a file handed to
// ParseFile), as a backing.Source: itself where it is one, else f served
// as it is, closed where it has a Close (a test's file in memory).
func asSource(f index.File) backing.Source {
	if s, ok := f.(backing.Source); ok {
		return s
	}
	return &fileSource{f}
}

// fileSource is a file that is not a backing.Source (asSource).
type fileSource struct{ index.File }

// Close closes the file where it has a Close.
func (f *fileSource) Close() error {
	if c, ok := f.File.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func closeFile(f backing.Source) { f.Close() }

func (l *loader) closeAll() {
	l.closePrepared(nil)
	for _, f := range l.files {
		closeFile(f)
	}
	for _, f := range l.spare {
		closeFile(f)
	}
	l.files, l.spare = nil, nil
}

// openFile opens path and keeps it for closeAll.
func (l *loader) openFile(path string) (backing.Source, error) {
	f, err := l.open(path)
	if err != nil {
		return nil, err
	}
	s := asSource(f)
	l.spare = append(l.spare, s)
	return s, nil
}

// release closes f now and forgets it.
func (l *loader) release(f backing.Source) {
	if i := slices.Index(l.spare, f); i >= 0 {
		l.spare = slices.Delete(l.spare, i, i+1)
	}
	l.closePrepared(f)
	closeFile(f)
}

// sniff returns the format of f, or nil when f is not a checkpoint.
func sniff(f index.File) (*Format, error) {
	head, err := index.ReadHead(f, SniffLen)
	if err != nil {
		return nil, err
	}
	fm, ok := Detect(head)
	if !ok {
		return nil, nil
	}
	return fm, nil
}

// isLFSPointerFile reports whether f is a Git LFS pointer (IsLFSPointer).
func isLFSPointerFile(f index.File) (bool, error) {
	head, err := index.ReadHead(f, len(lfsPrefix))
	if err != nil {
		return false, err
	}
	return IsLFSPointer(head), nil
}

// dcpShard reports whether path, a file that no format reads, is a
// .distcp of a distributed checkpoint: its directory holds a .metadata
// that dcp.Sniff accepts (a .distcp alone is a row of torch.save zips,
// which no reader takes for one file), or, with no such .metadata
// beside it, it is named as torch names them (__R_K.distcp).
func (l *loader) dcpShard(path string) (dir string, ok bool) {
	dir = filepath.Dir(path)
	if f, err := l.openFile(filepath.Join(dir, dcp.MetadataName)); err == nil {
		head := make([]byte, dcp.SniffLen)
		n, _ := f.ReadAt(head, 0)
		l.release(f)
		if dcp.Sniff(head[:n]) {
			return dir, true
		}
	}
	return dir, strings.HasSuffix(path, ".distcp")
}

// file loads a SOURCE that is a file.
func (l *loader) file(path string) (*index.Index, error) {
	f, err := l.openFile(path)
	if err != nil {
		return nil, err
	}
	if filepath.Base(path) == dcp.MetadataName { // a distributed checkpoint's: read its directory
		head, err := index.ReadHead(f, dcp.SniffLen)
		if err != nil {
			return nil, err
		}
		if dcp.Sniff(head) {
			l.release(f)
			return l.dir(filepath.Dir(path))
		}
	}
	if strings.HasSuffix(path, ".index.json") {
		fm, err := sniff(f)
		if err != nil {
			return nil, err
		}
		if fm == nil {
			l.release(f)
			return l.weightMap(filepath.Dir(path), path)
		}
	}
	p, err := l.parseFile(path, f)
	if err != nil {
		if _, ok := l.dcpShard(path); ok {
			return nil, index.ErrorAt(path, "", "a shard of a PyTorch Distributed Checkpoint, which is read whole: pass the directory that holds it and its .metadata")
		}
		return nil, err
	}
	return l.join(filepath.Dir(path), []part{p}, true)
}
