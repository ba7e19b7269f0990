package main

import (
	"context"
	"encoding/json"
	"fmt"
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
		return err
	}
	size, err := bytesize.Parse(*sizeFlag)
	if err != nil {
		return usagef("bench: --size: %v", err)
	}
	block, err := bytesize.Parse(*blockFlag)
	if err != nil || block > 64<<20 {
		return usagef("bench: --block: %q is not a size up to 64 MiB", *blockFlag)
	}
	treeSize, err := bytesize.Parse(*treeSizeFlag)
	if err != nil {
		return usagef("bench: --tree-size: %v", err)
	}
	if *readers < 1 || *readers > 256 {
		return usagef("bench: --readers: %d is not between 1 and 256", *readers)
	}
	if *count < 1 || *count > 100 {
		return usagef("bench: --count: %d is not between 1 and 100", *count)
	}
	if *treeTensors < 1 || *treeTensors > 1_000_000 {
		return usagef("bench: --tree-tensors: %d is not between 1 and 1000000", *treeTensors)
	}
	phases := map[string]bool{}
	for _, p := range strings.Split(*phasesFlag, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(bench.Phases, p) {
			return usagef("bench: --phases: unknown measurement %q (want some of %s)", p, strings.Join(bench.Phases, ","))
		}
		phases[p] = true
	}
	if phases["view"] && !phases["read"] {
		return usagef("bench: --phases: view is compared with read; list both")
	}
	mflags := strings.Fields(*mountFlags)
	for _, fl := range mflags {
		if !strings.HasPrefix(fl, "-") {
			continue
		}
		name := strings.TrimLeft(fl, "-")
		name, _, _ = strings.Cut(name, "=")
		if name == "dtype" {
			return usagef("bench: --mount: --dtype changes the tree the benchmark reads; leave it out")
		}
	}
	if *tree && f.NArg() > 0 {
		return usagef("bench: --tree generates its own checkpoint; give no SOURCE")
	}

	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: cannot find this program to run it: %v", err)
	}
	dir := *dirFlag
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
		Exe: exe, Dir: dir, Keep: *dirFlag != "", MountFlags: mflags,
		Readers: *readers, Block: int(block), Phases: phases, Progress: os.Stderr,
	}
	if *tree {
		rep, err := bench.Tree(ctx, cfg, *treeTensors, treeSize, *count)
		if err != nil {
			return err
		}
		if *jsonOut {
			return benchJSON(rep)
		}
		rep.Print(os.Stdout)
		return nil
	}
	source := ""
	generated := false
	if f.NArg() == 1 {
		source = f.Arg(0)
		if tfsource.IsRemote(source) {
			return usagef("bench: %s: not a local checkpoint: bench compares reads through a mount with direct reads of the same local file (time a remote SOURCE with tensorfs load)", source)
		}
	} else {
		// In a --dir of the caller's, the checkpoint is kept for the
		// next run with the same --size.
		source = filepath.Join(dir, fmt.Sprintf("bench-%d.safetensors", size))
		if _, err := os.Stat(source); err != nil || !cfg.Keep {
			fmt.Fprintf(os.Stderr, "tensorfs bench: writing a %s checkpoint to %s\n", bytesize.Format(size), source)
			if err := bench.Generate(source, size); err != nil {
				os.Remove(source)
				return fmt.Errorf("bench: %v", err)
			}
		}
		generated = true
	}
	ck, err := openSource(source, sourceOptions{Mode: backing.Pread})
	if err != nil {
		return err
	}
	idx := ck.idx
	ck.close()
	rep, err := bench.Reads(ctx, cfg, idx, source, generated, *count)
	if err != nil {
		return err
	}
	if *jsonOut {
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
