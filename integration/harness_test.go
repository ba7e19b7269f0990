package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/fs"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// Timeouts. A mount that is not ready in readyTimeout failed; any one
// subprocess that runs past cmdTimeout is killed and fails its test; a
// server that has not exited exitTimeout after its unmount or signal
// failed. They catch hangs, not slowness: a mount comes up and a server
// exits in well under a second, but CI runs the test packages in
// parallel on two cores, where any process can be kept off the CPU for
// seconds; a limit that slowness can reach is a flaky test (they were
// 20 s for readiness and 15 s for the exit).
const (
	readyTimeout = 2 * time.Minute
	cmdTimeout   = 2 * time.Minute
	exitTimeout  = time.Minute
)

// tensorfsBin is the binary TestMain built; buildErr says why not.
var (
	tensorfsBin string
	buildErr    error
)

func TestMain(m *testing.M) {
	if mnt := os.Getenv(ipcConsumerEnv); mnt != "" {
		// This binary re-run as the second process of TestMountGPU.
		os.Exit(ipcConsumer(mnt))
	}
	dir, err := os.MkdirTemp("", "tensorfs-integration-")
	if err != nil {
		log.Fatal(err)
	}
	tensorfsBin, buildErr = buildTensorfs(dir)
	// Race-enabled binaries (this suite under -race, and the server the
	// load test builds) sleep a second at exit by default
	// (atexit_sleep_ms); every CLI run and unmount would pay it. Races are
	// still reported and still make the binary exit 66.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildTensorfs builds ./cmd/tensorfs into dir, with the race detector
// when the tests run with it.
func buildTensorfs(dir string) (string, error) {
	gobin := goBinary()
	bin := filepath.Join(dir, "tensorfs")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/tensorfs")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, args...)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tensorfs: %v\n%s", err, out)
	}
	return bin, nil
}

// goBinary returns the go command of the toolchain running the tests.
func goBinary() string {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		return "go"
	}
	return gobin
}

// tensorfsBinary returns the tensorfs binary, failing t when it did not build.
func tensorfsBinary(t testing.TB) string {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return tensorfsBin
}

var (
	fuseOnce   sync.Once
	fuseReason string // why FUSE cannot be used here; "" when it can
)

// needFUSE skips t when this machine cannot mount FUSE file systems
// (/dev/fuse missing or unusable, mount(2) and fusermount3 refused), and
// fails it instead under CI=true. It probes once by mounting an empty
// tree in this process and unmounting it straight away (nothing reads it).
func needFUSE(t testing.TB) {
	t.Helper()
	fuseOnce.Do(func() { fuseReason = probeFUSE() })
	if fuseReason != "" {
		testenv.SkipOrFail(t, fuseReason)
	}
}

func probeFUSE() string {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return "FUSE is not available: " + err.Error()
	}
	f.Close()
	dir, err := os.MkdirTemp("", "tensorfs-probe-")
	if err != nil {
		return err.Error()
	}
	defer os.RemoveAll(dir)
	idx := &index.Index{Format: "probe", Sources: []string{}}
	root, err := fs.NewRoot(idx, []backing.Source{}, fs.Options{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		return "probe: " + err.Error()
	}
	server, err := fs.Mount(dir, root, fs.MountOptions{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		return "cannot mount FUSE here: " + err.Error()
	}
	if err := server.Unmount(); err != nil {
		return "cannot unmount FUSE here: " + err.Error()
	}
	return ""
}

// Mount is a tensorfs server running as a subprocess.
type Mount struct {
	Dir    string // the mount point
	Source string

	t      testing.TB
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the server has exited
	err    error         // its Wait error, valid after done
	umount sync.Once
}

// syncBuffer is a bytes.Buffer safe for the exec goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mount runs `tensorfs mount flags... src DIR` on a fresh directory and
// waits until DIR/.tensorfs/index.json exists. The mount is taken down
// when t ends (if the test has not done it).
func mount(t testing.TB, src string, flags ...string) *Mount {
	t.Helper()
	return mountIn(t, "", src, flags...)
}

// mountIn is mount with the server run in directory cwd ("": the test's).
func mountIn(t testing.TB, cwd, src string, flags ...string) *Mount {
	t.Helper()
	m := startMountIn(t, cwd, src, flags...)
	if err := m.waitReady(); err != nil {
		t.Fatal(err)
	}
	return m
}

// startMount starts the server without waiting for readiness.
func startMount(t testing.TB, src string, flags ...string) *Mount {
	t.Helper()
	return startMountIn(t, "", src, flags...)
}

func startMountIn(t testing.TB, cwd, src string, flags ...string) *Mount {
	t.Helper()
	needFUSE(t)
	bin := tensorfsBinary(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"mount"}, flags...), src, dir)
	m := &Mount{Dir: dir, Source: src, t: t, stderr: &syncBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Dir = cwd
	m.cmd.Stdout = m.stderr
	m.cmd.Stderr = m.stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	t.Cleanup(m.cleanup)
	return m
}

// waitReady polls for the readiness file.
func (m *Mount) waitReady() error {
	ready := filepath.Join(m.Dir, ".tensorfs", "index.json")
	deadline := time.Now().Add(readyTimeout)
	for {
		if _, err := os.Stat(ready); err == nil {
			return nil
		}
		select {
		case <-m.done:
			return fmt.Errorf("tensorfs mount %s exited before the mount was ready (%v); stderr:\n%s", m.Source, m.err, m.stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tensorfs mount %s: not ready after %v; stderr:\n%s", m.Source, readyTimeout, m.stderr)
		}
	}
}

// Path returns the path of rel inside the mount.
func (m *Mount) Path(rel string) string { return filepath.Join(m.Dir, rel) }

// Stderr returns what the server has written so far.
func (m *Mount) Stderr() string { return m.stderr.String() }

// Unmount runs `tensorfs umount DIR` and checks that the server exits 0.
func (m *Mount) Unmount() {
	m.t.Helper()
	var failed string
	m.umount.Do(func() {
		r := runTensorfs(m.t, "umount", m.Dir)
		if r.code != 0 {
			failed = fmt.Sprintf("tensorfs umount %s: exit %d: %s", m.Dir, r.code, r.stderr)
			return
		}
		code, err := m.wait(exitTimeout)
		if err != nil {
			failed = err.Error()
		} else if code != 0 {
			failed = fmt.Sprintf("server exited %d after unmount; stderr:\n%s", code, m.stderr)
		}
	})
	if failed != "" {
		m.t.Fatal(failed)
	}
}

// Signal sends sig to the server.
func (m *Mount) Signal(sig os.Signal) {
	m.t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		m.t.Fatal(err)
	}
}

// wait waits up to timeout for the server to exit and returns its exit
// status (-1 when killed by a signal).
func (m *Mount) wait(timeout time.Duration) (int, error) {
	select {
	case <-m.done:
	case <-time.After(timeout):
		return 0, fmt.Errorf("server still running %v later; stderr:\n%s", timeout, m.stderr)
	}
	var ee *exec.ExitError
	switch {
	case m.err == nil:
		return 0, nil
	case errors.As(m.err, &ee):
		return ee.ExitCode(), nil
	}
	return 0, m.err
}

// cleanup takes the mount down whatever state the test left it in.
func (m *Mount) cleanup() {
	select {
	case <-m.done:
	default:
		if fs.Mounted(m.Dir) {
			fs.Unmount(m.Dir)
		}
		select {
		case <-m.done:
		case <-time.After(exitTimeout):
			m.cmd.Process.Kill()
			<-m.done
		}
	}
	if fs.Mounted(m.Dir) { // a killed server leaves a dead mount
		if err := fs.Unmount(m.Dir); err != nil {
			fs.Detach(m.Dir)
		}
	}
}

// result is what a subprocess did.
type result struct {
	stdout, stderr string
	code           int
}

// runCmd runs name args with cmdTimeout; the test fails if it cannot
// start or runs too long. stdin, when non-nil, is fed to it.
func runCmd(t testing.TB, stdin io.Reader, name string, args ...string) result {
	t.Helper()
	return runCmdIn(t, "", stdin, name, args...)
}

// runCmdIn is runCmd in directory dir ("": the test's).
func runCmdIn(t testing.TB, dir string, stdin io.Reader, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, stdin
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: still running after %v", name, shortArgs(args), cmdTimeout)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// runTensorfs runs the tensorfs binary.
func runTensorfs(t testing.TB, args ...string) result {
	t.Helper()
	return runCmd(t, nil, tensorfsBinary(t), args...)
}

// runTensorfsIn runs the tensorfs binary in directory dir.
func runTensorfsIn(t testing.TB, dir string, args ...string) result {
	t.Helper()
	return runCmdIn(t, dir, nil, tensorfsBinary(t), args...)
}

// mustRun runs name args and fails t unless it exits 0; it returns stdout.
func mustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	r := runCmd(t, nil, name, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: exit %d\nstdout: %s\nstderr: %s", name, shortArgs(args), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// shortArgs formats args for a message, with long ones (Python scripts)
// cut.
func shortArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 80 {
			a = strings.TrimSpace(a[:60]) + "..."
		}
		out[i] = strconv.Quote(a)
	}
	return strings.Join(out, " ")
}

// runPy runs a Python script with the Debian Python (numpy and torch
// importable where installed) and returns its stdout; a non-zero exit
// fails t with the script's stderr.
func runPy(t testing.TB, script string, args ...string) string {
	t.Helper()
	py := testenv.Python(t)
	return mustRun(t, py, append([]string{"-c", script}, args...)...)
}

// stTensor is one tensor of a generated safetensors file.
type stTensor struct {
	Name  string
	DType string // safetensors spelling
	Shape []int64
	Data  []byte
}

// writeSafetensors writes a safetensors file at path: 8-byte header
// length, the JSON header (with __metadata__ when metadata is non-nil,
// padded with spaces to a multiple of 8), then the data in the order
// given. It returns the header length plus 8 (where data starts).
func writeSafetensors(t testing.TB, path string, tensors []stTensor, metadata map[string]string) int64 {
	t.Helper()
	header := map[string]any{}
	if metadata != nil {
		header["__metadata__"] = metadata
	}
	var data bytes.Buffer
	for _, ts := range tensors {
		start := data.Len()
		data.Write(ts.Data)
		shape := ts.Shape
		if shape == nil {
			shape = []int64{}
		}
		header[ts.Name] = map[string]any{"dtype": ts.DType, "shape": shape, "data_offsets": []int{start, data.Len()}}
	}
	var h bytes.Buffer
	enc := json.NewEncoder(&h)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(header); err != nil {
		t.Fatal(err)
	}
	hb := bytes.TrimRight(h.Bytes(), "\n")
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(hb)))
	out.Write(hb)
	out.Write(data.Bytes())
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return 8 + int64(len(hb))
}

// pattern returns n bytes that differ at every offset of a small period,
// so misplaced reads show.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) ^ byte(i>>8)*31 ^ byte(i>>16)*7 ^ seed
	}
	return b
}

// safetensorsFiles returns every *.safetensors file under dir, sorted.
func safetensorsFiles(t testing.TB, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".safetensors") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// mountedAt reports whether anything FUSE is mounted at dir.
func mountedAt(dir string) bool { return fs.Mounted(dir) }

// exitedBySignal reports whether err is a process killed by a signal.
func exitedBySignal(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			return ws.Signaled()
		}
	}
	return false
}
