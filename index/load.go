package index

// STUB: replaced by the loader (sharded directories, GGUF splits, names).

// Opener opens one backing file by path. backing.Open provides it.
type Opener func(path string) (File, error)

// Load opens SOURCE (a checkpoint file, or a directory holding a sharded
// checkpoint) through open, detects the format(s) by content, parses and
// validates everything, merges shards into one Index whose Sources are the
// shard paths, sorts Tensors by Name and assigns Paths (AssignPaths). The
// returned files are the opened sources, files[i] for Sources[i]; on error
// every file opened is closed.
func Load(path string, open Opener) (*Index, []File, error) {
	f, err := open(path)
	if err != nil {
		return nil, nil, err
	}
	idx, err := ParseFile(f)
	if err != nil {
		if c, ok := f.(interface{ Close() error }); ok {
			c.Close()
		}
		return nil, nil, err
	}
	return idx, []File{f}, nil
}
