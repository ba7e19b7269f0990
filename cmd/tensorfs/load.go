package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
)

const loadAbout = `
Pulls every tensor of SOURCE through the Go client (package client) the
way a program loading a model onto GPUs would: in chunks of --chunk bytes,
--parallel tensors at a time, into a fixed pool of buffers, so the memory
it holds is about parallel x chunk whatever the checkpoint's size.

SOURCE is a checkpoint file, a directory holding a sharded checkpoint, or a
tensorfs mount point (read through the mount's files).

On a terminal, a progress bar shows tensors, bytes, rate and time left.
At the end one line on stderr reports the tensors and bytes loaded, the
time, the throughput in GB/s (10^9 bytes a second; MB/s or kB/s for a
small load) and the peak memory:
the largest anonymous resident memory seen during the load (RssAnon,
sampled) and the peak resident set (VmHWM).

--sha256 prints "<sha256 hex>  <tensor name>" for every tensor in index
order (sorted by name), as sha256sum does, computed over the bytes loaded
(converted with --dtype, if given); tensors with no view in --dtype are
hashed as stored.

--gpu N uploads every tensor to CUDA device N instead (CUDA found at run
time: libcudart through dlopen, or $TENSORFS_CUDART; the binary needs cgo):
the checkpoint goes into one allocation, each tensor at a 256-byte aligned
offset, through pinned staging buffers that --parallel goroutines fill
(chunks of one tensor in parallel, small tensors read together by file
range) and --streams CUDA streams copy from. Their defaults come from the
machine's CPUs. A checkpoint file that is mostly in the page cache is read
through it; one that is not is read with O_DIRECT straight into the pinned
buffers (--io auto; --io pread, mmap or direct forces one). The report
says which path ran for each file, the device memory used and the host's
peak memory. --verify then copies every tensor back and compares its
sha256 with the host's. It fails in one line, exit 1, without a CUDA
runtime, without device N, in a binary built without cgo, or when the
checkpoint does not fit in the device's free memory.`

func runLoad(args []string) error {
	l, err := parseLoadFlags(args)
	if err != nil {
		return err
	}
	if l.gpu != nil {
		return loadGPU(l.f, *l.gpu)
	}
	mode, err := parseMode("load", "io", l.io)
	if err != nil {
		return err
	}
	if err := loadChecks(l.source); err != nil {
		return err
	}
	ck, done, err := openLoad(l.source, mode, l.cpuProfile, l.f.isSet("io"))
	if err != nil {
		return err
	}
	defer done()
	return l.stream(ck)
}

// openLoad starts load's --cpuprofile and opens SOURCE through the
// client (openClient), with or without --gpu; --io set for a mount is a
// usage error. done closes the checkpoint, then stops the profile.
func openLoad(source string, mode backing.Mode, cpuProfile string, ioSet bool) (ck *client.Checkpoint, done func(), err error) {
	stopProfile, err := startCPUProfile("load", cpuProfile)
	if err != nil {
		return nil, nil, err
	}
	ck, err = openClient(source, mode)
	if err != nil {
		stopProfile()
		return nil, nil, err
	}
	done = func() {
		ck.Close()
		stopProfile()
	}
	if ck.IsMount() && ioSet {
		done()
		return nil, nil, usagef("load: --io applies to checkpoint files; %s is a tensorfs mount, read through it", source)
	}
	return ck, done, nil
}

// loadFlags are load's operand and flags, parsed and checked
// (parseLoadFlags).
type loadFlags struct {
	f          *flags
	source     string
	to         dtype.DType
	sha, quiet bool
	parallel   int
	chunk      int64
	io         string
	rules      []splitRule // nil without --split
	parts      int
	part       int
	cpuProfile string
	// gpu is what loadGPU is asked to do, with --gpu; else nil.
	gpu *gpuLoad
}

// parseLoadFlags parses load's command line; a bad value or a flag that
// needs another is a usage error.
func parseLoadFlags(args []string) (*loadFlags, error) {
	f := newFlags("load", "[--dtype DT] [--sha256] [--parallel N] [--chunk SIZE] [--io MODE] [--split RULES --parts N --part K] [--gpu N [--verify] [--buffers N] [--streams N] [--register]] [--quiet] SOURCE", loadAbout)
	addRemoteFlags(f)
	dtFlag := f.String("dtype", "", "convert float and quantized tensors to `DT` (f32, f16, bf16 or f64); others load as stored")
	sha := f.Bool("sha256", false, "print the sha256 of every tensor, sha256sum style, in index order")
	parallel := f.Int("parallel", 0, "tensors in flight, each with one chunk buffer (`N`, 1 to 1024; 0 or unset: one per CPU, at most 16); with --gpu, the goroutines filling pinned buffers (default: one per CPU, 2 to 32)")
	chunkFlag := f.String("chunk", "8MiB", "chunk and buffer `SIZE` (bytes, or with a K, M, G, KiB, MiB, GiB suffix; with --gpu the default is 8MiB)")
	ioFlag := f.String("io", "pread", "read checkpoint files with `MODE`: pread, mmap or direct (O_DIRECT, bypassing the page cache); with --gpu also auto, the default (by page-cache residency); not for a mount")
	gpu := f.Int("gpu", -1, "upload every tensor to CUDA device `N` (0, 1, ...)")
	verify := f.Bool("verify", false, "with --gpu: copy every tensor back and compare its sha256 with the host's")
	buffers := f.Int("buffers", 0, "with --gpu: pinned staging buffers (`N`; default one and a half per --parallel goroutine, at most 1 GiB)")
	streams := f.Int("streams", 0, "with --gpu: CUDA streams (`N`, 1 to 64; default half the goroutines, 2 to 8)")
	splitFlag := f.String("split", "", "tensor parallelism: load only part --part of --parts of the tensors that `RULES` name (PATTERN=DIM,... with name globs, first match wins; or the preset llama), the others whole")
	parts := f.Int("parts", 0, "with --split: the number of parts (`N`, the ranks)")
	part := f.Int("part", -1, "with --split: the part to load (`K`, 0 to --parts - 1: the rank)")
	writeCombined := f.Bool("write-combined", true, "with --gpu: allocate the pinned staging buffers write-combined (--write-combined=false: cacheable)")
	register := f.Bool("register", false, "with --gpu: copy tensors stored as they are uploaded straight from the file's mapping, registered with cudaHostRegister, instead of staging them (pays where the same pages are copied more than once; see docs/BENCHMARKS.md)")
	quiet := f.Bool("quiet", false, "no progress bar and no summary line")
	cpuProfile := f.String("cpuprofile", "", "write a CPU profile of the load, opening included (go tool pprof format), to `FILE`")
	if err := f.parse(args, 1, 1); err != nil {
		return nil, err
	}
	if *gpu < 0 {
		for _, name := range []string{"verify", "buffers", "streams", "write-combined", "register"} {
			if f.isSet(name) {
				return nil, usagef("load: --%s needs --gpu", name)
			}
		}
		if f.isSet("gpu") {
			return nil, usagef("load: --gpu: %d is not a device ordinal (0, 1, ...)", *gpu)
		}
	}
	l := &loadFlags{f: f, source: f.Arg(0), sha: *sha, quiet: *quiet, parallel: *parallel, io: *ioFlag, parts: *parts, part: *part, cpuProfile: *cpuProfile}
	if err := l.parseValues(*dtFlag, *splitFlag, *chunkFlag); err != nil {
		return nil, err
	}
	if *gpu < 0 {
		return l, nil
	}
	if *sha {
		return nil, usagef("load: --sha256 does not go with --gpu (--verify compares the sha256 of every tensor on the device with the host's)")
	}
	if *buffers < 0 || *buffers > 4096 {
		return nil, usagef("load: --buffers: %d is not between 1 and 4096 (or 0, the default)", *buffers)
	}
	if *streams < 0 || *streams > 64 {
		return nil, usagef("load: --streams: %d is not between 1 and 64 (or 0, the default)", *streams)
	}
	if !f.isSet("chunk") {
		l.chunk = 0
	}
	l.gpu = &gpuLoad{
		source: l.source, device: *gpu, to: l.to, verify: *verify, quiet: *quiet,
		workers: *parallel, buffers: *buffers, streams: *streams, chunk: int(l.chunk),
		io: *ioFlag, ioSet: f.isSet("io"), cpuProfile: *cpuProfile,
		rules: l.rules, parts: *parts, part: *part,
		writeCombined: *writeCombined, register: *register,
	}
	return l, nil
}

// parseValues checks the values of --dtype, --split (with --parts and
// --part), --chunk and --parallel, and sets to, rules and chunk.
func (l *loadFlags) parseValues(dtFlag, splitFlag, chunkFlag string) error {
	if dtFlag != "" {
		dt, err := dtype.ParseView(dtFlag)
		if err != nil {
			return usagef("load: --dtype: %v", err)
		}
		l.to = dt
	}
	if splitFlag != "" {
		var err error
		if l.rules, err = parseSplitRules(splitFlag); err != nil {
			return usagef("load: --split: %v", err)
		}
		if l.parts < 1 || l.parts > 1<<20 || l.part < 0 || l.part >= l.parts {
			return usagef("load: --split needs --parts N (1 or more) and --part K (0 to N-1); got --parts %d --part %d", l.parts, l.part)
		}
	} else if l.f.isSet("parts") || l.f.isSet("part") {
		return usagef("load: --parts and --part need --split")
	}
	chunk, err := bytesize.Parse(chunkFlag)
	if err != nil {
		return usagef("load: --chunk: %v", err)
	}
	if chunk > 1<<30 {
		return usagef("load: --chunk: %s is more than 1 GiB", chunkFlag)
	}
	l.chunk = chunk
	if l.parallel < 0 || l.parallel > 1024 {
		return usagef("load: --parallel: %d is not between 1 and 1024 (or 0, the default)", l.parallel)
	}
	return nil
}

// loadChecks are what load checks before any work, with or without
// --gpu: that SOURCE is in no dead mount, and the remote flags
// (openClient checks them again).
func loadChecks(source string) error {
	if err := checkDeadMount(source); err != nil {
		return err
	}
	_, err := remoteOptions()
	return err
}

// stream reads every tensor of ck through the client (with --sha256
// printing each one's hash), then says what it read, how fast and with
// how much memory.
func (l *loadFlags) stream(ck *client.Checkpoint) error {
	tensors := ck.TensorsIn(l.to)
	unserved := ck.Unserved()

	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	sink := &loadSink{hash: l.sha, out: out, n: len(tensors), pending: map[int][32]byte{}, names: tensors}
	if !l.quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		sink.bar = newLoadBar(ck, tensors, l.to)
		sink.clearBar = term.IsTerminal(int(os.Stdout.Fd()))
	}
	sink.flushLines = term.IsTerminal(int(os.Stdout.Fd()))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// An interrupt also ends reads waiting on a remote store.
	defer context.AfterFunc(ctx, stopRemote)()
	mem := startLoadMemSampler(10 * time.Millisecond)
	start := time.Now()
	sopts := client.StreamOptions{Parallel: l.parallel, ChunkSize: int(l.chunk), DType: l.to}
	if l.rules != nil {
		var err error
		if sopts.Split, _, err = splitPlan(ck, l.rules, l.parts, l.part); err != nil {
			return err
		}
	}
	err := ck.Stream(ctx, sink, sopts)
	elapsed := time.Since(start)
	peakAnon, hwm := mem.stop()
	if sink.bar != nil {
		sink.bar.Describe(fmt.Sprintf("%d/%d tensors", sink.tensors.Load(), len(tensors)))
		sink.bar.Finish()
		sink.bar.Clear()
		fmt.Fprint(os.Stderr, "\r")
	}
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("writing the hashes: %w", ferr)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: interrupted after %d of %s", l.source, sink.tensors.Load(), plural(len(tensors), "tensor"))
		}
		if sink.failed != nil {
			return sink.failed // the first failure, not a read the stop then ended
		}
		return err
	}
	if !l.quiet {
		n := sink.bytes.Load()
		fmt.Fprintf(os.Stderr, "loaded %s: %s (%s) in %.3f s, %s, peak memory %s anonymous (RssAnon), %s resident (VmHWM)\n",
			plural(int(sink.tensors.Load()), "tensor"), plural(int(n), "byte"), bytesize.Format(n), elapsed.Seconds(), bytesize.Rate(n, elapsed.Seconds()), bytesize.Format(peakAnon), bytesize.Format(hwm))
	}
	if len(unserved) > 0 { // the rest is loaded (and listed); the checkpoint is not whole
		return fmt.Errorf("load: %s: %s not loaded: %s", l.source, plural(unservedCount(unserved), "tensor"), unservedNames(unserved))
	}
	return nil
}

// loadSink counts, and with --sha256 hashes, every tensor, printing the
// hashes in index order as soon as every earlier tensor is done.
type loadSink struct {
	hash       bool
	out        *bufio.Writer
	n          int
	names      []client.TensorInfo
	bar        *progressbar.ProgressBar // nil when not drawn
	clearBar   bool                     // stdout and stderr share the terminal
	flushLines bool                     // stdout is a terminal: flush per batch

	bytes, tensors atomic.Int64

	mu      sync.Mutex
	next    int              // GUARDED_BY(mu): index of the next hash to print
	pending map[int][32]byte // GUARDED_BY(mu): finished, not yet printed

	// failed is the first tensor's error; once there is one the load
	// fails, so the remote reads still under way are stopped (a read
	// retrying a cut reply would otherwise go on until its timeout)
	failOnce sync.Once
	failed   error
}

// order returns the position among s.names (the tensors loaded, in
// index order) of the tensor at index i of the checkpoint.
func (s *loadSink) order(i int) int {
	return sort.Search(len(s.names), func(k int) bool { return s.names[k].Index >= i })
}

type loadTensor struct {
	s     *loadSink
	index int
	h     hash.Hash // nil without --sha256
}

func (s *loadSink) Begin(t client.TensorInfo, dt dtype.DType, size int64) (client.TensorSink, error) {
	lt := &loadTensor{s: s, index: s.order(t.Index)}
	if s.hash {
		lt.h = sha256.New()
	}
	return lt, nil
}

func (t *loadTensor) Write(chunk []byte, off int64) error {
	if t.h != nil {
		t.h.Write(chunk)
	}
	t.s.bytes.Add(int64(len(chunk)))
	if t.s.bar != nil {
		t.s.bar.Add64(int64(len(chunk)))
	}
	return nil
}

func (t *loadTensor) End(err error) error {
	if err != nil {
		t.s.failOnce.Do(func() { t.s.failed = err; stopRemote() })
		return nil // Stream reports it
	}
	s := t.s
	done := s.tensors.Add(1)
	if s.bar != nil {
		s.bar.Describe(fmt.Sprintf("%d/%d tensors", done, s.n))
	}
	if t.h == nil {
		return nil
	}
	var sum [32]byte
	t.h.Sum(sum[:0])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[t.index] = sum
	printed := false
	for {
		sum, ok := s.pending[s.next]
		if !ok {
			break
		}
		if !printed && s.bar != nil && s.clearBar {
			s.bar.Clear()
		}
		printed = true
		delete(s.pending, s.next)
		s.out.WriteString(loadSumLine(sum, s.names[s.next].Name))
		s.next++
	}
	if printed && s.flushLines {
		s.out.Flush()
	}
	return nil
}

// loadSumLine formats one line as sha256sum does: "<hex>  <name>\n", and for a
// name holding a newline, carriage return or backslash, a leading
// backslash and those characters escaped (\n, \r, \\).
func loadSumLine(sum [32]byte, name string) string {
	h := hex.EncodeToString(sum[:])
	if !strings.ContainsAny(name, "\n\r\\") {
		return h + "  " + name + "\n"
	}
	r := strings.NewReplacer("\\", "\\\\", "\n", "\\n", "\r", "\\r")
	return "\\" + h + "  " + r.Replace(name) + "\n"
}

// newLoadBar returns the progress bar: bytes to deliver, rate, ETA, and
// tensors done in the description.
func newLoadBar(ck *client.Checkpoint, tensors []client.TensorInfo, to dtype.DType) *progressbar.ProgressBar {
	var total int64
	for _, t := range tensors {
		total += loadDeliveredSize(ck, t, to)
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("0/%d tensors", len(tensors))),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionUseANSICodes(true),
	)
}

// loadDeliveredSize is the bytes Stream delivers for t converted to to.
func loadDeliveredSize(ck *client.Checkpoint, t client.TensorInfo, to dtype.DType) int64 {
	if to == dtype.Invalid || to == t.DType || !ck.Convertible(t.Name, to) {
		return t.Size
	}
	n, ok := to.ByteSize(t.NumElements())
	if !ok {
		return t.Size
	}
	return n
}

// loadMemSampler records the largest RssAnon of the process while it runs.
type loadMemSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak atomic.Int64
}

func startLoadMemSampler(every time.Duration) *loadMemSampler {
	m := &loadMemSampler{done: make(chan struct{})}
	m.sample()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
				m.sample()
			}
		}
	}()
	return m
}

func (m *loadMemSampler) sample() {
	anon, _ := loadProcStatus()
	for {
		p := m.peak.Load()
		if anon <= p || m.peak.CompareAndSwap(p, anon) {
			return
		}
	}
}

// stop ends sampling and returns the peak RssAnon seen and VmHWM, in bytes.
func (m *loadMemSampler) stop() (peakAnon, hwm int64) {
	close(m.done)
	m.wg.Wait()
	m.sample()
	_, hwm = loadProcStatus()
	return m.peak.Load(), hwm
}

// loadProcStatus reads RssAnon and VmHWM from /proc/self/status, in bytes (0
// where the kernel does not say).
func loadProcStatus() (rssAnon, hwm int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(k) {
		case "RssAnon":
			dst = &rssAnon
		case "VmHWM":
			dst = &hwm
		default:
			continue
		}
		fields := strings.Fields(string(v))
		if len(fields) >= 1 {
			n, _ := strconv.ParseInt(fields[0], 10, 64)
			*dst = n << 10 // kB
		}
	}
	return rssAnon, hwm
}
