package httpsrc

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// throttler is a loopback server of one file that refuses a request
// (with status) whenever more than limit are being served at once: a
// rate limit counted in concurrency, not time. Until it has refused
// one, the requests it serves wait, so that the client does exceed it.
type throttler struct {
	data    []byte
	status  int
	limit   atomic.Int64
	active  atomic.Int64
	refused atomic.Int64
	served  atomic.Int64
	once    sync.Once
	gate    chan struct{}
	armed   atomic.Bool // served requests wait on gate
}

func (h *throttler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.active.Add(1)
	defer h.active.Add(-1)
	if n > h.limit.Load() {
		h.refused.Add(1)
		h.once.Do(func() { close(h.gate) })
		if h.status == 503 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(503)
			w.Write([]byte(`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
			return
		}
		w.WriteHeader(h.status)
		return
	}
	if h.armed.Load() {
		<-h.gate
	}
	h.served.Add(1)
	w.Header().Set("ETag", `"v1"`)
	var a, b int64
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
		http.Error(w, "ranged GETs only", 400)
		return
	}
	b = min(b, int64(len(h.data))-1)
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, len(h.data)))
	w.Header().Set("Content-Length", fmt.Sprint(b-a+1))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(h.data[a : b+1])
}

// TestThrottleAIMD: a server that answers 429 (or 503 SlowDown) above
// 3 requests at once; the client, allowed 16 GETs in flight, lowers its
// bound (halving on a throttle), every byte is read right, and once the
// server stops throttling the bound grows back to 16 (+1 per window of
// successful GETs), a count of GETs, not a time.
func TestThrottleAIMD(t *testing.T) {
	for _, status := range []int{429, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			const part, parts, parallel = 4 << 10, 256, 16
			data := make([]byte, part*parts)
			r := rand.New(rand.NewPCG(3, 4))
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			h := &throttler{data: data, status: status, gate: make(chan struct{})}
			h.limit.Store(3)
			srv := httptest.NewServer(h)
			defer srv.Close()
			u, _ := url.Parse(srv.URL + "/model.bin")
			st, key, err := New(u)
			if err != nil {
				t.Fatal(err)
			}
			c, err := remote.New(st, remote.Options{PartSize: part, Parallel: parallel, Readahead: -1, MemCache: 2 * int64(len(data))})
			if err != nil {
				t.Fatal(err)
			}
			h.limit.Store(1 << 30) // Open's GET is not throttled
			src, err := c.Open(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			h.limit.Store(3)
			h.armed.Store(true)
			// Phase 1: 64 parts read by 64 readers at once.
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i := 1; i <= 64; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					buf := make([]byte, part)
					if _, err := src.ReadAt(buf, int64(i)*part); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(buf, data[i*part:(i+1)*part]) {
						errs <- fmt.Errorf("part %d: wrong bytes", i)
					}
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			_, lowest, throttles := c.Limit()
			if h.refused.Load() == 0 || throttles == 0 {
				t.Fatalf("the server refused %d requests, the client saw %d throttles", h.refused.Load(), throttles)
			}
			if lowest > parallel/2 {
				t.Fatalf("the bound on GETs in flight went down to %d only, want at most %d", lowest, parallel/2)
			}
			// Phase 2: no more throttling; one GET per part, in turn.
			h.limit.Store(1 << 30)
			buf := make([]byte, part)
			for i := 65; i < parts; i++ {
				if _, err := src.ReadAt(buf, int64(i)*part); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf, data[i*part:(i+1)*part]) {
					t.Fatalf("part %d: wrong bytes", i)
				}
			}
			// From 1 to 16 takes 1+2+...+15 = 120 successes; 191 were made.
			if limit, _, _ := c.Limit(); limit != parallel {
				t.Fatalf("the bound is %d after %d GETs without a throttle, want %d", limit, parts-65, parallel)
			}
			t.Logf("HTTP %d: %d refused, %d throttles counted, bound down to %d, back to %d", status, h.refused.Load(), throttles, lowest, parallel)
		})
	}
}

// holder is a loopback server of one file whose requests wait for the
// test's answer (hold), or are served at once (hold false); it counts
// the requests being handled at once.
type holder struct {
	data    []byte
	hold    atomic.Bool
	arrived chan chan int // a held request's answer: its status
	active  atomic.Int64
	mu      sync.Mutex
	peak    int64 // GUARDED_BY(mu): most requests handled at once since reset
}

func (h *holder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.active.Add(1)
	h.mu.Lock()
	h.peak = max(h.peak, n)
	h.mu.Unlock()
	status := http.StatusPartialContent
	if h.hold.Load() {
		answer := make(chan int)
		h.arrived <- answer
		status = <-answer
	}
	// No longer counted once answered, before the client can see the
	// answer and send another request.
	h.active.Add(-1)
	if status != http.StatusPartialContent {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("ETag", `"v1"`)
	var a, b int64
	fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b)
	b = min(b, int64(len(h.data))-1)
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, len(h.data)))
	w.Header().Set("Content-Length", fmt.Sprint(b-a+1))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(h.data[a : b+1])
}

// resetPeak starts counting the peak again from the requests in hand.
func (h *holder) resetPeak() {
	h.mu.Lock()
	h.peak = h.active.Load()
	h.mu.Unlock()
}

// TestThrottleLowersInFlight: the server holds every request until the
// test answers it. The client, allowed 16 GETs in flight, has 16 at the
// server; all 16 are answered 503: the bound halves once (to 8, not 16
// times), the throttled GETs give up their slots while they back off, so
// the server then sees 8 GETs at once, retries included, and never more
// until one succeeds. Then every read finishes, byte-exact.
func TestThrottleLowersInFlight(t *testing.T) {
	const part, parts, parallel = 4 << 10, 64, 16
	data := make([]byte, part*parts)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	h := &holder{data: data, arrived: make(chan chan int)}
	srv := httptest.NewServer(h)
	defer srv.Close()
	done := make(chan struct{})
	defer close(done)
	defer func() {
		// On the way out (a failure included), answer whatever is held.
		h.hold.Store(false)
		go func() {
			for {
				select {
				case a := <-h.arrived:
					a <- http.StatusPartialContent
				case <-done:
					return
				}
			}
		}()
	}()
	u, _ := url.Parse(srv.URL + "/model.bin")
	st, key, err := New(u)
	if err != nil {
		t.Fatal(err)
	}
	c, err := remote.New(st, remote.Options{PartSize: part, Parallel: parallel, Readahead: -1, MemCache: 2 * int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	src, err := c.Open(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	h.hold.Store(true)
	var wg sync.WaitGroup
	errs := make(chan error, parts)
	for i := 1; i < parts; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			buf := make([]byte, part)
			if _, err := src.ReadAt(buf, int64(i)*part); err != nil {
				errs <- err
			} else if !bytes.Equal(buf, data[i*part:(i+1)*part]) {
				errs <- fmt.Errorf("part %d: wrong bytes", i)
			}
		}(i)
	}
	take := func(n int) []chan int {
		var held []chan int
		for len(held) < n {
			held = append(held, <-h.arrived)
		}
		return held
	}
	// Round 1: the client's 16 GETs, all throttled.
	for _, a := range take(parallel) {
		a <- http.StatusServiceUnavailable
	}
	// The client reads the 16 answers as they come: wait for all of
	// them (a count, not a time).
	for {
		if _, _, n := c.Limit(); n >= parallel {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if limit, _, throttles := c.Limit(); limit != parallel/2 || throttles != parallel {
		t.Fatalf("after %d throttled GETs the bound is %d (%d throttles counted), want %d", parallel, limit, throttles, parallel/2)
	}
	// Round 2: 8 GETs at the server (retries and new reads), held.
	h.resetPeak()
	held := take(parallel / 2)
	h.mu.Lock()
	peak := h.peak
	h.mu.Unlock()
	if peak > parallel/2 {
		t.Fatalf("%d requests at the server at once after the bound halved to %d", peak, parallel/2)
	}
	h.hold.Store(false)
	for _, a := range held {
		a <- http.StatusPartialContent
	}
	// Anything that arrived held in between is served.
	go func() {
		for {
			select {
			case a := <-h.arrived:
				a <- http.StatusPartialContent
			case <-done:
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	limit, lowest, throttles := c.Limit()
	t.Logf("16 GETs throttled at once: bound 16 -> %d (lowest %d), %d throttles counted; 8 at the server after; bound now %d", parallel/2, lowest, throttles, limit)
}
