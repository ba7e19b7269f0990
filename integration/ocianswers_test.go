package integration

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestOCIRegistryAnswers: load --sha256 of a ModelPack artifact on
// Debian's docker-registry, through a loopback proxy that answers the
// blob GETs as a hostile or overloaded registry does: a Range answered
// with the whole blob (200) is one line (never a mix of bytes); 429 and
// 503 for a while are waited out and the bytes are the file's; a 500
// that lasts, a 403 and a 401 are one line naming the status, the file
// and its blob, with exit 1. The manifest's GET answered 503 or 429 for
// a while is waited out too (before oci.retryable, it was one line).
func TestOCIRegistryAnswers(t *testing.T) {
	reg := testenv.StartRegistry(t)
	st := testenv.Path(t, "safetensors/swift/data.safetensors")
	data, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	repo := "models/swift"
	cfg := testenv.PushBlob(t, reg.Host, repo, "application/vnd.cncf.model.config.v1+json", []byte(`{}`), nil)
	w := testenv.PushBlob(t, reg.Host, repo, "application/vnd.cncf.model.weight.v1.raw", data, map[string]string{"org.cncf.model.filepath": "model.safetensors"})
	testenv.PushManifest(t, reg.Host, repo, "v1", "application/vnd.cncf.model.manifest.v1+json", cfg, []testenv.OCIDescriptor{w})
	want := runTensorfs(t, "load", "--sha256", st)
	if want.code != 0 {
		t.Fatalf("load --sha256 %s: exit %d %s", st, want.code, want.stderr)
	}
	target, _ := url.Parse("http://" + reg.Host)

	for _, c := range []struct {
		name    string
		status  int    // what the blob GETs are answered, 0 for the registry's answer
		times   int    // how many are (0: all)
		noRange bool   // the Range header is dropped: the registry answers 200
		want    string // "": the file's sha256s
		path    string // the requests answered so: "" for the weight's blob
	}{
		{name: "range answered 200", noRange: true, want: "the server does not support Range requests (it answered a ranged GET with the whole file, HTTP 200)"},
		{name: "429 for a while", status: http.StatusTooManyRequests, times: 3},
		{name: "503 for a while", status: http.StatusServiceUnavailable, times: 3},
		{name: "500 always", status: http.StatusInternalServerError, want: "HTTP 500"},
		{name: "403", status: http.StatusForbidden, want: "HTTP 403"},
		{name: "401", status: http.StatusUnauthorized, want: "401"},
		{name: "manifest 503 for a while", status: http.StatusServiceUnavailable, times: 2, path: "/manifests/v1"},
		{name: "manifest 429 for a while", status: http.StatusTooManyRequests, times: 2, path: "/manifests/v1"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			var mu sync.Mutex
			answered := 0
			rp := httputil.NewSingleHostReverseProxy(target)
			px := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				path := c.path
				if path == "" {
					path = "/blobs/" + w.Digest
				}
				if strings.HasSuffix(r.URL.Path, path) {
					if c.noRange {
						r.Header.Del("Range")
					}
					mu.Lock()
					hostile := c.status != 0 && (c.times == 0 || answered < c.times)
					if hostile {
						answered++
					}
					mu.Unlock()
					if hostile {
						rw.Header().Set("Retry-After", "0")
						http.Error(rw, http.StatusText(c.status), c.status)
						return
					}
				}
				rp.ServeHTTP(rw, r)
			}))
			defer px.Close()
			src := "oci://" + strings.TrimPrefix(px.URL, "http://") + "/" + repo + ":v1"
			r := runTensorfs(t, "load", "--sha256", "--remote-timeout", "3s", src)
			if c.want == "" {
				if r.code != 0 || r.stdout != want.stdout {
					t.Errorf("load --sha256 %s: exit %d\n%s%s\nwant the file's:\n%s", src, r.code, r.stdout, r.stderr, want.stdout)
				}
				return
			}
			line := strings.TrimRight(r.stderr, "\n")
			t.Log(line)
			if r.code != 1 || strings.Contains(line, "\n") || !strings.Contains(line, c.want) || !strings.Contains(line, w.Digest) {
				t.Errorf("load --sha256 %s: exit %d\n%s%s\nwant exit 1, one line naming the blob and %q", src, r.code, r.stdout, r.stderr, c.want)
			}
		})
	}
}
