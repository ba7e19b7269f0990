package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"golang.org/x/sys/unix"
)

const About = `
Measures reads of a checkpoint through a fresh tensorfs mount side by side
with reads of the same bytes straight from the checkpoint file, in one run,
and prints throughputs in GB/s (10^9 bytes a second) and their ratios.
Without SOURCE it first writes a safetensors checkpoint of --size bytes
(BF16 and F16 tensors, alternately) to a temporary directory.

The mount is served by another process ("tensorfs mount", with the flags
given in --mount): a process must never read its own mount. The checkpoint
file is read into the page cache before anything is timed, and again
before each mount and each direct read (a mount drops the checkpoint's
pages it has served, see "cache"), so every figure compares reads from
the page cache. Each run measures, with --readers readers taking
whole tensors (or reads) from a shared queue:

  first read    every tensor file of a fresh mount read once, start to
                end, in --block reads; beside: pread of the same byte
                ranges of the checkpoint file.
  repeat read   the same again on the same mount (its own page cache).
  .f32 view     the .f32/ file of every BF16 tensor (F16 when there is no
                BF16) on the same mount, counted in output bytes; beside:
                the first read of the stored files of the same mount.
  random        random reads of 4 KiB to 1 MiB (sizes log-uniform, any
                offset) of the tensor files of a fresh mount; beside: the
                same reads of the checkpoint file.
  mmap          every tensor file of a fresh mount mapped (MAP_SHARED)
                and copied out, as NumPy's mmap_mode="r" consumers do;
                beside: the same ranges of a mapping of the checkpoint.
                Then, on another fresh mount, the random reads copied out
                of mappings (sparse access: embedding rows, slices).
  cache         the page cache that reading adds, per byte read: the
                checkpoint's pages are dropped (posix_fadvise), then
                every tensor file of a fresh mount is read with read(2),
                every .npy/ file of another mapped and copied out
                (NumPy's mmap_mode="r"), and the safetensors export
                (.safetensors/model.safetensors) read, then mapped, and
                the .f32/ view's export read, each on its own mount. One
                copy of each byte is 1.00; the mount's cache plus the
                checkpoint's is 2.00 (1.50 for the .f32/ export, whose
                bytes are twice the stored ones). As root
                it is counted in a private memory cgroup (this process
                and its server only); otherwise from /proc/meminfo, which
                counts the whole machine.

The first and repeat reads are also measured on a zero-work FUSE server
(every READ answered from one buffer of zeros, with the same request
size, readahead and caching) mounted beside: its figures are what FUSE
itself allows on this machine, and the ratio to them how close tensorfs
comes. Each run's header says how much of the mount's page cache sits in
large folios after the repeat read (root only): 0% where the kernel's
FUSE caches 4 KiB pages.

Only tensors that are one contiguous range of a checkpoint file take part.
The CPU columns are the seconds of CPU the reading process and the server
used during the tensorfs side of the measurement.

The header says how much of the checkpoint the page cache holds and, as
root, how much of it sits in large folios: a file just written is held in
2 MiB folios, which copy out about twice as fast as the small pages of a
file read back from disk, so the direct baseline moves with it.

--tree measures the metadata side instead: it writes a sparse safetensors
file of --tree-tensors tensors and --tree-size bytes, and reports the time
from starting the server to MOUNTPOINT/.tensorfs/index.json, a walk of the
stored tree (every directory read, every entry stat'ed, hidden directories
skipped), two walks of everything (the views too), and the server's peak
and anonymous memory (VmHWM, RssAnon) after each.

Levers are swept by passing mount flags, e.g.
  tensorfs bench --count 3 --mount "--readahead-kb 128"
  tensorfs bench --mount "--no-splice --backing pread"
See docs/BENCHMARKS.md for figures and the defaults they led to.`

// Phases are the measurements, in the order a run makes them.
var Phases = []string{"read", "view", "random", "mmap", "cache", "split"}

// Config is what every measurement shares.
type Config struct {
	// Exe is the tensorfs program: servers run as "Exe mount FLAGS
	// SOURCE MOUNTPOINT" (a process must never read its own mount), and
	// the zero-work server as "Exe bench --serve-null MANIFEST MOUNTPOINT".
	Exe string
	// Dir holds the generated checkpoints, mount points and logs.
	Dir string
	// Keep keeps generated checkpoints in Dir for later runs.
	Keep bool
	// MountFlags are passed to every "tensorfs mount".
	MountFlags []string
	// Readers read in parallel, Block bytes at a time.
	Readers, Block int
	// Phases: which of Phases to measure; nil means all.
	Phases map[string]bool
	// Progress receives one line per step; nil means none.
	Progress io.Writer
}

// newHarness checks cfg and returns the harness of one invocation.
func newHarness(ctx context.Context, cfg Config) *harness {
	phases := cfg.Phases
	if phases == nil {
		phases = map[string]bool{}
		for _, p := range Phases {
			phases[p] = true
		}
	}
	return &harness{
		ctx: ctx, exe: cfg.Exe, dir: cfg.Dir, mountFlags: cfg.MountFlags,
		readers: max(1, cfg.Readers), block: max(4096, cfg.Block), phases: phases,
		progress: cfg.Progress, keep: cfg.Keep,
	}
}

// Reads makes count runs of the read measurements on the checkpoint at
// source, whose parsed index is idx (generated: Generate wrote it).
func Reads(ctx context.Context, cfg Config, idx *index.Index, source string, generated bool, count int) (*Report, error) {
	return newHarness(ctx, cfg).runReads(idx, source, generated, count)
}

// Tree writes a sparse safetensors checkpoint of n tensors and size
// bytes and makes count runs of the metadata measurements on it.
func Tree(ctx context.Context, cfg Config, n int, size int64, count int) (*TreeReport, error) {
	return newHarness(ctx, cfg).runTree(n, size, count)
}

// harness holds what every measurement shares.
type harness struct {
	ctx        context.Context
	exe        string   // this program, run as "mount" for the servers
	dir        string   // scratch: checkpoints, mount points, logs
	mountFlags []string // passed to every "tensorfs mount"
	readers    int
	block      int
	phases     map[string]bool
	progress   io.Writer // one line per step
	source     string    // the checkpoint to mount
	keep       bool      // keep generated checkpoints (a --dir was given)
	mounts     int       // mount points made so far
}

// tensor is one tensor taking part: its file in the mount and the
// byte range of the checkpoint file holding it.
type tensor struct {
	path  string // in the mounted tree
	src   int    // index into Report.Sources / bench fds
	off   int64
	size  int64
	dtype dtype.DType
	elems int64
	shape []int64
}

// Report is everything one invocation measured.
type Report struct {
	Source    string   `json:"source"`
	Generated bool     `json:"generated"`
	Sources   []string `json:"sources"`
	Tensors   int      `json:"tensors"` // taking part
	Skipped   int      `json:"skipped"` // not one contiguous range
	Bytes     int64    `json:"bytes"`   // their bytes
	DTypes    string   `json:"dtypes"`
	Resident  float64  `json:"resident"` // fraction of the sources in the page cache after warming
	// LargeFolios is the fraction of a sample of the sources' cached pages
	// that belong to large folios (-1 when /proc/kpageflags cannot be
	// read: not root). Reads of large folios are cheaper: a checkpoint
	// just written sits in 2 MiB folios, one read back from disk mostly
	// in small ones, and the direct baseline differs about twofold.
	LargeFolios float64     `json:"large_folios"`
	Readers     int         `json:"readers"`
	Block       int         `json:"block"`
	MountFlags  []string    `json:"mount_flags"`
	Machine     Machine     `json:"machine"`
	Runs        []RunResult `json:"runs"`
	Median      []Row       `json:"median,omitempty"`
}

type Machine struct {
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Memory int64  `json:"memory"`
}

// RunResult is one run: its rows and how long its mounts took to be ready.
type RunResult struct {
	Rows       []Row      `json:"rows"`
	Load       [2]float64 `json:"loadavg"` // 1-minute load average before and after
	ReadyMS    []float64  `json:"ready_ms"`
	ServerHWM  int64      `json:"server_vmhwm"`    // largest VmHWM of its servers (counts mapped checkpoint pages)
	ServerAnon int64      `json:"server_rss_anon"` // largest RssAnon of its servers at the end of their measurements
	Cache      []CacheRow `json:"cache,omitempty"` // page cache growth (the cache phase)
	// MountLargeFolios is the fraction of a sample of the mount's cached
	// pages (after the repeat read) in large folios; -1 when it cannot
	// be read (not root), 0 on kernels whose FUSE uses small pages only.
	MountLargeFolios float64 `json:"mount_large_folios"`
}

// Row is one measurement: tensorfs beside its baseline.
type Row struct {
	Name         string  `json:"name"`
	Label        string  `json:"label"`
	Baseline     string  `json:"baseline"`
	Bytes        int64   `json:"bytes"` // read on the tensorfs side
	BaselineGBps float64 `json:"baseline_gbps"`
	GBps         float64 `json:"gbps"`
	Ratio        float64 `json:"ratio"`
	Target       float64 `json:"target,omitempty"`
	Seconds      float64 `json:"seconds"`
	ReaderCPU    float64 `json:"reader_cpu_s"`
	ServerCPU    float64 `json:"server_cpu_s"`
	Requests     uint64  `json:"requests"` // READ requests the server answered
	RequestKiB   float64 `json:"request_kib"`
}

// measurement is one timed pass of readers.
type measurement struct {
	bytes     int64
	wall      time.Duration
	readerCPU time.Duration
	serverCPU time.Duration
	requests  uint64 // READ requests the server answered (stats.json)
	reqBytes  uint64 // and their bytes
}

func (m measurement) gbps() float64 {
	if m.wall <= 0 {
		return 0
	}
	return float64(m.bytes) / m.wall.Seconds() / 1e9
}

func (b *harness) logf(format string, args ...any) {
	if b.progress != nil {
		fmt.Fprintf(b.progress, "tensorfs bench: "+format+"\n", args...)
	}
}

// runReads makes count runs of the read measurements on source.
func (b *harness) runReads(idx *index.Index, source string, generated bool, count int) (*Report, error) {
	b.source = source
	sources := slices.Clone(idx.Sources)
	for _, m := range idx.Members {
		sources[m.Source] = idx.Sources[idx.FileOf(m.Source)] // a member: its tensors are skipped
	}
	var tensors []tensor
	skipped := 0
	dtypes := map[dtype.DType]int{}
	var total int64
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if !t.Contiguous() || t.Size == 0 || idx.Member(t.Source) != nil {
			skipped++
			continue
		}
		tensors = append(tensors, tensor{path: t.Path, src: t.Source, off: t.Offset, size: t.Size, dtype: t.DType, elems: t.NumElements(), shape: t.Shape})
		dtypes[t.DType]++
		total += t.Size
	}
	if len(tensors) == 0 {
		return nil, fmt.Errorf("bench: %s has no tensor that is one contiguous range of its file", source)
	}
	var dts []string
	for dt, n := range dtypes {
		dts = append(dts, fmt.Sprintf("%d %s", n, dt))
	}
	sort.Strings(dts)
	rep := &Report{
		Source: source, Generated: generated, Sources: sources,
		Tensors: len(tensors), Skipped: skipped, Bytes: total, DTypes: strings.Join(dts, ", "),
		Readers: b.readers, Block: b.block, MountFlags: b.mountFlags, Machine: machineInfo(),
	}
	if rep.MountFlags == nil {
		rep.MountFlags = []string{}
	}

	fds := make([]int, len(sources))
	for i, s := range sources {
		fd, err := unix.Open(s, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0) // never blocks on a file swapped for a pipe since validation
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %v", s, err)
		}
		defer unix.Close(fd)
		fds[i] = fd
	}
	b.logf("reading %s into the page cache", bytesize.Format(total))
	var err error
	if rep.Resident, err = warm(fds); err != nil {
		return nil, fmt.Errorf("bench: warming the page cache: %v", err)
	}
	rep.LargeFolios = largeFolios(fds)
	if rep.Resident < 0.99 {
		b.logf("warning: only %.0f%% of the checkpoint stayed in the page cache; the figures compare disk reads", 100*rep.Resident)
	}

	for run := 1; run <= count; run++ {
		r, err := b.oneRun(run, count, fds, tensors)
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, r)
	}
	if count > 1 {
		rep.Median = median(rep.Runs)
	}
	return rep, nil
}

// oneRun makes every measurement once, each on fresh mounts.
func (b *harness) oneRun(run, count int, fds []int, tensors []tensor) (RunResult, error) {
	var r RunResult
	r.Load[0] = loadAvg()
	var rows []Row
	mountTensors := func(f func(s *server) error) error {
		if err := b.ctx.Err(); err != nil {
			return errors.New("bench: interrupted")
		}
		// Earlier mounts dropped the checkpoint's pages they served:
		// every measurement starts from a checkpoint in the page cache.
		if _, err := warm(fds); err != nil {
			return fmt.Errorf("bench: %v", err)
		}
		s, err := b.startServer()
		if err != nil {
			return err
		}
		r.ReadyMS = append(r.ReadyMS, float64(s.ready.Microseconds())/1000)
		ferr := f(s)
		hwm, anon := s.memory()
		r.ServerHWM, r.ServerAnon = max(r.ServerHWM, hwm), max(r.ServerAnon, anon)
		if err := s.stop(); err != nil && ferr == nil {
			ferr = err
		}
		return ferr
	}
	row := func(name, label, baseline string, base, m measurement, target float64) {
		rows = append(rows, Row{
			Name: name, Label: label, Baseline: baseline, Bytes: m.bytes,
			BaselineGBps: base.gbps(), GBps: m.gbps(), Ratio: m.gbps() / base.gbps(), Target: target,
			Seconds: m.wall.Seconds(), ReaderCPU: m.readerCPU.Seconds(), ServerCPU: m.serverCPU.Seconds(),
			Requests: m.requests, RequestKiB: float64(m.reqBytes) / 1024 / float64(max(1, m.requests)),
		})
	}
	b.logf("run %d of %d", run, count)

	if b.phases["read"] {
		if err := b.readPhase(run, fds, tensors, &r, mountTensors, row); err != nil {
			return r, err
		}
	}
	if b.phases["random"] {
		if err := b.randomPhase(fds, tensors, mountTensors, row); err != nil {
			return r, err
		}
	}
	if b.phases["mmap"] {
		if err := b.mmapPhase(fds, tensors, mountTensors, row); err != nil {
			return r, err
		}
	}
	if b.phases["split"] {
		err := mountTensors(func(s *server) error { return b.splitPhase(fds, s, tensors, row) })
		if err != nil {
			return r, err
		}
	}
	if b.phases["cache"] {
		c, err := b.cachePhase(fds, tensors)
		if err != nil {
			return r, err
		}
		r.Cache = c
	}
	r.Rows = rows
	r.Load[1] = loadAvg()
	return r, nil
}

// mountFunc runs f on a fresh mount of the checkpoint (oneRun's
// mountTensors).
type mountFunc func(f func(s *server) error) error

// rowFunc adds a row of figures to the run (oneRun's row).
type rowFunc func(name, label, baseline string, base, m measurement, target float64)

// readPhase measures the first and repeat reads of every tensor file
// against direct reads and the zero-work server, then (with the view
// phase) the .f32 view.
func (b *harness) readPhase(run int, fds []int, tensors []tensor, r *RunResult, mountTensors mountFunc, row rowFunc) error {
	// The zero-work server answers the same reads beside the mount:
	// what FUSE itself allows on this machine.
	null, err := b.startNull(tensors)
	if err != nil {
		return err
	}
	err = mountTensors(func(s *server) error {
		// The mount drops the checkpoint's pages once served (unless
		// --keep-backing-cache): read them back in before each direct
		// read, so that it reads the page cache as it did before.
		if _, err := warm(fds); err != nil {
			return fmt.Errorf("bench: %v", err)
		}
		direct, err := b.measure(nil, len(tensors), b.directJob(fds, tensors))
		if err != nil {
			return err
		}
		first, nullFirst, err := b.measurePair(run, s, null, tensors)
		if err != nil {
			return err
		}
		row("first_read", "first read, fresh mount", "direct read", direct, first, 0.5)
		row("first_read_null", "first read, fresh mount", "zero-work FUSE", nullFirst, first, 0.9)
		if _, err := warm(fds); err != nil {
			return fmt.Errorf("bench: %v", err)
		}
		direct, err = b.measure(nil, len(tensors), b.directJob(fds, tensors))
		if err != nil {
			return err
		}
		again, nullAgain, err := b.measurePair(run, s, null, tensors)
		if err != nil {
			return err
		}
		row("repeat_read", "repeat read, same mount", "direct read", direct, again, 0.7)
		row("repeat_read_null", "repeat read, same mount", "zero-work FUSE", nullAgain, again, 0.9)
		r.MountLargeFolios = mountLargeFolios(s.mnt, tensors)
		if !b.phases["view"] {
			return nil
		}
		conv := viewTensors(tensors)
		if len(conv) == 0 {
			b.logf("no BF16 or F16 tensor: no .f32 view to measure")
			return nil
		}
		// The native first read dropped the checkpoint's pages it
		// served: read them back in, so that the view, like the native
		// read it is compared with, reads the page cache.
		if _, err := warm(fds); err != nil {
			return fmt.Errorf("bench: %v", err)
		}
		view, err := b.measure(s, len(conv), b.fileJob(s.mnt, ".f32", conv))
		if err != nil {
			return err
		}
		row("f32_view", fmt.Sprintf(".f32 of %s, output bytes", conv[0].dtype), "native first read", first, view, 0.8)
		return nil
	})
	if serr := null.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	return nil
}

// randomPhase measures random 4K-1M reads against direct preads.
func (b *harness) randomPhase(fds []int, tensors []tensor, mountTensors mountFunc, row rowFunc) error {
	reads := randomReads(tensors, min(totalBytes(tensors)/2, 512<<20))
	err := mountTensors(func(s *server) error {
		direct, err := b.measure(nil, len(reads), b.directRandomJob(fds, tensors, reads))
		if err != nil {
			return err
		}
		job, done, err := b.randomJob(s.mnt, tensors, reads)
		if err != nil {
			return err
		}
		defer done()
		m, err := b.measure(s, len(reads), job)
		if err != nil {
			return err
		}
		row("random", "random 4K-1M reads, fresh mount", "direct pread", direct, m, 0)
		return nil
	})
	if err != nil {
		return err
	}
	return nil
}

// mmapPhase measures mapping and copying every tensor file, then random
// reads out of mappings, against direct mappings of the checkpoint.
func (b *harness) mmapPhase(fds []int, tensors []tensor, mountTensors mountFunc, row rowFunc) error {
	err := mountTensors(func(s *server) error {
		job, done, err := b.directMmapJob(fds, tensors)
		if err != nil {
			return err
		}
		direct, err := b.measure(nil, len(tensors), job)
		done()
		if err != nil {
			return err
		}
		m, err := b.measure(s, len(tensors), b.mmapJob(s.mnt, tensors))
		if err != nil {
			return err
		}
		row("mmap", "mmap and copy, fresh mount", "direct mmap", direct, m, 0)
		return nil
	})
	if err != nil {
		return err
	}
	// Sparse access to mapped tensors (embedding rows, slices of a
	// np.load(mmap_mode="r") array): the random reads above, copied
	// out of mappings.
	reads := randomReads(tensors, min(totalBytes(tensors)/8, 128<<20))
	err = mountTensors(func(s *server) error {
		job, done, err := b.directMmapRandomJob(fds, tensors, reads)
		if err != nil {
			return err
		}
		direct, err := b.measure(nil, len(reads), job)
		done()
		if err != nil {
			return err
		}
		job, done, err = b.mmapRandomJob(s.mnt, tensors, reads)
		if err != nil {
			return err
		}
		defer done()
		m, err := b.measure(s, len(reads), job)
		if err != nil {
			return err
		}
		row("mmap_random", "mmap, random 4K-1M, fresh mount", "direct mmap", direct, m, 0)
		return nil
	})
	if err != nil {
		return err
	}
	return nil
}

// measurePair reads every tensor file of the mount s and of the
// zero-work mount null, in turn: the mount first in odd runs, the
// zero-work server first in even ones, so that neither side always
// reads after the other.
func (b *harness) measurePair(run int, s, null *server, ts []tensor) (mount, zero measurement, err error) {
	for i := range 2 {
		if (i == 0) == (run%2 == 1) {
			mount, err = b.measure(s, len(ts), b.fileJob(s.mnt, "", ts))
		} else {
			zero, err = b.measure(nil, len(ts), b.fileJob(null.mnt, "", ts))
		}
		if err != nil {
			return mount, zero, err
		}
	}
	return mount, zero, nil
}
