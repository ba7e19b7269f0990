package cuda

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
)

// ErrNoDevice is wrapped by the error of an upload to a device ordinal
// the machine does not have.
var ErrNoDevice = errors.New("no such CUDA device")

// ErrDeviceFull is wrapped by the error of an upload that does not fit in
// the device's free memory; it is returned before anything is copied.
var ErrDeviceFull = errors.New("not enough free device memory")

// DeviceAlign is the alignment of every tensor's offset in an Upload's
// allocation (cudaMalloc's own alignment, and what CUDA IPC consumers and
// vectorised kernels expect).
const DeviceAlign = 256

// DefaultUploadChunk is the default size of a pinned staging buffer.
const DefaultUploadChunk = 8 << 20

// UploadOptions configure Upload. A zero field is chosen from the machine
// (see Defaults).
type UploadOptions struct {
	Device    int
	DType     dtype.DType                  // convert as client.StreamOptions.DType does
	Filter    func(client.TensorInfo) bool // when set, selects the tensors
	Workers   int                          // goroutines filling the pinned buffers
	Buffers   int                          // pinned staging buffers
	Streams   int                          // CUDA streams the copies are spread over (at most 64)
	ChunkSize int                          // bytes per staging buffer (rounded down to 4 KiB)
	Read      client.ReadPath              // page cache or O_DIRECT, per file (default: by residency)
	// Cacheable allocates ordinary (cacheable) pinned staging buffers.
	// By default they are write-combined (cudaHostAllocWriteCombined):
	// the host only writes them and the device only reads them, which on
	// the H200 machine measured faster (docs/BENCHMARKS.md).
	Cacheable bool
	// Register copies the native bytes of tensors in mapped files
	// (client.Checkpoint.Mapping) straight from the mapping, registered
	// with cudaHostRegister for the upload, instead of staging them.
	Register bool
	Progress func(n int64) // called with the bytes of every chunk queued
	// Split, when set, gives each tensor the part of it this device
	// receives (tensor parallelism: numpy.array_split bounds), or nil for
	// a replicated tensor: the device holds the parts only.
	Split func(client.TensorInfo) *client.Split

	// noReclaim skips the wait for a buffer's copies before it is
	// refilled: the bug the tests prove the stand-in catches.
	noReclaim bool
}

// Defaults returns o with every zero field chosen from the machine's CPUs:
// a worker per CPU (2 to 32), half as many streams (2 to 8), one pinned
// buffer per worker (at least 4) and 8 MiB chunks, with at most 1 GiB of
// pinned memory in all. Pinning is slow (about 2 GB/s on the H200
// machine) and is paid on every upload, so the staging is kept small:
// 128 MiB on 16 CPUs, which measured the fastest both in the copy and
// over the whole call (docs/BENCHMARKS.md).
func (o UploadOptions) Defaults() UploadOptions {
	if o.Workers <= 0 {
		o.Workers = min(max(runtime.GOMAXPROCS(0), 2), 32)
	}
	if o.Streams <= 0 {
		o.Streams = min(max(o.Workers/2, 2), 8)
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultUploadChunk
	}
	if o.ChunkSize >= 4096 {
		o.ChunkSize &^= 4095
	}
	if o.Buffers <= 0 {
		o.Buffers = max(o.Workers, o.Streams, 4)
		if limit := (1 << 30) / o.ChunkSize; o.Buffers > limit {
			o.Buffers = max(limit, 2)
		}
	}
	return o
}

// Tensor is one tensor uploaded to device memory.
type Tensor struct {
	Name  string
	DType dtype.DType // dtype of the bytes on the device
	Shape []int64
	Ptr   DevicePtr // 0 for an empty tensor
	Size  int64     // bytes at Ptr

	// Offset is the tensor's offset in its Upload's allocation (a
	// multiple of DeviceAlign).
	Offset int64
	// Split is the part of the tensor on the device (Shape is the
	// part's), nil when it is whole.
	Split *client.Split
}

// Upload is a checkpoint in device memory: every tensor at a 256-byte
// aligned offset of one allocation, so that a consumer (or a CUDA IPC
// handle) needs one pointer for the whole checkpoint.
type Upload struct {
	rt  *Runtime
	dev int

	Device  int
	Base    DevicePtr // the allocation; 0 when every tensor is empty
	Bytes   int64     // its size
	Tensors []Tensor  // in index order; Ptr = Base + Offset
	Stats   UploadStats

	mu           sync.Mutex
	freed        bool       // GUARDED_BY(mu)
	teardown     chan error // GUARDED_BY(mu): the background teardown's result; nil once read
	teardownTime time.Duration
}

// UploadStats says what an Upload did.
type UploadStats struct {
	Bytes       int64         // tensor bytes copied to the device
	Elapsed     time.Duration // from the first read to the last copy completed
	Setup       time.Duration // checks, device allocation, staging buffers (before Elapsed)
	Fill        client.FillStats
	Workers     int
	Buffers     int
	Streams     int
	ChunkSize   int
	PinnedBytes int64 // staging memory held during the upload
	Copies      int64 // cudaMemcpyAsync calls
	Waits       int64 // buffer refills that waited for a copy

	WriteCombined   bool          // staging buffers were write-combined
	RegisteredBytes int64         // bytes copied straight from registered mappings
	Register        time.Duration // spent registering them (within Elapsed)
}

// GBps is the upload's rate in 10^9 bytes a second.
func (s UploadStats) GBps() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.Elapsed.Seconds() / 1e9
}

// UploadCheckpoint copies the tensors of ck (selected and converted per
// opts) into one allocation on device opts.Device. It checks the device
// and its free memory first, then fills pinned staging buffers from
// opts.Workers goroutines (client.Checkpoint.Fill: chunks of a tensor in
// parallel, small tensors read together by file range, cold files with
// O_DIRECT) and queues each buffer's copies on one of opts.Streams
// streams. With opts.Register, tensors in a mapped file (ck opened with
// backing.Mmap) are copied straight from the registered mapping instead.
//
// It returns once every byte is on the device. The host memory it holds
// is the staging buffers, whatever the checkpoint's size; they are freed
// (and mappings unregistered) in the background after it returns, and
// Free waits for that. On an error or a cancelled ctx everything is
// freed before it returns.
func UploadCheckpoint(ctx context.Context, rt *Runtime, ck *client.Checkpoint, opts UploadOptions) (*Upload, error) {
	t0 := time.Now()
	opts = opts.Defaults()
	if opts.Streams > 64 {
		return nil, fmt.Errorf("cuda: %d streams (at most 64)", opts.Streams)
	}
	if err := checkDevice(rt, opts.Device); err != nil {
		return nil, err
	}
	fopts := client.FillOptions{DType: opts.DType, Filter: opts.Filter, Workers: opts.Workers, Read: opts.Read, Progress: opts.Progress, Split: opts.Split}
	plan, err := ck.PlanFill(fopts)
	if err != nil {
		return nil, err
	}
	u := &Upload{rt: rt, dev: opts.Device, Device: opts.Device}
	offsets, total := deviceLayout(plan)
	if free, all, ok, err := rt.MemInfo(opts.Device); err != nil {
		return nil, err
	} else if ok && total > free {
		return nil, fmt.Errorf("%s: %w: it needs %s on cuda:%d, which has %s free of %s", ck.Path(), ErrDeviceFull, bytesize.FormatFixed(total), opts.Device, bytesize.FormatFixed(free), bytesize.FormatFixed(all))
	}

	if opts.Register && !rt.CanRegister() {
		return nil, fmt.Errorf("cuda: registering mappings: %s has no cudaHostRegister", rt.Path())
	}
	regs, direct, staged := splitRegistered(ck, plan, opts.Register)

	// The device allocation, and the staging buffers, at once.
	var (
		st      *staging
		stErr   error
		stReady = make(chan struct{})
	)
	go func() {
		defer close(stReady)
		if len(staged) > 0 {
			st, stErr = newStaging(rt, opts, u, staged)
		}
	}()
	base, err := rt.Malloc(opts.Device, total)
	<-stReady
	cleanup := func() {
		if st != nil {
			st.free()
		}
		unregister(rt, regs)
		u.Free()
	}
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("%s: %s of device memory on cuda:%d: %w", ck.Path(), bytesize.FormatFixed(total), opts.Device, err)
	}
	u.Base, u.Bytes = base, total
	u.setTensors(plan, offsets)
	if stErr != nil {
		cleanup()
		return nil, stErr
	}
	setup := time.Since(t0)

	start := time.Now()
	var fs client.FillStats
	var regBytes int64
	var regTime time.Duration
	if len(direct) > 0 {
		regBytes, regTime, err = copyRegistered(ctx, rt, ck, opts, u, plan, direct, regs)
	}
	if err == nil && len(staged) > 0 {
		sub := make([]client.FillTensor, len(staged))
		for i, k := range staged {
			sub[i] = plan[k]
		}
		fs, err = ck.Fill(ctx, sub, st, fopts)
	}
	// Wait for every copy queued, also after an error: the staging
	// buffers and registrations go next.
	if serr := rt.Synchronize(opts.Device); err == nil && serr != nil {
		err = serr
	}
	elapsed := time.Since(start)
	u.Stats = UploadStats{
		Bytes: fs.Bytes + regBytes, Elapsed: elapsed, Setup: setup, Fill: fs,
		Workers: opts.Workers, Buffers: opts.Buffers, Streams: opts.Streams, ChunkSize: opts.ChunkSize,
		RegisteredBytes: regBytes, Register: regTime, WriteCombined: !opts.Cacheable,
	}
	if st != nil {
		u.Stats.PinnedBytes = int64(opts.Buffers) * int64(opts.ChunkSize)
		u.Stats.Copies, u.Stats.Waits = st.copies.Load(), st.waits.Load()
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	// Everything is on the device: the rest is the host's housekeeping.
	u.teardown = make(chan error, 1)
	go u.tearDown(st, regs)
	return u, nil
}

// deviceLayout places the plan's tensors in one allocation, each at a
// multiple of DeviceAlign: their offsets and the allocation's size.
func deviceLayout(plan []client.FillTensor) (offsets []int64, total int64) {
	offsets = make([]int64, len(plan))
	for k, ft := range plan {
		offsets[k] = total
		total += (ft.Size + DeviceAlign - 1) &^ (DeviceAlign - 1)
	}
	if total == 0 {
		// Always one allocation (and one IPC handle), even for a
		// checkpoint of empty tensors.
		total = DeviceAlign
	}
	return offsets, total
}

// splitRegistered says which tensors of plan are copied from a
// registered mapping (direct, with the mappings to register), and which
// through the staging buffers (staged): indices in plan.
func splitRegistered(ck *client.Checkpoint, plan []client.FillTensor, register bool) (regs []registration, direct, staged []int) {
	if register {
		byFile := map[*byte]int{}
		for k, ft := range plan {
			file, _, ok := mappingOf(ck, ft)
			if !ok || ft.Size == 0 {
				staged = append(staged, k)
				continue
			}
			if _, seen := byFile[unsafe.SliceData(file)]; !seen {
				byFile[unsafe.SliceData(file)] = len(regs)
				regs = append(regs, registration{mem: file})
			}
			direct = append(direct, k)
		}
	} else {
		for k := range plan {
			staged = append(staged, k)
		}
	}
	return regs, direct, staged
}

// setTensors lists the plan's tensors in u, each at its offset of the
// allocation at u.Base.
func (u *Upload) setTensors(plan []client.FillTensor, offsets []int64) {
	base := u.Base
	for k, ft := range plan {
		t := Tensor{Name: ft.Info.Name, DType: ft.DType, Shape: ft.Info.Shape, Size: ft.Size, Offset: offsets[k], Split: ft.Split}
		if ft.Split != nil {
			t.Shape = ft.Split.SliceShape(ft.Info.Shape)
		}
		if ft.Size > 0 {
			t.Ptr = base + DevicePtr(offsets[k])
		}
		u.Tensors = append(u.Tensors, t)
	}
}

// tearDown frees the staging buffers and unregisters the mappings, in
// the background once everything is on the device; Free waits for it.
func (u *Upload) tearDown(st *staging, regs []registration) {
	rt := u.rt
	t := time.Now()
	var err error
	if st != nil {
		err = st.free()
	}
	if e := unregister(rt, regs); err == nil {
		err = e
	}
	u.teardownTime = time.Since(t)
	u.teardown <- err
}

// registration is a mapping registered with cudaHostRegister.
type registration struct {
	mem  []byte
	done bool // registered
}

// mappingOf returns the file mapping holding ft's delivered bytes, when
// they are its native bytes in a mapped file.
func mappingOf(ck *client.Checkpoint, ft client.FillTensor) ([]byte, int64, bool) {
	if ft.DType != ft.Info.DType || ft.Split != nil {
		return nil, 0, false
	}
	return ck.Mapping(ft.Info)
}

// copyRegistered registers each mapping (read-only) and queues the copies
// of the direct tensors from it, in chunks spread over the streams. The
// registrations are undone by unregister.
func copyRegistered(ctx context.Context, rt *Runtime, ck *client.Checkpoint, opts UploadOptions, u *Upload, plan []client.FillTensor, direct []int, regs []registration) (int64, time.Duration, error) {
	t := time.Now()
	for i := range regs {
		if err := rt.HostRegister(opts.Device, regs[i].mem); err != nil {
			return 0, time.Since(t), fmt.Errorf("%s: registering its mapping for DMA: %w", ck.Path(), err)
		}
		regs[i].done = true
	}
	regTime := time.Since(t)
	var streams []stream
	var events []event
	defer func() {
		for _, s := range streams {
			rt.syncStream(s)
			rt.destroyStream(s)
		}
		for _, e := range events {
			rt.destroyEvent(e)
		}
	}()
	for range opts.Streams {
		s, err := rt.newStream(opts.Device)
		if err != nil {
			return 0, regTime, err
		}
		streams = append(streams, s)
		e, err := rt.newEvent(opts.Device)
		if err != nil {
			return 0, regTime, err
		}
		events = append(events, e)
	}
	piece := int64(max(opts.ChunkSize, 64<<20))
	var n int64
	q := 0
	for _, k := range direct {
		if err := context.Cause(ctx); err != nil {
			return n, regTime, err
		}
		file, off, _ := mappingOf(ck, plan[k])
		tt := &u.Tensors[k]
		for o := int64(0); o < tt.Size; o += piece {
			m := min(piece, tt.Size-o)
			s := q % len(streams)
			q++
			if err := rt.copyMany([]DevicePtr{tt.Ptr + DevicePtr(o)}, [][]byte{file[off+o : off+o+m]}, streams[s], events[s]); err != nil {
				return n, regTime, &client.TensorError{Source: ck.Path(), Name: tt.Name, Op: "copy from the registered mapping", Off: o, Err: err}
			}
			n += m
			if opts.Progress != nil {
				opts.Progress(m)
			}
		}
	}
	return n, regTime, nil
}

// unregister undoes the registrations made.
func unregister(rt *Runtime, regs []registration) error {
	var first error
	for i := range regs {
		if regs[i].done {
			if err := rt.HostUnregister(regs[i].mem); err != nil && first == nil {
				first = err
			}
			regs[i].done = false
		}
	}
	return first
}

// checkDevice fails unless dev is a device of the machine.
func checkDevice(rt *Runtime, dev int) error {
	n, err := rt.DeviceCount()
	if err != nil {
		return fmt.Errorf("cuda: no usable CUDA device: %w", err)
	}
	if dev < 0 || dev >= n {
		return fmt.Errorf("cuda: %w: device %d (the machine has %s)", ErrNoDevice, dev, plural(n, "CUDA device"))
	}
	return nil
}

// Free frees the device memory. Calling it again does nothing.
func (u *Upload) Free() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.freed {
		return nil
	}
	u.freed = true
	var err error
	if u.teardown != nil {
		err = <-u.teardown
	}
	if e := u.rt.Free(u.Base); e != nil && err == nil {
		err = e
	}
	return err
}

// Teardown waits until the staging buffers are freed and the mappings
// unregistered (which UploadCheckpoint leaves to the background once the
// bytes are on the device), and says how long that took.
func (u *Upload) Teardown() (time.Duration, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.teardown == nil {
		return u.teardownTime, nil
	}
	err := <-u.teardown
	u.teardown = nil
	return u.teardownTime, err
}

// VerifyStats says what Verify compared.
type VerifyStats struct {
	Tensors int
	Bytes   int64
	Elapsed time.Duration
}

// Verify copies every tensor back from the device and compares its
// sha256 with that of the bytes ck delivers on the host (read again,
// converted as uploaded), from workers goroutines (0: one per CPU). A
// mismatch is an error naming the tensor and both digests.
func (u *Upload) Verify(ctx context.Context, ck *client.Checkpoint, workers, chunk int) (VerifyStats, error) {
	if workers <= 0 {
		workers = min(max(runtime.GOMAXPROCS(0), 2), 32)
	}
	if chunk <= 0 {
		chunk = 16 << 20
	}
	workers = min(workers, max(len(u.Tensors), 1))
	start := time.Now()
	var (
		next     atomic.Int64
		bytes    atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancel(err)
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pinned, err := u.rt.HostAlloc(u.dev, chunk)
			if err != nil {
				fail(err)
				return
			}
			defer u.rt.FreeHost(pinned)
			host := make([]byte, chunk)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(u.Tensors)) {
					return
				}
				if err := context.Cause(ctx); err != nil {
					fail(err)
					return
				}
				if err := u.verifyOne(ck, &u.Tensors[i], pinned, host); err != nil {
					fail(err)
					return
				}
				bytes.Add(u.Tensors[i].Size)
			}
		}()
	}
	wg.Wait()
	return VerifyStats{Tensors: len(u.Tensors), Bytes: bytes.Load(), Elapsed: time.Since(start)}, firstErr
}

func (u *Upload) verifyOne(ck *client.Checkpoint, t *Tensor, pinned, host []byte) error {
	var r *client.TensorReader
	var err error
	if t.Split != nil {
		r, err = ck.OpenSlice(t.Name, t.DType, *t.Split)
	} else {
		r, err = ck.OpenTensor(t.Name, t.DType)
	}
	if err != nil {
		return err
	}
	defer r.Close()
	if r.Size() != t.Size {
		return fmt.Errorf("%s: tensor %q: %d bytes on the host, %d on cuda:%d", ck.Path(), t.Name, r.Size(), t.Size, u.dev)
	}
	hd, hh := sha256.New(), sha256.New()
	for off := int64(0); off < t.Size; {
		n := min(int64(len(pinned)), t.Size-off)
		if err := u.rt.CopyToHost(pinned[:n], t.Ptr+DevicePtr(off)); err != nil {
			return fmt.Errorf("%s: tensor %q: copying it back from cuda:%d: %w", ck.Path(), t.Name, u.dev, err)
		}
		if _, err := r.ReadAt(host[:n], off); err != nil {
			return err
		}
		hd.Write(pinned[:n])
		hh.Write(host[:n])
		off += n
	}
	var d, h [32]byte
	hd.Sum(d[:0])
	hh.Sum(h[:0])
	if d != h {
		return fmt.Errorf("%s: tensor %q: sha256 on cuda:%d is %x, the host's is %x", ck.Path(), t.Name, u.dev, d, h)
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
