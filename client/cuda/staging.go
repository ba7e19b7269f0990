package cuda

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/client"
)

// staging is the FillSink of an Upload: pinned buffers, one event per
// buffer recorded after the copies from it, and the streams.
type staging struct {
	rt      *Runtime
	u       *Upload
	ids     []int // Fill's tensor k is u.Tensors[ids[k]]
	bufs    [][]byte
	streams []stream
	events  []event
	// pending[i]: a copy from bufs[i] may be in flight. Only the
	// goroutine holding buffer i touches it (Fill, then Reclaim by the
	// next holder, ordered by the pool's channel).
	pending []bool
	// noReclaim: UploadOptions.noReclaim (tests only).
	noReclaim bool

	copies, waits atomic.Int64
}

var _ client.FillSink = (*staging)(nil)

func newStaging(rt *Runtime, opts UploadOptions, u *Upload, ids []int) (*staging, error) {
	s := &staging{rt: rt, u: u, ids: ids, pending: make([]bool, opts.Buffers), noReclaim: opts.noReclaim}
	fail := func(err error) (*staging, error) {
		s.free()
		return nil, err
	}
	for range opts.Streams {
		st, err := rt.newStream(opts.Device)
		if err != nil {
			return fail(err)
		}
		s.streams = append(s.streams, st)
	}
	for range opts.Buffers {
		ev, err := rt.newEvent(opts.Device)
		if err != nil {
			return fail(err)
		}
		s.events = append(s.events, ev)
	}
	// Pinning runs faster from a few threads at once.
	var flags uint
	if !opts.Cacheable {
		flags = hostAllocWriteCombined
	}
	s.bufs = make([][]byte, opts.Buffers)
	errs := make([]error, opts.Buffers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(opts.Buffers, 8) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(opts.Buffers) {
					return
				}
				s.bufs[i], errs[i] = rt.hostAlloc(opts.Device, opts.ChunkSize, flags)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fail(fmt.Errorf("%d pinned staging buffers of %s: %w", opts.Buffers, bytesize.FormatFixed(int64(opts.ChunkSize)), err))
		}
	}
	return s, nil
}

func (s *staging) Buffers() [][]byte { return s.bufs }

func (s *staging) Reclaim(i int) error {
	if !s.pending[i] || s.noReclaim {
		return nil
	}
	s.waits.Add(1)
	if err := s.rt.syncEvent(s.events[i]); err != nil {
		return err
	}
	s.pending[i] = false
	return nil
}

// Fill queues the copy of every segment of buffer i to its tensor's place
// on the device, on stream i mod Streams, and records buffer i's event.
func (s *staging) Fill(i int, buf []byte, segs []client.Segment) error {
	dst := make([]DevicePtr, 0, len(segs))
	src := make([][]byte, 0, len(segs))
	for _, sg := range segs {
		t := &s.u.Tensors[s.ids[sg.Tensor]]
		if sg.Off < 0 || int64(sg.N) > t.Size-sg.Off || sg.BufOff < 0 || sg.BufOff+sg.N > len(buf) {
			return fmt.Errorf("cuda: segment [%d, %d) outside tensor %q (%d bytes) or its buffer", sg.Off, sg.Off+int64(sg.N), t.Name, t.Size)
		}
		if sg.N == 0 {
			continue
		}
		dst = append(dst, t.Ptr+DevicePtr(sg.Off))
		src = append(src, buf[sg.BufOff:sg.BufOff+sg.N])
	}
	if err := s.rt.copyMany(dst, src, s.streams[i%len(s.streams)], s.events[i]); err != nil {
		return err
	}
	s.pending[i] = true
	s.copies.Add(int64(len(dst)))
	return nil
}

// free waits for the device and frees the buffers, events and streams.
func (s *staging) free() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if len(s.streams) > 0 {
		keep(s.rt.Synchronize(s.u.dev))
	}
	for _, b := range s.bufs {
		if b != nil {
			keep(s.rt.FreeHost(b))
		}
	}
	s.bufs = nil
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
