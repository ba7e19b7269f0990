// Command cudacheck proves the tensorfs GPU upload path on a real CUDA
// machine and measures it. It takes a checkpoint (or generates one),
// uploads every tensor with cuda.UploadCheckpoint, copies each
// tensor back from the device and compares its sha256 with the host's,
// and prints the upload throughput next to a plain pinned cudaMemcpy of
// the same bytes.
//
// Build and run (needs cgo; CUDA only at run time, found by dlopen):
//
//	CGO_ENABLED=1 go build -o cudacheck ./client/cuda/cudacheck
//	./cudacheck -size 4GiB             # generate a 4 GiB checkpoint
//	./cudacheck -ckpt model.safetensors -dtype f16
//
// Without a CUDA runtime it prints one line and exits 1. The exit status
// is 0 only when every tensor on the device matched.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/client/cuda"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

func main() {
	var (
		ckpt     = flag.String("ckpt", "", "checkpoint to upload (default: generate one of -size bytes)")
		sizeFlag = flag.String("size", "1GiB", "size of the generated checkpoint")
		dir      = flag.String("dir", os.TempDir(), "where to generate the checkpoint")
		dtFlag   = flag.String("dtype", "", "convert tensors to this dtype (f32, f16, bf16, f64) while uploading")
		parallel = flag.Int("parallel", 0, "tensors in flight in the host pass, and goroutines filling the pinned buffers in the upload (default 4, or the number of CPUs when fewer)")
		chunk    = flag.String("chunk", "8MiB", "pinned staging buffer size")
		buffers  = flag.Int("buffers", 8, "pinned staging buffers")
		streams  = flag.Int("streams", 2, "CUDA streams")
		device   = flag.Int("device", 0, "CUDA device")
		repeat   = flag.Int("repeat", 3, "upload runs (the best is reported)")
	)
	flag.Parse()
	if err := run(*ckpt, *sizeFlag, *dir, *dtFlag, *parallel, *chunk, *buffers, *streams, *device, *repeat); err != nil {
		fmt.Fprintln(os.Stderr, "tensorfs: "+strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}

func run(ckpt, sizeFlag, dir, dtFlag string, parallel int, chunkFlag string, buffers, streams, device, repeat int) error {
	rt, err := openDevice(device)
	if err != nil {
		return err
	}
	defer rt.Close()

	chunk, err := parseSize(chunkFlag)
	if err != nil {
		return err
	}
	var to dtype.DType
	if dtFlag != "" {
		if to, err = dtype.ParseView(dtFlag); err != nil {
			return err
		}
	}
	if ckpt == "" {
		tmp, path, err := generateIn(dir, sizeFlag)
		if tmp != "" {
			defer os.RemoveAll(tmp)
		}
		if err != nil {
			return err
		}
		ckpt = path
	}
	ck, err := client.Open(ckpt)
	if err != nil {
		return err
	}
	defer ck.Close()

	// Host side: the expected sha256 of every tensor as delivered; this
	// also brings the checkpoint into the page cache, so the upload below
	// measures memory to GPU, not the disk.
	if parallel <= 0 {
		parallel = min(client.DefaultParallel, runtime.GOMAXPROCS(0))
	}
	opts := client.StreamOptions{Parallel: parallel, ChunkSize: int(chunk), DType: to}
	want := newHashSink()
	t0 := time.Now()
	if err := ck.Stream(context.Background(), want, opts); err != nil {
		return err
	}
	total := want.total()
	fmt.Printf("cudacheck: checkpoint %s: %d tensors, %s delivered (%s), host pass %.2f GB/s\n",
		ckpt, len(want.sums), gb(total), dtName(to), rate(total, time.Since(t0)))

	best, verified, err := uploads(rt, ck, cuda.UploadOptions{
		Device: device, DType: to, Workers: parallel, Buffers: buffers, Streams: streams, ChunkSize: int(chunk),
	}, repeat, want.sums)
	if err != nil {
		return err
	}
	fmt.Printf("cudacheck: verified %d tensors: the sha256 of every tensor copied back from the device equals the host's\n", verified)

	pinned, naive, err := baselines(rt, ck, device, total, int(chunk))
	if err != nil {
		return err
	}
	up := rate(total, best)
	fmt.Printf("cudacheck: upload (client.Fill -> cuda.UploadCheckpoint, %d workers, %d pinned x %s, %d streams): %.2f GB/s (best of %d)\n",
		parallel, buffers, chunkFlag, streams, up, repeat)
	fmt.Printf("cudacheck: plain pinned cudaMemcpy of the same %s (one pinned buffer, one call): %.2f GB/s\n", gb(total), pinned)
	fmt.Printf("cudacheck: naive loader (pread into one pinned %s buffer, synchronous cudaMemcpy per chunk): %.2f GB/s\n", chunkFlag, naive)
	fmt.Printf("cudacheck: upload / plain pinned cudaMemcpy = %.2f\n", up/pinned)
	return nil
}

// openDevice opens the CUDA runtime, checks that it has device, and
// says what it found.
func openDevice(device int) (*cuda.Runtime, error) {
	rt, err := cuda.Open()
	if err != nil {
		return nil, err
	}
	n, err := rt.DeviceCount()
	if err != nil {
		rt.Close()
		return nil, err
	}
	if n == 0 || device >= n {
		rt.Close()
		return nil, fmt.Errorf("cudacheck: device %d requested, %d CUDA device(s) present", device, n)
	}
	rv, dv, _ := rt.Versions()
	fmt.Printf("cudacheck: runtime %s (runtime %d, driver %d), %d device(s), using device %d\n", rt.Path(), rv, dv, n, device)
	return rt, nil
}

// generateIn generates a checkpoint of sizeFlag bytes in a new
// temporary directory under dir; the caller removes tmp when it is not
// "", on an error too.
func generateIn(dir, sizeFlag string) (tmp, path string, err error) {
	size, err := parseSize(sizeFlag)
	if err != nil {
		return "", "", err
	}
	tmp, err = os.MkdirTemp(dir, "cudacheck")
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(tmp, "model.safetensors")
	return tmp, path, generate(path, size)
}

// uploads uploads ck repeat times with opts, saying how fast each run
// was, and verifies the last run's tensors against want (the host's
// sha256 of each); it returns the fastest run's time and how many
// tensors it verified.
func uploads(rt *cuda.Runtime, ck *client.Checkpoint, opts cuda.UploadOptions, repeat int, want map[string]string) (time.Duration, int, error) {
	best := time.Duration(1<<63 - 1)
	var verified int
	for r := 0; r < repeat; r++ {
		u, err := cuda.UploadCheckpoint(context.Background(), rt, ck, opts)
		if err != nil {
			return 0, 0, err
		}
		st := u.Stats
		d := st.Elapsed
		best = min(best, d)
		fmt.Printf("cudacheck: upload run %d: %s in %.3f s = %.2f GB/s (%d async copies, %d reclaim waits)\n",
			r+1, gb(st.Bytes), d.Seconds(), rate(st.Bytes, d), st.Copies, st.Waits)
		if r == repeat-1 {
			got := make(map[string]cuda.Tensor, len(u.Tensors))
			for _, t := range u.Tensors {
				got[t.Name] = t
			}
			verified, err = verify(rt, got, want, opts.ChunkSize)
			if err != nil {
				u.Free()
				return 0, 0, err
			}
		}
		if err := u.Free(); err != nil {
			return 0, 0, err
		}
	}
	return best, verified, nil
}

// verify copies every uploaded tensor back in chunks and compares its
// sha256 with the host's.
func verify(rt *cuda.Runtime, got map[string]cuda.Tensor, want map[string]string, chunk int) (int, error) {
	if len(got) != len(want) {
		return 0, fmt.Errorf("cudacheck: %d tensors on the device, %d expected", len(got), len(want))
	}
	buf := make([]byte, chunk)
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t := got[name]
		h := sha256.New()
		for off := int64(0); off < t.Size; off += int64(chunk) {
			n := min(int64(chunk), t.Size-off)
			if err := rt.CopyToHost(buf[:n], t.Ptr+cuda.DevicePtr(off)); err != nil {
				return 0, fmt.Errorf("cudacheck: tensor %q: %w", name, err)
			}
			h.Write(buf[:n])
		}
		if s := fmt.Sprintf("%x", h.Sum(nil)); s != want[name] {
			return 0, fmt.Errorf("cudacheck: tensor %q: device bytes differ from the host's (sha256 %s, want %s)", name, s, want[name])
		}
	}
	return len(names), nil
}

// baselines measures the same byte count copied (a) from one pinned
// buffer holding all of it with one cudaMemcpy, the ceiling for host to
// device, and (b) by a naive loader: read a chunk into one pinned buffer,
// cudaMemcpy it, repeat.
func baselines(rt *cuda.Runtime, ck *client.Checkpoint, device int, total int64, chunk int) (pinned, naive float64, err error) {
	dev, err := rt.Malloc(device, total)
	if err != nil {
		return 0, 0, err
	}
	defer rt.Free(dev)

	// (b) naive loader over the native bytes, tensor by tensor.
	stage, err := rt.HostAlloc(device, chunk)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	var off int64
	for _, t := range ck.Tensors() {
		r, err := ck.OpenTensor(t.Name, client.AsStored)
		if err != nil {
			rt.FreeHost(stage)
			return 0, 0, err
		}
		for o := int64(0); o < r.Size() && off < total; o += int64(chunk) {
			n := min(int64(chunk), r.Size()-o, total-off)
			if _, err := r.ReadAt(stage[:n], o); err != nil {
				r.Close()
				rt.FreeHost(stage)
				return 0, 0, err
			}
			if err := rt.CopyToDevice(dev+cuda.DevicePtr(off), stage[:n]); err != nil {
				r.Close()
				rt.FreeHost(stage)
				return 0, 0, err
			}
			off += n
		}
		r.Close()
	}
	naive = rate(off, time.Since(t0))
	rt.FreeHost(stage)

	// (a) one pinned buffer of all the bytes, one cudaMemcpy, best of 3.
	all, err := rt.HostAlloc(device, int(total))
	if err != nil {
		return 0, 0, err
	}
	defer rt.FreeHost(all)
	for i := range all {
		all[i] = byte(i)
	}
	best := time.Duration(1<<63 - 1)
	for range 3 {
		t0 := time.Now()
		if err := rt.CopyToDevice(dev, all); err != nil {
			return 0, 0, err
		}
		best = min(best, time.Since(t0))
	}
	return rate(total, best), naive, nil
}

// generate writes a safetensors checkpoint of about size bytes: F16
// tensors of up to 64 MiB of pseudo-random bytes (a random 1 MiB block
// repeated, each MiB stamped with its index so no two are equal).
func generate(path string, size int64) error {
	const tensorMax = 64 << 20
	const block = 1 << 20
	const finite = 0xBFFF_BFFF_BFFF_BFFF // F16 exponents below 0x1F: no Inf or NaN
	r := rand.New(rand.NewPCG(42, 7))
	rnd := make([]byte, block)
	for i := 0; i+8 <= block; i += 8 {
		binary.LittleEndian.PutUint64(rnd[i:], r.Uint64()&finite)
	}
	var hts []view.HeaderTensor
	var sizes []int64
	for off := int64(0); off < size; off += tensorMax {
		n := min(tensorMax, size-off) &^ 1
		name := fmt.Sprintf("layers.%04d.weight", len(sizes))
		hts = append(hts, view.HeaderTensor{Name: name, DType: dtype.F16, Shape: []int64{n / 2}, Size: n})
		sizes = append(sizes, n)
		if n == 0 {
			break
		}
	}
	h, err := view.SafetensorsHeader(nil, hts)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(h); err != nil {
		f.Close()
		return err
	}
	var stamp uint64
	for _, n := range sizes {
		for o := int64(0); o < n; o += block {
			m := min(block, n-o)
			binary.LittleEndian.PutUint64(rnd, stamp*0x9E3779B97F4A7C15&finite)
			stamp++
			if _, err := f.Write(rnd[:m]); err != nil {
				f.Close()
				return err
			}
		}
	}
	return f.Close()
}

// hashSink computes the sha256 of every tensor on the host.
type hashSink struct {
	mu    sync.Mutex
	sums  map[string]string
	bytes int64
}

type tensorHash struct {
	s    *hashSink
	name string
	n    int64
	h    hash.Hash
}

func newHashSink() *hashSink { return &hashSink{sums: map[string]string{}} }

func (s *hashSink) total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

func (s *hashSink) Begin(t client.TensorInfo, dt dtype.DType, size int64) (client.TensorSink, error) {
	return &tensorHash{s: s, name: t.Name, h: sha256.New()}, nil
}

func (t *tensorHash) Write(p []byte, off int64) error {
	t.h.Write(p)
	t.n += int64(len(p))
	return nil
}

func (t *tensorHash) End(err error) error {
	if err != nil {
		return nil
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.sums[t.name] = fmt.Sprintf("%x", t.h.Sum(nil))
	t.s.bytes += t.n
	return nil
}

// parseSize parses a size flag (bytesize.Parse), failing in cudacheck's
// words.
func parseSize(s string) (int64, error) {
	n, err := bytesize.Parse(s)
	if err != nil {
		return 0, errors.New("cudacheck: bad size " + strconv.Quote(s))
	}
	return n, nil
}

func gb(n int64) string { return fmt.Sprintf("%.2f GB", float64(n)/1e9) }

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e9
}

func dtName(d dtype.DType) string {
	if d == dtype.Invalid {
		return "as stored"
	}
	return "as " + d.String()
}
