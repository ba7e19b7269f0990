package s3_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/s3"
)

// fakeS3 is a loopback S3 endpoint of one bucket "bkt" holding "obj"
// and, in listings, a key with a control character; lie, when set,
// rewrites the Content-Range of ranged replies.
type fakeS3 struct {
	data []byte
	lie  atomic.Pointer[func(first, last int64) string]
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("list-type") {
		// A key no XML 1.0 document can hold raw: URL-encoded when
		// asked (encoding-type=url), else sent as it is, as stores do.
		enc := r.URL.Query().Get("encoding-type") == "url"
		bad, good := "dir/bad\x01name.json", "dir/obj"
		esc := func(s string) string { return s }
		encType := ""
		if enc {
			esc = url.QueryEscape
			encType = "<EncodingType>url</EncodingType>"
		}
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bkt</Name><Prefix>dir/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>%s<IsTruncated>false</IsTruncated><Contents><Key>%s</Key><Size>3</Size></Contents><Contents><Key>%s</Key><Size>%d</Size></Contents></ListBucketResult>`, encType, esc(bad), esc(good), len(f.data))
		return
	}
	w.Header().Set("ETag", `"e1"`)
	w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
	var a, b int64
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
		w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
		w.Write(f.data)
		return
	}
	b = min(b, int64(len(f.data))-1)
	cr := fmt.Sprintf("bytes %d-%d/%d", a, b, len(f.data))
	if lie := f.lie.Load(); lie != nil {
		cr = (*lie)(a, b)
	}
	w.Header().Set("Content-Range", cr)
	w.Header().Set("Content-Length", strconv.FormatInt(b-a+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(f.data[a : b+1])
}

func fakeStore(t *testing.T, f *fakeS3, logf func(string, ...any)) *s3.Store {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	st, err := s3.New(context.Background(), "bkt", s3.Options{Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestS3ContentRangeHeldToRequest: a reply labelled with other bytes
// than those asked for (same length and total) fails the read.
func TestS3ContentRangeHeldToRequest(t *testing.T) {
	f := &fakeS3{data: randomBytes(20000, 3)}
	c, err := remote.New(fakeStore(t, f, t.Logf), remote.Options{PartSize: 4096, Readahead: -1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lie := func(a, b int64) string { return fmt.Sprintf("bytes 0-%d/%d", b-a, len(f.data)) }
	f.lie.Store(&lie)
	if _, err := s.ReadAt(make([]byte, 100), 9000); !errors.Is(err, backing.ErrFault) || !strings.Contains(err.Error(), "Content-Range") {
		t.Fatalf("read through a lying Content-Range: %v", err)
	}
}

// TestS3ListSkipsControlCharacters: a key with a control character is
// skipped with one log line; the rest of the prefix is listed.
func TestS3ListSkipsControlCharacters(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	st := fakeStore(t, &fakeS3{data: randomBytes(100, 4)}, func(format string, args ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		mu.Unlock()
	})
	ents, _, err := st.List(context.Background(), "dir/")
	if err != nil || len(ents) != 1 || ents[0].Name != "obj" {
		t.Fatalf("List: %v %v", ents, err)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `bad\x01name.json`) {
		t.Fatalf("logged %q", logged)
	}
}
