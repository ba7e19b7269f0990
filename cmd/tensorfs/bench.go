package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/fs"
)

const benchAbout = `
Measures reads of a checkpoint through a fresh tensorfs mount side by side
with reads of the same bytes straight from the checkpoint file, in one run,
and prints throughputs in GB/s (10^9 bytes a second) and their ratios.
Without SOURCE it first writes a safetensors checkpoint of --size bytes
(BF16 and F16 tensors, alternately) to a temporary directory.

The mount is served by another process ("tensorfs mount", with the flags
given in --mount): a process must never read its own mount. The checkpoint
file is read once before anything is timed, so every figure compares reads
from the page cache. Each run measures, with --readers readers taking
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

// benchPhases are the measurements, in the order a run makes them.
var benchPhases = []string{"read", "view", "random", "mmap"}

func runBench(args []string) error {
	f := newFlags("bench", "[flags] [SOURCE]", benchAbout)
	sizeFlag := f.String("size", "1GiB", "`SIZE` of the checkpoint generated when there is no SOURCE (bytes, or with a K, M, G, KiB, MiB, GiB suffix)")
	readers := f.Int("readers", 2, "parallel readers, `N`")
	blockFlag := f.String("block", "1MiB", "`SIZE` of each sequential read(2) and copy")
	count := f.Int("count", 1, "runs, `N`, each on fresh mounts; with more than one, a last table gives the median of every figure")
	mountFlags := f.String("mount", "", "`FLAGS` passed to tensorfs mount, as one string, e.g. \"--readahead-kb 128 --no-splice\"")
	phasesFlag := f.String("phases", strings.Join(benchPhases, ","), "comma-separated `LIST` of measurements to make: read (first and repeat), view, random, mmap")
	jsonOut := f.Bool("json", false, "print the results as one JSON object on stdout instead of tables")
	dirFlag := f.String("dir", "", "`DIR` for the generated checkpoint and the mount points, where the checkpoint is kept for later runs with the same --size (default: a new temporary directory, removed afterwards)")
	tree := f.Bool("tree", false, "measure mount time, tree walks and server memory on a generated sparse checkpoint instead (see --tree-tensors, --tree-size)")
	treeTensors := f.Int("tree-tensors", 10000, "tensors, `N`, of the --tree checkpoint")
	treeSizeFlag := f.String("tree-size", "100GiB", "`SIZE` of the --tree checkpoint (a sparse file)")
	if err := f.parse(args, 0, 1); err != nil {
		return err
	}
	size, err := loadParseSize(*sizeFlag)
	if err != nil {
		return usagef("bench: --size: %v", err)
	}
	block, err := loadParseSize(*blockFlag)
	if err != nil || block > 64<<20 {
		return usagef("bench: --block: %q is not a size up to 64 MiB", *blockFlag)
	}
	treeSize, err := loadParseSize(*treeSizeFlag)
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
		if !slices.Contains(benchPhases, p) {
			return usagef("bench: --phases: unknown measurement %q (want some of %s)", p, strings.Join(benchPhases, ","))
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

	b := &bench{
		ctx: ctx, exe: exe, dir: dir, mountFlags: mflags,
		readers: *readers, block: int(block), phases: phases,
		progress: os.Stderr, keep: *dirFlag != "",
	}
	if *tree {
		return b.runTree(*treeTensors, treeSize, *count, *jsonOut)
	}
	source := ""
	generated := false
	if f.NArg() == 1 {
		source = f.Arg(0)
	} else {
		// In a --dir of the caller's, the checkpoint is kept for the
		// next run with the same --size.
		source = filepath.Join(dir, fmt.Sprintf("bench-%d.safetensors", size))
		if _, err := os.Stat(source); err != nil || !b.keep {
			fmt.Fprintf(b.progress, "tensorfs bench: writing a %s checkpoint to %s\n", loadHumanBytes(size), source)
			if err := benchGenerate(source, size); err != nil {
				os.Remove(source)
				return fmt.Errorf("bench: %v", err)
			}
		}
		generated = true
	}
	rep, err := b.runReads(source, generated, *count)
	if err != nil {
		return err
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.print(os.Stdout)
	return nil
}

// bench holds what every measurement shares.
type bench struct {
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

// benchTensor is one tensor taking part: its file in the mount and the
// byte range of the checkpoint file holding it.
type benchTensor struct {
	path  string // in the mounted tree
	src   int    // index into benchReport.Sources / bench fds
	off   int64
	size  int64
	dtype dtype.DType
	elems int64
}

// benchReport is everything one invocation measured.
type benchReport struct {
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
	LargeFolios float64      `json:"large_folios"`
	Readers     int          `json:"readers"`
	Block       int          `json:"block"`
	MountFlags  []string     `json:"mount_flags"`
	Machine     benchMachine `json:"machine"`
	Runs        []benchRun   `json:"runs"`
	Median      []benchRow   `json:"median,omitempty"`
}

type benchMachine struct {
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Memory int64  `json:"memory"`
}

// benchRun is one run: its rows and how long its mounts took to be ready.
type benchRun struct {
	Rows       []benchRow `json:"rows"`
	Load       [2]float64 `json:"loadavg"` // 1-minute load average before and after
	ReadyMS    []float64  `json:"ready_ms"`
	ServerHWM  int64      `json:"server_vmhwm"`    // largest VmHWM of its servers (counts mapped checkpoint pages)
	ServerAnon int64      `json:"server_rss_anon"` // largest RssAnon of its servers at the end of their measurements
}

// benchRow is one measurement: tensorfs beside its baseline.
type benchRow struct {
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

// benchMeasure is one timed pass of readers.
type benchMeasure struct {
	bytes     int64
	wall      time.Duration
	readerCPU time.Duration
	serverCPU time.Duration
	requests  uint64 // READ requests the server answered (stats.json)
	reqBytes  uint64 // and their bytes
}

func (m benchMeasure) gbps() float64 {
	if m.wall <= 0 {
		return 0
	}
	return float64(m.bytes) / m.wall.Seconds() / 1e9
}

func (b *bench) logf(format string, args ...any) {
	if b.progress != nil {
		fmt.Fprintf(b.progress, "tensorfs bench: "+format+"\n", args...)
	}
}

// runReads makes count runs of the read measurements on source.
func (b *bench) runReads(source string, generated bool, count int) (*benchReport, error) {
	b.source = source
	ck, err := loadCheckpoint(source, backing.Pread)
	if err != nil {
		return nil, err
	}
	sources := slices.Clone(ck.idx.Sources)
	var tensors []benchTensor
	skipped := 0
	dtypes := map[dtype.DType]int{}
	var total int64
	for i := range ck.idx.Tensors {
		t := &ck.idx.Tensors[i]
		if !t.Contiguous() || t.Size == 0 {
			skipped++
			continue
		}
		tensors = append(tensors, benchTensor{path: t.Path, src: t.Source, off: t.Offset, size: t.Size, dtype: t.DType, elems: t.NumElements()})
		dtypes[t.DType]++
		total += t.Size
	}
	ck.close()
	if len(tensors) == 0 {
		return nil, fmt.Errorf("bench: %s has no tensor that is one contiguous range of its file", source)
	}
	var dts []string
	for dt, n := range dtypes {
		dts = append(dts, fmt.Sprintf("%d %s", n, dt))
	}
	sort.Strings(dts)
	rep := &benchReport{
		Source: source, Generated: generated, Sources: sources,
		Tensors: len(tensors), Skipped: skipped, Bytes: total, DTypes: strings.Join(dts, ", "),
		Readers: b.readers, Block: b.block, MountFlags: b.mountFlags, Machine: benchMachineInfo(),
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
	b.logf("reading %s into the page cache", loadHumanBytes(total))
	if rep.Resident, err = benchWarm(fds); err != nil {
		return nil, fmt.Errorf("bench: warming the page cache: %v", err)
	}
	rep.LargeFolios = benchLargeFolios(fds)
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
		rep.Median = benchMedian(rep.Runs)
	}
	return rep, nil
}

// oneRun makes every measurement once, each on fresh mounts.
func (b *bench) oneRun(run, count int, fds []int, tensors []benchTensor) (benchRun, error) {
	var r benchRun
	r.Load[0] = benchLoadAvg()
	var rows []benchRow
	mountTensors := func(f func(s *benchServer) error) error {
		if err := b.ctx.Err(); err != nil {
			return errors.New("bench: interrupted")
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
	row := func(name, label, baseline string, base, m benchMeasure, target float64) {
		rows = append(rows, benchRow{
			Name: name, Label: label, Baseline: baseline, Bytes: m.bytes,
			BaselineGBps: base.gbps(), GBps: m.gbps(), Ratio: m.gbps() / base.gbps(), Target: target,
			Seconds: m.wall.Seconds(), ReaderCPU: m.readerCPU.Seconds(), ServerCPU: m.serverCPU.Seconds(),
			Requests: m.requests, RequestKiB: float64(m.reqBytes) / 1024 / float64(max(1, m.requests)),
		})
	}
	b.logf("run %d of %d", run, count)

	if b.phases["read"] {
		err := mountTensors(func(s *benchServer) error {
			direct, err := b.measure(nil, len(tensors), b.directJob(fds, tensors))
			if err != nil {
				return err
			}
			first, err := b.measure(s, len(tensors), b.fileJob(s.mnt, "", tensors))
			if err != nil {
				return err
			}
			row("first_read", "first read, fresh mount", "direct read", direct, first, 0.5)
			direct, err = b.measure(nil, len(tensors), b.directJob(fds, tensors))
			if err != nil {
				return err
			}
			again, err := b.measure(s, len(tensors), b.fileJob(s.mnt, "", tensors))
			if err != nil {
				return err
			}
			row("repeat_read", "repeat read, same mount", "direct read", direct, again, 0.7)
			if !b.phases["view"] {
				return nil
			}
			conv := benchViewTensors(tensors)
			if len(conv) == 0 {
				b.logf("no BF16 or F16 tensor: no .f32 view to measure")
				return nil
			}
			view, err := b.measure(s, len(conv), b.fileJob(s.mnt, ".f32", conv))
			if err != nil {
				return err
			}
			row("f32_view", fmt.Sprintf(".f32 of %s, output bytes", conv[0].dtype), "native first read", first, view, 0.8)
			return nil
		})
		if err != nil {
			return r, err
		}
	}
	if b.phases["random"] {
		reads := benchRandomReads(tensors, min(benchTotal(tensors)/2, 512<<20))
		err := mountTensors(func(s *benchServer) error {
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
			return r, err
		}
	}
	if b.phases["mmap"] {
		err := mountTensors(func(s *benchServer) error {
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
			return r, err
		}
		// Sparse access to mapped tensors (embedding rows, slices of a
		// np.load(mmap_mode="r") array): the random reads above, copied
		// out of mappings.
		reads := benchRandomReads(tensors, min(benchTotal(tensors)/8, 128<<20))
		err = mountTensors(func(s *benchServer) error {
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
			return r, err
		}
	}
	r.Rows = rows
	r.Load[1] = benchLoadAvg()
	return r, nil
}

// benchLoadAvg returns the 1-minute load average: other work on the
// machine shows in it (a run with two readers and a server adds about 2).
func benchLoadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// benchViewTensors returns the tensors whose .f32 view is measured: the
// BF16 ones, or the F16 ones when there is no BF16.
func benchViewTensors(ts []benchTensor) []benchTensor {
	for _, dt := range []dtype.DType{dtype.BF16, dtype.F16} {
		var out []benchTensor
		for _, t := range ts {
			if t.dtype == dt {
				t.size = 4 * t.elems
				out = append(out, t)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

func benchTotal(ts []benchTensor) int64 {
	var n int64
	for _, t := range ts {
		n += t.size
	}
	return n
}

// benchJob does job j with worker w's buffer and returns the bytes it read.
type benchJob func(w, j int, buf []byte) (int64, error)

// measure runs jobs 0..n-1 with b.readers workers taking them in order,
// and times the whole. With a server, it also reports the server's CPU.
func (b *bench) measure(s *benchServer, n int, job benchJob) (benchMeasure, error) {
	bufs := make([][]byte, b.readers)
	for i := range bufs {
		bufs[i] = make([]byte, b.block)
		for j := 0; j < len(bufs[i]); j += 4096 {
			bufs[i][j] = 1 // fault the buffer in before timing
		}
	}
	var next atomic.Int64
	var total atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	srvBefore := s.cpu()
	statsBefore := s.stats()
	cpuBefore := benchSelfCPU()
	start := time.Now()
	for w := range b.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for {
				j := int(next.Add(1) - 1)
				if j >= n || b.ctx.Err() != nil {
					return
				}
				got, err := job(w, j, bufs[w])
				total.Add(got)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	m := benchMeasure{bytes: total.Load(), wall: time.Since(start), readerCPU: benchSelfCPU() - cpuBefore}
	if s != nil {
		m.serverCPU = s.cpu() - srvBefore
		after := s.stats()
		m.requests = after.Reads - statsBefore.Reads
		m.reqBytes = after.Bytes - statsBefore.Bytes
	}
	if firstErr != nil {
		return m, fmt.Errorf("bench: %v", firstErr)
	}
	if b.ctx.Err() != nil {
		return m, errors.New("bench: interrupted")
	}
	return m, nil
}

// directJob reads tensor j's range of the checkpoint file with pread.
func (b *bench) directJob(fds []int, ts []benchTensor) benchJob {
	return func(w, j int, buf []byte) (int64, error) {
		t := &ts[j]
		var done int64
		for done < t.size {
			k := int(min(int64(len(buf)), t.size-done))
			n, err := unix.Pread(fds[t.src], buf[:k], t.off+done)
			if err != nil {
				return done, fmt.Errorf("reading %s: %v", t.path, err)
			}
			if n == 0 {
				return done, fmt.Errorf("reading %s: unexpected end of file", t.path)
			}
			done += int64(n)
		}
		return done, nil
	}
}

// fileJob opens tensor j's file under mnt/prefix and reads it to the end
// with read(2), as cat or a loader does.
func (b *bench) fileJob(mnt, prefix string, ts []benchTensor) benchJob {
	return func(w, j int, buf []byte) (int64, error) {
		t := &ts[j]
		p := filepath.Join(mnt, prefix, t.path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", p, err)
		}
		defer unix.Close(fd)
		var done int64
		for {
			n, err := unix.Read(fd, buf)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return done, fmt.Errorf("reading %s: %v", p, err)
			}
			if n == 0 {
				break
			}
			done += int64(n)
		}
		if done != t.size {
			return done, fmt.Errorf("%s: read %d bytes, want %d", p, done, t.size)
		}
		return done, nil
	}
}

// benchRead is one random read: bytes [off, off+n) of tensor t.
type benchRead struct {
	t   int
	off int64
	n   int
}

// benchRandomReads returns random reads totalling about total bytes:
// lengths log-uniform in [4 KiB, 1 MiB] (capped by the tensor), offsets
// uniform, tensors chosen in proportion to their size. The seed is fixed,
// so every run and both sides read the same ranges.
func benchRandomReads(ts []benchTensor, total int64) []benchRead {
	rng := rand.New(rand.NewPCG(7, 7))
	cum := make([]int64, len(ts))
	var sum int64
	for i, t := range ts {
		sum += t.size
		cum[i] = sum
	}
	var reads []benchRead
	var got int64
	for got < total {
		x := rng.Int64N(sum)
		i := sort.Search(len(cum), func(i int) bool { return cum[i] > x })
		n := int64(math.Exp(math.Log(4096) + rng.Float64()*(math.Log(1<<20)-math.Log(4096))))
		n = min(n, ts[i].size)
		off := rng.Int64N(ts[i].size - n + 1)
		reads = append(reads, benchRead{t: i, off: off, n: int(n)})
		got += n
	}
	return reads
}

// directRandomJob makes read j on the checkpoint file.
func (b *bench) directRandomJob(fds []int, ts []benchTensor, reads []benchRead) benchJob {
	return func(w, j int, buf []byte) (int64, error) {
		r := reads[j]
		t := &ts[r.t]
		return benchPreadFull(fds[t.src], benchBuf(buf, r.n), t.off+r.off, t.path)
	}
}

// randomJob makes read j on the mount's tensor files, opened once
// beforehand (at most benchMaxOpen of them; reads of others open them).
func (b *bench) randomJob(mnt string, ts []benchTensor, reads []benchRead) (benchJob, func(), error) {
	const benchMaxOpen = 4096
	fds := make([]int, len(ts))
	for i := range fds {
		fds[i] = -1
	}
	closeAll := func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}
	opened := 0
	for _, r := range reads {
		if fds[r.t] >= 0 || opened >= benchMaxOpen {
			continue
		}
		p := filepath.Join(mnt, ts[r.t].path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("bench: %s: %v", p, err)
		}
		fds[r.t] = fd
		opened++
	}
	job := func(w, j int, buf []byte) (int64, error) {
		r := reads[j]
		t := &ts[r.t]
		fd := fds[r.t]
		if fd < 0 {
			p := filepath.Join(mnt, t.path)
			var err error
			if fd, err = unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
				return 0, fmt.Errorf("%s: %v", p, err)
			}
			defer unix.Close(fd)
		}
		return benchPreadFull(fd, benchBuf(buf, r.n), r.off, t.path)
	}
	return job, closeAll, nil
}

// benchBuf returns buf[:n], or a fresh buffer when buf is shorter.
func benchBuf(buf []byte, n int) []byte {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]byte, n)
}

func benchPreadFull(fd int, buf []byte, off int64, name string) (int64, error) {
	var done int
	for done < len(buf) {
		n, err := unix.Pread(fd, buf[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return int64(done), fmt.Errorf("reading %s: %v", name, err)
		}
		if n == 0 {
			return int64(done), fmt.Errorf("reading %s: unexpected end of file at %d", name, off+int64(done))
		}
		done += n
	}
	return int64(done), nil
}

// directMmapJob maps every checkpoint file and copies tensor j's range
// out of the mapping; done unmaps them.
func (b *bench) directMmapJob(fds []int, ts []benchTensor) (benchJob, func(), error) {
	maps, err := benchMapAll(fds)
	if err != nil {
		return nil, nil, err
	}
	job := func(w, j int, buf []byte) (int64, error) {
		t := &ts[j]
		return benchCopyOut(buf, maps[t.src][t.off:t.off+t.size]), nil
	}
	return job, func() { benchUnmapAll(maps) }, nil
}

// benchMapAll maps each file whole, read-only and shared (nil for an
// empty one).
func benchMapAll(fds []int) ([][]byte, error) {
	maps := make([][]byte, len(fds))
	for i, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			benchUnmapAll(maps)
			return nil, fmt.Errorf("bench: %v", err)
		}
		if st.Size == 0 {
			continue
		}
		m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			benchUnmapAll(maps)
			return nil, fmt.Errorf("bench: mmap: %v", err)
		}
		maps[i] = m
	}
	return maps, nil
}

func benchUnmapAll(maps [][]byte) {
	for i, m := range maps {
		if m != nil {
			unix.Munmap(m)
			maps[i] = nil
		}
	}
}

// directMmapRandomJob copies read j out of a mapping of the checkpoint
// file; done unmaps.
func (b *bench) directMmapRandomJob(fds []int, ts []benchTensor, reads []benchRead) (benchJob, func(), error) {
	maps, err := benchMapAll(fds)
	if err != nil {
		return nil, nil, err
	}
	job := func(w, j int, buf []byte) (int64, error) {
		r := reads[j]
		t := &ts[r.t]
		return benchCopyOut(buf, maps[t.src][t.off+r.off:t.off+r.off+int64(r.n)]), nil
	}
	return job, func() { benchUnmapAll(maps) }, nil
}

// mmapRandomJob copies read j out of mappings of the mount's tensor files,
// made beforehand (for the files the reads touch); done unmaps them.
func (b *bench) mmapRandomJob(mnt string, ts []benchTensor, reads []benchRead) (benchJob, func(), error) {
	maps := make([][]byte, len(ts))
	done := func() { benchUnmapAll(maps) }
	for _, r := range reads {
		if maps[r.t] != nil {
			continue
		}
		p := filepath.Join(mnt, ts[r.t].path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("bench: %s: %v", p, err)
		}
		m, err := unix.Mmap(fd, 0, int(ts[r.t].size), unix.PROT_READ, unix.MAP_SHARED)
		unix.Close(fd)
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("bench: mmap %s: %v", p, err)
		}
		maps[r.t] = m
	}
	job := func(w, j int, buf []byte) (int64, error) {
		r := reads[j]
		return benchCopyOut(buf, maps[r.t][r.off:r.off+int64(r.n)]), nil
	}
	return job, done, nil
}

// mmapJob maps tensor j's file of the mount and copies it out.
func (b *bench) mmapJob(mnt string, ts []benchTensor) benchJob {
	return func(w, j int, buf []byte) (int64, error) {
		t := &ts[j]
		p := filepath.Join(mnt, t.path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", p, err)
		}
		defer unix.Close(fd)
		m, err := unix.Mmap(fd, 0, int(t.size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return 0, fmt.Errorf("mmap %s: %v", p, err)
		}
		defer unix.Munmap(m)
		return benchCopyOut(buf, m), nil
	}
}

// benchCopyOut copies src through buf, a chunk at a time.
func benchCopyOut(buf, src []byte) int64 {
	var n int64
	for len(src) > 0 {
		k := copy(buf, src)
		src = src[k:]
		n += int64(k)
	}
	return n
}

// benchWarm reads every file once and returns the fraction of their pages
// resident in the page cache afterwards (mincore).
func benchWarm(fds []int) (float64, error) {
	buf := make([]byte, 4<<20)
	var pages, resident int64
	for _, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return 0, err
		}
		for off := int64(0); off < st.Size; {
			n, err := unix.Pread(fd, buf, off)
			if err != nil {
				return 0, err
			}
			if n == 0 {
				break
			}
			off += int64(n)
		}
		if st.Size == 0 {
			continue
		}
		m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return 0, err
		}
		vec := make([]byte, (st.Size+4095)/4096)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
		unix.Munmap(m)
		if errno != 0 {
			return 0, errno
		}
		for _, v := range vec {
			resident += int64(v & 1)
		}
		pages += int64(len(vec))
	}
	if pages == 0 {
		return 1, nil
	}
	return float64(resident) / float64(pages), nil
}

// benchSink keeps the loads that map pages from being optimized away.
var benchSink byte

// benchLargeFolios returns the fraction of up to 4096 evenly spaced pages
// of the files that sit in large (compound) folios, from /proc/self/pagemap
// and /proc/kpageflags; -1 when those cannot be read (they need root).
func benchLargeFolios(fds []int) float64 {
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return -1
	}
	defer pagemap.Close()
	kflags, err := os.Open("/proc/kpageflags")
	if err != nil {
		return -1
	}
	defer kflags.Close()
	const (
		present      = 1 << 63
		pfnMask      = 1<<55 - 1
		compoundHead = 1 << 15
		compoundTail = 1 << 16
	)
	var seen, large int
	var b [8]byte
	for _, fd := range fds {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Size == 0 {
			continue
		}
		m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			continue
		}
		npages := (st.Size + 4095) / 4096
		step := max(1, npages/4096)
		base := uintptr(unsafe.Pointer(&m[0])) / 4096
		for pg := int64(0); pg < npages; pg += step {
			benchSink += m[pg*4096] // map it (the page is cached: a minor fault)
			if _, err := pagemap.ReadAt(b[:], int64(base+uintptr(pg))*8); err != nil {
				break
			}
			e := binary.LittleEndian.Uint64(b[:])
			if e&present == 0 || e&pfnMask == 0 {
				continue
			}
			if _, err := kflags.ReadAt(b[:], int64(e&pfnMask)*8); err != nil {
				break
			}
			seen++
			if binary.LittleEndian.Uint64(b[:])&(compoundHead|compoundTail) != 0 {
				large++
			}
		}
		unix.Munmap(m)
	}
	if seen == 0 {
		return -1
	}
	return float64(large) / float64(seen)
}

// benchSelfCPU returns the CPU time (user + system) this process used.
func benchSelfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchMedian returns, for every row name, the median of each figure
// over the runs.
func benchMedian(runs []benchRun) []benchRow {
	var out []benchRow
	for i, first := range runs[0].Rows {
		col := func(get func(benchRow) float64) float64 {
			var v []float64
			for _, r := range runs {
				if i < len(r.Rows) {
					v = append(v, get(r.Rows[i]))
				}
			}
			sort.Float64s(v)
			if len(v)%2 == 1 {
				return v[len(v)/2]
			}
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		m := first
		m.BaselineGBps = col(func(r benchRow) float64 { return r.BaselineGBps })
		m.GBps = col(func(r benchRow) float64 { return r.GBps })
		m.Ratio = col(func(r benchRow) float64 { return r.Ratio })
		m.Seconds = col(func(r benchRow) float64 { return r.Seconds })
		m.ReaderCPU = col(func(r benchRow) float64 { return r.ReaderCPU })
		m.ServerCPU = col(func(r benchRow) float64 { return r.ServerCPU })
		m.Requests = uint64(col(func(r benchRow) float64 { return float64(r.Requests) }))
		m.RequestKiB = col(func(r benchRow) float64 { return r.RequestKiB })
		out = append(out, m)
	}
	return out
}

// print writes the report as tables.
func (rep *benchReport) print(w io.Writer) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	origin := ""
	if rep.Generated {
		origin = ", generated"
	}
	fmt.Fprintf(bw, "checkpoint: %s: %d tensors, %s (%s)%s", rep.Source, rep.Tensors, loadHumanBytes(rep.Bytes), rep.DTypes, origin)
	if rep.Skipped > 0 {
		fmt.Fprintf(bw, "; %d non-contiguous tensors left out", rep.Skipped)
	}
	folios := ""
	if rep.LargeFolios >= 0 {
		folios = fmt.Sprintf(", %.0f%% of it in large folios", 100*rep.LargeFolios)
	}
	fmt.Fprintf(bw, "\nreaders: %d, %s reads; page cache: %.0f%% of the checkpoint resident%s\n", rep.Readers, loadHumanBytes(int64(rep.Block)), 100*rep.Resident, folios)
	mf := strings.Join(rep.MountFlags, " ")
	if mf == "" {
		mf = "(defaults)"
	}
	fmt.Fprintf(bw, "mount flags: %s\n", mf)
	m := rep.Machine
	fmt.Fprintf(bw, "machine: %d CPUs (%s), %s memory, Linux %s, %s\n", m.CPUs, m.CPU, loadHumanBytes(m.Memory), m.Kernel, m.Go)
	for i, r := range rep.Runs {
		var ready []string
		for _, ms := range r.ReadyMS {
			ready = append(ready, fmt.Sprintf("%.0f ms", ms))
		}
		fmt.Fprintf(bw, "\nrun %d of %d (mounts ready in %s; server RssAnon %s; load average %.1f, then %.1f)\n", i+1, len(rep.Runs), strings.Join(ready, ", "), loadHumanBytes(r.ServerAnon), r.Load[0], r.Load[1])
		benchTable(bw, r.Rows)
	}
	if len(rep.Median) > 0 {
		fmt.Fprintf(bw, "\nmedian of %d runs\n", len(rep.Runs))
		benchTable(bw, rep.Median)
	}
}

func benchTable(w io.Writer, rows []benchRow) {
	fmt.Fprintf(w, "  %-34s %-18s %9s %9s %7s %7s %8s %8s %9s %7s\n", "measurement", "baseline", "base GB/s", "GB/s", "ratio", "target", "rdr CPU", "srv CPU", "requests", "KiB/req")
	for _, r := range rows {
		target := ""
		if r.Target > 0 {
			target = fmt.Sprintf(">=%.2f", r.Target)
		}
		reqSize := "-"
		if r.Requests > 0 {
			reqSize = fmt.Sprintf("%.0f", r.RequestKiB)
		}
		fmt.Fprintf(w, "  %-34s %-18s %9.2f %9.2f %7.2f %7s %7.2fs %7.2fs %9d %7s\n", r.Label, r.Baseline, r.BaselineGBps, r.GBps, r.Ratio, target, r.ReaderCPU, r.ServerCPU, r.Requests, reqSize)
	}
}

// benchMachineInfo describes this machine.
func benchMachineInfo() benchMachine {
	m := benchMachine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.Memory = int64(si.Totalram) * int64(si.Unit)
	}
	return m
}

// benchServer is a "tensorfs mount" subprocess.
type benchServer struct {
	cmd    *exec.Cmd
	mnt    string
	log    string
	ready  time.Duration // from starting the process to index.json
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// startServer mounts b.source at a new mount point with "tensorfs mount"
// and waits until MOUNTPOINT/.tensorfs/index.json exists.
func (b *bench) startServer() (*benchServer, error) {
	b.mounts++
	mnt := filepath.Join(b.dir, fmt.Sprintf("mnt%d", b.mounts))
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %v", err)
	}
	s := &benchServer{mnt: mnt, log: filepath.Join(b.dir, fmt.Sprintf("mount%d.log", b.mounts)), exited: make(chan struct{})}
	logFile, err := os.Create(s.log)
	if err != nil {
		return nil, fmt.Errorf("bench: %v", err)
	}
	defer logFile.Close()
	args := append(append([]string{"mount"}, b.mountFlags...), b.source, mnt)
	s.cmd = exec.Command(b.exe, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s mount: %v", b.exe, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	ready := filepath.Join(mnt, ".tensorfs", "index.json")
	deadline := start.Add(readyTimeout)
	for {
		if _, err := os.Stat(ready); err == nil {
			s.ready = time.Since(start)
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("bench: tensorfs mount %s exited before the mount was ready (%v): %s", strings.Join(args[1:], " "), s.err, lastLine(s.log))
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			s.stop()
			if b.ctx.Err() != nil {
				return nil, errors.New("bench: interrupted")
			}
			return nil, fmt.Errorf("bench: the mount was not ready after %v: %s", readyTimeout, lastLine(s.log))
		}
	}
}

// readProcStatus reads fields of /proc/PID/status in bytes.
func readProcStatus(pid int) (hwm, rssAnon int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmHWM":
			hwm = n << 10
		case "RssAnon":
			rssAnon = n << 10
		}
	}
	return hwm, rssAnon
}

// memory returns the server's VmHWM and RssAnon.
func (s *benchServer) memory() (hwm, rssAnon int64) {
	if s == nil || s.cmd.Process == nil {
		return 0, 0
	}
	return readProcStatus(s.cmd.Process.Pid)
}

// cpu returns the CPU time (user + system) the server has used; 0 for nil.
func (s *benchServer) cpu() time.Duration {
	if s == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ
	return time.Duration(ut+st) * time.Second / ticks
}

// stats reads the server's counters from MOUNTPOINT/.tensorfs/stats.json
// (zero for nil or on error).
func (s *benchServer) stats() fs.Stats {
	var st fs.Stats
	if s == nil {
		return st
	}
	data, err := os.ReadFile(filepath.Join(s.mnt, ".tensorfs", "stats.json"))
	if err == nil {
		json.Unmarshal(data, &st)
	}
	return st
}

// stop unmounts and waits for the server to exit 0.
func (s *benchServer) stop() error {
	if fs.Mounted(s.mnt) {
		if err := fs.Unmount(s.mnt); err != nil {
			s.cmd.Process.Kill()
			<-s.exited
			fs.Unmount(s.mnt)
			return fmt.Errorf("bench: %v", err)
		}
	}
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("bench: the server of %s did not exit after unmounting: %s", s.mnt, lastLine(s.log))
	}
	os.Remove(s.mnt)
	if s.err != nil {
		return fmt.Errorf("bench: the server of %s exited with %v: %s", s.mnt, s.err, lastLine(s.log))
	}
	os.Remove(s.log)
	return nil
}

// benchGenerate writes a safetensors checkpoint of about size bytes:
// tensors of size/64 (1 MiB to 64 MiB), BF16 and F16 alternately, of
// weight-like values (normal, standard deviation 0.02), the file synced
// so that writeback does not run during the measurements.
func benchGenerate(path string, size int64) error {
	const mib = 1 << 20
	tsize := max(mib, min(64*mib, size/64/mib*mib))
	n := max(1, int(size/tsize))
	const cols = 4096
	rows := tsize / 2 / cols
	suffixes := []string{"self_attn.q_proj", "self_attn.o_proj", "mlp.up_proj", "mlp.down_proj"}
	type ent struct {
		name string
		dt   dtype.DType
	}
	ents := make([]ent, n)
	for i := range ents {
		dt := dtype.BF16
		if i%2 == 1 {
			dt = dtype.F16
		}
		ents[i] = ent{fmt.Sprintf("model.layers.%d.%s.weight", i/len(suffixes), suffixes[i%len(suffixes)]), dt}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	header := map[string]any{"__metadata__": map[string]string{"format": "pt", "generator": "tensorfs bench"}}
	for i, e := range ents {
		off := int64(i) * tsize
		header[e.name] = map[string]any{"dtype": e.dt.String(), "shape": []int64{rows, cols}, "data_offsets": []int64{off, off + tsize}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	blocks := map[dtype.DType][]byte{}
	rng := rand.New(rand.NewPCG(1, 2))
	f64 := make([]byte, 8*(mib/2))
	for i := 0; i < mib/2; i++ {
		binary.LittleEndian.PutUint64(f64[8*i:], math.Float64bits(rng.NormFloat64()*0.02))
	}
	for _, dt := range []dtype.DType{dtype.BF16, dtype.F16} {
		c, ok := dtype.ConverterFor(dtype.F64, dt)
		if !ok {
			return fmt.Errorf("no converter to %s", dt)
		}
		blk := make([]byte, mib)
		c(blk, f64)
		blocks[dt] = blk
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 4*mib)
	var hl [8]byte
	binary.LittleEndian.PutUint64(hl[:], uint64(len(h)))
	w.Write(hl[:])
	w.Write(h)
	for _, e := range ents {
		blk := blocks[e.dt]
		for done := int64(0); done < tsize; done += mib {
			if _, err := w.Write(blk); err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
