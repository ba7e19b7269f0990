package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf/hftest"
)

// hfSmallRepo commits a small sharded checkpoint to srv as id: two
// shards, one in LFS (the CDN) and one in git (resolve's relative 307
// to /api/resolve-cache/…), the weight map and config.json in git. It
// returns the sha and the `load --sha256` lines of a local copy.
func hfSmallRepo(t *testing.T, srv *hftest.Server, id string) (sha, want string) {
	t.Helper()
	dir := t.TempDir()
	var files []hftest.File
	for s := range 2 {
		data := make([]byte, 96<<10)
		for j := range data {
			data[j] = byte(j*(s+3) + s)
		}
		p := filepath.Join(dir, fmt.Sprintf("model-%05d-of-00002.safetensors", s+1))
		writeSafetensors(t, p, []stTensor{{Name: fmt.Sprintf("w%d", s), DType: "U8", Shape: []int64{int64(len(data))}, Data: data}}, nil)
		b, _ := os.ReadFile(p)
		files = append(files, hftest.File{Path: filepath.Base(p), Data: b, LFS: s == 0})
	}
	idx := []byte(`{"metadata":{},"weight_map":{"w0":"model-00001-of-00002.safetensors","w1":"model-00002-of-00002.safetensors"}}`)
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644)
	files = append(files, hftest.File{Path: "model.safetensors.index.json", Data: idx}, hftest.File{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)})
	w := runTensorfs(t, "load", "--quiet", "--sha256", dir)
	if w.code != 0 {
		t.Fatal(w.stderr)
	}
	return srv.Commit(id, "main", files...), w.stdout
}

// TestHFTokenNeverAtTier: `load --proxy TIER --proxy-terminates-tls` of
// a private repository with HF_TOKEN set, its CDN on https://: the
// tier, a Go proxy that terminates TLS and records every header of
// every request, never sees the token nor an Authorization header; the
// CDN neither; the Hub gets it only as "Authorization: Bearer"; stdout
// and stderr never hold it. (Before: the tier got it on 2 of its 3
// kinds of request, the GETs of files in git.)
func TestHFTokenNeverAtTier(t *testing.T) {
	const token = "hf_SECRETfleetTOKEN"
	srv := hftest.NewTLSCDN()
	defer srv.Close()
	srv.Repo("org/private", true, false)
	srv.Grant(token, "org/private")
	_, want := hfSmallRepo(t, srv, "org/private")
	var mu sync.Mutex
	var seen []hftest.Request
	out := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableCompression: true}
	tier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, hftest.Request{Listener: "tier", Method: r.Method, Target: r.RequestURI, Header: r.Header.Clone()})
		mu.Unlock()
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), nil)
		for k, v := range r.Header {
			if !strings.HasPrefix(k, "Proxy-") {
				req.Header[k] = v
			}
		}
		resp, err := out.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
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
	env := append(hfEnv(t, srv), "HF_TOKEN="+token)
	r := runEnv(t, env, "load", "--sha256", "--proxy", tier.URL, "--proxy-terminates-tls", "hf://org/private")
	if r.code != 0 || !strings.Contains(r.stdout, strings.TrimSpace(want)) {
		t.Fatalf("load: exit %d, stdout %s, want %s; stderr %s", r.code, r.stdout, want, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Errorf("the output holds the token")
	}
	mu.Lock()
	all := append(seen, srv.Requests()...)
	mu.Unlock()
	tiered, authed, tierAuthed := 0, 0, 0
	for _, q := range all {
		if q.Listener == "tier" && q.Header.Get("Authorization") != "" {
			tierAuthed++
		}
		if strings.Contains(q.Target, token) {
			t.Errorf("%s: %s %s: the token in the URL", q.Listener, q.Method, q.Target)
		}
		if q.Listener == "tier" {
			tiered++
		}
		for k, vs := range q.Header {
			for _, v := range vs {
				ok := q.Listener == "hub" && k == "Authorization" && v == "Bearer "+token
				if ok {
					authed++
				}
				if !ok && (strings.Contains(v, token) || k == "Authorization") {
					t.Errorf("%s: %s %s: header %s holds a credential of the Hub", q.Listener, q.Method, q.Target, k)
				}
			}
		}
	}
	t.Logf("%d requests through the tier, %d of them with Authorization; %d at the Hub with the token", tiered, tierAuthed, authed)
	if tiered == 0 || authed == 0 {
		t.Errorf("%d requests through the tier, %d with the token at the Hub: the test tested nothing", tiered, authed)
	}
}

// TestHFRevisionPathNotPrinted: `hf://org/m@..%2F..%2F..%2Ftoken` with
// HF_HUB_OFFLINE=1 is one line about the revision, exit 1, and never
// the first line of $HF_HOME/token (before: printed as the "snapshot"
// it looked for).
func TestHFRevisionPathNotPrinted(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "token"), []byte("hf_PRINTEDsecret\n"), 0o600)
	os.MkdirAll(filepath.Join(home, "hub", "models--org--m", "refs"), 0o755)
	env := []string{"HF_HOME=" + home, "HF_HUB_OFFLINE=1", "HF_TOKEN=", "HF_HUB_CACHE=", "HF_TOKEN_PATH="}
	for _, src := range []string{"hf://org/m@..%2F..%2F..%2Ftoken", "hf://org/m@..%2F..%2F..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fhostname"} {
		r := runEnv(t, env, "ls", src)
		if r.code != 1 || strings.Contains(r.stderr, "hf_PRINTEDsecret") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "never a path") {
			t.Errorf("%s: exit %d, stderr %q: want exit 1 and one line about the revision", src, r.code, r.stderr)
		}
	}
}

// TestHFNoNetworkFallsBack: with the Hub unreachable, a repository whose
// snapshot is in the HF cache (written by --hf-cache-write) loads from
// there, byte-exact, with one line saying so, without HF_HUB_OFFLINE;
// one not in the cache fails with the hint (HF_HUB_OFFLINE,
// --remote-timeout).
func TestHFNoNetworkFallsBack(t *testing.T) {
	srv := hftest.New()
	_, want := hfSmallRepo(t, srv, "org/model")
	defer srv.Close()
	env := hfEnv(t, srv)
	w := runEnv(t, env, "load", "--quiet", "--sha256", "--hf-cache-write", "hf://org/model")
	if w.code != 0 || w.stdout != want {
		t.Fatalf("load --hf-cache-write: exit %d, %s %s", w.code, w.stdout, w.stderr)
	}
	// The Hub now cannot be reached: a port held for the test that
	// refuses connections (a closed server's port could be taken).
	hub, free, err := hftest.Unreachable()
	if err != nil {
		t.Fatal(err)
	}
	defer free()
	env = append(env, "HF_ENDPOINT="+hub)
	r := runEnv(t, env, "load", "--quiet", "--sha256", "hf://org/model")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("the Hub unreachable, the snapshot cached: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "the Hub cannot be reached") || !strings.Contains(lines[0], "from the HF cache") {
		t.Errorf("stderr %q: want one line saying the snapshot is read from the HF cache", r.stderr)
	}
	r = runEnv(t, env, "ls", "--remote-timeout", "1s", "hf://org/other")
	if r.code != 1 || !strings.Contains(r.stderr, "HF_HUB_OFFLINE=1") || !strings.Contains(r.stderr, "--remote-timeout") {
		t.Errorf("the Hub unreachable, nothing cached: exit %d, stderr %q: want the hint", r.code, r.stderr)
	}
}
