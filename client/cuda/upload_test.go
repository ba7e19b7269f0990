//go:build cgo

package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// writeMixed writes a safetensors file of tensors of the given dtypes and
// element counts, random bytes each, in the order given (so offsets are
// unaligned wherever a size is odd), and returns its path.
func writeMixed(t *testing.T, dir string, specs []mixedSpec) string {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	hdr := map[string]any{}
	var data []byte
	for _, s := range specs {
		dt, err := dtype.Parse(s.dtype)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := dt.ByteSize(s.n)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if dt == dtype.BF16 || dt == dtype.F16 || dt == dtype.F32 {
			// Finite values: keep NaN payloads out of the comparison's way
			// (the conversions are tested in dtype).
			for i := len(b) - 1; i >= 0; i -= int(dt.ElemSize()) {
				b[i] &= 0x3f
			}
		}
		hdr[s.name] = map[string]any{"dtype": s.dtype, "shape": []int64{s.n}, "data_offsets": []int{len(data), len(data) + len(b)}}
		data = append(data, b...)
	}
	h, _ := json.Marshal(hdr)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	file = append(append(file, h...), data...)
	path := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type mixedSpec struct {
	name  string
	dtype string
	n     int64
}

// mixedSpecs: odd sizes (unaligned offsets), tensors smaller than a chunk
// (several per file-range chunk), tensors spanning many chunks, empty
// ones, and float tensors that --dtype converts.
var mixedSpecs = []mixedSpec{
	{"a.tiny", "U8", 3}, {"b.empty", "F32", 0}, {"c.odd", "U8", 4097},
	{"d.bf16", "BF16", 70001}, {"e.f32", "F32", 33333}, {"f.small", "I32", 17},
	{"g.big", "U8", 300001}, {"h.f16", "F16", 5}, {"i.bool", "BOOL", 9},
	{"j.after", "U8", 65536}, {"k.last", "F32", 1},
}

// compareDevice copies every uploaded tensor back and compares it with
// what ck delivers on the host.
func compareDevice(t *testing.T, rt *Runtime, ck *client.Checkpoint, u *Upload, to dtype.DType) {
	t.Helper()
	// A quantized checkpoint's readers of a dtype get its logical
	// weights, its readers as stored the parts (TensorsIn).
	if want := len(ck.TensorsIn(to)); len(u.Tensors) != want {
		t.Fatalf("%d tensors uploaded, a reader of %v gets %d", len(u.Tensors), to, want)
	}
	for _, tt := range u.Tensors {
		if tt.Offset%DeviceAlign != 0 || (tt.Size > 0 && tt.Ptr != u.Base+DevicePtr(tt.Offset)) {
			t.Fatalf("%s: offset %d, ptr %#x, base %#x", tt.Name, tt.Offset, tt.Ptr, u.Base)
		}
		r, err := ck.OpenTensor(tt.Name, tt.DType)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, r.Size())
		if _, err := r.ReadAt(want, 0); err != nil && len(want) > 0 {
			t.Fatal(err)
		}
		r.Close()
		got := make([]byte, tt.Size)
		if err := rt.CopyToHost(got, tt.Ptr); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%s (%s): device bytes differ from the host's at byte %d of %d", tt.Name, tt.DType, i, len(want))
		}
	}
}

// checkNothingLeft checks from the call log that every device and pinned
// allocation was freed and every registration undone.
func checkNothingLeft(t *testing.T, logPath string) {
	t.Helper()
	live := map[string]string{}
	for _, c := range readCalls(t, logPath) {
		switch c.fn {
		case "cudaMalloc", "cudaHostAlloc":
			if p := c.args["ptr"]; p != "" {
				live[p] = c.fn
			}
		case "cudaHostRegister":
			live[c.args["ptr"]] = c.fn
		case "cudaFree", "cudaFreeHost", "cudaHostUnregister":
			delete(live, c.args["ptr"])
		}
	}
	if len(live) > 0 {
		t.Fatalf("left behind: %v", live)
	}
}

// TestUploadCheckpointEveryByte uploads a checkpoint of mixed tensors by
// every path — staged from the page cache, staged from O_DIRECT reads at
// unaligned offsets, copied from the registered mapping — as stored and
// converted, with few small buffers so that they are reused many times
// (the stand-in catches a buffer refilled before its copy ran), and
// compares every byte on the device with the host's.
func TestUploadCheckpointEveryByte(t *testing.T) {
	for _, tc := range []struct {
		name     string
		read     client.ReadPath
		mode     backing.Mode
		register bool
		to       dtype.DType
		wantPath client.ReadPath
	}{
		{"cached", client.ReadCached, backing.Pread, false, client.AsStored, client.ReadCached},
		{"direct", client.ReadDirect, backing.Pread, false, client.AsStored, client.ReadDirect},
		{"auto-cold", client.ReadAuto, backing.Pread, false, client.AsStored, client.ReadDirect},
		{"direct-f16", client.ReadDirect, backing.Pread, false, dtype.F16, client.ReadDirect},
		{"cached-f32", client.ReadCached, backing.Mmap, false, dtype.F32, client.ReadCached},
		{"register", client.ReadCached, backing.Mmap, true, client.AsStored, 0},
		{"register-bf16", client.ReadCached, backing.Mmap, true, dtype.BF16, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, logPath := fakeRuntime(t)
			path := writeMixed(t, t.TempDir(), mixedSpecs)
			if tc.read == client.ReadAuto {
				dropCache(t, path)
			}
			ck, err := client.OpenWith(path, client.Options{Backing: &backing.Options{Mode: tc.mode}})
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			u, err := UploadCheckpoint(context.Background(), rt, ck, UploadOptions{
				DType: tc.to, Read: tc.read, Register: tc.register,
				Workers: 3, Buffers: 3, Streams: 2, ChunkSize: 16 << 10,
			})
			if err != nil {
				t.Fatal(err)
			}
			compareDevice(t, rt, ck, u, tc.to)
			st := u.Stats
			var native int64
			for _, tt := range u.Tensors {
				if info, _ := ck.Tensor(tt.Name); info.DType == tt.DType {
					native += tt.Size
				}
			}
			if tc.register {
				if st.RegisteredBytes != native || native == 0 {
					t.Errorf("%d bytes copied from the registered mapping, want the %d native bytes", st.RegisteredBytes, native)
				}
			} else if st.RegisteredBytes != 0 {
				t.Errorf("%d bytes registered without Register", st.RegisteredBytes)
			}
			if tc.wantPath != 0 {
				if len(st.Fill.Files) != 1 || st.Fill.Files[0].Path != tc.wantPath {
					t.Errorf("files read: %+v, want one read by %v", st.Fill.Files, tc.wantPath)
				}
			}
			if _, err := u.Verify(context.Background(), ck, 2, 8<<10); err != nil {
				t.Fatal(err)
			}
			if err := u.Free(); err != nil {
				t.Fatal(err)
			}
			checkNothingLeft(t, logPath)
			calls := readCalls(t, logPath)
			mallocs, registers := 0, 0
			for _, c := range calls {
				switch c.fn {
				case "cudaMalloc":
					mallocs++
				case "cudaHostRegister":
					registers++
				}
			}
			if mallocs != 1 {
				t.Errorf("%d cudaMalloc calls, want one allocation for the whole checkpoint", mallocs)
			}
			if tc.register != (registers == 1) {
				t.Errorf("%d cudaHostRegister calls with Register %v", registers, tc.register)
			}
		})
	}
}

// dropCache evicts path from the page cache (so that ReadAuto finds it
// cold); it skips the test where the kernel keeps it.
func dropCache(t *testing.T, path string) {
	t.Helper()
	// Dirty pages stay whatever the advice: write them back first.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	src, err := backing.Open(path, backing.Options{Mode: backing.Pread})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.(backing.Adviser).Advise(0, src.Size(), backing.DontNeed); err != nil {
		t.Fatal(err)
	}
	if frac, ok := backing.Residency(src); !ok || frac >= client.ColdResidency {
		testenv.SkipOrFail(t, fmt.Sprintf("the page cache kept %s after POSIX_FADV_DONTNEED (residency %.2f)", path, frac))
	}
}

// TestUploadRealCheckpoints uploads every real checkpoint of the shared
// test data that the client opens (safetensors, PyTorch zip and legacy,
// strided tensors, GGUF quantized blocks, NumPy), as stored and as F16,
// by O_DIRECT and the page cache, and compares every byte.
func TestUploadRealCheckpoints(t *testing.T) {
	dir := testenv.Dir(t)
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, "negative") || strings.HasSuffix(p, ".tsv") || strings.HasSuffix(p, ".f32ref") {
			return nil
		}
		files = append(files, p)
		return nil
	})
	sort.Strings(files)
	rt, logPath := fakeRuntime(t)
	uploaded := 0
	for i, p := range files {
		ck, err := client.Open(p)
		if err != nil {
			continue // refused files are tested elsewhere
		}
		opts := UploadOptions{Workers: 2, Buffers: 2, Streams: 2, ChunkSize: 8 << 10, Read: client.ReadDirect}
		if i%2 == 1 {
			opts.DType, opts.Read = dtype.F16, client.ReadCached
		}
		u, err := UploadCheckpoint(context.Background(), rt, ck, opts)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		compareDevice(t, rt, ck, u, opts.DType)
		if err := u.Free(); err != nil {
			t.Fatal(err)
		}
		ck.Close()
		uploaded++
	}
	if uploaded < 50 {
		t.Fatalf("only %d of %d shared files uploaded", uploaded, len(files))
	}
	checkNothingLeft(t, logPath)
}

// TestUploadErrors: no such device and a checkpoint that does not fit
// fail before anything is allocated; a cancelled upload frees
// everything; Verify names a tensor whose device bytes differ.
func TestUploadErrors(t *testing.T) {
	path := writeMixed(t, t.TempDir(), mixedSpecs)
	ck, err := client.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()

	t.Run("no device", func(t *testing.T) {
		rt, logPath := fakeRuntime(t)
		_, err := UploadCheckpoint(context.Background(), rt, ck, UploadOptions{Device: 1})
		if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "device 1 (the machine has 1 CUDA device)") {
			t.Fatalf("got %v", err)
		}
		for _, c := range readCalls(t, logPath) {
			if c.fn == "cudaMalloc" || c.fn == "cudaHostAlloc" {
				t.Fatalf("%s before the device was checked", c.line)
			}
		}
	})
	t.Run("device full", func(t *testing.T) {
		t.Setenv("FAKE_CUDART_MEM", "100000")
		rt, logPath := fakeRuntime(t)
		_, err := UploadCheckpoint(context.Background(), rt, ck, UploadOptions{})
		if !errors.Is(err, ErrDeviceFull) || !strings.Contains(err.Error(), "which has 97.66 KiB free") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("got %v", err)
		}
		for _, c := range readCalls(t, logPath) {
			if c.fn == "cudaMalloc" || c.fn == "cudaHostAlloc" {
				t.Fatalf("%s for a checkpoint that does not fit", c.line)
			}
		}
	})
	for _, register := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancelled register=%v", register), func(t *testing.T) {
			rt, logPath := fakeRuntime(t)
			mck, err := client.OpenWith(path, client.Options{Backing: &backing.Options{Mode: backing.Mmap}})
			if err != nil {
				t.Fatal(err)
			}
			defer mck.Close()
			ctx, cancel := context.WithCancel(context.Background())
			_, err = UploadCheckpoint(ctx, rt, mck, UploadOptions{
				Workers: 2, Buffers: 2, Streams: 2, ChunkSize: 4096, Register: register, DType: dtype.F16,
				Progress: func(int64) { cancel() },
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			checkNothingLeft(t, logPath)
		})
	}
	t.Run("verify mismatch", func(t *testing.T) {
		rt, _ := fakeRuntime(t)
		u, err := UploadCheckpoint(context.Background(), rt, ck, UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer u.Free()
		var victim Tensor
		for _, tt := range u.Tensors {
			if tt.Name == "g.big" {
				victim = tt
			}
		}
		if err := rt.CopyToDevice(victim.Ptr+DevicePtr(victim.Size-1), []byte{0x5a}); err != nil {
			t.Fatal(err)
		}
		_, err = u.Verify(context.Background(), ck, 3, 4096)
		if err == nil || !strings.Contains(err.Error(), `tensor "g.big": sha256 on cuda:0 is `) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestUploadDefaults: the defaults come from the CPUs and stay within
// their bounds.
func TestUploadDefaults(t *testing.T) {
	o := UploadOptions{}.Defaults()
	if o.Workers < 2 || o.Workers > 32 || o.Streams < 2 || o.Streams > 8 || o.Buffers < o.Workers || o.ChunkSize != DefaultUploadChunk {
		t.Fatalf("defaults %+v", o)
	}
	if o := (UploadOptions{ChunkSize: 10000}).Defaults(); o.ChunkSize != 8192 {
		t.Fatalf("chunk 10000 became %d, want it rounded down to 4 KiB", o.ChunkSize)
	}
	if o := (UploadOptions{ChunkSize: 512 << 20, Workers: 16}).Defaults(); int64(o.Buffers)*int64(o.ChunkSize) > 1<<30 {
		t.Fatalf("%d buffers of %d bytes: more than 1 GiB pinned", o.Buffers, o.ChunkSize)
	}
}
