package httpsrc

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// TestDiskCacheOrigin: the disk cache keys parts by the whole URL but
// its secrets. Servers (or queries) that serve other bytes under the
// same path, size, ETag and Last-Modified never share parts; a URL
// signed again (another presigned signature) does.
func TestDiskCacheOrigin(t *testing.T) {
	const size = 20000
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	var gets atomic.Int64
	// serve answers every request for /m.bin with bytes that its fill
	// byte (and the query's "rev") chooses, under one ETag and
	// Last-Modified.
	serve := func(fill byte) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gets.Add(1)
			b := fill
			if rev := r.URL.Query().Get("rev"); rev != "" {
				b += rev[0]
			}
			w.Header().Set("ETag", `"same"`)
			http.ServeContent(w, r, "m.bin", mtime, bytes.NewReader(bytes.Repeat([]byte{b}, size)))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	one, two := serve(1), serve(2)
	dir := t.TempDir()
	read := func(raw string) ([]byte, int64) {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		st, key, err := New(u)
		if err != nil {
			t.Fatal(err)
		}
		c, err := remote.New(st, remote.Options{PartSize: 4096, Readahead: -1, CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Open(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		before := gets.Load()
		buf := make([]byte, size)
		if _, err := s.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		return buf, gets.Load() - before
	}
	for _, tc := range []struct {
		url  string
		fill byte
		warm bool // served from the disk cache: no GET after Open
	}{
		{one.URL + "/m.bin", 1, false},
		{one.URL + "/m.bin", 1, true},
		{two.URL + "/m.bin", 2, false},
		{one.URL + "/m.bin?rev=a", 1 + 'a', false},
		{one.URL + "/m.bin?rev=b", 1 + 'b', false},
		{one.URL + "/m.bin?rev=b&X-Amz-Signature=s1&X-Amz-Date=d1", 1 + 'b', true},
		{one.URL + "/m.bin?X-Amz-Credential=c2&rev=b&X-Amz-Signature=s2", 1 + 'b', true},
		{one.URL + "/m.bin?rev=a", 1 + 'a', true},
	} {
		got, n := read(tc.url)
		for i := range got {
			if got[i] == tc.fill {
				continue
			}
			t.Fatalf("%s: byte %d is %d, the server's are %d: the disk cache served another URL's parts", tc.url, i, got[i], tc.fill)
		}
		if tc.warm && n != 0 {
			t.Errorf("%s: %d GETs, want none (warm)", tc.url, n)
		}
		if !tc.warm && n == 0 {
			t.Errorf("%s: served from the disk cache", tc.url)
		}
	}
}
