package httpsrc

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// TestHubTokenRule: a URL on the Hub's endpoint (HF_ENDPOINT) gets the
// token huggingface_hub would use, from $HF_HOME/token as from HF_TOKEN
// (hf.TokenFor, the rule hf:// follows), as "Authorization: Bearer";
// a redirect to another port (the CDN) carries none, and with a cache
// tier the requests that hold it go to the Hub directly: the tier, which
// records every header, never sees it.
func TestHubTokenRule(t *testing.T) {
	const token = "hf_FILEtok3n"
	data := []byte(strings.Repeat("tensor bytes ", 100))
	serve := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}
	var mu sync.Mutex
	var seen []string // "who header=value"
	record := func(who string, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for k, vs := range r.Header {
			for _, v := range vs {
				seen = append(seen, who+" "+k+"="+v)
			}
		}
	}
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("cdn", r)
		serve(w, r)
	}))
	defer cdn.Close()
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("hub", r)
		if strings.HasPrefix(r.URL.Path, "/lfs/") {
			http.Redirect(w, r, cdn.URL+"/blob", http.StatusFound)
			return
		}
		serve(w, r)
	}))
	defer hub.Close()
	tier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("tier", r)
		http.Error(w, "the tier", http.StatusBadGateway)
	}))
	defer tier.Close()
	home := t.TempDir()
	for _, v := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"} {
		t.Setenv(v, "")
	}
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_ENDPOINT", hub.URL)
	os.WriteFile(filepath.Join(home, "token"), []byte(token+"\n"), 0o600)
	proxy, _ := url.Parse(tier.URL)
	for _, path := range []string{"/org/m/resolve/main/config.json", "/lfs/model.safetensors"} {
		u, _ := url.Parse(hub.URL + path)
		st, key, err := NewWith(u, Options{Proxy: proxy, Logf: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		obj, n, err := st.Open(context.Background(), key, make([]byte, 16))
		if err != nil || n != 16 {
			t.Fatalf("%s: %d %v", path, n, err)
		}
		buf := make([]byte, 32)
		if err := st.Get(context.Background(), obj, 100, [][]byte{buf}, nil); err != nil || !bytes.Equal(buf, data[100:132]) {
			t.Fatalf("%s: %v", path, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	authed := false
	for _, l := range seen {
		switch {
		case strings.HasPrefix(l, "hub Authorization=Bearer "+token):
			authed = true
		case strings.Contains(l, token) || strings.Contains(l, "Authorization"):
			t.Errorf("the token where it does not belong: %s", l)
		}
	}
	if !authed {
		t.Error("the Hub never got the token of $HF_HOME/token")
	}
}

// TestNoTokenElsewhere: HF_TOKEN is never sent to another host, and the
// URL's query (a presigned signature) and user info stay out of
// messages.
func TestNoTokenElsewhere(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_secret_token")
	var auth atomic.Value
	auth.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		http.NotFound(w, r)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/dir/model.safetensors?X-Amz-Signature=sig123")
	u.User = url.UserPassword("user", "pw123")
	st, key, err := New(u)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.Open(context.Background(), key, make([]byte, 16))
	if remote.KindOf(err) != remote.NotFound {
		t.Fatalf("Open: %v, want not found", err)
	}
	if a := auth.Load().(string); strings.Contains(a, "hf_secret_token") {
		t.Fatalf("HF_TOKEN sent to %s", srv.URL)
	}
	for _, secret := range []string{"sig123", "pw123", "hf_secret_token"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("message %q holds a secret", err)
		}
	}
}
