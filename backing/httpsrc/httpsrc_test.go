package httpsrc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lazyweights/tensorfs/backing/remote"
)

func TestHuggingFaceHosts(t *testing.T) {
	for host, want := range map[string]bool{
		"huggingface.co":          true,
		"HuggingFace.co.":         true,
		"cdn-lfs.huggingface.co":  true,
		"huggingface.co.evil.com": false,
		"evilhuggingface.co":      false,
		"hf.co":                   false,
		"127.0.0.1":               false,
	} {
		if got := isHuggingFace(host); got != want {
			t.Errorf("isHuggingFace(%q) = %v", host, got)
		}
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
