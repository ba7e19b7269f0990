//go:build cgo

package cuda

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

var (
	fakeOnce sync.Once
	fakeLib  string
	fakeErr  error
)

// TestMain removes the stand-in library built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if fakeLib != "" {
		os.RemoveAll(filepath.Dir(fakeLib))
	}
	os.Exit(code)
}

// fakeRuntime builds testdata/fakecudart.c (once per test binary), copies
// it into the test's directory, so each test loads a fresh instance with
// its own state, and loads it. It returns the runtime and the path of the
// call log.
func fakeRuntime(t *testing.T) (*Runtime, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the stand-in library is built for Linux")
	}
	fakeOnce.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			fakeErr = fmt.Errorf("gcc not found: %v (apt-get install gcc)", err)
			return
		}
		dir, err := os.MkdirTemp("", "fakecudart")
		if err != nil {
			fakeErr = err
			return
		}
		lib := filepath.Join(dir, "libcudart.so")
		out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-pthread", "-Wall", "-Werror",
			"-o", lib, filepath.Join("testdata", "fakecudart.c")).CombinedOutput()
		if err != nil {
			fakeErr = fmt.Errorf("building the stand-in libcudart: %v\n%s", err, out)
			return
		}
		fakeLib = lib
	})
	if fakeErr != nil {
		if strings.Contains(fakeErr.Error(), "gcc not found") {
			testenv.SkipOrFail(t, fakeErr.Error())
		}
		t.Fatal(fakeErr)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcudart.so")
	data, err := os.ReadFile(fakeLib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, data, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "calls.log")
	t.Setenv("FAKE_CUDART_LOG", logPath)
	rt, err := OpenLibrary(lib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt, logPath
}

// call is one line of the stand-in's log: the function and its key=value
// arguments.
type call struct {
	fn   string
	args map[string]string
	line string
}

func readCalls(t *testing.T, path string) []call {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		c := call{fn: fields[0], args: map[string]string{}, line: sc.Text()}
		for _, f := range fields[1:] {
			if k, v, ok := strings.Cut(f, "="); ok {
				c.args[k] = v
			}
		}
		calls = append(calls, c)
	}
	return calls
}

func hexArg(t *testing.T, c call, key string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(c.args[key], "0x"), 16, 64)
	if err != nil {
		t.Fatalf("%q: bad %s: %v", c.line, key, err)
	}
	return v
}

func decArg(t *testing.T, c call, key string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(c.args[key], 10, 64)
	if err != nil {
		t.Fatalf("%q: bad %s: %v", c.line, key, err)
	}
	return v
}

// writeCheckpoint writes a safetensors file of U8 tensors with the given
// sizes and random contents, and returns the path and the contents.
func writeCheckpoint(t *testing.T, sizes map[string]int) (string, map[string][]byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	hdr := map[string]any{}
	want := map[string][]byte{}
	var names []string
	for n := range sizes {
		names = append(names, n)
	}
	var data []byte
	for _, n := range names {
		b := make([]byte, sizes[n])
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want[n] = b
		hdr[n] = map[string]any{"dtype": "U8", "shape": []int{len(b)}, "data_offsets": []int{len(data), len(data) + len(b)}}
		data = append(data, b...)
	}
	h, _ := json.Marshal(hdr)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	file = append(append(file, h...), data...)
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// TestUploadStaging uploads a checkpoint through the pinned staging
// buffers over the stand-in library, copies every tensor back and
// compares, and checks from the call log that the configured pinned
// buffers were the only ones, were reused, and that every chunk landed
// inside its tensor, covering it.
func TestUploadStaging(t *testing.T) {
	const chunk = 4096
	sizes := map[string]int{
		"empty": 0, "one": 1, "small": 1000, "below": chunk - 1, "exact": chunk,
		"above": chunk + 1, "many": 9*chunk + 77, "layers/0/w": 5 * chunk, "layers/1/w": 3*chunk + 5,
	}
	for _, tc := range []struct{ streams, buffers, workers int }{
		{1, 1, 1}, {2, 3, 2}, {2, 8, 4}, {3, 4, 8},
	} {
		t.Run(fmt.Sprintf("s%d_b%d_w%d", tc.streams, tc.buffers, tc.workers), func(t *testing.T) {
			rt, logPath := fakeRuntime(t)
			path, want := writeCheckpoint(t, sizes)
			ck, err := client.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			u, err := UploadCheckpoint(context.Background(), rt, ck, UploadOptions{Streams: tc.streams, Buffers: tc.buffers, Workers: tc.workers, ChunkSize: chunk, Read: client.ReadCached})
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Tensors) != len(sizes) {
				t.Fatalf("%d tensors uploaded, want %d", len(u.Tensors), len(sizes))
			}
			for _, dt := range u.Tensors {
				b := want[dt.Name]
				if dt.Size != int64(len(b)) || dt.DType != dtype.U8 || (len(b) > 0) != (dt.Ptr != 0) {
					t.Errorf("%s: %+v", dt.Name, dt)
					continue
				}
				back := make([]byte, len(b))
				if err := rt.CopyToHost(back, dt.Ptr); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(back, b) {
					t.Errorf("%s: device bytes differ from the checkpoint", dt.Name)
				}
			}
			if st := u.Stats; st.Bytes != ck.TotalSize() || st.Copies == 0 || st.RegisteredBytes != 0 {
				t.Errorf("stats %+v, want %d bytes copied, all staged", st, ck.TotalSize())
			}
			tensors, base := u.Tensors, u.Base
			if err := u.Free(); err != nil {
				t.Fatal(err)
			}
			checkLog(t, readCalls(t, logPath), tc.buffers, chunk, tensors, base)
			checkNothingLeft(t, logPath)
		})
	}
}

// checkLog checks the stand-in's call log of one staged upload of
// tensors into the allocation at base, through buffers pinned buffers of
// chunk bytes.
func checkLog(t *testing.T, calls []call, buffers, chunk int, tensors []Tensor, base DevicePtr) {
	t.Helper()
	pinned := map[uint64]int{} // pinned buffer -> async copies from it
	type span struct {
		name string
		ptr  uint64
		size int64
	}
	var spans []span
	for _, tt := range tensors {
		if tt.Ptr != 0 {
			spans = append(spans, span{tt.Name, uint64(tt.Ptr), tt.Size})
		}
	}
	covered := map[string]int64{}
	freed := false
	for _, c := range calls {
		switch c.fn {
		case "RACE", "ERROR":
			t.Errorf("stand-in reports: %s", c.line)
		case "cudaHostAlloc":
			pinned[hexArg(t, c, "ptr")] = 0
		case "cudaMemcpyAsync":
			src, dst, n := hexArg(t, c, "src"), hexArg(t, c, "dst"), decArg(t, c, "n")
			from := false
			for p := range pinned {
				if src >= p && src+uint64(n) <= p+uint64(chunk) {
					pinned[p]++
					from = true
				}
			}
			if !from {
				t.Errorf("async copy from [%#x, +%d), not inside a pinned buffer", src, n)
			}
			found := false
			for _, s := range spans {
				if dst >= s.ptr && dst+uint64(n) <= s.ptr+uint64(s.size) {
					found = true
					covered[s.name] += n
				}
			}
			if !found {
				t.Errorf("async copy to [%#x, +%d) is in no tensor", dst, n)
			}
		case "cudaFree":
			if hexArg(t, c, "ptr") == uint64(base) {
				freed = true
			}
		}
	}
	if len(pinned) != buffers {
		t.Errorf("%d pinned buffers allocated, configured %d", len(pinned), buffers)
	}
	reused := 0
	for _, n := range pinned {
		if n > 1 {
			reused++
		}
	}
	if reused == 0 {
		t.Errorf("no pinned buffer was reused: %v", pinned)
	}
	for _, s := range spans {
		if covered[s.name] != s.size {
			t.Errorf("%s: async copies cover %d of %d bytes", s.name, covered[s.name], s.size)
		}
	}
	if !freed {
		t.Errorf("the device allocation %#x was not freed by Free", uint64(base))
	}
}

// TestEarlyReuseIsCaught shows the tests above can fail: with the wait
// for a buffer's copies skipped (UploadOptions.noReclaim, as a buggy
// staging would), the stand-in (which runs queued copies only at
// synchronization) sees staging buffers change under queued copies.
func TestEarlyReuseIsCaught(t *testing.T) {
	const chunk = 4096
	rt, logPath := fakeRuntime(t)
	path, _ := writeCheckpoint(t, map[string]int{"a": 8 * chunk, "b": 5*chunk + 3})
	ck, err := client.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	u, err := UploadCheckpoint(context.Background(), rt, ck, UploadOptions{Streams: 1, Buffers: 2, Workers: 1, ChunkSize: chunk, Read: client.ReadCached, noReclaim: true})
	if u != nil {
		u.Free()
	}
	races := 0
	for _, c := range readCalls(t, logPath) {
		if c.fn == "RACE" {
			races++
		}
	}
	if races == 0 {
		t.Errorf("the stand-in saw no early buffer reuse")
	}
	var ce *Error
	if err == nil || !errors.As(err, &ce) || ce.Code != 999 {
		t.Errorf("UploadCheckpoint error %v, want the stand-in's race error", err)
	}
}

func TestMissingRuntime(t *testing.T) {
	check := func(err error, name string) {
		t.Helper()
		if !errors.Is(err, ErrNoRuntime) {
			t.Fatalf("error %v, want ErrNoRuntime", err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "CUDA runtime not found ("+name+"): ") || strings.Contains(msg, "\n") {
			t.Errorf("message %q", msg)
		}
	}
	_, err := OpenLibrary("/nonexistent/libcudart.so")
	check(err, "/nonexistent/libcudart.so")

	t.Setenv(EnvLibrary, "/nonexistent/libcudart.so.12")
	_, err = Open()
	check(err, "/nonexistent/libcudart.so.12")

	// A library without the CUDA symbols (libc) is refused by name.
	_, err = OpenLibrary("libc.so.6")
	check(err, "libc.so.6")
	if !strings.Contains(err.Error(), "has no symbol cudaGetDeviceCount") {
		t.Errorf("message %q does not name the missing symbol", err)
	}

	// With nothing configured Open searches; on a machine without CUDA it
	// fails the same way.
	os.Unsetenv(EnvLibrary)
	if rt, err := Open(); err == nil {
		t.Logf("a CUDA runtime is installed here: %s", rt.Path())
		rt.Close()
	} else {
		check(err, "libcudart.so")
	}
}

func TestRuntimeBasics(t *testing.T) {
	rt, _ := fakeRuntime(t)
	n, err := rt.DeviceCount()
	if err != nil || n != 1 {
		t.Errorf("DeviceCount %d, %v", n, err)
	}
	if err := rt.SetDevice(3); err == nil || !strings.Contains(err.Error(), "invalid device ordinal") {
		t.Errorf("SetDevice(3): %v", err)
	}
	path, _ := writeCheckpoint(t, map[string]int{"a": 10})
	ck, err := client.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, err := UploadCheckpoint(context.Background(), rt, ck, UploadOptions{Device: 3}); err == nil {
		t.Errorf("UploadCheckpoint to device 3 of 1: no error")
	}
	if _, err := UploadCheckpoint(context.Background(), rt, ck, UploadOptions{Streams: 65}); err == nil {
		t.Errorf("65 streams: no error")
	}
	if v, _, err := rt.Versions(); err != nil || v != 12040 {
		t.Errorf("Versions %d, %v", v, err)
	}
}
