package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The memory-limit test of `tensorfs load`: a checkpoint six times larger
// than a cgroup v1 memory limit loads inside that limit, directly and
// through a mount, with every sha256 equal to one computed independently;
// reading the whole file at once under the same limit is killed, so the
// limit is real and the test can fail.

const (
	loadLimit     = 256 << 20  // memory.limit_in_bytes of the test cgroup
	loadCkptBytes = 1536 << 20 // tensor bytes of the generated checkpoint
	loadCgroupFS  = "/sys/fs/cgroup/memory"
)

// loadCgroup is a child memory cgroup (v1) that the test creates and
// removes.
type loadCgroup struct {
	dir string
}

// loadNeedCgroup skips t (fails it under CI=true) where a memory cgroup
// cannot be made: not root, or no cgroup v1 memory controller.
func loadNeedCgroup(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "the memory-limit test needs root to create a cgroup")
	}
	if _, err := os.Stat(filepath.Join(loadCgroupFS, "memory.limit_in_bytes")); err != nil {
		testenv.SkipOrFail(t, "no cgroup v1 memory controller at "+loadCgroupFS+": "+err.Error())
	}
}

// loadParentCgroup returns the memory cgroup directory of this process
// (so the child stays inside whatever limits and accounting apply to the
// test), or the hierarchy's root where that is not visible.
func loadParentCgroup() string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return loadCgroupFS
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				dir := filepath.Join(loadCgroupFS, filepath.Clean("/"+parts[2]))
				if st, err := os.Stat(dir); err == nil && st.IsDir() {
					return dir
				}
			}
		}
	}
	return loadCgroupFS
}

// newLoadCgroup creates a child cgroup limited to limit bytes (and as much
// memory+swap, where swap accounting exists, so nothing escapes to swap).
func newLoadCgroup(t *testing.T, limit int64) *loadCgroup {
	t.Helper()
	dir := filepath.Join(loadParentCgroup(), fmt.Sprintf("tensorfs-load-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.SkipOrFail(t, "cannot create a memory cgroup: "+err.Error())
	}
	cg := &loadCgroup{dir: dir}
	t.Cleanup(cg.remove)
	cg.write(t, "memory.limit_in_bytes", strconv.FormatInt(limit, 10))
	if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
		cg.write(t, "memory.memsw.limit_in_bytes", strconv.FormatInt(limit, 10))
	}
	if got := strings.TrimSpace(cg.read(t, "memory.limit_in_bytes")); got != strconv.FormatInt(limit, 10) {
		t.Fatalf("memory.limit_in_bytes is %s after writing %d", got, limit)
	}
	return cg
}

func (cg *loadCgroup) write(t *testing.T, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(value), 0o644); err != nil {
		t.Fatalf("cgroup %s: %v", file, err)
	}
}

func (cg *loadCgroup) read(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		t.Fatalf("cgroup %s: %v", file, err)
	}
	return string(b)
}

// oomKills returns the cgroup's OOM kill count (memory.oom_control
// "oom_kill", kernels >= 4.13), or -1 where the kernel does not say.
func (cg *loadCgroup) oomKills(t *testing.T) int64 {
	for _, line := range strings.Split(cg.read(t, "memory.oom_control"), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return -1
}

// remove deletes the cgroup once its processes are gone.
func (cg *loadCgroup) remove() {
	for i := 0; i < 50; i++ {
		err := os.Remove(cg.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// loadRun runs name args as a process of cg: a shell writes its own pid
// into cgroup.procs, then execs the command, so the command is charged to
// the cgroup from its first instruction.
func loadRun(t *testing.T, cg *loadCgroup, name string, args ...string) (result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	procs := filepath.Join(cg.dir, "cgroup.procs")
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, procs, name}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q: still running after %v", name, args, cmdTimeout)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r, err
}

// loadDiskDir returns a temporary directory on a disk-backed filesystem:
// the page cache of a disk file is reclaimable under a memory limit,
// tmpfs pages are not, so the checkpoint must not live on tmpfs.
func loadDiskDir(t *testing.T) string {
	t.Helper()
	for _, base := range []string{os.TempDir(), "/var/tmp", testenv.RepoRoot()} {
		var st unix.Statfs_t
		if unix.Statfs(base, &st) != nil || st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
			continue
		}
		if st.Bavail*uint64(st.Bsize) < 3*loadCkptBytes {
			continue
		}
		dir, err := os.MkdirTemp(base, "tensorfs-load-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	testenv.SkipOrFail(t, "no disk-backed temporary directory with 4.5 GiB free")
	return ""
}

// loadTensorSpec is one tensor of the generated checkpoint, and where its
// bytes are in the file.
type loadTensorSpec struct {
	name  string
	dtype string
	shape []int64
	size  int64
	off   int64 // from the start of the file
}

// loadWriteCheckpoint writes a safetensors file of about total tensor
// bytes: large tensors of several dtypes plus a few small and odd ones,
// laid out in an order different from the name order. The data is real
// pseudo-random bytes (a 1 MiB random block, each MiB stamped with a
// running counter so no two are equal), written quickly, then flushed to
// disk and dropped from the page cache, so the loads below read it
// through the page cache of their own cgroup.
func loadWriteCheckpoint(t *testing.T, dir string, total int64) (string, []loadTensorSpec) {
	t.Helper()
	var specs []loadTensorSpec
	add := func(name, dt string, elem int64, shape ...int64) {
		n := elem
		for _, d := range shape {
			n *= d
		}
		specs = append(specs, loadTensorSpec{name: name, dtype: dt, shape: append([]int64{}, shape...), size: n})
	}
	add("lm_head.bias", "F32", 4, 7)
	add("step", "I64", 8)
	add("embed.weight", "BF16", 2, 1000, 513)
	dts := []struct {
		name string
		elem int64
	}{{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"U8", 1}, {"I64", 8}}
	const big = 64 << 20
	var sum int64
	for _, s := range specs {
		sum += s.size
	}
	for i := 0; sum < total; i++ {
		d := dts[i%len(dts)]
		n := min(int64(big), total-sum) / d.elem / 1024 * 1024
		if n == 0 {
			break
		}
		add(fmt.Sprintf("model.layers.%02d.weight", i), d.name, d.elem, n/1024, 1024)
		sum += n * d.elem
	}
	// File order: reversed, so index (name) order differs from it.
	sort.Slice(specs, func(i, j int) bool { return specs[i].name > specs[j].name })
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for i := range specs {
		s := &specs[i]
		header[s.name] = map[string]any{"dtype": s.dtype, "shape": s.shape, "data_offsets": []int64{off, off + s.size}}
		off += s.size
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	at := 8 + int64(len(h)) // data starts after the header
	for i := range specs {
		specs[i].off = at
		at += specs[i].size
	}

	path := filepath.Join(dir, "big.safetensors")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 4<<20)
	w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(h))))
	w.Write(h)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	block := make([]byte, 1<<20)
	for i := 0; i+8 <= len(block); i += 8 {
		binary.LittleEndian.PutUint64(block[i:], r.Uint64())
	}
	var stamp uint64
	for left := off; left > 0; {
		n := min(int64(len(block)), left)
		binary.LittleEndian.PutUint64(block, stamp)
		stamp++
		if _, err := w.Write(block[:n]); err != nil {
			t.Fatal(err)
		}
		left -= n
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return path, specs
}

// loadDropCache drops the file's clean pages from the page cache.
func loadDropCache(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Logf("fadvise DONTNEED: %v", err)
	}
}

// loadExpected computes, in the test process and outside the cgroup, the
// sha256 of every tensor's byte range of the file with plain reads, and
// returns the sha256sum-style lines `tensorfs load --sha256` must print,
// in name order.
func loadExpected(t *testing.T, path string, specs []loadTensorSpec) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, s.off, s.size)); err != nil {
			t.Fatal(err)
		}
		sums[s.name] = hex.EncodeToString(h.Sum(nil))
		names = append(names, s.name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(sums[n] + "  " + n + "\n")
	}
	return b.String()
}

var loadSummaryRE = regexp.MustCompile(`loaded (\d+) tensors: (\d+) bytes .* in ([0-9.]+) s, ([0-9.]+) (GB/s|MB/s|kB/s|B/s), peak memory ([0-9.]+) (B|KiB|MiB|GiB) anonymous`)

// loadPeakAnon parses the summary line's peak anonymous memory, in bytes.
func loadPeakAnon(t *testing.T, stderr string) (tensors, bytes int64, gbps float64, peak int64) {
	t.Helper()
	m := loadSummaryRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary line in stderr:\n%s", stderr)
	}
	tensors, _ = strconv.ParseInt(m[1], 10, 64)
	bytes, _ = strconv.ParseInt(m[2], 10, 64)
	gbps, _ = strconv.ParseFloat(m[4], 64)
	gbps *= map[string]float64{"GB/s": 1, "MB/s": 1e-3, "kB/s": 1e-6, "B/s": 1e-9}[m[5]]
	v, _ := strconv.ParseFloat(m[6], 64)
	unit := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[7]]
	return tensors, bytes, gbps, int64(v * unit)
}

func TestLoadUnderMemoryLimit(t *testing.T) {
	loadNeedCgroup(t)
	bin := tensorfsBinary(t)
	dir := loadDiskDir(t)
	start := time.Now()
	path, specs := loadWriteCheckpoint(t, dir, loadCkptBytes)
	want := loadExpected(t, path, specs)
	var total int64
	for _, s := range specs {
		total += s.size
	}
	t.Logf("checkpoint: %d tensors, %d MiB, written and hashed in %.1f s", len(specs), total>>20, time.Since(start).Seconds())
	if total < 5*loadLimit {
		t.Fatalf("checkpoint of %d bytes is not several times the %d-byte limit", total, loadLimit)
	}

	// The race detector multiplies memory; keep its buffers small.
	loadArgs := []string{"load", "--sha256"}
	if raceEnabled {
		loadArgs = append(loadArgs, "--parallel", "2", "--chunk", "1MiB")
	}

	check := func(t *testing.T, source string) {
		loadDropCache(t, path)
		cg := newLoadCgroup(t, loadLimit)
		kills := cg.oomKills(t)
		t0 := time.Now()
		r, _ := loadRun(t, cg, bin, append(loadArgs, source)...)
		if r.code != 0 {
			t.Fatalf("tensorfs load %s under %d MiB: exit %d (oom kills %d -> %d)\nstderr: %s",
				source, loadLimit>>20, r.code, kills, cg.oomKills(t), r.stderr)
		}
		if r.stdout != want {
			t.Errorf("tensorfs load --sha256 %s: hashes differ from the file's\ngot:\n%s\nwant:\n%s", source, r.stdout, want)
		}
		n, b, gbps, peak := loadPeakAnon(t, r.stderr)
		if n != int64(len(specs)) || b != total {
			t.Errorf("summary says %d tensors, %d bytes; want %d, %d", n, b, len(specs), total)
		}
		maxUsage, _ := strconv.ParseInt(strings.TrimSpace(cg.read(t, "memory.max_usage_in_bytes")), 10, 64)
		t.Logf("%s: %.1f s, %.2f GB/s, peak anonymous %d MiB, cgroup peak usage %d MiB of %d MiB (page cache included)",
			source, time.Since(t0).Seconds(), gbps, peak>>20, maxUsage>>20, loadLimit>>20)
		if peak > loadLimit/2 {
			t.Errorf("peak anonymous memory %d MiB is over half the limit", peak>>20)
		}
		if k := cg.oomKills(t); k > kills {
			t.Errorf("the cgroup saw %d OOM kills during the load", k-kills)
		}
	}

	t.Run("direct", func(t *testing.T) { check(t, path) })
	t.Run("mount", func(t *testing.T) {
		m := mount(t, path)
		check(t, m.Dir)
		m.Unmount()
	})

	// The control: reading the whole file into memory at once (dd with one
	// block the size of the file) under the same limit is killed.
	t.Run("whole-file read is killed", func(t *testing.T) {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		loadDropCache(t, path)
		cg := newLoadCgroup(t, loadLimit)
		kills := cg.oomKills(t)
		r, err := loadRun(t, cg, "dd", "if="+path, "of=/dev/null", "bs="+strconv.FormatInt(st.Size(), 10), "count=1", "iflag=fullblock")
		if r.code == 0 && err == nil {
			t.Fatalf("reading the whole %d MiB file at once under %d MiB succeeded: the limit does not hold\n%s", st.Size()>>20, loadLimit>>20, r.stderr)
		}
		var ee *exec.ExitError
		signaled := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()
		after := cg.oomKills(t)
		t.Logf("whole-file read: %v (oom kills %d -> %d)", err, kills, after)
		if !signaled || (kills >= 0 && after <= kills) {
			t.Errorf("whole-file read failed (%v) but was not OOM-killed (oom kills %d -> %d); stderr: %s", err, kills, after, r.stderr)
		}
	})
}

// loadF32 encodes float32 values little-endian.
func loadF32(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func loadSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestLoadCommand checks what `tensorfs load` prints: sha256sum lines in
// index order, converted with --dtype, escaped like sha256sum for odd
// names, checkable with `sha256sum -c` inside a mount; the summary line;
// and one-line errors with the right exit status.
func TestLoadCommand(t *testing.T) {
	dir := t.TempDir()
	half := []byte{0x00, 0x3c, 0x00, 0x40, 0x00, 0xc2, 0x00, 0x38} // 1, 2, -3, 0.5 in F16
	ints := []byte{1, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	w := loadF32(0.25, -1, 8, 1e-3)
	path := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, path, []stTensor{
		{Name: "w", DType: "F32", Shape: []int64{2, 2}, Data: w},
		{Name: "b/c", DType: "I32", Shape: []int64{3}, Data: ints},
		{Name: "a", DType: "F16", Shape: []int64{4}, Data: half},
	}, nil)

	native := loadSum(half) + "  a\n" + loadSum(ints) + "  b/c\n" + loadSum(w) + "  w\n"
	r := runTensorfs(t, "load", "--sha256", "--chunk", "3", path)
	if r.code != 0 || r.stdout != native {
		t.Errorf("load --sha256: exit %d\ngot:\n%s\nwant:\n%s\nstderr: %s", r.code, r.stdout, native, r.stderr)
	}
	if m := loadSummaryRE.FindStringSubmatch(r.stderr); m == nil || m[1] != "3" || m[2] != "36" {
		t.Errorf("summary line: %q", r.stderr)
	}
	converted := loadSum(loadF32(1, 2, -3, 0.5)) + "  a\n" + loadSum(ints) + "  b/c\n" + loadSum(w) + "  w\n"
	r = runTensorfs(t, "load", "--sha256", "--dtype", "float32", "--quiet", path)
	if r.code != 0 || r.stdout != converted || r.stderr != "" {
		t.Errorf("load --sha256 --dtype f32 --quiet: exit %d\ngot:\n%s\nwant:\n%s\nstderr: %q", r.code, r.stdout, converted, r.stderr)
	}

	// sha256sum's escaping for names holding a backslash or a newline.
	odd := filepath.Join(dir, "odd.safetensors")
	writeSafetensors(t, odd, []stTensor{{Name: "x\\y\nz", DType: "U8", Shape: []int64{2}, Data: []byte{7, 9}}}, nil)
	r = runTensorfs(t, "load", "--sha256", "--quiet", odd)
	if want := "\\" + loadSum([]byte{7, 9}) + "  x\\\\y\\nz\n"; r.stdout != want {
		t.Errorf("odd name: got %q, want %q", r.stdout, want)
	}

	// Through a mount, the output checks with sha256sum -c run in the
	// mount: every name is also the tensor's path there.
	t.Run("mount", func(t *testing.T) {
		m := mount(t, path)
		r := runTensorfs(t, "load", "--sha256", "--quiet", m.Dir)
		if r.code != 0 || r.stdout != native {
			t.Errorf("load --sha256 MOUNT: exit %d\ngot:\n%s\nwant:\n%s\nstderr: %s", r.code, r.stdout, native, r.stderr)
		}
		r = runTensorfs(t, "load", "--sha256", "--quiet", "--dtype", "f32", m.Dir)
		if r.stdout != converted {
			t.Errorf("load --sha256 --dtype f32 MOUNT:\ngot:\n%s\nwant:\n%s\nstderr: %s", r.stdout, converted, r.stderr)
		}
		checkOneLineError(t, runTensorfs(t, "load", "--io", "mmap", m.Dir), 2, "--io applies to checkpoint files")
		if _, err := exec.LookPath("sha256sum"); err == nil {
			cmd := exec.Command("sha256sum", "-c", "--strict")
			cmd.Dir = m.Dir
			cmd.Stdin = strings.NewReader(native)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("sha256sum -c in the mount: %v\n%s", err, out)
			}
		}
		m.Unmount()
	})

	// Errors: one line, exit 1; usage errors exit 2.
	checkOneLineError(t, runTensorfs(t, "load", filepath.Join(dir, "missing.safetensors")), 1, "missing.safetensors")
	notCkpt := filepath.Join(dir, "junk.bin")
	os.WriteFile(notCkpt, []byte("not a checkpoint at all"), 0o644)
	checkOneLineError(t, runTensorfs(t, "load", notCkpt), 1, "junk.bin")
	for _, args := range [][]string{
		{"load"},
		{"load", "--chunk", "0", path},
		{"load", "--chunk", "lots", path},
		{"load", "--parallel", "-1", path},
		{"load", "--dtype", "i8", path},
		{"load", "--io", "carrier-pigeon", path},
		{"load", path, path},
	} {
		checkOneLineError(t, runTensorfs(t, args...), 2, "load")
	}
	if r := runTensorfs(t, "load", "-h"); r.code != 0 || !strings.Contains(r.stdout, "--sha256") {
		t.Errorf("load -h: exit %d, %q", r.code, r.stdout)
	}
}
