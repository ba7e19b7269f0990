package remote

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
)

// stallStore is a memStore whose GETs, once stall is set, wait for
// their context and fail as a stalled connection does.
type stallStore struct {
	*memStore
	stall   atomic.Bool
	started chan struct{} // one value per stalled GET
	maxWait atomic.Int64  // the longest deadline a stalled GET was given
}

func (s *stallStore) Get(ctx context.Context, obj Object, off int64, bufs [][]byte, filled func(int)) error {
	if !s.stall.Load() {
		return s.memStore.Get(ctx, obj, off, bufs, filled)
	}
	s.gets.Add(1)
	if dl, ok := ctx.Deadline(); ok {
		if d := int64(time.Until(dl)); d > s.maxWait.Load() {
			s.maxWait.Store(d)
		}
	}
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return &Error{URL: s.URL(obj.Key), Kind: Transient, Msg: "read: " + ctx.Err().Error(), Err: ctx.Err()}
}

func newStall(t *testing.T, opts Options) (*stallStore, *Source) {
	t.Helper()
	_, base := newTest(t, 100000, Options{})
	st := &stallStore{memStore: base.c.store.(*memStore), started: make(chan struct{}, 1)}
	c, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return st, s
}

// TestInterruptEndsReads: a read waiting on a stalled store ends as soon
// as the Client's Context is cancelled (not at its 10-minute deadline),
// with an error that says it was interrupted (context.Canceled), and
// Close does not wait for the stalled GET.
func TestInterruptEndsReads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, s := newStall(t, Options{PartSize: 4096, Readahead: -1, Timeout: 10 * time.Minute, Context: ctx})
	st.stall.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := s.ReadAt(make([]byte, 100), 50000)
		done <- err
	}()
	<-st.started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, backing.ErrFault) {
			t.Fatalf("interrupted read: %v", err)
		}
	case <-time.After(time.Minute): // generous: it ends in microseconds
		t.Fatal("the read still waits on the stalled store a minute after the interrupt")
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close still waits on the stalled GET a minute after the interrupt")
	}
}

// TestOneDeadlinePerRead: once a read has given up on a store that
// stayed away for its whole Timeout, the read the kernel sends again at
// once (a failed readahead, then the page read itself) makes one short
// try, not another Timeout of retries; the store serves again as soon
// as it answers.
func TestOneDeadlinePerRead(t *testing.T) {
	st, s := newStall(t, Options{PartSize: 4096, Readahead: -1, Timeout: 3 * time.Second})
	st.stall.Store(true)
	buf := make([]byte, 100)
	if _, err := s.ReadAt(buf, 50000); !errors.Is(err, backing.ErrFault) || KindOf(err) != Transient || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read with the store stalled: %v", err)
	}
	st.gets.Store(0)
	st.maxWait.Store(0)
	if _, err := s.ReadAt(buf, 50000); !errors.Is(err, backing.ErrFault) {
		t.Fatalf("second read with the store stalled: %v", err)
	}
	if n, w := st.gets.Load(), time.Duration(st.maxWait.Load()); n != 1 || w > probeTimeout {
		t.Fatalf("the read sent again made %d GETs, the longest given %v; want 1 of at most %v", n, w, probeTimeout)
	}
	st.stall.Store(false)
	if _, err := s.ReadAt(buf, 50000); err != nil {
		t.Fatalf("read with the store back: %v", err)
	}
}
