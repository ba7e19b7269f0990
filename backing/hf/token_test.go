package hf_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/hf/hftest"
	"github.com/lazyweights/tensorfs/source"
)

// recordingTier is a cache tier that records every request it gets,
// every header included, and passes it on to its origin (absolute form,
// http:// or https://: a tier that terminates TLS).
type recordingTier struct {
	*httptest.Server
	mu   sync.Mutex
	seen []hftest.Request // GUARDED_BY(mu)
}

func newRecordingTier(t *testing.T) *recordingTier {
	tier := &recordingTier{}
	out := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableCompression: true}
	tier.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tier.mu.Lock()
		tier.seen = append(tier.seen, hftest.Request{Listener: "tier", Method: r.Method, Target: r.RequestURI, Header: r.Header.Clone()})
		tier.mu.Unlock()
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
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
	t.Cleanup(tier.Close)
	return tier
}

func (tier *recordingTier) requests() []hftest.Request {
	tier.mu.Lock()
	defer tier.mu.Unlock()
	return append([]hftest.Request(nil), tier.seen...)
}

// leaks lists where secret shows in reqs (their targets and every
// header), but for allowed(r, header): the one place it belongs.
func leaks(reqs []hftest.Request, secret string, allowed func(r hftest.Request, name, value string) bool) []string {
	var out []string
	for _, r := range reqs {
		if strings.Contains(r.Target, secret) {
			out = append(out, r.Listener+": "+r.Method+" target holds it")
		}
		for name, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, secret) && !allowed(r, name, v) {
					out = append(out, r.Listener+": "+r.Method+" "+r.Target+": header "+name)
				}
				if name == "Authorization" && !allowed(r, name, v) {
					out = append(out, r.Listener+": "+r.Method+" "+r.Target+": an Authorization header")
				}
			}
		}
	}
	return out
}

// TestTokenNeverReachesTier: with a cache tier (--proxy, with and
// without --proxy-terminates-tls) and HF_TOKEN set, a private
// repository whose files are in LFS (the CDN) and in git (resolve's
// relative 307 to /api/resolve-cache/…, a shard among them) is read
// whole with the right bytes, and the tier, which records every header
// of every request, never sees the token or an Authorization header;
// nor does the CDN. The Hub gets it only as "Authorization: Bearer",
// never in a URL; no error or log line holds it.
func TestTokenNeverReachesTier(t *testing.T) {
	const token = "hf_SECRETtok3n"
	for _, tc := range []struct {
		name        string
		tlsCDN      bool
		terminating bool
	}{
		{"http CDN", false, false},
		{"https CDN, --proxy-terminates-tls", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := hftest.New()
			if tc.tlsCDN {
				srv = hftest.NewTLSCDN()
			}
			defer srv.Close()
			files := shardedRepo(4)
			files[1].LFS = false // a shard in git: read in ranged GETs of resolve-cache
			srv.Repo("org/private", true, false)
			sha := srv.Commit("org/private", "main", files...)
			srv.Grant(token, "org/private")
			tier := newRecordingTier(t)
			env(t, srv)
			t.Setenv("HF_TOKEN", token)
			var logs logLines
			o := opts()
			o.Remote.Remote.Logf = logs.logf
			o.Remote.Remote.Proxy, _ = url.Parse(tier.URL)
			o.Remote.Remote.ProxyTerminatesTLS = tc.terminating
			ck, err := source.Load(context.Background(), "hf://org/private", o)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			got := readAll(t, ck)
			for _, f := range files[:2] {
				if string(got["hf://org/private@"+sha+"/"+f.Path]) != string(f.Data) {
					t.Errorf("%s: wrong bytes", f.Path)
				}
			}
			treqs := tier.requests()
			if len(treqs) == 0 {
				t.Fatal("no request went through the tier: the test tested nothing")
			}
			var cdnViaTier bool
			for _, r := range treqs {
				cdnViaTier = cdnViaTier || strings.Contains(r.Target, "/blobs/")
			}
			if !cdnViaTier {
				t.Error("no CDN GET went through the tier")
			}
			never := func(hftest.Request, string, string) bool { return false }
			for _, l := range leaks(treqs, token, never) {
				t.Errorf("the tier saw the token: %s", l)
			}
			hubOnly := func(r hftest.Request, name, v string) bool {
				return r.Listener == "hub" && name == "Authorization" && v == "Bearer "+token
			}
			hubReqs := srv.Requests()
			for _, l := range leaks(hubReqs, token, hubOnly) {
				t.Errorf("the token where it does not belong: %s", l)
			}
			authed := 0
			for _, r := range hubReqs {
				if r.Header.Get("Authorization") != "" {
					authed++
				}
			}
			if authed == 0 {
				t.Error("the Hub never got the token: the test tested nothing")
			}
			if strings.Contains(logs.String(), token) {
				t.Errorf("a log line holds the token: %s", logs.String())
			}
		})
	}
}

// TestRevisionIsNotAPath: a revision that is a path (.., an escape from
// refs/) is refused by the URI's grammar, before any file is read, and
// no message holds a file's content: $HF_HOME/token's above all.
func TestRevisionIsNotAPath(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	home := env(t, srv)
	t.Setenv("HF_HUB_OFFLINE", "1")
	const secret = "hf_FILEtok3nLEAK"
	os.WriteFile(filepath.Join(home, "token"), []byte(secret+"\n"), 0o600)
	os.MkdirAll(filepath.Join(home, "hub", "models--org--m", "refs"), 0o755)
	for _, src := range []string{
		"hf://org/m@..%2F..%2F..%2Ftoken",
		"hf://org/m@..%2F..%2F..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fhostname",
		"hf://org/m@%2Fetc%2Fhostname",
		"hf://org/m@a%2F..%2F..%2F..%2Ftoken",
		"hf://org/m@refs%2Fpr%2F..%2F..%2F..%2Ftoken",
		"hf://org/m@..",
		"hf://org/m@.",
		"hf://org/m@a%2F%2Fb",
		"hf://org/m@a%5Cb",
		"hf://org/m@a%00b",
		"hf://org/m@main%0Ax",
	} {
		_, err := load(t, src)
		if err == nil {
			t.Errorf("%s: loaded", src)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, secret) || strings.Contains(msg, "\n") || !strings.Contains(msg, "revision") {
			t.Errorf("%s: %q: want one line about the revision, without the file's content", src, msg)
		}
	}
	for _, ok := range []string{"main", "v1.0", "refs/pr/1", "refs%2Fconvert%2Fparquet", "feature%2Fx-y_z", "0123456789abcdef0123456789abcdef01234567"} {
		if _, _, _, _, err := hf.Parse("hf://org/m@" + ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestHostileRef: a ref file in the HF cache whose content is not a
// commit sha (a path out of the cache, a file's first line, a huge
// file) is one line that says so without echoing it, never a walk of
// the filesystem; a snapshot link out of the cache is not read.
func TestHostileRef(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	home := env(t, srv)
	t.Setenv("HF_HUB_OFFLINE", "1")
	dir := filepath.Join(home, "hub", "models--org--m")
	os.MkdirAll(filepath.Join(dir, "refs"), 0o755)
	for _, content := range []string{"../../../../usr", "hf_CONTENTsecret\n", strings.Repeat("a", 41), strings.Repeat("a", 40) + "/../../../usr", strings.Repeat("A", 1<<20)} {
		os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(content), 0o644)
		_, err := load(t, "hf://org/m")
		if err == nil {
			t.Errorf("ref %.40q: loaded", content)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, strings.TrimSpace(content)[:min(16, len(strings.TrimSpace(content)))]) || strings.Contains(msg, "\n") || !strings.Contains(msg, "commit sha") || len(msg) > 400 {
			t.Errorf("ref %.40q: %.300q: want one short line saying it is not a commit sha", content, msg)
		}
	}
	// A snapshot whose file links out of the cache (to $HF_HOME/token)
	// is not read: the file is not in the cache.
	sha := strings.Repeat("b", 40)
	os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(sha), 0o644)
	snap := filepath.Join(dir, "snapshots", sha)
	os.MkdirAll(snap, 0o755)
	os.WriteFile(filepath.Join(home, "token"), []byte("hf_OUTSIDEsecret"), 0o600)
	os.Symlink(filepath.Join(home, "token"), filepath.Join(snap, "model.safetensors"))
	os.Symlink("../../../../token", filepath.Join(snap, "b.safetensors"))
	_, err := load(t, "hf://org/m")
	if err == nil || strings.Contains(err.Error(), "hf_OUTSIDEsecret") {
		t.Errorf("a snapshot of links out of the cache: %v", err)
	}
	st, _, err := hf.Open(context.Background(), "hf://org/m", hf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ents, _, err := st.List(context.Background(), "")
	if err != nil || len(ents) != 0 {
		t.Errorf("links out of the cache listed: %v %v", ents, err)
	}
}

// TestTreeNeverEnds: a tree listing whose Link rel="next" names the page
// itself, or whose pages never end (past the last entry, pages that
// repeat it), is one line naming the loop after a few requests, not a
// storm of requests until the deadline.
func TestTreeNeverEnds(t *testing.T) {
	for _, tc := range []struct {
		fault hftest.TreeFault
		want  string
	}{
		{hftest.TreeSelf, "the Hub's tree listing loops: page 1's next page"},
		{hftest.TreeEndless, "the Hub's tree listing does not end: page 4 gives no entry"},
	} {
		srv := hftest.New()
		srv.TreeFault = tc.fault
		srv.Commit("org/model", "main", shardedRepo(1)...) // 7 entries, 3 a page
		env(t, srv)
		_, err := load(t, "hf://org/model")
		n := srv.HubRequests.Load()
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("fault %d: %v, want one line with %q", tc.fault, err, tc.want)
		}
		if n > 5 {
			t.Errorf("fault %d: %d requests to the Hub, want at most 5 (the revision, the pages)", tc.fault, n)
		}
	}
}

// TestOfflineMissingNamesCachePath: offline, a shard the weight map
// names that is not in the snapshot (never downloaded, or its blob
// gone) is one line naming its path in the cache, as REMOTE.md says,
// not the Hub's EntryNotFound.
func TestOfflineMissingNamesCachePath(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(1)
	sha := srv.Commit("org/model", "main", files...)
	home := env(t, srv)
	hub := filepath.Join(home, "hub")
	hfCache(t, hub, "org/model", "main", sha, []hftest.File{files[0], files[2]}) // shard 2 never downloaded
	t.Setenv("HF_HUB_OFFLINE", "1")
	want := filepath.Join(hub, "models--org--model", "snapshots", sha, files[1].Path)
	_, err := load(t, "hf://org/model")
	if err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE is set and the file is not in the HF cache ("+want+")") || strings.Contains(err.Error(), "EntryNotFound") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a shard missing offline: %v, want one line naming %s", err, want)
	}
}

// unreachableHub is an endpoint that refuses every connection, on a
// port held for the test (hftest.Unreachable).
func unreachableHub(t *testing.T) string {
	u, free, err := hftest.Unreachable()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(free)
	return u
}

// TestUnreachableFallsBackToCache: when the Hub cannot be reached (no
// network: here a refused connection), a revision whose snapshot is in
// the HF cache (a branch through refs/, or a sha) is read from there,
// as huggingface_hub does, with one log line; without one the error
// says what to do (HF_HUB_OFFLINE, --remote-timeout); a shard missing
// from the snapshot is one line naming its path in the cache.
func TestUnreachableFallsBackToCache(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(1)
	sha := srv.Commit("org/model", "main", files...)
	home := env(t, srv)
	t.Setenv("HF_ENDPOINT", unreachableHub(t))
	hub := filepath.Join(home, "hub")
	hfCache(t, hub, "org/model", "main", sha, files)
	for _, src := range []string{"hf://org/model", "hf://org/model@" + sha} {
		var logs logLines
		o := opts()
		o.Remote.Remote.Logf = logs.logf
		ck, err := source.Load(context.Background(), src, o)
		if err != nil {
			t.Fatalf("%s with the Hub unreachable and the snapshot cached: %v", src, err)
		}
		got := readAll(t, ck)
		ck.Close()
		if string(got["hf://org/model@"+sha+"/"+files[1].Path]) != string(files[1].Data) {
			t.Errorf("%s: wrong bytes (sources %v)", src, ck.Index.Sources)
		}
		l := logs.String()
		if strings.Count(l, "\n") != 0 || !strings.Contains(l, "the Hub cannot be reached") || !strings.Contains(l, "from the HF cache") || !strings.Contains(l, sha) {
			t.Errorf("%s: log %q, want one line saying the snapshot is read from the cache", src, l)
		}
	}
	// Not in the cache: the error says what to do.
	// (One try, with the store itself: the client would retry it for
	// its open deadline, with the same message.)
	st, _, err := hf.Open(context.Background(), "hf://org/other", hf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.List(context.Background(), "")
	st.Close()
	if err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE=1") || !strings.Contains(err.Error(), "--remote-timeout") || strings.Contains(err.Error(), "\n") {
		t.Errorf("unreachable, nothing cached: %v, want the hint", err)
	}
	// A shard missing from the snapshot.
	os.Remove(filepath.Join(hub, "models--org--model", "blobs", hftest.ETag(files[1])))
	_, err = load(t, "hf://org/model")
	want := filepath.Join(hub, "models--org--model", "snapshots", sha, files[1].Path)
	if err == nil || !strings.Contains(err.Error(), "the file is not in the HF cache ("+want+")") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a shard missing, the Hub unreachable: %v, want one line naming %s", err, want)
	}
}

// TestOnEndpoint: the Hub's token goes to the endpoint's scheme, host
// and port only (HF_ENDPOINT, default https://huggingface.co): not to a
// subdomain (the CDN), another port, a look-alike host, or over http://.
func TestOnEndpoint(t *testing.T) {
	t.Setenv("HF_ENDPOINT", "")
	for u, want := range map[string]bool{
		"https://huggingface.co/org/m/resolve/main/x": true,
		"https://HuggingFace.co./x":                   true,
		"https://huggingface.co:443/x":                true,
		"http://huggingface.co/x":                     false,
		"https://huggingface.co:8443/x":               false,
		"https://cdn-lfs.huggingface.co/x":            false,
		"https://huggingface.co.evil.com/x":           false,
		"https://evilhuggingface.co/x":                false,
		"https://hf.co/x":                             false,
		"https://127.0.0.1/x":                         false,
	} {
		pu, _ := url.Parse(u)
		if got := hf.OnEndpoint(pu); got != want {
			t.Errorf("OnEndpoint(%s) = %v", u, got)
		}
	}
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:8080/")
	for u, want := range map[string]bool{"http://127.0.0.1:8080/x": true, "http://127.0.0.1:8081/x": false, "https://huggingface.co/x": false} {
		pu, _ := url.Parse(u)
		if got := hf.OnEndpoint(pu); got != want {
			t.Errorf("HF_ENDPOINT set: OnEndpoint(%s) = %v", u, got)
		}
	}
}
