package formats

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// Layout is one row of the table of directory layouts: how the files of
// a directory make one checkpoint. A SOURCE that is a directory is read
// by the first row of Layouts that claims it and finds a checkpoint
// (loader.dir); a directory no row reads gets the no-checkpoint message.
type Layout struct {
	Name string
	// Claim reports whether d is of this layout, from its files' names
	// and what it reads of them through d.Open (a file it leaves open
	// is Load's: d.Open returns it again). An error fails the load.
	Claim func(d *Dir) (bool, error)
	// Load reads d as one checkpoint: an Index whose Sources are the
	// files it kept (Dir.Keep), in that order, then its members; every
	// tensor's Source numbers them; no paths yet. Files it opened and
	// did not keep are closed by the loader. nil and no error: no
	// checkpoint after all (the next rows are asked).
	Load func(d *Dir) (*index.Index, error)
}

// Layouts is the table of directory layouts, in the order they are
// asked: a distributed checkpoint (its .metadata), a weight map
// (*.index.json), then the files of the directory that are checkpoints
// by content (shards), which claims every directory.
var Layouts = []Layout{
	{Name: "dcp", Claim: claimDCP, Load: loadDCP}, // dcp.go
	{Name: "weight map", Claim: claimWeightMap, Load: loadWeightMap},
	{Name: "shards", Claim: func(*Dir) (bool, error) { return true, nil }, Load: loadShards}, // dir.go
}

// Dir is a directory a Layout reads: its path and files, and the loader
// that opens them (so that every file opened is closed when the load
// fails).
type Dir struct {
	Path  string   // the directory, as given
	Files []string // its regular files (links to regular files included), as paths, sorted
	l     *loader
	open  map[string]backing.Source // opened through Open and not released
	// What the shards row saw in a directory where it found no
	// checkpoint, for the no-checkpoint message.
	lfs     string // the first Git LFS pointer among the files
	refused string // what the first file of Refused's formats is
	broken  int    // checkpoint files left out (Options.Report)
}

// Open opens path, one of d.Files (or a file beside them), or returns
// the source Open returned for it before and that is not released.
func (d *Dir) Open(path string) (backing.Source, error) {
	if f, ok := d.open[path]; ok {
		return f, nil
	}
	f, err := d.l.openFile(path)
	if err != nil {
		return nil, err
	}
	if d.open == nil {
		d.open = map[string]backing.Source{}
	}
	d.open[path] = f
	return f, nil
}

// Release closes f, opened by Open, now.
func (d *Dir) Release(f backing.Source) {
	for p, o := range d.open {
		if o == f {
			delete(d.open, p)
		}
	}
	d.l.release(f)
}

// Keep makes files, opened by Open, the files of the checkpoint Load
// returns, in order: Sources[i] of its Index reads the i-th.
func (d *Dir) Keep(files ...backing.Source) {
	for _, f := range files {
		for p, o := range d.open {
			if o == f {
				delete(d.open, p)
			}
		}
		if i := slices.Index(d.l.spare, f); i >= 0 {
			d.l.spare = slices.Delete(d.l.spare, i, i+1)
		}
		d.l.files = append(d.l.files, f)
	}
}

// releaseAll closes what Claim or Load opened and did not keep.
func (d *Dir) releaseAll() {
	for _, f := range d.open {
		d.l.release(f)
	}
	d.open = nil
}

// claimWeightMap claims a directory with a *.index.json file.
func claimWeightMap(d *Dir) (bool, error) {
	return slices.ContainsFunc(d.Files, isWeightMap), nil
}

func isWeightMap(p string) bool { return strings.HasSuffix(filepath.Base(p), ".index.json") }

// loadWeightMap reads the directory's weight map (chooseWeightMap) and
// the shards it names.
func loadWeightMap(d *Dir) (*index.Index, error) {
	var maps []string
	for _, p := range d.Files {
		if isWeightMap(p) {
			maps = append(maps, filepath.Base(p))
		}
	}
	m, err := chooseWeightMap(d.Path, maps)
	if err != nil {
		return nil, err
	}
	return d.l.weightMap(d.Path, filepath.Join(d.Path, m))
}
