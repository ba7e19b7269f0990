package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/cmd/tensorfs/internal/bench"
	tfsource "github.com/lazyweights/tensorfs/source"
)

// The measurements themselves live in cmd/tensorfs/internal/bench; this file parses
// the command line.

func runBench(args []string) error {
	if len(args) >= 3 && args[0] == "--serve-null" {
		// The zero-work server of a running bench (cmd/tensorfs/internal/bench).
		return bench.ServeNull(args[1], args[2], args[3:])
	}
	b, err := parseBenchFlags(args)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: cannot find this program to run it: %v", err)
	}
	dir := b.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "tensorfs-bench-")
		if err != nil {
			return fmt.Errorf("bench: %v", err)
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %v", err)
	}

	// Ctrl-C stops between measurements and takes the mounts down. The
	// servers run in their own process groups, so the signal reaches
	// only this process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := bench.Config{
		Exe: exe, Dir: dir, Keep: b.dir != "", MountFlags: b.mountFlags,
		Readers: b.readers, Block: int(b.block), Phases: b.phases, Progress: os.Stderr,
	}
	if b.tree {
		rep, err := bench.Tree(ctx, cfg, b.treeTensors, b.treeSize, b.count)
		if err != nil {
			return err
		}
		return b.print(rep)
	}
	source, generated, err := b.checkpoint(cfg)
	if err != nil {
		return err
	}
	ck, err := openSource(source, sourceOptions{Mode: backing.Pread})
	if err != nil {
		return err
	}
	idx := ck.idx
	ck.close()
	rep, err := bench.Reads(ctx, cfg, idx, source, generated, b.count)
	if err != nil {
		return err
	}
	return b.print(rep)
}

// benchFlags are bench's operand and flags, parsed and checked
// (parseBenchFlags).
type benchFlags struct {
	source      string // SOURCE, when given (hasSource)
	hasSource   bool
	size, block int64
	readers     int
	count       int
	mountFlags  []string
	phases      map[string]bool
	json        bool
	dir         string
	tree        bool
	treeTensors int
	treeSize    int64
}

// parseBenchFlags parses bench's command line; a bad value is a usage
// error.
func parseBenchFlags(args []string) (*benchFlags, error) {
	f := newFlags("bench", "[flags] [SOURCE]", bench.About)
	sizeFlag := f.String("size", "1GiB", "`SIZE` of the checkpoint generated when there is no SOURCE (bytes, or with a K, M, G, KiB, MiB, GiB suffix)")
	readers := f.Int("readers", 2, "parallel readers, `N`")
	blockFlag := f.String("block", "1MiB", "`SIZE` of each sequential read(2) and copy")
	count := f.Int("count", 1, "runs, `N`, each on fresh mounts; with more than one, a last table gives the median of every figure")
	mountFlags := f.String("mount", "", "`FLAGS` passed to tensorfs mount, as one string, e.g. \"--readahead-kb 128 --no-splice\"")
	phasesFlag := f.String("phases", strings.Join(bench.Phases, ","), "comma-separated `LIST` of measurements to make: read (first and repeat, beside a direct read and a zero-work FUSE server), view, random, mmap, cache (page cache growth per byte read), split (all 8 tensor-parallel parts of each tensor of rank ≥ 2 through .split/, along dim 0 and dim 1, beside the whole tensors)")
	jsonOut := f.Bool("json", false, "print the results as one JSON object on stdout instead of tables")
	dirFlag := f.String("dir", "", "`DIR` for the generated checkpoint and the mount points, where the checkpoint is kept for later runs with the same --size (default: a new temporary directory, removed afterwards)")
	tree := f.Bool("tree", false, "measure mount time, tree walks and server memory on a generated sparse checkpoint instead (see --tree-tensors, --tree-size)")
	treeTensors := f.Int("tree-tensors", 10000, "tensors, `N`, of the --tree checkpoint")
	treeSizeFlag := f.String("tree-size", "100GiB", "`SIZE` of the --tree checkpoint (a sparse file)")
	if err := f.parse(args, 0, 1); err != nil {
		return nil, err
	}
	b := &benchFlags{source: f.Arg(0), hasSource: f.NArg() == 1, readers: *readers, count: *count, json: *jsonOut, dir: *dirFlag, tree: *tree, treeTensors: *treeTensors}
	var err error
	if b.size, err = bytesize.Parse(*sizeFlag); err != nil {
		return nil, usagef("bench: --size: %v", err)
	}
	if b.block, err = bytesize.Parse(*blockFlag); err != nil || b.block > 64<<20 {
		return nil, usagef("bench: --block: %q is not a size up to 64 MiB", *blockFlag)
	}
	if b.treeSize, err = bytesize.Parse(*treeSizeFlag); err != nil {
		return nil, usagef("bench: --tree-size: %v", err)
	}
	if *readers < 1 || *readers > 256 {
		return nil, usagef("bench: --readers: %d is not between 1 and 256", *readers)
	}
	if *count < 1 || *count > 100 {
		return nil, usagef("bench: --count: %d is not between 1 and 100", *count)
	}
	if *treeTensors < 1 || *treeTensors > 1_000_000 {
		return nil, usagef("bench: --tree-tensors: %d is not between 1 and 1000000", *treeTensors)
	}
	if b.phases, err = benchPhases(*phasesFlag); err != nil {
		return nil, err
	}
	if b.mountFlags, err = benchMountFlags(*mountFlags); err != nil {
		return nil, err
	}
	if *tree && f.NArg() > 0 {
		return nil, usagef("bench: --tree generates its own checkpoint; give no SOURCE")
	}
	return b, nil
}

// benchPhases parses --phases: the measurements to make.
func benchPhases(list string) (map[string]bool, error) {
	phases := map[string]bool{}
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(bench.Phases, p) {
			return nil, usagef("bench: --phases: unknown measurement %q (want some of %s)", p, strings.Join(bench.Phases, ","))
		}
		phases[p] = true
	}
	if phases["view"] && !phases["read"] {
		return nil, usagef("bench: --phases: view is compared with read; list both")
	}
	return phases, nil
}

// benchMountFlags parses --mount: the flags passed to tensorfs mount,
// which may not change the tree read (--dtype).
func benchMountFlags(flags string) ([]string, error) {
	mflags := strings.Fields(flags)
	for _, fl := range mflags {
		if !strings.HasPrefix(fl, "-") {
			continue
		}
		name := strings.TrimLeft(fl, "-")
		name, _, _ = strings.Cut(name, "=")
		if name == "dtype" {
			return nil, usagef("bench: --mount: --dtype changes the tree the benchmark reads; leave it out")
		}
	}
	return mflags, nil
}

// checkpoint is the checkpoint to read: SOURCE, which must be local, or
// one of --size generated in cfg.Dir (kept there for the next run with
// the same --size when --dir is the caller's).
func (b *benchFlags) checkpoint(cfg bench.Config) (source string, generated bool, err error) {
	if b.hasSource {
		if tfsource.IsRemote(b.source) {
			return "", false, usagef("bench: %s: not a local checkpoint: bench compares reads through a mount with direct reads of the same local file (time a remote SOURCE with tensorfs load)", b.source)
		}
		return b.source, false, nil
	}
	source = filepath.Join(cfg.Dir, fmt.Sprintf("bench-%d.safetensors", b.size))
	if _, err := os.Stat(source); err != nil || !cfg.Keep {
		fmt.Fprintf(os.Stderr, "tensorfs bench: writing a %s checkpoint to %s\n", bytesize.Format(b.size), source)
		if err := bench.Generate(source, b.size); err != nil {
			os.Remove(source)
			return "", false, fmt.Errorf("bench: %v", err)
		}
	}
	return source, true, nil
}

// print prints a report: as JSON with --json, else as tables.
func (b *benchFlags) print(rep interface{ Print(io.Writer) }) error {
	if b.json {
		return benchJSON(rep)
	}
	rep.Print(os.Stdout)
	return nil
}

// benchJSON prints v as indented JSON on stdout.
func benchJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
