package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestOCICompressedTar: a ModelPack artifact whose weights and
// config.json are one .tar+gzip layer, pushed to Debian's
// docker-registry, loads with the sha256 of the file it was tarred from
// and passes check --data; a registry that serves other compressed bytes
// of the same size under the layer's digest (the same tar gzipped with
// another header) fails check and check --data (exit 1) naming the
// layer and both digests.
func TestOCICompressedTar(t *testing.T) {
	reg := testenv.StartRegistry(t).Host
	st := testenv.Path(t, "safetensors/swift/data.safetensors")
	data, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	tb := bytes.NewBuffer(modelTar(data, []byte(`{"architectures":["Test"]}`)))
	gzipped := func(mtime time.Time) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.ModTime = mtime
		w.Write(tb.Bytes())
		w.Close()
		return b.Bytes()
	}
	blob, other := gzipped(time.Time{}), gzipped(time.Unix(1e9, 0))
	repo := "models/swift-tgz"
	cfg := testenv.PushBlob(t, reg, repo, "application/vnd.cncf.model.config.v1+json", []byte(`{"config":{"format":"safetensors"}}`), nil)
	l := testenv.PushBlob(t, reg, repo, "application/vnd.cncf.model.weight.v1.tar+gzip", blob, nil)
	testenv.PushManifest(t, reg, repo, "v1", "application/vnd.cncf.model.manifest.v1+json", cfg, []testenv.OCIDescriptor{l})
	src := "oci://" + reg + "/" + repo + ":v1"

	want := runTensorfs(t, "load", "--sha256", st)
	got := runTensorfs(t, "load", "--sha256", src)
	if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
		t.Errorf("load --sha256: %s gives exit %d\n%s%s\nthe file exit %d\n%s%s", src, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
	}
	if r := runTensorfs(t, "check", "--data", src); r.code != 0 {
		t.Errorf("check --data %s: exit %d\n%s%s", src, r.code, r.stdout, r.stderr)
	}

	lying := "oci://" + lyingRegistry(t, reg, l.Digest, other) + "/" + repo + ":v1"
	for _, args := range [][]string{{"check", lying}, {"check", "--data", lying}} {
		r := runTensorfs(t, args...)
		msg := "layer " + l.Digest + ": the sha256 of its " + itoa(int64(len(blob))) + " compressed bytes is " + strings.TrimPrefix(testenv.Digest(other), "sha256:") + ", not its digest " + l.Digest
		if r.code != 1 || !strings.Contains(r.stderr, msg) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s of a registry serving other bytes: exit %d, want 1 with one line holding %q\n%s%s", args, r.code, msg, r.stdout, r.stderr)
		}
	}
}

// modelTar is a tar of model.safetensors (weights) and config.json
// (config), regular files in that order.
func modelTar(weights, config []byte) []byte {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, f := range []struct {
		name string
		data []byte
	}{{"model.safetensors", weights}, {"config.json", config}} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg})
		tw.Write(f.data)
	}
	tw.Close()
	return tb.Bytes()
}

// lyingRegistry is a registry on loopback (its HOST:PORT) that proxies
// the one at reg but serves the blob of digest as served, with an ETag
// of its own.
func lyingRegistry(t *testing.T, reg, digest string, served []byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/blobs/"+digest) {
			rw.Header().Set("ETag", `"x"`)
			http.ServeContent(rw, r, "", time.Time{}, bytes.NewReader(served))
			return
		}
		req, _ := http.NewRequest(r.Method, "http://"+reg+r.URL.Path, nil)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			rw.Header()[k] = v
		}
		rw.WriteHeader(resp.StatusCode)
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		rw.Write(b.Bytes())
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
