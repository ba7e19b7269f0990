package integration

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestOCICredentials: a model pushed to Debian's docker-registry behind
// htpasswd auth loads (load --sha256) with the credential of
// $REGISTRY_AUTH_FILE as the file it was pushed from does; a wrong
// password and a credential helper are one line each, exit 1, the
// password in no output.
func TestOCICredentials(t *testing.T) {
	open := testenv.StartRegistry(t)
	st := testenv.Path(t, "safetensors/swift/data.safetensors")
	data, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.PushBlob(t, open.Host, "private/swift", "application/vnd.cncf.model.config.v1+json", []byte(`{}`), nil)
	w := testenv.PushBlob(t, open.Host, "private/swift", "application/vnd.cncf.model.weight.v1.raw", data, map[string]string{"org.cncf.model.filepath": "model.safetensors"})
	testenv.PushManifest(t, open.Host, "private/swift", "v1", "", cfg, []testenv.OCIDescriptor{w})

	dir := t.TempDir()
	reg := testenv.StartRegistryWith(t, open.Store, testenv.HtpasswdAuth(t, dir, "alice", "s3cret-pw"))
	src := "oci://" + reg.Host + "/private/swift:v1"
	authFile := filepath.Join(dir, "auth.json")
	t.Setenv("REGISTRY_AUTH_FILE", authFile)
	t.Setenv("DOCKER_CONFIG", dir)
	write := func(body string) {
		if err := os.WriteFile(authFile, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

	write(`{"auths":{"` + reg.Host + `":{"auth":"` + b64("alice:s3cret-pw") + `"}}}`)
	want := runTensorfs(t, "load", "--sha256", st)
	got := runTensorfs(t, "load", "--sha256", src)
	if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
		t.Errorf("load --sha256 %s: exit %d\n%s%s\nthe file: exit %d\n%s%s", src, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
	}

	for _, c := range []struct{ name, body, want string }{
		{"wrong password", `{"auths":{"` + reg.Host + `":{"auth":"` + b64("alice:wrong-s3cret") + `"}}}`,
			"the registry refused the credential for " + reg.Host + " from " + authFile + " (HTTP 401)"},
		{"helper", `{"auths":{"` + reg.Host + `":{}},"credHelpers":{"` + reg.Host + `":"pass"}}`,
			"the credential helper docker-credential-pass, which tensorfs does not run"},
	} {
		write(c.body)
		r := runTensorfs(t, "load", "--sha256", src)
		out := r.stdout + r.stderr
		t.Logf("%s: %s", c.name, strings.TrimSpace(out))
		if r.code != 1 || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 || strings.Contains(out, "s3cret") {
			t.Errorf("%s: exit %d, want 1 and one line holding %q, no password:\n%s", c.name, r.code, c.want, out)
		}
	}
}
