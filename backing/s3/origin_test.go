package s3_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/s3"
)

// TestDiskCacheEndpoints: two S3 endpoints serving bucket bkt, key obj
// with the same size, ETag and Last-Modified but other bytes share no
// disk cache parts; the same endpoint again is served warm. The
// endpoints are loopback servers that answer GetObject (path style,
// ranged) as S3 does.
func TestDiskCacheEndpoints(t *testing.T) {
	const size = 40 << 10
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	var gets atomic.Int64
	serve := func(fill byte) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/bkt/obj" {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			gets.Add(1)
			w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
			http.ServeContent(w, r, "obj", mtime, bytes.NewReader(bytes.Repeat([]byte{fill}, size)))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	one, two := serve(1), serve(2)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	dir := t.TempDir()
	for _, tc := range []struct {
		endpoint string
		fill     byte
		warm     bool
	}{
		{one, 1, false},
		{two, 2, false},
		{one, 1, true},
		{two, 2, true},
	} {
		t.Setenv("AWS_ENDPOINT_URL", tc.endpoint)
		st, err := s3.New(context.Background(), "bkt", s3.Options{NoSign: true})
		if err != nil {
			t.Fatal(err)
		}
		o := small()
		o.CacheDir, o.Readahead = dir, -1
		c, err := remote.New(st, o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Open(context.Background(), "obj")
		if err != nil {
			t.Fatal(err)
		}
		before := gets.Load()
		buf := make([]byte, size)
		if _, err := s.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		s.Close()
		for i := range buf {
			if buf[i] != tc.fill {
				t.Fatalf("%s: byte %d is %d, the endpoint's are %d: the disk cache served another endpoint's parts", tc.endpoint, i, buf[i], tc.fill)
			}
		}
		if n := gets.Load() - before; tc.warm != (n == 0) {
			t.Errorf("%s: %d GETs after Open, warm %v", tc.endpoint, n, tc.warm)
		}
	}
}
