package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// Sink receives the tensors of a Stream. Begin is called once per tensor,
// from the goroutine that will then deliver that tensor's chunks; calls
// for different tensors may run concurrently.
type Sink interface {
	// Begin announces a tensor: t as stored, dt the dtype of the bytes
	// that follow (t.DType unless converted), size their count. It
	// returns the TensorSink for this tensor's chunks, or a nil
	// TensorSink and nil error to skip the tensor. An error stops the
	// stream.
	Begin(t TensorInfo, dt dtype.DType, size int64) (TensorSink, error)
}

// TensorSink receives the chunks of one tensor.
//
// Write is called with consecutive chunks in order: the first at off 0,
// each next one at the previous off plus its length, until off+len(chunk)
// == size; every chunk but the last is a full buffer. Calls are never
// concurrent for one TensorSink. chunk is only valid until Write returns,
// unless the sink supplied the buffers (BufferProvider), in which case the
// sink owns it until Stream calls Reclaim for it.
//
// End is called exactly once after a successful Begin: with nil after the
// last chunk, or with the error that stopped this tensor (its own read
// error, the context's cause when the stream was cancelled or another
// tensor failed). An error returned by End(nil) stops the stream.
type TensorSink interface {
	Write(chunk []byte, off int64) error
	End(err error) error
}

// BufferProvider is implemented by a sink that supplies the chunk buffers
// itself, for example pinned host memory that a GPU can copy from
// asynchronously. When the sink does not implement it, Stream allocates
// Parallel buffers of ChunkSize bytes.
type BufferProvider interface {
	// Buffers returns the buffers Stream reads into; Stream calls it once
	// and uses each buffer's length as its chunk size. The number of
	// buffers bounds the chunks in flight; Stream allocates no others.
	Buffers() [][]byte
	// Reclaim blocks until the sink is done with buffer i (Buffers()[i]),
	// e.g. until an asynchronous copy from it has completed. Stream calls
	// it before every refill of buffer i, including the first.
	Reclaim(i int) error
}

// StreamOptions tune Stream. The zero value is usable.
type StreamOptions struct {
	// Parallel is the number of tensors in flight. The default is
	// GOMAXPROCS, or DefaultParallel when that is smaller: copying from
	// the page cache is CPU work, and more copies than CPUs only contend
	// (on a 16-CPU machine 16 in flight read 79.9 GB/s where 4 read 30.8:
	// docs/BENCHMARKS.md, GPU upload).
	// A value set here is used as it is (more can help a source with
	// high latency, such as a network filesystem).
	Parallel int
	// ChunkSize is the size of each chunk buffer (default
	// DefaultChunkSize). Ignored when the sink is a BufferProvider.
	ChunkSize int
	// DType converts every tensor that has a view in it (F64, F32, F16,
	// BF16). Tensors without one (integers, bool, complex) are delivered
	// in their stored dtype; Sink.Begin says which. AsStored
	// delivers every tensor as stored. Any other dtype is refused
	// (ErrNotConvertible) before anything is read.
	DType dtype.DType
	// Filter, when set, selects the tensors to stream.
	Filter func(TensorInfo) bool
	// Split, when set, gives each tensor the part of it to deliver
	// (tensor-parallel slices: see Split), or nil to deliver it whole (a
	// replicated tensor). Sink.Begin's size is then the part's, its shape
	// Split.SliceShape of the tensor's. A part that does not exist (a
	// dimension the tensor lacks, bounds off a quantized type's blocks)
	// fails the Stream with ErrNoPart before that tensor is read.
	Split func(TensorInfo) *Split
}

// Defaults for StreamOptions.
const (
	DefaultParallel  = 16
	DefaultChunkSize = 8 << 20
)

// BufferBytes returns the bytes of chunk buffers a Stream with these
// options holds when the sink does not supply them: Parallel × ChunkSize,
// after defaults.
func (o StreamOptions) BufferBytes() int64 {
	o = o.withDefaults()
	return int64(o.Parallel) * int64(o.ChunkSize)
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Parallel <= 0 {
		o.Parallel = min(DefaultParallel, runtime.GOMAXPROCS(0))
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	return o
}

// Stream delivers every tensor (selected by opts.Filter, converted per
// opts.DType) into sink, in fixed-size chunks read into a fixed pool of
// buffers allocated once (or supplied by the sink). Tensors are taken in
// index order, at most opts.Parallel at a time (with Parallel 1, Begin
// calls come in exactly that order), and may finish out of order; read
// whole and as stored from a source that fetches ahead (a remote one),
// they are taken instead in runs of tensors stored one after another,
// about Parallel runs of equal bytes (fewer where the source serves
// fewer at once with one request each), each read by one worker and
// announced to its source as one plan (one GET per run: runs.go), in
// index order still with Parallel 1 when the runs keep it. The
// memory Stream holds is the buffer pool plus a small constant per tensor
// in flight, whatever the checkpoint's size.
//
// Stream returns when every started tensor has ended: nil when all were
// delivered, else the first error (a *TensorError naming the tensor for
// read and sink errors), or the context's cause when ctx was cancelled.
func (c *Checkpoint) Stream(ctx context.Context, sink Sink, opts StreamOptions) error {
	if sink == nil {
		return errors.New("client: Stream: nil sink")
	}
	if opts.DType != dtype.Invalid && !opts.DType.IsFloatView() {
		return fmt.Errorf("%s: %w: %s is not a view dtype (want F64, F32, F16 or BF16)", c.path, ErrNotConvertible, opts.DType)
	}
	opts = opts.withDefaults()
	var sel []TensorInfo
	for _, t := range c.tensors {
		if t.Listed(opts.DType) && (opts.Filter == nil || opts.Filter(t)) {
			sel = append(sel, t)
		}
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if len(sel) == 0 {
		return nil
	}
	pool, err := newPool(sink, opts)
	if err != nil {
		return err
	}
	if runs, workers := c.runs(sel, opts, pool.chunk); runs != nil {
		return forEach(ctx, len(runs), workers, func(ctx context.Context, i int) error {
			c.plan(runs[i], pool.chunk)
			for _, t := range runs[i] {
				if err := c.streamOne(ctx, sink, pool, t, opts.DType, nil, false); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return forEach(ctx, len(sel), opts.Parallel, func(ctx context.Context, i int) error {
		if i+1 < len(sel) {
			// A source that fetches ahead starts on the next tensor now,
			// so that its GETs overlap this one's.
			c.prefetch(sel[i+1])
		}
		var part *Split
		if opts.Split != nil {
			part = opts.Split(sel[i])
		}
		return c.streamOne(ctx, sink, pool, sel[i], opts.DType, part, true)
	})
}

// streamOne delivers one tensor, announcing its range to a source that
// fetches ahead when announce is set (not when it is in a run whose plan
// its source was told).
func (c *Checkpoint) streamOne(ctx context.Context, sink Sink, pool *pool, t TensorInfo, to dtype.DType, part *Split, announce bool) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if to != AsStored && !c.convertible(t, to) {
		to = AsStored
	}
	r, err := c.openPart(t, to, part)
	if err != nil {
		return err
	}
	defer r.Close()
	if announce {
		c.prefetch(t)
	}
	size := r.Size()
	ts, err := sink.Begin(t, r.DType(), size)
	if err != nil {
		return &TensorError{Source: c.path, Name: t.Name, Op: "sink begin", Off: -1, Err: err}
	}
	if ts == nil {
		return nil
	}
	var cs *index.CheckStream
	if it := c.checked(t); it != nil && part == nil {
		if r.DType() == t.DType {
			cs = index.NewCheckStream(it, c.files[it.Source])
			ts = checkSink{ts, cs}
		}
	}
	err = c.deliver(ctx, ts, pool, r, size)
	if err == nil && part == nil {
		// A stored .npz member read whole: its CRC-32.
		if cs != nil {
			if cerr := cs.Done(); cerr != nil {
				err = &TensorError{Source: c.path, Name: t.Name, Op: "check", Off: -1, Err: cerr}
			}
		} else {
			err = c.verify(t)
		}
	}
	c.dropPages(t, r.DType(), -1, 0)
	endErr := ts.End(err)
	if err != nil {
		return err
	}
	if endErr != nil {
		return &TensorError{Source: c.path, Name: t.Name, Op: "sink end", Off: -1, Err: endErr}
	}
	return nil
}

// deliver reads r chunk by chunk into pool buffers and writes them to ts.
func (c *Checkpoint) deliver(ctx context.Context, ts TensorSink, pool *pool, r *TensorReader, size int64) error {
	name := r.info.Name
	for off := int64(0); off < size; {
		b, err := pool.get(ctx)
		if err != nil {
			if ctx.Err() == nil {
				err = &TensorError{Source: c.path, Name: name, Op: "sink reclaim", Off: off, Err: err}
			}
			return err
		}
		n := int64(len(b.buf))
		if rem := size - off; n > rem {
			n = rem
		}
		chunk := b.buf[:n]
		if _, err := r.ReadAt(chunk, off); err != nil {
			pool.put(b)
			return err // a *TensorError from the reader
		}
		if r.part == nil || r.ranged {
			c.dropPages(r.info, r.dtype, r.skip+off, n) // a part: when a plain range
		}
		err = ts.Write(chunk, off)
		pool.put(b)
		if err != nil {
			return &TensorError{Source: c.path, Name: name, Op: "sink write", Off: off, Err: err}
		}
		off += n
		if err := context.Cause(ctx); err != nil && off < size {
			return err
		}
	}
	return nil
}

// dropPages tells a mapped source that Stream is done with the bytes of
// t it has just read: chunk [off, off+n) of native bytes, or with off < 0
// the whole tensor (any representation). It does nothing unless the
// checkpoint's files are mapped, and for tensors that are not one
// contiguous range of their file. Failures only cost memory: ignored.
func (c *Checkpoint) dropPages(t TensorInfo, dt dtype.DType, off, n int64) {
	if !c.dropMapped || c.files == nil {
		return
	}
	it := &c.idx.Tensors[t.Index]
	if it.Strides != nil {
		return
	}
	a, ok := c.files[it.Source].(backing.Adviser)
	if !ok {
		return
	}
	switch {
	case off < 0:
		a.Advise(it.Offset, it.Size, backing.DontNeed)
	case native(t, dt):
		a.Advise(it.Offset+off, n, backing.DontNeed)
	default:
		// A converted chunk came from about the same fraction of the
		// stored bytes; dropping a page too many only costs a refault.
		if d, ok := dt.ByteSize(t.NumElements()); ok && d > 0 {
			from := it.Offset + int64(float64(off)/float64(d)*float64(it.Size))
			to := it.Offset + int64(float64(off+n)/float64(d)*float64(it.Size))
			a.Advise(from, to-from, backing.DontNeed)
		}
	}
}

// pool is the fixed set of chunk buffers of one Stream.
type pool struct {
	free     chan chunkBuf
	provider BufferProvider // nil when the buffers are the pool's own
	chunk    int64          // every buffer's length; 0 when they differ
}

type chunkBuf struct {
	i   int
	buf []byte
}

func newPool(sink Sink, opts StreamOptions) (*pool, error) {
	p := &pool{}
	var bufs [][]byte
	if bp, ok := sink.(BufferProvider); ok {
		p.provider = bp
		bufs = bp.Buffers()
		if len(bufs) == 0 {
			return nil, errors.New("client: sink supplied no buffers")
		}
		for i, b := range bufs {
			if len(b) == 0 {
				return nil, fmt.Errorf("client: sink buffer %d is empty", i)
			}
		}
	} else {
		bufs = make([][]byte, opts.Parallel)
		for i := range bufs {
			bufs[i] = make([]byte, opts.ChunkSize)
		}
	}
	p.free = make(chan chunkBuf, len(bufs))
	p.chunk = int64(len(bufs[0]))
	for i, b := range bufs {
		if int64(len(b)) != p.chunk {
			p.chunk = 0
		}
		p.free <- chunkBuf{i, b}
	}
	return p, nil
}

// get takes a free buffer, waiting for one, and (for sink buffers) for the
// sink to be done with it.
func (p *pool) get(ctx context.Context) (chunkBuf, error) {
	if err := context.Cause(ctx); err != nil {
		return chunkBuf{}, err
	}
	var b chunkBuf
	select {
	case b = <-p.free:
	case <-ctx.Done():
		return chunkBuf{}, context.Cause(ctx)
	}
	if p.provider != nil {
		if err := p.provider.Reclaim(b.i); err != nil {
			p.free <- b
			return chunkBuf{}, err
		}
	}
	return b, nil
}

func (p *pool) put(b chunkBuf) { p.free <- b }
