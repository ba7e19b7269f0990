package s3_test

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/remote/storetest"
	"github.com/lazyweights/tensorfs/backing/s3"
	"github.com/lazyweights/tensorfs/backing/s3/s3test"
)

// TestConformance runs the stores' conformance suite against a real S3
// server (versitygw), reached through a loopback proxy that holds, cuts
// or refuses replies on request; then with the GETs presigned through a
// cache tier (Options.Proxy).
func TestConformance(t *testing.T) {
	srv := s3test.Start(t) // one server, a bucket for each run
	t.Run("direct", func(t *testing.T) { storetest.Run(t, harness(srv, "conformance", false)) })
	t.Run("tier", func(t *testing.T) { storetest.Run(t, harness(srv, "conformance-tier", true)) })
}

func harness(srv *s3test.Server, bucket string, tier bool) storetest.Harness {
	return func(t *testing.T, objects map[string][]byte) *storetest.Fixture {
		srv.Bucket(t, bucket)
		for k, v := range objects {
			srv.Put(t, bucket, k, v)
		}
		target, err := url.Parse(srv.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		// The endpoint is a proxy in front of the server that holds,
		// cuts or refuses replies on request; with a tier, the
		// presigned GETs reach it through the tier (a forward proxy
		// that passes every byte on at once, as nginx streams).
		var hold storetest.Holder
		px := httptest.NewServer(hold.Wrap(httputil.NewSingleHostReverseProxy(target)))
		t.Cleanup(px.Close)
		srv.Setenv(t)
		t.Setenv("AWS_ENDPOINT_URL", px.URL)
		opts := s3.Options{Logf: t.Logf}
		if tier {
			fwd := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {}, FlushInterval: -1}
			tp := httptest.NewServer(fwd)
			t.Cleanup(tp.Close)
			opts.Proxy, _ = url.Parse(tp.URL)
		}
		st, err := s3.New(context.Background(), bucket, opts)
		if err != nil {
			t.Fatal(err)
		}
		return &storetest.Fixture{
			Store:   st,
			Replace: func(t *testing.T, key string, data []byte) { srv.Put(t, bucket, key, data) },
			Holder:  &hold,
			Denied: func(t *testing.T) (remote.Store, string) {
				t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
				bad, err := s3.New(context.Background(), bucket, opts)
				if err != nil {
					t.Fatal(err)
				}
				return bad, "conformance/ranges.bin"
			},
			Secrets: []string{s3test.SecretKey, "not-the-secret"},
			Lacks: map[string]string{
				"Expire":   "each GET is signed as it is sent (presigned, behind a proxy, for that one request): nothing the store keeps expires",
				"Redirect": "S3 answers a GET it can serve itself; the store follows no redirect",
			},
		}
	}
}
