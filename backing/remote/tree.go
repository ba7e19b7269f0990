package remote

import (
	"context"
	"path"
	"strings"
)

// Tree presents a Client's store as a tree of '/'-separated paths for
// formats.LoadTree: the path of the object at key K is "/K", and a prefix
// P/ is the directory "/P". Parsers then find a sharded checkpoint's
// weight map, shards and split-GGUF siblings under a prefix as they do in
// a local directory.
type Tree struct {
	C   *Client
	Ctx context.Context
}

// Key is the object key of a tree path.
func Key(p string) string { return strings.TrimPrefix(p, "/") }

// Path is the tree path of a key. A key ending in '/' is a prefix, and
// its path ends in '/' too.
func Path(key string) string { return "/" + key }

// IsDir reports whether p is a prefix (true) or an object. A path ending
// in '/' is only looked up as a prefix. Either way within OpenTimeout
// (Client.Stat): a store that cannot be reached is an error, not a wait.
func (t Tree) IsDir(p string) (bool, error) {
	return t.C.Stat(t.ctx(), Key(p))
}

// Files lists the objects directly under the prefix p, as tree paths.
func (t Tree) Files(p string) ([]string, error) {
	k := strings.TrimSuffix(Key(p), "/")
	if k != "" {
		k += "/"
	}
	ents, err := t.C.List(t.ctx(), k)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		if path.Clean(e.Name) != e.Name || e.Name == "." || e.Name == ".." {
			continue // not reachable by a clean path
		}
		out = append(out, path.Join(p, e.Name))
	}
	return out, nil
}

// Display names a tree path in messages: its URL.
func (t Tree) Display(p string) string { return t.C.URL(Key(p)) }

func (t Tree) ctx() context.Context {
	if t.Ctx == nil {
		return context.Background()
	}
	return t.Ctx
}
