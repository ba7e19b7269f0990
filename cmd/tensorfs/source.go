package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/fs"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/source"
)

// checkpoint is an opened SOURCE (openSource): a checkpoint's index and
// open backing files. The commands that read tensors through the Go
// client get a client.Checkpoint instead (openClient), which a
// tensorfs mount can also be.
type checkpoint struct {
	path    string
	mode    backing.Mode
	idx     *index.Index
	sources []backing.Source   // sources[i] reads idx.Sources[i]
	remote  *remote.Client     // a remote SOURCE's client, else nil
	loaded  *source.Checkpoint // what source.Load returned
}

// beside returns the files of the model directory beside the
// checkpoint (source.Checkpoint.Beside): config.json, tokenizer
// files... They are the checkpoint's: close closes them. A file that
// cannot be read is left out with one line on stderr.
func (c *checkpoint) beside() ([]source.File, error) {
	files, err := c.loaded.Beside(context.Background())
	for _, s := range c.loaded.BesideSkipped() {
		fmt.Fprintf(os.Stderr, "tensorfs: %v\n", s) // one line each; the rest is served
	}
	return files, err
}

// sourceOptions say how a command opens its SOURCE.
type sourceOptions struct {
	Mode backing.Mode // how local files are read (the parsers read them through backing.ForParsing)
	// Report, when set, makes the loader go on past the problems of a
	// weight map and its shards, each given to Report
	// (source.Options.Report), and leaves the index's unserved entries and
	// notes to the caller rather than logging them: `tensorfs check`,
	// which reports some of them as problems (one line each, not two).
	Report func(error)
}

// openSource is the one way every command opens its SOURCE (a file, a
// directory, a remote SOURCE of source.Schemes; a tensorfs mount only
// through openClient): it checks the remote flags and that SOURCE is not
// in a dead mount, parses and validates the checkpoint completely
// (source.Load), and logs what its parsers left out (notes, unserved
// tensors), one line each. A tensorfs mount is refused: mount, ls, cat,
// check and bench need the checkpoint's index.
func openSource(path string, o sourceOptions) (*checkpoint, error) {
	ro, err := openChecks(path)
	if err != nil {
		return nil, err
	}
	if isMount(path) {
		return nil, fmt.Errorf("%s: a tensorfs mount, not a checkpoint: its index is %s (tensorfs load reads a mount)", path, filepath.Join(path, source.MountIndexPath))
	}
	return load(path, o, ro)
}

// openClient opens SOURCE as openSource does, or a tensorfs mount read
// through its files, for the commands that read tensors through the Go
// client (load, convert): the client.Checkpoint it returns holds
// everything opened, and its Close closes it.
func openClient(path string, mode backing.Mode) (*client.Checkpoint, error) {
	ro, err := openChecks(path)
	if err != nil {
		return nil, err
	}
	if isMount(path) {
		ck, err := client.Open(path)
		if err != nil {
			return nil, err
		}
		logNotes(ck.Notes())
		logUnserved(path, ck.Unserved())
		return ck, nil
	}
	c, err := load(path, sourceOptions{Mode: mode}, ro)
	if err != nil {
		return nil, err
	}
	// The client takes over the sources and what source.Load returned.
	ck, err := client.FromSource(c.path, c.loaded, c.mode)
	if err != nil {
		c.close()
		return nil, err
	}
	return ck, nil
}

// openChecks are what opening any SOURCE checks first: the remote flags
// (a bad value is a usage error for a local SOURCE too), returned as
// options, and that SOURCE is not in a dead mount.
func openChecks(path string) (source.RemoteOptions, error) {
	ro, err := remoteOptions()
	if err != nil {
		return ro, err
	}
	return ro, checkDeadMount(path)
}

// isMount reports whether path is a tensorfs mount point (never a
// remote SOURCE).
func isMount(path string) bool { return !source.IsRemote(path) && source.IsMount(path) }

// load loads the checkpoint at path (source.Load) with the remote
// options ro and logs what its parsers left out, unless o.Report takes
// the problems.
func load(path string, o sourceOptions, ro source.RemoteOptions) (*checkpoint, error) {
	ck, err := source.Load(context.Background(), path, source.Options{Backing: backing.Options{Mode: o.Mode}, Remote: ro, Report: o.Report})
	if err != nil {
		if source.IsRemote(path) {
			return nil, fmt.Errorf("%v", err)
		}
		var pe *iofs.PathError
		if errors.As(err, &pe) && !errors.As(err, new(*index.FormatError)) {
			return nil, errors.New(describePath(pe))
		}
		return nil, err
	}
	if o.Report == nil {
		logNotes(ck.Index.Notes)
		us := make([]client.Unserved, len(ck.Index.Unserved))
		for i, u := range ck.Index.Unserved {
			us[i] = client.Unserved{Name: u.Name, Type: u.Type, Why: u.Why, More: u.More}
		}
		logUnserved(path, us)
	}
	return &checkpoint{path: path, mode: o.Mode, idx: ck.Index, sources: ck.Sources, remote: ck.Remote, loaded: ck}, nil
}

// checkDeadMount refuses a SOURCE that is, or is inside, a FUSE mount
// whose server was killed: the kernel may still answer stat from its
// cache (so it looks like a live mount), but every read fails.
func checkDeadMount(path string) error {
	mp, ok := mountAbove(path)
	if !ok {
		return nil
	}
	if m, _ := fs.FindMount(mp); m.Dead {
		what := "a dead FUSE mount"
		if m.Tensorfs() {
			what = "a dead tensorfs mount (of " + m.Source + ")"
		}
		in := ""
		if filepath.Clean(mp) != filepath.Clean(path) {
			in = " is inside " + mp + ", which"
		}
		return fmt.Errorf("%s%s is %s: its server was killed, nothing can be read there; clear it with `tensorfs umount %s` (and mount again)", path, in, what, mp)
	}
	return nil
}

func (c *checkpoint) close() {
	for _, s := range c.sources {
		s.Close()
	}
	c.sources = nil
	if c.loaded != nil {
		c.loaded.Sources = nil // closed above
		c.loaded.Close()       // the files beside it
		c.loaded = nil
	}
}

// find returns the tensor with exactly this name, or else the one at this
// path in the mounted tree, or else the one the checkpoint keys so
// (index.Index.Keys: a DCP's dotted key), as a listing shows it
// (index.Tensor.Listed: converted for a float view, native otherwise): a
// quantized weight that keeps its stored name is its stored codes
// natively and its values converted.
func (c *checkpoint) find(name string, converted bool) (*index.Tensor, bool) {
	ts := c.idx.Tensors
	byName := func(name string) (*index.Tensor, bool) {
		i := sort.Search(len(ts), func(i int) bool { return ts[i].Name >= name })
		for ; i < len(ts) && ts[i].Name == name; i++ {
			if ts[i].Listed(converted) {
				return &ts[i], true
			}
		}
		return nil, false
	}
	if t, ok := byName(name); ok {
		return t, true
	}
	for i := range ts {
		if ts[i].Path == name && ts[i].Listed(converted) {
			return &ts[i], true
		}
	}
	if n, ok := index.NamesByKey(c.idx.Keys)[name]; ok {
		return byName(n)
	}
	return nil, false
}

// logNotes writes the checkpoint's notes (index.Index.Notes: what its
// parser left out of the tensors without failing) to stderr, one line
// each.
func logNotes(notes []string) {
	for _, n := range notes {
		fmt.Fprintf(os.Stderr, "tensorfs: %s\n", n)
	}
}

// logUnserved writes to stderr what the checkpoint at source holds that
// is not served (a tensor of a type this build does not know), one line
// per kind (the same type and reason) with how many and the first few
// names; the rest is served.
func logUnserved(source string, us []client.Unserved) {
	fmt.Fprint(os.Stderr, unservedLines(source, us))
}

// unservedLines is what logUnserved writes.
func unservedLines(source string, us []client.Unserved) string {
	type kind struct{ typ, why string }
	var order []kind
	groups := map[kind][]client.Unserved{}
	more := map[kind]int64{}
	for _, u := range us {
		k := kind{u.Type, u.Why}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], u)
		more[k] += u.More
	}
	var b strings.Builder
	for _, k := range order {
		g := groups[k]
		if n := int64(len(g)) + more[k]; n > 1 {
			fmt.Fprintf(&b, "tensorfs: %s: %d tensors (%s) are not served: %s", source, n, k.typ, k.why)
			if !slices.ContainsFunc(g, func(u client.Unserved) bool { return u.Name != "" }) {
				b.WriteString(" (none has a name)\n") // nameless: no names to list
				continue
			}
			fmt.Fprintf(&b, ": %s\n", unservedNamesOf(g, n))
			continue
		}
		fmt.Fprintf(&b, "tensorfs: %s: tensor %s (%s) is not served: %s\n", source, strconv.Quote(g[0].Name), k.typ, k.why)
	}
	return b.String()
}

// unservedNamesOf lists the first few names of g, quoted, and how many
// more of the n it stands for.
func unservedNamesOf(g []client.Unserved, n int64) string {
	var b strings.Builder
	for i, u := range g {
		if i == 4 {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteShort(u.Name))
	}
	if shown := int64(min(len(g), 4)); n > shown {
		fmt.Fprintf(&b, " and %d more", n-shown)
	}
	return b.String()
}

// unservedNames lists the names of us for an error line: the first few,
// quoted, with their types, then how many more (entries a list left out
// counted: client.Unserved.More).
func unservedNames(us []client.Unserved) string {
	var b strings.Builder
	total := int64(unservedCount(us))
	for i, u := range us {
		if i == 4 {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s)", quoteShort(u.Name), u.Type)
	}
	if shown := int64(min(len(us), 4)); total > shown {
		fmt.Fprintf(&b, " and %d more", total-shown)
	}
	return b.String()
}

// unservedCount is how many entries us stands for (client.Unserved.More
// counted).
func unservedCount(us []client.Unserved) int {
	n := 0
	for _, u := range us {
		n += 1 + int(u.More)
	}
	return n
}

// quoteShort quotes name, its first 200 bytes and "..." when longer (a
// name may be 64 KiB).
func quoteShort(name string) string {
	if len(name) > 200 {
		return strconv.Quote(name[:200]) + "..."
	}
	return strconv.Quote(name)
}
