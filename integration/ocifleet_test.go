package integration

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// countingProxy is a loopback reverse proxy in front of a registry that
// counts the bytes of the blob bodies the registry served through it,
// whoever asked (the tier, or a process that went around it).
type countingProxy struct {
	rp        *httputil.ReverseProxy
	blobBytes atomic.Int64
	blobGets  atomic.Int64
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func newCountingProxy(host string) *countingProxy {
	c := &countingProxy{rp: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host})}
	c.rp.ModifyResponse = func(resp *http.Response) error {
		if strings.Contains(resp.Request.URL.Path, "/blobs/sha256:") && resp.Request.Method == http.MethodGet {
			c.blobGets.Add(1)
			resp.Body = countingBody{resp.Body, &c.blobBytes}
		}
		return nil
	}
	return c
}

func (c *countingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.rp.ServeHTTP(w, r) }

// TestOCIFleetThroughTier: 8 processes (7 loads and a mount) read one
// ModelPack artifact from Debian's docker-registry through the nginx
// tier (--proxy): each is byte-exact, and the registry serves at most
// 1.10x the model's blob bytes (its blobs are digest-addressed: one
// cached copy serves every process), against about 8x through a proxy
// that does not cache. The registry's bytes are counted by a reverse
// proxy in front of it, so a GET that went around the tier counts too.
func TestOCIFleetThroughTier(t *testing.T) {
	needFUSE(t)
	path, want := fleetCheckpoint(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := testenv.StartRegistry(t)
	repo := "fleet/model"
	cfg := testenv.PushBlob(t, reg.Host, repo, "application/vnd.cncf.model.config.v1+json", []byte(`{"config":{"format":"safetensors"}}`), nil)
	w := testenv.PushBlob(t, reg.Host, repo, "application/vnd.cncf.model.weight.v1.raw", data, map[string]string{"org.cncf.model.filepath": "model.safetensors"})
	testenv.PushManifest(t, reg.Host, repo, "v1", "application/vnd.cncf.model.manifest.v1+json", cfg, []testenv.OCIDescriptor{w})
	size := int64(len(data))
	for _, tier := range []bool{true, false} {
		name := "through the tier"
		if !tier {
			name = "without the tier"
		}
		t.Run(name, func(t *testing.T) {
			counter := newCountingProxy(reg.Host)
			front := strings.TrimPrefix(httpServerOf(t, counter), "http://")
			ng := startNginx(t)
			proxy := ng.Tier
			if !tier {
				proxy = ng.Pass
			}
			src := "oci://" + front + "/" + repo + ":v1"
			stderr := fleet(t, nil, src, want, "--part-size", "1MiB", "--proxy", proxy)
			if strings.Contains(stderr, "reading from the origin directly") {
				t.Fatalf("the tier was bypassed: %s", stderr)
			}
			ng.Quit(t)
			got := counter.blobBytes.Load()
			ratio := float64(got) / float64(size)
			t.Logf("%s: the registry served %d blob bytes in %d GETs for a model of %d: %.3fx", name, got, counter.blobGets.Load(), size, ratio)
			if ratio < 1 {
				t.Fatalf("the registry served %.3fx the model: the counting is off", ratio)
			}
			if tier && ratio > 1.10 {
				t.Fatalf("the registry served %.3fx the model through the tier, want at most 1.10x", ratio)
			}
			if !tier && ratio < 7.5 {
				t.Fatalf("the registry served %.3fx the model without the tier, want about 8x (the counting is off)", ratio)
			}
		})
	}
}

// countingFiles serves a directory (a registry's filesystem storage, as
// its storage backend: S3, a CDN) and counts the bytes it sent.
type countingFiles struct {
	h     http.Handler
	bytes atomic.Int64
	gets  atomic.Int64
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

func (c *countingFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		c.gets.Add(1)
	}
	c.h.ServeHTTP(countingWriter{w, &c.bytes}, r)
}

// redirectingRegistry pushes data as a ModelPack artifact (its
// model.safetensors) to repo of Debian's docker-registry that wants
// alice's password (htpasswd) and redirects its blob GETs to its
// storage: files over the registry's filesystem store, served by serve
// (which returns its URL: plain or TLS). front gives the registry's
// HOST:PORT as the processes reach it (its own, or a proxy's in front
// of it). It returns that HOST:PORT and the environment naming the auth
// file that holds alice's credential for it.
func redirectingRegistry(t *testing.T, repo string, data []byte, files *countingFiles, serve func(*testing.T, http.Handler) string, front func(reg string) string) (string, []string) {
	t.Helper()
	open := testenv.StartRegistry(t)
	cfg := testenv.PushBlob(t, open.Host, repo, "application/vnd.cncf.model.config.v1+json", []byte(`{}`), nil)
	w := testenv.PushBlob(t, open.Host, repo, "application/vnd.cncf.model.weight.v1.raw", data, map[string]string{"org.cncf.model.filepath": "model.safetensors"})
	testenv.PushManifest(t, open.Host, repo, "v1", "", cfg, []testenv.OCIDescriptor{w})
	files.h = http.FileServer(http.Dir(open.Store))
	storage := serve(t, files)
	dir := t.TempDir()
	extra := testenv.HtpasswdAuth(t, dir, "alice", "s3cret-pw") + fmt.Sprintf("middleware:\n  storage:\n    - name: redirect\n      options:\n        baseurl: %s\n", storage)
	reg := testenv.StartRegistryWith(t, open.Store, extra)
	host := reg.Host
	if front != nil {
		host = front(reg.Host)
	}
	authFile := filepath.Join(dir, "auth.json")
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret-pw"))
	if err := os.WriteFile(authFile, []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return host, []string{"REGISTRY_AUTH_FILE=" + authFile, "DOCKER_CONFIG=" + dir}
}

// TestOCIFleetCredentialRedirect: a registry that wants a password
// (htpasswd) and redirects blob GETs to its storage (distribution's
// redirect middleware, as registries on S3 or behind a CDN do): 8
// processes through the tier send the credential to the registry
// directly and read the storage through the tier, which serves them
// all from one copy: the storage sends at most 1.10x the model's bytes
// (before: every blob GET went directly, 8x).
func TestOCIFleetCredentialRedirect(t *testing.T) {
	needFUSE(t)
	path, want := fleetCheckpoint(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	repo := "fleet/private"
	files := &countingFiles{}
	var counter *countingProxy
	front, env := redirectingRegistry(t, repo, data, files, httpServerOf, func(reg string) string {
		counter = newCountingProxy(reg)
		return strings.TrimPrefix(httpServerOf(t, counter), "http://")
	})
	ng := startNginx(t)
	stderr := fleet(t, env, "oci://"+front+"/"+repo+":v1", want, "--part-size", "1MiB", "--proxy", ng.Tier)
	if strings.Contains(stderr, "reading from the origin directly") {
		t.Fatalf("the tier was bypassed: %s", stderr)
	}
	ng.Quit(t)
	size := int64(len(data))
	got := files.bytes.Load() + counter.blobBytes.Load()
	ratio := float64(got) / float64(size)
	t.Logf("the storage sent %d bytes in %d GETs, the registry %d bytes of blob answers in %d, for a model of %d: %.3fx", files.bytes.Load(), files.gets.Load(), counter.blobBytes.Load(), counter.blobGets.Load(), size, ratio)
	if files.bytes.Load() < size {
		t.Fatalf("the storage sent %d bytes, less than the model's %d: the blobs were not redirected", files.bytes.Load(), size)
	}
	if ratio > 1.10 {
		t.Fatalf("the registry and its storage sent %.3fx the model through the tier, want at most 1.10x", ratio)
	}
}
