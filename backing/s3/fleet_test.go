package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/s3"
	"github.com/lazyweights/tensorfs/backing/s3/s3test"
)

// recordingProxy is a forward HTTP proxy (absolute-form requests only)
// that records each request's URL and headers; slowDown, when set,
// answers 503 SlowDown instead of forwarding.
type recordingProxy struct {
	mu       sync.Mutex
	reqs     []*http.Request
	slowDown bool
	etag     string // when set, every reply's ETag (a tier holding another version)
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.reqs = append(p.reqs, r.Clone(context.Background()))
	slow, etag := p.slowDown, p.etag
	p.mu.Unlock()
	if !r.URL.IsAbs() {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	if slow {
		w.WriteHeader(503)
		w.Write([]byte(`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
		return
	}
	out, _ := http.NewRequest(r.Method, r.URL.String(), nil)
	out.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// TestPresignedThroughProxy: behind --proxy, an object's GETs reach the
// proxy in absolute form, presigned (the signature in the query, no
// Authorization or security token header), with the Range header sent
// unsigned and If-Match pinning the ETag; the path is the same for
// every range, so that a cache keyed on it holds one copy; the bytes
// are right. A proxy that answers 5xx is bypassed.
func TestPresignedThroughProxy(t *testing.T) {
	data := randomBytes(300<<10+77, 9)
	srv := s3test.Start(t)
	srv.Bucket(t, "bkt")
	srv.Put(t, "bkt", "dir/model.bin", data)
	srv.Setenv(t)
	t.Setenv("AWS_SESSION_TOKEN", "") // none: the server has no STS
	p := &recordingProxy{}
	ps := httptest.NewServer(p)
	defer ps.Close()
	pu, _ := url.Parse(ps.URL)
	var logs []string
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		logMu.Unlock()
	}
	st, err := s3.New(context.Background(), "bkt", s3.Options{Proxy: pu, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	opts := small()
	c, err := remote.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	src, err := c.Open(context.Background(), "dir/model.bin")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, src); !bytes.Equal(got, data) {
		t.Fatal("bytes through the proxy differ")
	}
	src.Close()
	p.mu.Lock()
	reqs := p.reqs
	p.mu.Unlock()
	if len(reqs) < 2 {
		t.Fatalf("the proxy saw %d requests", len(reqs))
	}
	wantPath := "/bkt/dir/model.bin"
	for i, r := range reqs {
		q := r.URL.Query()
		switch {
		case r.Method != "GET" || r.URL.Host != srv.Addr || r.URL.Path != wantPath:
			t.Fatalf("request %d: %s %s, want GET http://%s%s", i, r.Method, r.URL.Redacted(), srv.Addr, wantPath)
		case q.Get("X-Amz-Signature") == "" || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
			t.Fatalf("request %d: not presigned: %s", i, r.URL.RawQuery)
		case strings.Contains(strings.ToLower(q.Get("X-Amz-SignedHeaders")), "range"):
			t.Fatalf("request %d: Range is signed (%s): a cache could not share the object across ranges", i, q.Get("X-Amz-SignedHeaders"))
		case r.Header.Get("Authorization") != "" || r.Header.Get("X-Amz-Security-Token") != "":
			t.Fatalf("request %d: credentials in headers to the proxy: %v", i, r.Header)
		case r.Header.Get("Range") == "":
			t.Fatalf("request %d: no Range", i)
		case i > 0 && r.Header.Get("If-Match") != src.Object().ETag:
			t.Fatalf("request %d: If-Match %q, want the ETag %q", i, r.Header.Get("If-Match"), src.Object().ETag)
		}
		if strings.Contains(r.URL.String(), s3test.SecretKey) {
			t.Fatalf("request %d: the secret key in the URL", i)
		}
		var a, b int64
		fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b)
		if a%opts.PartSize != 0 || ((b+1)%opts.PartSize != 0 && b+1 != int64(len(data))) {
			t.Fatalf("request %d: Range %s is not aligned to the part size %d", i, r.Header.Get("Range"), opts.PartSize)
		}
	}
	if len(logs) != 0 {
		t.Fatalf("logged %q", logs)
	}

	// The proxy answers 503: the reads go to the endpoint directly.
	p.mu.Lock()
	p.slowDown = true
	p.mu.Unlock()
	c2, err := remote.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	src2, err := c2.Open(context.Background(), "dir/model.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	if got := readAll(t, src2); !bytes.Equal(got, data) {
		t.Fatal("bytes past a failing proxy differ")
	}
}

// TestPresignedOtherVersion: a proxy whose replies carry another ETag
// than the object had at open (a tier holding pieces of another
// version) is refused: the read fails with EIO (backing.ErrFault), one
// line logged, no byte of it served.
func TestPresignedOtherVersion(t *testing.T) {
	data := randomBytes(200<<10, 10)
	srv := s3test.Start(t)
	srv.Bucket(t, "bkt")
	srv.Put(t, "bkt", "obj", data)
	srv.Setenv(t)
	p := &recordingProxy{}
	ps := httptest.NewServer(p)
	defer ps.Close()
	pu, _ := url.Parse(ps.URL)
	var logs []string
	var mu sync.Mutex
	opts := small()
	opts.Logf = func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	st, err := s3.New(context.Background(), "bkt", s3.Options{Proxy: pu})
	if err != nil {
		t.Fatal(err)
	}
	c, err := remote.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	src, err := c.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p.mu.Lock()
	p.etag = `"0123456789abcdef0123456789abcdef"`
	p.mu.Unlock()
	buf := make([]byte, 64<<10)
	for i := 0; i < 3; i++ {
		n, err := src.ReadAt(buf, 100<<10)
		if !errors.Is(err, backing.ErrFault) || n != 0 {
			t.Fatalf("read %d: %d bytes, %v; want none and an I/O fault", i, n, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], "changed") {
		t.Fatalf("logged %q, want one line saying the object changed", logs)
	}
}

// TestFailingTierBypassedS3: behind a tier that fails (a redirect to
// file://, a whole body to a Range request, a 404 for an object the
// endpoint has, 502, nothing listening), the presigned GETs go to the
// endpoint directly: the bytes are right (the tier never forwards, so
// they are the endpoint's), and one line names the tier and what it did.
func TestFailingTierBypassedS3(t *testing.T) {
	data := randomBytes(100<<10+3, 11)
	srv := s3test.Start(t)
	srv.Bucket(t, "bkt")
	srv.Put(t, "bkt", "obj", data)
	srv.Setenv(t)
	t.Setenv("AWS_SESSION_TOKEN", "")
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	tests := []struct {
		name string
		tier http.HandlerFunc // nil: nothing listens
		want string
	}{
		{"redirect to file", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		}, "HTTP 302 where the origin answered HTTP 206"},
		{"whole body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"x"`)
			w.Write(data)
		}, "answered a Range request with the whole body (HTTP 200)"},
		{"404", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }, "HTTP 404 where the origin answered HTTP 206"},
		{"502", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) }, "HTTP 502"},
		{"not listening", nil, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			remote.ResetTierLog()
			proxy := closedURL
			var tierN int
			var mu sync.Mutex
			if tt.tier != nil {
				ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					tierN++
					mu.Unlock()
					tt.tier(w, r)
				}))
				defer ps.Close()
				proxy = ps.URL
			}
			pu, _ := url.Parse(proxy)
			var logs []string
			logf := func(format string, args ...any) {
				mu.Lock()
				logs = append(logs, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			st, err := s3.New(context.Background(), "bkt", s3.Options{Proxy: pu, Logf: logf})
			if err != nil {
				t.Fatal(err)
			}
			opts := small()
			opts.Logf = logf
			c, err := remote.New(st, opts)
			if err != nil {
				t.Fatal(err)
			}
			src, err := c.Open(context.Background(), "obj")
			if err != nil {
				t.Fatalf("open: %v (logged %q)", err, logs)
			}
			defer src.Close()
			if got := readAll(t, src); !bytes.Equal(got, data) {
				t.Fatal("bytes past a failing tier differ")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(logs) != 1 || !strings.Contains(logs[0], "proxy "+proxy+": ") || !strings.Contains(logs[0], tt.want) {
				t.Fatalf("logged %q, want one line naming %s and saying %q", logs, proxy, tt.want)
			}
			if tt.tier != nil && tierN == 0 {
				t.Fatal("the tier got no request")
			}
		})
	}
}
