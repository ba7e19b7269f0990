package httpsrc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/httpsrc"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/remote/storetest"
)

// Secrets the loopback servers put in URLs: the store's own query (a
// presigned URL's) and the one of the redirects it follows.
const (
	querySecret    = "QuErYsEcReT0001"
	redirectSecret = "ReDiReCtSeCrEt02"
)

// server is a loopback HTTP server of objects, as nginx (ETag and
// Last-Modified: etag) or Go's http.FileServer over a directory
// (Last-Modified only) serves files, with redirects and refusals on
// request.
type server struct {
	etag bool
	dir  string // the FileServer's directory, when !etag
	hold storetest.Holder

	mu        sync.Mutex
	objects   map[string]object // GUARDED_BY(mu)
	redirects map[string]int    // GUARDED_BY(mu): key -> hops, < 0 forever
}

type object struct {
	data []byte
	etag string
	mod  time.Time
}

// epoch is the modification time of the objects as first served.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (s *server) put(key string, data []byte, mod time.Time) {
	sum := sha256.Sum256(data)
	s.objects[key] = object{data: data, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, mod: mod}
	if !s.etag {
		p := filepath.Join(s.dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			panic(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			panic(err)
		}
	}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	if strings.HasPrefix(key, "private/") {
		http.Error(w, "no", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	hops, redirected := s.redirects[key]
	obj, ok := s.objects[key]
	s.mu.Unlock()
	if redirected {
		hop, _ := strconv.Atoi(r.URL.Query().Get("hop"))
		if hops < 0 || hop < hops {
			q := url.Values{"hop": {strconv.Itoa(hop + 1)}, "X-Amz-Signature": {redirectSecret}}
			http.Redirect(w, r, r.URL.Path+"?"+q.Encode(), http.StatusFound)
			return
		}
	}
	if !s.etag {
		http.FileServer(http.Dir(s.dir)).ServeHTTP(w, r)
		return
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", obj.etag)
	http.ServeContent(w, r, "", obj.mod, bytes.NewReader(obj.data))
}

func harness(etag bool) storetest.Harness {
	return func(t *testing.T, objects map[string][]byte) *storetest.Fixture {
		s := &server{etag: etag, dir: t.TempDir(), objects: map[string]object{}, redirects: map[string]int{}}
		for k, v := range objects {
			s.put(k, v, epoch)
		}
		srv := httptest.NewServer(s.hold.Wrap(s))
		t.Cleanup(srv.Close)
		u, err := url.Parse(srv.URL + "/conformance/ranges.bin?X-Amz-Signature=" + querySecret)
		if err != nil {
			t.Fatal(err)
		}
		st, _, err := httpsrc.New(u)
		if err != nil {
			t.Fatal(err)
		}
		return &storetest.Fixture{
			Store: st,
			Replace: func(t *testing.T, key string, data []byte) {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.put(key, data, s.objects[key].mod.Add(time.Hour))
			},
			Redirect: func(t *testing.T, key string, hops int) {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.redirects[key] = hops
			},
			Holder:  &s.hold,
			Denied:  func(t *testing.T) (remote.Store, string) { return st, "private/weights.bin" },
			Secrets: []string{querySecret, redirectSecret},
			Lacks: map[string]string{
				"Expire": "the store reads the URL it was given: a signature in it that expires cannot be renewed (its 403 is the Denied error)",
				"List":   "an HTTP server cannot be listed",
			},
		}
	}
}

// TestConformance runs the stores' conformance suite against a server
// that gives ETags (as nginx does) and one that gives Last-Modified only
// (Go's http.FileServer).
func TestConformance(t *testing.T) {
	for _, etag := range []bool{true, false} {
		t.Run(fmt.Sprintf("etag=%v", etag), func(t *testing.T) {
			storetest.Run(t, harness(etag))
		})
	}
}

// broken is a store that breaks one promise the suite holds stores to.
type broken struct {
	remote.Store
	mode string
}

func (b broken) Open(ctx context.Context, key string, head []byte) (remote.Object, int, error) {
	if b.mode == "uncancellable" {
		ctx = context.WithoutCancel(ctx)
	}
	obj, n, err := b.Store.Open(ctx, key, head)
	if b.mode == "twice" && err != nil {
		err = fmt.Errorf("%s: %w", b.URL(key), err)
	}
	return obj, n, err
}

func (b broken) Get(ctx context.Context, obj remote.Object, off int64, bufs [][]byte, filled func(int)) error {
	switch b.mode {
	case "unpinned":
		obj.ETag, obj.LastModified = "", time.Time{}
	case "leaky":
		// A watcher of the request that outlives it.
		go func() { <-context.WithoutCancel(ctx).Done() }()
	}
	return b.Store.Get(ctx, obj, off, bufs, filled)
}

// The ways broken breaks a store, each with the subtest of the suite
// that must fail and what it must say.
var brokenModes = []struct{ mode, fails, says string }{
	{"unpinned", "validators/store", "want an error of kind changed"},
	{"twice", "errors/missing", "names conformance/missing.bin 2 times, want once"},
	{"uncancellable", "cancel/before", "want an error wrapping context.Canceled"},
	{"leaky", "cancel/mid-body", "a goroutine in the store's code is left running"},
}

// TestBrokenStore is the suite against each broken store, run by
// TestSuiteCatchesBrokenStores in a process of its own; it does
// nothing otherwise.
func TestBrokenStore(t *testing.T) {
	if os.Getenv("STORETEST_BROKEN") == "" {
		return
	}
	for _, m := range brokenModes {
		t.Run(m.mode, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, objects map[string][]byte) *storetest.Fixture {
				f := harness(true)(t, objects)
				f.Store = broken{Store: f.Store, mode: m.mode}
				return f
			})
		})
	}
}

// TestSuiteCatchesBrokenStores: the suite fails a store that does not
// pin the version it opened, one whose errors name the object twice,
// one that ignores a cancelled context and one that leaves a goroutine
// behind each GET, each in the subtest that checks it, saying so.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStore$", "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_BROKEN=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed every broken store:\n%s", out)
	}
	for _, m := range brokenModes {
		// What the subtest said: the lines after its === RUN (-v
		// prints them as they come), up to the next test's.
		name := "TestBrokenStore/" + m.mode + "/" + m.fails
		_, said, _ := strings.Cut(string(out), "=== RUN   "+name+"\n")
		said, _, _ = strings.Cut(said, "\n=== ")
		if !strings.Contains(string(out), "--- FAIL: "+name+" ") || !strings.Contains(said, m.says) {
			t.Errorf("%s: the suite did not fail %s saying %q:\n%s", m.mode, m.fails, m.says, out)
		}
	}
}
