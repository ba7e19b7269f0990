package integration

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestOCIFleetTLSStorage: a registry that wants a password (htpasswd)
// and redirects its blob GETs to an https:// storage (distribution's
// redirect middleware; a loopback TLS server with a certificate no
// process trusts) is read through the nginx tier with
// --proxy-terminates-tls: the credentialed GETs go to the registry
// directly, the redirects to the storage to the tier as absolute-form
// https:// GETs, which it makes and caches. 4 loads in turn are each
// byte-exact and the storage sends at most 1.10x the model's bytes.
// Before oci:// took the flag, the redirect went to the tier through
// CONNECT, which it refuses (and could not cache), then to the storage
// directly, whose certificate is not trusted: exit 1.
func TestOCIFleetTLSStorage(t *testing.T) {
	path, want := fleetCheckpoint(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	repo := "fleet/tls"
	files := &countingFiles{}
	tlsServer := func(t *testing.T, h http.Handler) string {
		srv := httptest.NewTLSServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	reg, env := redirectingRegistry(t, repo, data, files, tlsServer, nil)
	ng := startNginx(t)
	src := "oci://" + reg + "/" + repo + ":v1"
	for i := range 4 {
		r := runEnv(t, env, "load", "--quiet", "--sha256", "--part-size", "1MiB", "--proxy", ng.Tier, "--proxy-terminates-tls", src)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("load %d of 4: exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", i+1, r.code, r.stdout, want, r.stderr)
		}
		if strings.Contains(r.stderr, "reading from the origin directly") {
			t.Fatalf("load %d: the tier was bypassed: %s", i+1, r.stderr)
		}
	}
	ng.Quit(t)
	size := int64(len(data))
	ratio := float64(files.bytes.Load()) / float64(size)
	t.Logf("the https storage sent %d bytes in %d GETs for 4 loads of a model of %d: %.3fx", files.bytes.Load(), files.gets.Load(), size, ratio)
	if files.bytes.Load() < size || ratio > 1.10 {
		t.Fatalf("the https storage sent %.3fx the model for 4 loads through the tier, want 1 to 1.10x", ratio)
	}
}
