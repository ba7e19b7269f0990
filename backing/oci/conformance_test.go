package oci_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing/oci"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/remote/storetest"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestConformance runs the stores' conformance suite against Debian's
// docker-registry holding a ModelPack artifact of the suite's objects
// (one raw weight layer each, named by its path annotation), reached
// through a loopback proxy that holds replies mid-body on request.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, objects map[string][]byte) *storetest.Fixture {
		reg := testenv.StartRegistry(t)
		keys := make([]string, 0, len(objects))
		for k := range objects {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var layers []testenv.OCIDescriptor
		for _, k := range keys {
			layers = append(layers, testenv.PushBlob(t, reg.Host, "conformance", oci.MediaWeightRaw, objects[k], map[string]string{"org.cncf.model.filepath": k}))
		}
		cfg := testenv.PushBlob(t, reg.Host, "conformance", "application/vnd.cncf.model.config.v1+json", []byte("{}"), nil)
		testenv.PushManifest(t, reg.Host, "conformance", "v1", "application/vnd.cncf.model.manifest.v1+json", cfg, layers)
		target, err := url.Parse("http://" + reg.Host)
		if err != nil {
			t.Fatal(err)
		}
		var hold storetest.Holder
		open := func(t *testing.T, h http.Handler) *oci.Store {
			px := httptest.NewServer(h)
			t.Cleanup(px.Close)
			st, _, err := oci.Open(context.Background(), "oci://"+strings.TrimPrefix(px.URL, "http://")+"/conformance:v1", oci.Options{Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		rp := httputil.NewSingleHostReverseProxy(target)
		return &storetest.Fixture{
			Store:  open(t, hold.Wrap(rp)),
			Holder: &hold,
			Denied: func(t *testing.T) (remote.Store, string) {
				// A registry that gives the manifest and refuses
				// the blobs.
				return open(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.Contains(r.URL.Path, "/blobs/") {
						http.Error(w, "denied", http.StatusForbidden)
						return
					}
					rp.ServeHTTP(w, r)
				})), "conformance/ranges.bin"
			},
			Lacks: map[string]string{
				"Replace":  "a file is a blob named by its digest, pinned by the manifest's: it cannot change under a reader",
				"Expire":   "anonymous pulls: no signed URL (a registry token that expires is fetched again by auth.go, tested in oci_test.go)",
				"Redirect": "docker-registry serves its filesystem's blobs itself (redirects to a blob store are httpsrc's, run in its suite)",
			},
		}
	})
}
