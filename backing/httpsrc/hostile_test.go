package httpsrc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// hostile is a loopback server of one file that misbehaves as told.
type hostile struct {
	data []byte
	// lie, when set, rewrites the Content-Range of a reply to the
	// request for bytes first-last.
	lie func(first, last int64, total int) string
	// etag and lastMod are the validators sent; firstOnly sends them on
	// the first reply only.
	etag, lastMod string
	firstOnly     bool
	gzip          bool // label ranged replies Content-Encoding: gzip

	mu      sync.Mutex
	replies int
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.replies++
	first := h.replies == 1
	h.mu.Unlock()
	if h.etag != "" && (first || !h.firstOnly) {
		w.Header().Set("ETag", h.etag)
	}
	if h.lastMod != "" && (first || !h.firstOnly) {
		w.Header().Set("Last-Modified", h.lastMod)
	}
	var a, b int64
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
		w.Write(h.data)
		return
	}
	b = min(b, int64(len(h.data))-1)
	cr := fmt.Sprintf("bytes %d-%d/%d", a, b, len(h.data))
	if h.lie != nil {
		cr = h.lie(a, b, len(h.data))
	}
	w.Header().Set("Content-Range", cr)
	if h.gzip && a > 0 {
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Length", strconv.FormatInt(b-a+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(h.data[a : b+1])
}

func (h *hostile) start(t *testing.T) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// open opens base/f.bin with a client of 4 KiB parts.
func openHostile(t *testing.T, base string, opts remote.Options) (*remote.Source, error) {
	t.Helper()
	u, _ := url.Parse(base + "/f.bin")
	st, key, err := New(u)
	if err != nil {
		t.Fatal(err)
	}
	opts.PartSize, opts.Readahead = 4096, -1
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := remote.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c.Open(context.Background(), key)
}

func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7 / 3)
	}
	return b
}

// TestContentRangeHeldToRequest: a reply whose Content-Range does not
// name exactly the bytes asked for (right length and total, wrong
// start) fails the read (EIO), at open and after; never other bytes.
func TestContentRangeHeldToRequest(t *testing.T) {
	data := testData(20000)
	const lm = "Mon, 02 Jan 2006 15:04:05 GMT"
	for _, tc := range []struct {
		name string
		lie  func(a, b int64, total int) string
	}{
		{"start 0 for every range", func(a, b int64, total int) string { return fmt.Sprintf("bytes 0-%d/%d", b-a, total) }},
		{"shifted by one", func(a, b int64, total int) string { return fmt.Sprintf("bytes %d-%d/%d", a+1, b+1, total) }},
		{"no range", func(a, b int64, total int) string { return fmt.Sprintf("bytes */%d", total) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hostile{data: data, etag: `"v1"`, lastMod: lm}
			base := h.start(t)
			s, err := openHostile(t, base, remote.Options{})
			if err != nil {
				t.Fatal(err) // part 0 is asked for at 0: honest so far
			}
			defer s.Close()
			h.lie = tc.lie
			buf := make([]byte, 100)
			_, err = s.ReadAt(buf, 9000)
			if !errors.Is(err, backing.ErrFault) || !strings.Contains(err.Error(), "Content-Range") {
				t.Fatalf("read through a lying Content-Range: %v (bytes %v...)", err, buf[:8])
			}
		})
	}
	// At open: asked for the first part, sent another.
	h := &hostile{data: data, etag: `"v1"`, lie: func(a, b int64, total int) string { return fmt.Sprintf("bytes %d-%d/%d", a+5, b+5, total) }}
	if _, err := openHostile(t, h.start(t), remote.Options{}); err == nil || !strings.Contains(err.Error(), "Content-Range") {
		t.Fatalf("open through a lying Content-Range: %v", err)
	}
}

// TestValidatorsRequired: a server that gives no ETag and no
// Last-Modified is refused at open (one line saying why and naming
// --allow-unvalidated), accepted with AllowUnvalidated; one that gives
// them on the first reply only (and ignores If-Match) fails reads as
// changed, never serving bytes it cannot show are of the version
// opened.
func TestValidatorsRequired(t *testing.T) {
	data := testData(20000)
	h := &hostile{data: data}
	base := h.start(t)
	_, err := openHostile(t, base, remote.Options{})
	if err == nil || !strings.Contains(err.Error(), "no validator") || !strings.Contains(err.Error(), "--allow-unvalidated") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("open without validators: %v", err)
	}
	s, err := openHostile(t, base, remote.Options{AllowUnvalidated: true})
	if err != nil {
		t.Fatalf("open with AllowUnvalidated: %v", err)
	}
	buf := make([]byte, 100)
	if _, err := s.ReadAt(buf, 9000); err != nil || !bytes.Equal(buf, data[9000:9100]) {
		t.Fatalf("read with AllowUnvalidated: %v", err)
	}
	s.Close()

	for _, h := range []*hostile{
		{data: data, etag: `"v1"`, firstOnly: true},
		{data: data, lastMod: "Mon, 02 Jan 2006 15:04:05 GMT", firstOnly: true},
	} {
		s, err := openHostile(t, h.start(t), remote.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadAt(buf, 9000); !errors.Is(err, backing.ErrFault) || remote.KindOf(err) != remote.Changed {
			t.Fatalf("read of a reply without the validators (etag %q): %v", h.etag, err)
		}
		s.Close()
	}
}

// TestEncodedRangeRefused: a ranged reply labelled Content-Encoding
// gzip is refused at once, saying what the server did (not retried
// into "unexpected EOF").
func TestEncodedRangeRefused(t *testing.T) {
	h := &hostile{data: testData(20000), etag: `"v1"`, gzip: true}
	s, err := openHostile(t, h.start(t), remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h.mu.Lock()
	before := h.replies
	h.mu.Unlock()
	if _, err := s.ReadAt(make([]byte, 10), 9000); err == nil || !strings.Contains(err.Error(), `Content-Encoding "gzip"`) {
		t.Fatalf("read of an encoded range: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.replies - before; n != 1 {
		t.Fatalf("%d requests for an encoded range, want 1 (not retried)", n)
	}
}

// TestNoRefererOnRedirect: whatever the redirect (301, 302, 303, 307,
// 308, to this host or another), its target sees no Referer, so a
// presigned URL's query never reaches it, nor the URL's user info.
func TestNoRefererOnRedirect(t *testing.T) {
	data := testData(5000)
	var mu sync.Mutex
	var seen []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Referer")+"|"+r.Header.Get("Authorization")+"|"+r.URL.RawQuery)
		mu.Unlock()
		(&hostile{data: data, etag: `"v1"`}).ServeHTTP(w, r)
	}))
	defer target.Close()
	// The other host: the same loopback server under another name.
	other := strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, to := range []string{target.URL, other} {
			from := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, to+"/blob/f.bin", code)
			}))
			u, _ := url.Parse(from.URL + "/f.bin?X-Amz-Signature=sig123&token=tok456")
			u.User = url.UserPassword("user", "pw789")
			st, key, err := New(u)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := remote.New(st, remote.Options{PartSize: 4096})
			s, err := c.Open(context.Background(), key)
			if err != nil {
				t.Fatalf("%d to %s: %v", code, to, err)
			}
			s.Close()
			from.Close()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("no request reached the redirect target")
	}
	for _, s := range seen {
		for _, secret := range []string{"sig123", "tok456", "pw789", "dXNlcjpwdzc4OQ"} {
			if strings.Contains(s, secret) {
				t.Fatalf("the redirect target saw %q (Referer|Authorization|query)", s)
			}
		}
		if ref, _, _ := strings.Cut(s, "|"); ref != "" {
			t.Fatalf("the redirect target saw Referer %q", ref)
		}
	}
}

// TestRangeIgnoredRefused: a server that answers a ranged GET with the
// whole file (200) is refused at open, small file or not, as the
// package documents.
func TestRangeIgnoredRefused(t *testing.T) {
	for _, n := range []int{10, 20000} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"v1"`)
			w.Write(testData(n))
		}))
		_, err := openHostile(t, srv.URL, remote.Options{})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "does not support Range requests") || !strings.Contains(err.Error(), "download it") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%d-byte file from a server without Range: %v; want one line saying what to do", n, err)
		}
	}
}

// TestPythonHTTPServerRefused: python3 -m http.server, the first server
// anyone tries, does not answer Range requests: refused at open with one
// line that says what to do (a server that answers them, or download
// the file). Needs python3 (fails under CI=true without it).
func TestPythonHTTPServerRefused(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.SkipOrFail(t, "python3 not found")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.bin"), testData(20000), 0o644); err != nil {
		t.Fatal(err)
	}
	// Port 0: the server binds a free port itself and says which on its
	// first line (unbuffered, -u), once it listens. A port chosen here
	// and bound by the server later could be taken in between by another
	// test's connection or server.
	cmd := exec.Command(py, "-u", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir, "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
		io.Copy(io.Discard, out)
	}()
	var first string
	select {
	case first = <-line:
	case <-time.After(2 * time.Minute):
		t.Fatal("python3 -m http.server did not start in 2 minutes")
	}
	m := regexp.MustCompile(` port ([0-9]+) `).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("python3 -m http.server: first line %q, want one that says its port", first)
	}
	base := "http://127.0.0.1:" + m[1]
	_, err = openHostile(t, base, remote.Options{})
	if err == nil || !strings.Contains(err.Error(), "does not support Range requests") || !strings.Contains(err.Error(), "a server that answers Range requests") || !strings.Contains(err.Error(), "download it") {
		t.Fatalf("python3 -m http.server: %v; want a refusal that says what to do", err)
	}
}
