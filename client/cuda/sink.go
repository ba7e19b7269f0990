package cuda

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
)

// Options configure NewSink. The zero value is usable.
type Options struct {
	Device        int // CUDA device ordinal
	Streams       int // CUDA streams the copies are spread over (default 2, at most 64)
	PinnedBuffers int // pinned host staging buffers (default 4)
	ChunkSize     int // bytes per staging buffer (default client.DefaultChunkSize)
}

func (o Options) withDefaults() Options {
	if o.Streams <= 0 {
		o.Streams = 2
	}
	if o.PinnedBuffers <= 0 {
		o.PinnedBuffers = 4
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = client.DefaultChunkSize
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
	// multiple of DeviceAlign); 0 for a tensor from a Sink, which has an
	// allocation of its own.
	Offset int64
	// Split is the part of the tensor on the device (Shape is the
	// part's), nil when it is whole.
	Split *client.Split
}

// Stats counts what a Sink did.
type Stats struct {
	Tensors     int64 // tensors uploaded (detached or not)
	Bytes       int64 // bytes copied to the device
	AsyncCopies int64 // cudaMemcpyAsync from a pinned staging buffer
	SyncCopies  int64 // cudaMemcpy of a chunk that was not a staging buffer
	Waits       int64 // Reclaim calls that had to wait for a copy
}

// Sink uploads the tensors of a client.Stream to device memory. It is a
// client.Sink and a client.BufferProvider: the stream reads straight into
// the sink's pinned buffers, each chunk is queued with cudaMemcpyAsync on
// one of the sink's streams and an event is recorded after it, and a
// buffer is handed back for refilling only once its event has completed
// (Reclaim), so reading the next chunks overlaps the copies.
//
// Every tensor gets its own cudaMalloc allocation. End waits for the
// tensor's copies; a tensor that fails is freed. Tensors returns what was
// uploaded; Free releases all device and pinned memory the sink holds.
type Sink struct {
	// Dependencies and constants after NewSink.
	rt      *Runtime
	opts    Options
	bufs    [][]byte
	bufAt   map[*byte]int // first byte of bufs[i] -> i
	streams []stream
	events  []event // events[i] follows the last copy queued from bufs[i]

	// pending[i] is true while a copy from bufs[i] may be in flight.
	// Only the goroutine holding buffer i touches pending[i]:
	// client.Stream hands a buffer to one goroutine at a time, and calls
	// Reclaim(i) before giving it to the next.
	pending []bool

	uploaded, asyncCopies, syncCopies, waits, bytes atomic.Int64

	mu       sync.Mutex
	tensors  map[string]Tensor // GUARDED_BY(mu): uploaded
	inflight map[string]bool   // GUARDED_BY(mu): begun, not ended
	freed    bool              // GUARDED_BY(mu)
}

// Compile-time checks: the sink plugs into client.Stream.
var (
	_ client.Sink           = (*Sink)(nil)
	_ client.BufferProvider = (*Sink)(nil)
	_ client.TensorSink     = (*tensorSink)(nil)
)

// NewSink creates the streams, events and pinned buffers of an upload
// sink on opts.Device.
func NewSink(rt *Runtime, opts Options) (*Sink, error) {
	opts = opts.withDefaults()
	if opts.Streams > 64 {
		return nil, fmt.Errorf("cuda: %d streams (at most 64)", opts.Streams)
	}
	s := &Sink{
		rt:       rt,
		opts:     opts,
		bufAt:    map[*byte]int{},
		pending:  make([]bool, opts.PinnedBuffers),
		tensors:  map[string]Tensor{},
		inflight: map[string]bool{},
	}
	fail := func(err error) (*Sink, error) {
		s.Free()
		return nil, err
	}
	for range opts.Streams {
		st, err := rt.newStream(opts.Device)
		if err != nil {
			return fail(err)
		}
		s.streams = append(s.streams, st)
	}
	for i := range opts.PinnedBuffers {
		ev, err := rt.newEvent(opts.Device)
		if err != nil {
			return fail(err)
		}
		s.events = append(s.events, ev)
		b, err := rt.HostAlloc(opts.Device, opts.ChunkSize)
		if err != nil {
			return fail(err)
		}
		s.bufs = append(s.bufs, b)
		s.bufAt[unsafe.SliceData(b)] = i
	}
	return s, nil
}

// Buffers returns the pinned staging buffers (client.BufferProvider); none
// after Free, so that a Stream into a freed sink fails.
func (s *Sink) Buffers() [][]byte { return s.bufs }

// Reclaim waits until the last copy queued from buffer i has completed
// (client.BufferProvider).
func (s *Sink) Reclaim(i int) error {
	if i < 0 || i >= len(s.bufs) {
		return fmt.Errorf("cuda: Reclaim(%d): the sink has %d buffers", i, len(s.bufs))
	}
	if !s.pending[i] {
		return nil
	}
	s.waits.Add(1)
	if err := s.rt.syncEvent(s.events[i]); err != nil {
		return err
	}
	s.pending[i] = false
	return nil
}

// Begin allocates device memory for a tensor (client.Sink).
func (s *Sink) Begin(t client.TensorInfo, dt dtype.DType, size int64) (client.TensorSink, error) {
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return nil, errors.New("cuda: sink already freed")
	}
	if _, dup := s.tensors[t.Name]; dup || s.inflight[t.Name] {
		s.mu.Unlock()
		return nil, fmt.Errorf("cuda: tensor %q uploaded twice", t.Name)
	}
	s.inflight[t.Name] = true
	s.mu.Unlock()

	ptr, err := s.rt.Malloc(s.opts.Device, size)
	if err != nil {
		s.mu.Lock()
		delete(s.inflight, t.Name)
		s.mu.Unlock()
		return nil, err
	}
	return &tensorSink{s: s, t: Tensor{Name: t.Name, DType: dt, Shape: t.Shape, Ptr: ptr, Size: size}}, nil
}

// tensorSink receives the chunks of one tensor.
type tensorSink struct {
	s       *Sink
	t       Tensor
	streams uint64 // bit k: a copy was queued on streams[k]
}

// Write queues the copy of chunk to the tensor's memory at off. A chunk
// in one of the sink's pinned buffers is copied asynchronously; any other
// chunk (a caller driving the sink by hand) synchronously.
func (ts *tensorSink) Write(chunk []byte, off int64) error {
	s := ts.s
	n := int64(len(chunk))
	if off < 0 || n > ts.t.Size-off {
		return fmt.Errorf("cuda: chunk [%d, %d) outside the tensor's %d bytes", off, off+n, ts.t.Size)
	}
	if n == 0 {
		return nil
	}
	dst := ts.t.Ptr + DevicePtr(off)
	if i, ok := s.bufAt[unsafe.SliceData(chunk)]; ok && len(chunk) <= len(s.bufs[i]) {
		k := i % len(s.streams)
		if err := s.rt.copyAsync(dst, chunk, s.streams[k], s.events[i]); err != nil {
			return err
		}
		s.pending[i] = true
		ts.streams |= 1 << k
		s.asyncCopies.Add(1)
	} else {
		if err := s.rt.CopyToDevice(dst, chunk); err != nil {
			return err
		}
		s.syncCopies.Add(1)
	}
	s.bytes.Add(n)
	return nil
}

// End waits for the tensor's queued copies. A tensor that failed is freed.
func (ts *tensorSink) End(err error) error {
	s := ts.s
	var syncErr error
	for k := range s.streams {
		if ts.streams&(1<<k) != 0 {
			if e := s.rt.syncStream(s.streams[k]); e != nil && syncErr == nil {
				syncErr = e
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, ts.t.Name)
	if err != nil || syncErr != nil || s.freed {
		if e := s.rt.Free(ts.t.Ptr); e != nil && syncErr == nil {
			syncErr = e
		}
		if syncErr == nil && s.freed {
			syncErr = errors.New("cuda: sink freed while uploading")
		}
		return syncErr
	}
	s.tensors[ts.t.Name] = ts.t
	s.uploaded.Add(1)
	return nil
}

// Tensors returns the uploaded tensors by name.
func (s *Sink) Tensors() map[string]Tensor {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Tensor, len(s.tensors))
	for k, v := range s.tensors {
		out[k] = v
	}
	return out
}

// Detach returns the uploaded tensors and forgets them: Free will not free
// their device memory, which the caller now owns (cudaFree).
func (s *Sink) Detach() map[string]Tensor {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.tensors
	s.tensors = map[string]Tensor{}
	return out
}

// Stats returns counters of what the sink did.
func (s *Sink) Stats() Stats {
	return Stats{
		Tensors:     s.uploaded.Load(),
		Bytes:       s.bytes.Load(),
		AsyncCopies: s.asyncCopies.Load(),
		SyncCopies:  s.syncCopies.Load(),
		Waits:       s.waits.Load(),
	}
}

// Free waits for the device, then frees every tensor's device memory (not
// detached ones), the pinned buffers, events and streams. It must not run
// while a Stream into the sink is in progress. Calling it again does
// nothing.
func (s *Sink) Free() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed {
		return nil
	}
	s.freed = true
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if len(s.streams) > 0 {
		keep(s.rt.Synchronize(s.opts.Device))
	}
	for _, t := range s.tensors {
		keep(s.rt.Free(t.Ptr))
	}
	s.tensors = map[string]Tensor{}
	for _, b := range s.bufs {
		keep(s.rt.FreeHost(b))
	}
	s.bufs, s.bufAt = nil, nil
	for _, e := range s.events {
		keep(s.rt.destroyEvent(e))
	}
	s.events = nil
	for _, st := range s.streams {
		keep(s.rt.destroyStream(st))
	}
	s.streams = nil
	return first
}
