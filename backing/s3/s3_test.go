package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/s3"
	"github.com/lazyweights/tensorfs/backing/s3/s3test"
)

// small options: parts of 16 KiB so that a 200 KiB object has many.
func small() remote.Options {
	return remote.Options{PartSize: 16 << 10, MemCache: 64 << 10, Readahead: 32 << 10, Parallel: 4, Timeout: 5 * time.Second, OpenTimeout: 5 * time.Second}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// setup starts a server (behind a fault proxy) with bucket "bkt" holding
// "obj", and returns a client of the bucket through the proxy.
func setup(t *testing.T, data []byte, opts remote.Options) (*s3test.Server, *s3test.Proxy, *remote.Client) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Bucket(t, "bkt")
	srv.Put(t, "bkt", "obj", data)
	px := s3test.StartProxy(t, srv.Endpoint)
	srv.Setenv(t)
	t.Setenv("AWS_ENDPOINT_URL", px.URL)
	st, err := s3.New(context.Background(), "bkt", s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := remote.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv, px, c
}

func readAll(t *testing.T, s backing.Source) []byte {
	t.Helper()
	out := make([]byte, s.Size())
	if n, err := s.ReadAt(out, 0); n != len(out) || (err != nil && n != len(out)) {
		t.Fatalf("ReadAt: %d of %d bytes: %v", n, len(out), err)
	}
	return out
}

func TestReadsMatch(t *testing.T) {
	data := randomBytes(200<<10+123, 1)
	_, _, c := setup(t, data, small())
	s, err := c.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Size() != int64(len(data)) || s.Name() != "s3://bkt/obj" || s.Object().ETag == "" {
		t.Fatalf("Size %d Name %s ETag %q", s.Size(), s.Name(), s.Object().ETag)
	}
	if !bytes.Equal(readAll(t, s), data) {
		t.Fatal("whole read differs")
	}
	// Sequential small reads (readahead), random reads and reads past
	// the end, from several goroutines.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := 0; i < 30; i++ {
				off := r.Int64N(int64(len(data)) + 10)
				n := r.IntN(40 << 10)
				if g == 0 {
					off, n = int64(i)*3000, 3000
				}
				buf := make([]byte, n)
				got, err := s.ReadAt(buf, off)
				want := 0
				if off < int64(len(data)) {
					want = min(n, len(data)-int(off))
				}
				if got != want || (got < n && err == nil) || !bytes.Equal(buf[:got], data[min(off, int64(len(data))):][:got]) {
					errs <- fmt.Errorf("ReadAt(%d, %d) = %d, %v; want %d bytes", n, off, got, err, want)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestFaultsAreRetried(t *testing.T) {
	data := randomBytes(100<<10, 2)
	opts := small()
	opts.Readahead = -1 // one GET per part read, so that there are GETs to fail
	_, px, c := setup(t, data, opts)
	px.Every.Store(2) // every other request: 503 SlowDown or a reset
	s, err := c.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := make([]byte, len(data))
	for off := 0; off < len(data); off += int(opts.PartSize) {
		end := min(off+int(opts.PartSize), len(data))
		if n, err := s.ReadAt(got[off:end], int64(off)); n != end-off {
			t.Fatalf("ReadAt(%d, %d): %d bytes, %v", end-off, off, n, err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read through faults differs")
	}
	if px.Faults.Load() < 3 {
		t.Fatalf("only %d faults injected", px.Faults.Load())
	}
}

func TestChangedObject(t *testing.T) {
	data := randomBytes(100<<10, 3)
	srv, _, c := setup(t, data, func() remote.Options {
		o := small()
		o.Readahead = -1
		return o
	}())
	var mu sync.Mutex
	var logged []string
	opts := c.Options()
	_ = opts
	c2, err := remote.New(storeOf(t), remote.Options{PartSize: 16 << 10, Readahead: -1, Logf: func(f string, a ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c2.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Put(t, "bkt", "obj", randomBytes(len(data), 4)) // same size, new bytes
	for i := 0; i < 3; i++ {
		buf := make([]byte, 100)
		_, err = s.ReadAt(buf, 50<<10)
		if !errors.Is(err, backing.ErrFault) || remote.KindOf(err) != remote.Changed {
			t.Fatalf("read after the object changed: %v, want a fault of kind Changed", err)
		}
	}
	// Part 0, read at open, is not served either: no mixed versions.
	if _, err := s.ReadAt(make([]byte, 10), 0); !errors.Is(err, backing.ErrFault) {
		t.Fatalf("cached part after the change: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "s3://bkt/obj") || !strings.Contains(logged[0], "changed") {
		t.Fatalf("log lines: %q", logged)
	}
}

// storeOf is a store of bucket bkt at the endpoint in the environment.
func storeOf(t *testing.T) *s3.Store {
	st, err := s3.New(context.Background(), "bkt", s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestServerGoneAndBack(t *testing.T) {
	data := randomBytes(100<<10, 5)
	o := small()
	o.Timeout, o.Readahead = 700*time.Millisecond, -1
	srv, _, c := setup(t, data, o)
	s, err := c.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Stop()
	start := time.Now()
	_, err = s.ReadAt(make([]byte, 100), 60<<10)
	if !errors.Is(err, backing.ErrFault) || remote.KindOf(err) != remote.Transient {
		t.Fatalf("read with the server gone: %v", err)
	}
	if d := time.Since(start); d > 90*time.Second { // Timeout 700ms: bounded, not a hang
		t.Fatalf("the failing read took %v", d)
	}
	srv.Restart(t)
	buf := make([]byte, 100)
	if _, err := s.ReadAt(buf, 60<<10); err != nil || !bytes.Equal(buf, data[60<<10:][:100]) {
		t.Fatalf("read with the server back: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "bkt")
	srv.Put(t, "bkt", "obj", []byte("hello"))
	srv.Setenv(t)
	open := func(bucket, key string) error {
		st, err := s3.New(context.Background(), bucket, s3.Options{})
		if err != nil {
			return err
		}
		c, err := remote.New(st, remote.Options{OpenTimeout: 500 * time.Millisecond})
		if err != nil {
			return err
		}
		_, err = c.Stat(context.Background(), key)
		return err
	}
	for _, tc := range []struct {
		name, bucket, key string
		env               [2]string
		kind              remote.Kind
		want              string
	}{
		{"missing key", "bkt", "nope", [2]string{}, remote.NotFound, "s3://bkt/nope: HTTP 404 NoSuchKey"},
		{"missing bucket", "nobkt", "obj", [2]string{}, remote.NotFound, "s3://nobkt: HTTP 404 NoSuchBucket"},
		{"bad secret", "bkt", "obj", [2]string{"AWS_SECRET_ACCESS_KEY", "wrong-secret"}, remote.Denied, "SignatureDoesNotMatch"},
		{"unreachable", "bkt", "obj", [2]string{"AWS_ENDPOINT_URL", "http://127.0.0.1:1"}, remote.Transient, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			err := open(tc.bucket, tc.key)
			if remote.KindOf(err) != tc.kind || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (kind %v), want kind %v and %q", err, remote.KindOf(err), tc.kind, tc.want)
			}
			if msg := err.Error(); strings.Contains(msg, s3test.SecretKey) || strings.Contains(msg, "wrong-secret") || strings.Contains(msg, "\n") {
				t.Fatalf("message holds a secret or a newline: %q", msg)
			}
		})
	}
	// A prefix is a directory; the objects under it are listed.
	srv.Put(t, "bkt", "dir/a.safetensors", []byte("x"))
	srv.Put(t, "bkt", "dir/sub/c", []byte("y"))
	st, _ := s3.New(context.Background(), "bkt", s3.Options{})
	c, _ := remote.New(st, remote.Options{})
	if isDir, err := c.Stat(context.Background(), "dir"); err != nil || !isDir {
		t.Fatalf("Stat(dir) = %v, %v", isDir, err)
	}
	ents, err := c.List(context.Background(), "dir/")
	if err != nil || len(ents) != 1 || ents[0].Name != "a.safetensors" {
		t.Fatalf("List(dir/) = %v, %v", ents, err)
	}
}

func TestDiskCacheWarmStart(t *testing.T) {
	data := randomBytes(100<<10, 6)
	o := small()
	o.CacheDir = t.TempDir()
	srv, px, c := setup(t, data, o)
	s, err := c.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, s)
	s.Close()
	cold := px.Requests.Load()
	c2, err := remote.New(storeOf(t), o)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c2.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, s2), data) {
		t.Fatal("warm read differs")
	}
	s2.Close()
	if warm := px.Requests.Load() - cold; warm != 1 {
		t.Fatalf("a warm start sent %d requests (cold: %d), want 1 (the open)", warm, cold)
	}
	// A new version is never served from the cache.
	data2 := randomBytes(len(data), 7)
	srv.Put(t, "bkt", "obj", data2)
	s3, err := c2.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if !bytes.Equal(readAll(t, s3), data2) {
		t.Fatal("the new version read from the cache")
	}
}
