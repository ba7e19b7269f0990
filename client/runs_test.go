package client

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/source"
)

// runSink records each tensor's sha256, and the order of Begin calls.
type runSink struct {
	mu    sync.Mutex
	sums  map[string][32]byte
	begun []string
}

type runTensor struct {
	s    *runSink
	name string
	h    hash.Hash
}

func (s *runSink) Begin(t TensorInfo, dt dtype.DType, size int64) (TensorSink, error) {
	s.mu.Lock()
	s.begun = append(s.begun, t.Name)
	s.mu.Unlock()
	return &runTensor{s: s, name: t.Name, h: sha256.New()}, nil
}

func (t *runTensor) Write(chunk []byte, off int64) error { t.h.Write(chunk); return nil }

func (t *runTensor) End(err error) error {
	if err == nil {
		t.s.mu.Lock()
		t.s.sums[t.name] = [32]byte(t.h.Sum(nil))
		t.s.mu.Unlock()
	}
	return nil
}

// TestStreamRunsRemote: Stream of a remote checkpoint gives each of its
// Parallel workers a run of tensors stored one after another, announced
// as one plan: a model of 12 tensors (stored in another order than
// their names', small ones among them) costs at most Parallel GETs
// besides those that open it, one more for a reply cut mid-body, where
// one per tensor was made before; the sha256 of every tensor is that of
// the same file read from disk. With Parallel 1, Begin calls keep index
// order (the tensors are then read one at a time, as before); converted
// tensors are read as before too, their bytes right.
func TestStreamRunsRemote(t *testing.T) {
	const ps = 128 << 10
	dir := tempDir(t)
	var ts []stTensor
	for i, n := range []int{3 * ps, 5, 2*ps + 7, 4 * ps, 100, ps, 3*ps + 1, 8, 2 * ps, 5 * ps, 12, ps + 5} {
		n -= n % 2
		ts = append(ts, stTensor{fmt.Sprintf("t%02d", (i*7)%12), "F16", []int64{int64(n / 2)}, randomBytes(uint64(i+1), n)})
	}
	path := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, path, nil, ts)
	srv, taken, cut := rangeServer(t, path, ps)
	defer srv.Close()
	stream := func(t *testing.T, ck *Checkpoint, opts StreamOptions) *runSink {
		t.Helper()
		s := &runSink{sums: map[string][32]byte{}}
		if err := ck.Stream(context.Background(), s, opts); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		parallel int
		to       dtype.DType
		cut      bool
		remote   int // the remote Client's GETs in flight (0: the default); flows: half
	}{{3, AsStored, false, 0}, {3, AsStored, true, 0}, {4, AsStored, false, 0}, {1, AsStored, false, 0}, {3, dtype.F32, false, 0}, {6, AsStored, false, 4}} {
		t.Run(fmt.Sprintf("parallel %d %v cut %v remote %d", tc.parallel, tc.to, tc.cut, tc.remote), func(t *testing.T) {
			opts := StreamOptions{Parallel: tc.parallel, ChunkSize: 64 << 10, DType: tc.to}
			local, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			want := stream(t, local, opts)
			local.Close()
			ck, err := OpenWith(srv.URL+"/m.safetensors", Options{Remote: &source.RemoteOptions{Remote: remote.Options{PartSize: ps, Parallel: tc.remote}}})
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			opened := taken()
			cut.Store(tc.cut)
			got := stream(t, ck, opts)
			if len(got.sums) != len(ts) || !maps.Equal(got.sums, want.sums) {
				t.Fatalf("the sha256 of the %d tensors streamed differ from the local file's (%d of %d)", len(ts), len(got.sums), len(want.sums))
			}
			g := taken()
			if tc.to != AsStored {
				return // read as before: one GET per tensor or more
			}
			gets := tc.parallel
			if tc.remote > 0 {
				gets = min(gets, tc.remote/2) // a run each of its flows
			}
			if tc.cut {
				gets++
				if cut.Load() {
					t.Fatal("no reply was cut")
				}
			}
			if tc.parallel == 1 {
				if !slices.IsSorted(got.begun) {
					t.Errorf("Parallel 1: Begin calls in the order %v, not index order", got.begun)
				}
				return
			}
			if len(g) > gets {
				t.Errorf("12 tensors read by %d workers cost %d GETs after the %d that opened the file (%s); want at most %d", tc.parallel, len(g), len(opened), strings.Join(g, " "), gets)
			}
		})
	}
}

// rangeServer serves the file at path over HTTP (with an ETag),
// recording the Range of each request (taken returns those since its
// last call); once cut is set, the next reply of more than 4 parts of ps
// bytes is cut after 2 parts (the connection reset).
func rangeServer(t *testing.T, path string, ps int64) (srv *httptest.Server, taken func() []string, cut *atomic.Bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ranges []string
	cut = new(atomic.Bool)
	files := http.FileServer(http.Dir(filepath.Dir(path)))
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		var start, end int64
		if n, _ := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &start, &end); n == 2 && end-start >= 4*ps && cut.CompareAndSwap(true, false) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
			w.Header().Set("Content-Length", strconv.FormatInt(end-start+1, 10))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[start : start+2*ps])
			panic(http.ErrAbortHandler)
		}
		files.ServeHTTP(w, r)
	}))
	taken = func() []string {
		mu.Lock()
		defer mu.Unlock()
		r := ranges
		ranges = nil
		return r
	}
	return srv, taken, cut
}
