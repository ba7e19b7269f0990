package integration

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The load test: 16, then 64, concurrent readers of random ranges of
// every file of three mounts (every tensor in every view), against
// servers built with the race detector, for a bounded time. Every byte
// read must equal the same range of what `tensorfs cat` (which reads the
// checkpoint directly, without FUSE) writes for that file, the servers
// must report no data race, and their memory must stay flat under a
// steady load.

const (
	crPhase   = 1500 * time.Millisecond // one run of the readers
	crRSSSlop = 24 << 20                // RSS growth allowed within one load level
)

var (
	raceBinOnce sync.Once
	raceBin     string
	raceBinErr  error
)

// raceTensorfs returns a tensorfs binary built with -race: the harness's
// when the tests run with -race, otherwise one built once here.
func raceTensorfs(t *testing.T) string {
	t.Helper()
	if raceEnabled {
		return tensorfsBinary(t)
	}
	dir := filepath.Dir(tensorfsBinary(t)) // removed by TestMain
	raceBinOnce.Do(func() {
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(gobin); err != nil {
			gobin = "go"
		}
		raceBin = filepath.Join(dir, "tensorfs-race")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gobin, "build", "-race", "-o", raceBin, "./cmd/tensorfs")
		cmd.Dir = testenv.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			raceBinErr = fmt.Errorf("go build -race ./cmd/tensorfs: %v\n%s", err, out)
		}
	})
	if raceBinErr != nil {
		testenv.SkipOrFail(t, raceBinErr.Error())
	}
	return raceBin
}

// mountWith is mount(t, src, flags...) served by the binary bin.
func mountWith(t *testing.T, bin, src string, flags ...string) *Mount {
	t.Helper()
	needFUSE(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &Mount{Dir: dir, Source: src, t: t, stderr: &syncBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command(bin, append(append([]string{"mount"}, flags...), src, dir)...)
	m.cmd.Stdout, m.cmd.Stderr = m.stderr, m.stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	t.Cleanup(m.cleanup)
	if err := m.waitReady(); err != nil {
		t.Fatal(err)
	}
	return m
}

// crFixtures writes the three checkpoints: a safetensors file of every
// float width and some integers (tensors of one byte to 1.2 MB, odd
// sizes, a scalar, an empty one), a GGUF file of quantized blocks (random
// bytes: every bit pattern is a block) and a PyTorch file of strided
// views of one storage (transposed, sliced with an offset).
func crFixtures(t *testing.T, dir string) (st, gg, pt string) {
	t.Helper()
	f32 := func(n int, scale float32) []byte {
		b := make([]byte, 0, 4*n)
		for i := 0; i < n; i++ {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(i%1000-500)*scale+float32(i)/7))
		}
		return b
	}
	st = filepath.Join(dir, "load.safetensors")
	writeSafetensors(t, st, []stTensor{
		{Name: "big/w", DType: "F32", Shape: []int64{300, 1000}, Data: f32(300000, 0.001)},
		{Name: "big/bf16", DType: "BF16", Shape: []int64{777, 333}, Data: pattern(2*777*333, 1)},
		{Name: "half", DType: "F16", Shape: []int64{4097}, Data: pattern(2*4097, 2)},
		{Name: "double", DType: "F64", Shape: []int64{3, 5}, Data: pattern(120, 3)},
		{Name: "ids", DType: "I64", Shape: []int64{100}, Data: pattern(800, 4)},
		{Name: "bytes", DType: "U8", Shape: []int64{5}, Data: pattern(5, 5)},
		{Name: "scalar", DType: "F32", Shape: []int64{}, Data: f32(1, 1)},
		{Name: "empty", DType: "F32", Shape: []int64{0, 4}, Data: nil},
	}, map[string]string{"format": "pt"})

	// GGUF: Q8_0 (34-byte blocks of 32), Q4_K (144-byte blocks of 256),
	// F16; data offsets aligned to 32.
	type gt struct {
		name string
		typ  uint32
		dims []uint64
		size int
	}
	gts := []gt{{"blk.0.q8", 8, []uint64{4096, 64}, 64 * 128 * 34}, {"blk.0.q4k", 12, []uint64{256, 256}, 256 * 144}, {"out.f16", 1, []uint64{300, 33}, 2 * 300 * 33}}
	var infos, data []byte
	for i, g := range gts {
		for len(data)%32 != 0 {
			data = append(data, 0)
		}
		infos = append(infos, hGTI(g.name, g.typ, uint64(len(data)), g.dims...)...)
		data = append(data, pattern(g.size, byte(10+i))...)
	}
	gg = filepath.Join(dir, "load.gguf")
	if err := os.WriteFile(gg, hGGUF(uint64(len(gts)), 1, hGKV("general.architecture", hGString, hGStr("llama")), infos, data), 0o644); err != nil {
		t.Fatal(err)
	}

	// PyTorch: one 256x512 float storage seen whole, transposed, and as
	// a strided slice with an offset.
	storage := f32(256*512, 0.01)
	pkl := hPkDict(
		hPkStr("w"), hPkTensor("FloatStorage", "0", 256*512, 0, []int64{256, 512}, []int64{512, 1}, false),
		hPkStr("wt"), hPkTensor("FloatStorage", "0", 256*512, 0, []int64{512, 256}, []int64{1, 512}, false),
		hPkStr("slice"), hPkTensor("FloatStorage", "0", 256*512, 1000, []int64{100, 77}, []int64{1024, 3}, false),
	)
	pt = filepath.Join(dir, "load.pt")
	if err := os.WriteFile(pt, hTorchZip(t, pkl, hMember{"0", storage}), 0o644); err != nil {
		t.Fatal(err)
	}
	return st, gg, pt
}

// crExpectations returns, for every file of mount m of src, the file
// and a file holding its expected contents: what `tensorfs cat` writes
// for that tensor and view, or for .tensorfs files one whole sequential
// read.
func crExpectations(t *testing.T, m *Mount, src, dir string) [][2]string {
	t.Helper()
	r := runTensorfs(t, "ls", "--json", src)
	if r.code != 0 {
		t.Fatalf("ls --json %s: %s", src, r.stderr)
	}
	var doc struct{ Tensors []struct{ Name, Path string } }
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	byPath := map[string]string{}
	for _, tn := range doc.Tensors {
		byPath[tn.Path] = tn.Name
	}
	files := strings.Split(strings.TrimSpace(runPy(t, `
import os, sys
m = sys.argv[1]
for dp, dns, fns in os.walk(m):
    for f in fns:
        print(os.path.relpath(os.path.join(dp, f), m))
`, m.Dir)), "\n")
	sort.Strings(files)
	var out [][2]string
	for i, rel := range files {
		exp := filepath.Join(dir, fmt.Sprintf("expected-%s-%d", filepath.Base(src), i))
		var args []string
		first, rest, _ := strings.Cut(rel, "/")
		switch {
		case rel == ".tensorfs/stats.json":
			continue // changes with every read
		case strings.Contains(rel, ".safetensors/"):
			continue // the exports: export_test.go
		case first == ".tensorfs":
			if err := os.WriteFile(exp, []byte(mustRun(t, "cat", m.Path(rel))), 0o644); err != nil {
				t.Fatal(err)
			}
			out = append(out, [2]string{m.Path(rel), exp})
			continue
		case first == ".files":
			if rest != filepath.Base(src) {
				t.Fatalf("%s: not the checkpoint file %s", rel, src)
			}
			out = append(out, [2]string{m.Path(rel), src}) // the file as it is
			continue
		case first == ".npy":
			args = []string{"--npy", byPath[strings.TrimSuffix(rest, ".npy")]}
		case first == ".f32" || first == ".f16" || first == ".bf16" || first == ".f64":
			args = []string{"--dtype", first[1:], byPath[rest]}
		default:
			args = []string{byPath[rel]}
		}
		if args[len(args)-1] == "" {
			t.Fatalf("%s: no tensor for this path in ls --json", rel)
		}
		r := runTensorfs(t, append(append([]string{"cat"}, args[:len(args)-1]...), src, args[len(args)-1])...)
		if r.code != 0 {
			t.Fatalf("cat %v: %s", args, r.stderr)
		}
		if err := os.WriteFile(exp, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]string{m.Path(rel), exp})
	}
	return out
}

// pyConcurrentReaders runs N threads for a while, each reading random ranges
// (1 byte to 1 MiB, at any offset, some past the end) of random files,
// three reads in four with O_DIRECT (so the server sees them) and the
// rest through the page cache, opening files anew now and then, and
// comparing every read with the expected bytes. argv: manifest (JSON list
// of [file, expected file]), threads, seconds, seed. Prints a JSON
// summary.
const pyConcurrentReaders = `
import json, os, random, sys, threading, time
manifest, nthreads, secs, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
files = [(p, open(e, 'rb').read()) for p, e in json.load(open(manifest))]
deadline = time.monotonic() + secs
results = []
def reader(tid):
    rnd = random.Random(seed * 1000 + tid)
    fds = {}
    reads = nbytes = 0
    bad = []
    try:
        # Each thread reads at least once, whenever it gets to run: on a
        # loaded machine a thread can first run after the deadline.
        while (reads == 0 or time.monotonic() < deadline) and len(bad) < 5:
            i = rnd.randrange(len(files))
            path, want = files[i]
            direct = rnd.random() < 0.75
            key = (i, direct)
            fd = fds.get(key)
            if fd is None or rnd.random() < 0.05:
                if fd is not None:
                    os.close(fd)
                fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
                fds[key] = fd
            off = rnd.randrange(len(want) + 16)
            r = rnd.random()
            n = rnd.randrange(1, 64) if r < 0.3 else rnd.randrange(1, 16384) if r < 0.8 else rnd.randrange(1, (1 << 20) + 1)
            try:
                got = os.pread(fd, n, off)
            except OSError as e:
                bad.append('%s: pread(%d at %d): %s' % (path, n, off, e))
                continue
            reads += 1
            nbytes += len(got)
            if got != want[off:off + n]:
                bad.append('%s: pread(%d at %d)%s: %d bytes differ from the expected %d' % (path, n, off, ' O_DIRECT' if direct else '', len(got), len(want[off:off + n])))
    except Exception as e:
        bad.append('thread %d: %r' % (tid, e))
    finally:
        for fd in fds.values():
            os.close(fd)
    results.append((reads, nbytes, bad))
threads = [threading.Thread(target=reader, args=(i,)) for i in range(nthreads)]
for th in threads:
    th.start()
for th in threads:
    th.join()
print(json.dumps({'threads': len(results), 'reads': sum(r[0] for r in results), 'bytes': sum(r[1] for r in results),
                  'bad': [b for r in results for b in r[2]][:20]}))
`

// TestConcurrentReaders is the load test.
func TestConcurrentReaders(t *testing.T) {
	bin := raceTensorfs(t)
	dir := t.TempDir()
	st, gg, pt := crFixtures(t, dir)
	// Three ways of serving: copying out of the mapping, splicing, pread.
	mounts := []*Mount{
		mountWith(t, bin, st, "--no-splice"),
		mountWith(t, bin, gg),
		mountWith(t, bin, pt, "--backing", "pread"),
	}
	var manifest [][2]string
	for i, m := range mounts {
		manifest = append(manifest, crExpectations(t, m, []string{st, gg, pt}[i], dir)...)
	}
	mf, _ := json.Marshal(manifest)
	manifestPath := writeTemp(t, string(mf))
	var total int64
	for _, e := range manifest {
		if fi, err := os.Stat(e[1]); err == nil {
			total += fi.Size()
		}
	}
	t.Logf("%d files (tensors in every view, .tensorfs files), %.1f MiB in all, over 3 mounts; servers built with -race", len(manifest), float64(total)/(1<<20))

	rss := func() []int64 {
		out := make([]int64, len(mounts))
		for i, m := range mounts {
			out[i] = procStatusKB(t, m.cmd.Process.Pid, "VmRSS") << 10
		}
		return out
	}
	run := func(threads int, seed int) {
		t.Helper()
		start := time.Now()
		out := runPy(t, pyConcurrentReaders, manifestPath, fmt.Sprint(threads), fmt.Sprint(crPhase.Seconds()), fmt.Sprint(seed))
		var res struct {
			Threads, Reads int
			Bytes          int64
			Bad            []string
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, b := range res.Bad {
			t.Error(b)
		}
		if res.Threads != threads || res.Reads < threads {
			t.Errorf("%d threads finished %d reads, want %d threads, some reads each", res.Threads, res.Reads, threads)
		}
		secs := time.Since(start).Seconds()
		t.Logf("%2d readers: %d reads, %.1f MiB in %.1f s (%.0f reads/s)", threads, res.Reads, float64(res.Bytes)/(1<<20), secs, float64(res.Reads)/secs)
	}
	mib := func(v []int64) string {
		var s []string
		for _, x := range v {
			s = append(s, fmt.Sprintf("%.1f", float64(x)/(1<<20)))
		}
		return strings.Join(s, "/") + " MiB"
	}
	run(4, 1) // warm up: the kernel's caches, the servers' buffer pools
	before := rss()
	t.Logf("server RSS after warm-up: %s", mib(before))
	for _, threads := range []int{16, 64} {
		run(threads, 2*threads)
		mid := rss()
		run(threads, 2*threads+1)
		after := rss()
		t.Logf("server RSS with %d readers: %s after the first run, %s after the second", threads, mib(mid), mib(after))
		for i := range mounts {
			if after[i] > mid[i]+crRSSSlop+mid[i]/10 {
				t.Errorf("%s: server RSS grew from %.1f to %.1f MiB under a steady load of %d readers", filepath.Base(mounts[i].Source), float64(mid[i])/(1<<20), float64(after[i])/(1<<20), threads)
			}
		}
	}
	for _, m := range mounts {
		serverAlive(t, m)
		if s := m.Stderr(); strings.Contains(s, "DATA RACE") {
			t.Errorf("%s: the race detector reported:\n%s", filepath.Base(m.Source), s)
		}
		m.Unmount() // fails unless the server exits 0 (a race makes it exit 66)
	}
}
