package httpsrc

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCredentialDirectRedirectThroughTier: a store holding a registry's
// credential (Options.Authorization, as oci:// gives it) sends every
// request that carries it to the registry directly, and the redirect to
// the registry's storage (another host, no credential) through the
// tier, which caches it: the tier, recording every request, sees the
// storage's GETs and never the credential.
func TestCredentialDirectRedirectThroughTier(t *testing.T) {
	const cred = "Basic YWxpY2U6czNjcmV0"
	data := []byte(strings.Repeat("blob bytes ", 200))
	var mu sync.Mutex
	var seen []string // "who METHOD host path Authorization"
	record := func(who string, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, who+" "+r.Method+" "+r.Host+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	}
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("storage", r)
		w.Header().Set("ETag", `"blob"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer storage.Close()
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("registry", r)
		if r.Header.Get("Authorization") != cred {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, storage.URL+"/docker/registry/v2/blobs/sha256/ab/ab/data", http.StatusTemporaryRedirect)
	}))
	defer registry.Close()
	tier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("tier", r)
		forward(w, r)
	}))
	defer tier.Close()
	proxy, _ := url.Parse(tier.URL)
	u, _ := url.Parse(registry.URL + "/")
	st, _, err := NewWith(u, Options{Proxy: proxy, Logf: t.Logf, Authorization: func() string { return cred }})
	if err != nil {
		t.Fatal(err)
	}
	key := "v2/m/blobs/sha256:ab"
	obj, n, err := st.Open(context.Background(), key, make([]byte, 16))
	if err != nil || n != 16 {
		t.Fatalf("Open: %d %v", n, err)
	}
	buf := make([]byte, 64)
	if err := st.Get(context.Background(), obj, 100, [][]byte{buf}, nil); err != nil || !bytes.Equal(buf, data[100:164]) {
		t.Fatalf("Get: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	sh := strings.TrimPrefix(storage.URL, "http://")
	var viaTier, direct int
	for _, l := range seen {
		f := strings.SplitN(l, " ", 5)
		switch {
		case f[4] != "" && f[0] != "registry":
			t.Errorf("the credential where it does not belong: %s", l)
		case f[0] == "tier" && f[2] != sh:
			t.Errorf("through the tier, a request that is not the storage's: %s", l)
		case f[0] == "tier":
			viaTier++
		case f[0] == "registry" && f[4] == cred:
			direct++
		}
	}
	if viaTier != 2 || direct != 2 {
		t.Errorf("%d storage GETs through the tier and %d to the registry with its credential, want 2 and 2:\n%s", viaTier, direct, strings.Join(seen, "\n"))
	}
}

// TestTLSRedirectThroughTerminatingTier: with ProxyTerminatesTLS, a
// registry's redirect to its https:// storage goes to the tier as an
// absolute-form GET https://… (which the tier makes, and can cache),
// not through CONNECT; the credentialed GET still goes to the registry
// directly, and the tier sees no credential.
func TestTLSRedirectThroughTerminatingTier(t *testing.T) {
	const cred = "Basic YWxpY2U6czNjcmV0"
	data := []byte(strings.Repeat("blob bytes ", 200))
	storage := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"blob"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer storage.Close()
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != cred {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, storage.URL+"/docker/registry/v2/blobs/sha256/ab/ab/data", http.StatusTemporaryRedirect)
	}))
	defer registry.Close()
	var mu sync.Mutex
	var seen []string // "METHOD URL Authorization" as the tier got them
	tier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Method != http.MethodGet || r.URL.Scheme != "https" {
			http.Error(w, "absolute-form GETs only", http.StatusBadRequest)
			return
		}
		out, _ := http.NewRequest(r.Method, r.URL.String(), nil)
		out.Header = r.Header.Clone()
		resp, err := storage.Client().Transport.RoundTrip(out) // the tier trusts the storage
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer tier.Close()
	proxy, _ := url.Parse(tier.URL)
	u, _ := url.Parse(registry.URL + "/")
	st, _, err := NewWith(u, Options{Proxy: proxy, ProxyTerminatesTLS: true, Logf: t.Logf, Authorization: func() string { return cred }})
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := st.Open(context.Background(), "v2/m/blobs/sha256:ab", make([]byte, 16))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	buf := make([]byte, 64)
	if err := st.Get(context.Background(), obj, 100, [][]byte{buf}, nil); err != nil || !bytes.Equal(buf, data[100:164]) {
		t.Fatalf("Get: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "GET " + storage.URL + "/docker/registry/v2/blobs/sha256/ab/ab/data "
	if len(seen) != 2 || seen[0] != want || seen[1] != want {
		t.Errorf("the tier got %q, want 2 absolute-form GETs %q with no credential", seen, want)
	}
}
