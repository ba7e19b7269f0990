package integration

import (
	"os"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestOCICheckLoad: a ModelPack artifact pushed to Debian's
// docker-registry loads with the sha256 of the file it was pushed from
// (load --sha256), and check --data verifies its weight and config
// layers and its config blob against their digests; a registry that serves other bytes of
// the same size under a layer's digest fails check --data (exit 1),
// naming the file and both digests.
func TestOCICheckLoad(t *testing.T) {
	reg := testenv.StartRegistry(t).Host
	st := testenv.Path(t, "safetensors/swift/data.safetensors")
	data, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	repo := "models/swift"
	cfg := testenv.PushBlob(t, reg, repo, "application/vnd.cncf.model.config.v1+json", []byte(`{"config":{"format":"safetensors"}}`), nil)
	w := testenv.PushBlob(t, reg, repo, "application/vnd.cncf.model.weight.v1.raw", data, map[string]string{"org.cncf.model.filepath": "model.safetensors"})
	c := testenv.PushBlob(t, reg, repo, "application/vnd.cncf.model.weight.config.v1.raw", []byte(`{"architectures":["Test"]}`), map[string]string{"org.cncf.model.filepath": "config.json"})
	testenv.PushManifest(t, reg, repo, "v1", "application/vnd.cncf.model.manifest.v1+json", cfg, []testenv.OCIDescriptor{w, c})
	src := "oci://" + reg + "/" + repo + ":v1"

	want := runTensorfs(t, "load", "--sha256", st)
	got := runTensorfs(t, "load", "--sha256", src)
	if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
		t.Errorf("load --sha256: %s gives exit %d\n%s%s\nthe file exit %d\n%s%s", src, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
	}
	r := runTensorfs(t, "check", "--data", src)
	if r.code != 0 || !strings.Contains(r.stdout, "3 files verified by sha256") {
		t.Errorf("check --data %s: exit %d\n%s%s", src, r.code, r.stdout, r.stderr)
	}

	// A registry that proxies the real one but serves the weight
	// blob's bytes with one changed.
	bad := append([]byte(nil), data...)
	bad[len(bad)-1] ^= 0xff
	lying := "oci://" + lyingRegistry(t, reg, w.Digest, bad) + "/" + repo + ":v1"
	r = runTensorfs(t, "check", "--data", lying)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "model.safetensors") || !strings.Contains(r.stdout+r.stderr, "its source states "+strings.TrimPrefix(w.Digest, "sha256:")) {
		t.Errorf("check --data of a registry serving other bytes: exit %d, want 1 naming the file and both digests\n%s%s", r.code, r.stdout, r.stderr)
	}
}
