package hftest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// send GETs u with the headers hdr (name, value, ...), following no
// redirect.
func send(t *testing.T, u string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestServer: the test Hub answers as the Hub's documented API does:
// the tree paginated by Link, resolve's 302 with the LFS headers to a
// CDN that checks its signature and expiry and refuses Authorization,
// the relative 307 of a file in git, and X-Error-Code on errors.
func TestServer(t *testing.T) {
	s := New()
	defer s.Close()
	s.PageSize = 1
	big := []byte(strings.Repeat("x", 1000))
	sha := s.Commit("org/m", "main", File{Path: "a.bin", Data: big, LFS: true}, File{Path: "sub/c.txt", Data: []byte("hello")})
	get := func(u string, hdr ...string) *http.Response { return send(t, u, hdr...) }
	r := get(s.Hub.URL + "/api/models/org/m/tree/main?recursive=true")
	if r.StatusCode != 200 || !strings.Contains(r.Header.Get("Link"), `rel="next"`) {
		t.Errorf("tree: %d, Link %q", r.StatusCode, r.Header.Get("Link"))
	}
	form := url.Values{"paths": {"a.bin", "sub", "nope"}}
	pr, err := http.PostForm(s.Hub.URL+"/api/models/org/m/paths-info/main", form)
	if err != nil {
		t.Fatal(err)
	}
	var infos []struct {
		Type, Path string
		LFS        *struct{ OID string }
	}
	json.NewDecoder(pr.Body).Decode(&infos)
	if len(infos) != 2 || infos[0].Path != "a.bin" || infos[0].LFS == nil || infos[0].LFS.OID != SHA256(big) || infos[1].Type != "directory" {
		t.Errorf("paths-info: %+v", infos)
	}
	r = get(s.Hub.URL + "/org/m/resolve/main/a.bin")
	if r.StatusCode != 302 || r.Header.Get("X-Repo-Commit") != sha || r.Header.Get("X-Linked-Etag") != `"`+SHA256(big)+`"` || r.Header.Get("X-Linked-Size") != "1000" {
		t.Fatalf("resolve LFS: %d %v", r.StatusCode, r.Header)
	}
	loc := r.Header.Get("Location")
	if r := get(loc, "Range", "bytes=10-19"); r.StatusCode != 206 || r.Header.Get("Content-Range") != "bytes 10-19/1000" {
		t.Errorf("CDN range: %d %q", r.StatusCode, r.Header.Get("Content-Range"))
	}
	if r := get(loc, "Authorization", "Bearer x"); r.StatusCode != 400 {
		t.Errorf("CDN with Authorization: %d", r.StatusCode)
	}
	if r := get(strings.Replace(loc, "Signature=", "Signature=0", 1)); r.StatusCode != 403 {
		t.Errorf("CDN bad signature: %d", r.StatusCode)
	}
	s.Expire()
	if r := get(loc); r.StatusCode != 403 || s.Expired.Load() != 1 {
		t.Errorf("CDN expired: %d", r.StatusCode)
	}
	r = get(s.Hub.URL + "/org/m/resolve/" + sha + "/sub/c.txt")
	if r.StatusCode != 307 || !strings.HasPrefix(r.Header.Get("Location"), "/api/resolve-cache/models/org/m/"+sha+"/sub/c.txt") {
		t.Fatalf("resolve git: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	r = get(s.Hub.URL+r.Header.Get("Location"), "Range", "bytes=1-2")
	if b, _ := io.ReadAll(r.Body); r.StatusCode != 206 || string(b) != "el" || r.Header.Get("ETag") != `"`+GitOID([]byte("hello"))+`"` {
		t.Errorf("resolve-cache: %d %q", r.StatusCode, b)
	}
	s.Repo("org/gated", false, true)
	s.Commit("org/gated", "main", File{Path: "a", Data: []byte("a")})
	for _, tc := range []struct {
		url, auth, code string
		status          int
	}{
		{"/org/gated/resolve/main/a", "", "GatedRepo", 401},
		{"/org/gated/resolve/main/a", "Bearer nope", "GatedRepo", 403},
		{"/api/models/org/gated/revision/main", "", "", 200},
		{"/api/models/org/none/revision/main", "", "RepoNotFound", 401},
		{"/api/models/org/none/revision/main", "Bearer nope", "RepoNotFound", 404},
		{"/api/models/org/m/revision/v9", "", "RevisionNotFound", 404},
		{"/org/m/resolve/main/nope", "", "EntryNotFound", 404},
	} {
		r := get(s.Hub.URL+tc.url, "Authorization", tc.auth)
		if r.StatusCode != tc.status || r.Header.Get("X-Error-Code") != tc.code {
			t.Errorf("%s (%q): %d %q, want %d %q", tc.url, tc.auth, r.StatusCode, r.Header.Get("X-Error-Code"), tc.status, tc.code)
		}
	}
}

// TestXet: a file in Xet is resolve's 302 to the bridge with the headers
// huggingface_hub reads; xet-read-token answers a token; the bridge
// checks its S3-style signature and expiry, refuses an unranged GET past
// BridgeUnrangedMax, and answers ranges as FaultBridge says.
func TestXet(t *testing.T) {
	s := New()
	defer s.Close()
	s.BridgeUnrangedMax = 100
	big := []byte(strings.Repeat("0123456789", 100))
	small := []byte("small")
	sha := s.Commit("org/x", "main", File{Path: "big.bin", Data: big, Xet: true}, File{Path: "small.bin", Data: small, Xet: true})
	get := func(u string, hdr ...string) (*http.Response, []byte) {
		resp := send(t, u, hdr...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	r, _ := get(s.Hub.URL + "/org/x/resolve/main/big.bin")
	h := r.Header
	if r.StatusCode != 302 || h.Get("X-Xet-Hash") != XetHash(big) || h.Get("X-Linked-Etag") != `"`+SHA256(big)+`"` || h.Get("X-Linked-Size") != "1000" ||
		h.Get("Link") != "<"+s.Hub.URL+"/api/models/org/x/xet-read-token/"+sha+`>; rel="xet-auth"` || !strings.Contains(h.Get("Location"), "/xet-bridge-us/"+XetHash(big)+"?") {
		t.Fatalf("resolve Xet: %d %v", r.StatusCode, h)
	}
	loc := h.Get("Location")
	if r, _ := get(s.Hub.URL + "/api/models/org/x/xet-read-token/" + sha); r.StatusCode != 200 || r.Header.Get("X-Xet-Access-Token") == "" || r.Header.Get("X-Xet-Cas-Url") == "" || r.Header.Get("X-Xet-Token-Expiration") == "" {
		t.Errorf("xet-read-token: %d %v", r.StatusCode, r.Header)
	}
	if r, b := get(loc, "Range", "bytes=10-19"); r.StatusCode != 206 || r.Header.Get("Content-Range") != "bytes 10-19/1000" || string(b) != "0123456789" {
		t.Errorf("bridge range: %d %q %q", r.StatusCode, r.Header.Get("Content-Range"), b)
	}
	if r, _ := get(loc); r.StatusCode != 400 || s.BridgeUnranged.Load() != 1 {
		t.Errorf("bridge unranged past the cap: %d", r.StatusCode)
	}
	r, _ = get(s.Hub.URL + "/org/x/resolve/main/small.bin")
	if r, b := get(r.Header.Get("Location")); r.StatusCode != 200 || string(b) != "small" {
		t.Errorf("bridge unranged under the cap: %d %q", r.StatusCode, b)
	}
	if r, _ := get(strings.Replace(loc, "X-Amz-Signature=", "X-Amz-Signature=0", 1), "Range", "bytes=0-0"); r.StatusCode != 403 {
		t.Errorf("bridge bad signature: %d", r.StatusCode)
	}
	for _, tc := range []struct {
		f          BridgeFault
		accept     string
		status     int
		enc, cr    string
		body       int
		notFaulted bool
	}{
		{BridgeWhole, "identity", 200, "", "", 1000, false},
		{BridgeGzip, "gzip", 200, "gzip", "", -1, false},
		{BridgeGzip, "identity", 206, "", "bytes 10-19/1000", 10, true},
		{BridgeGzipAlways, "identity", 200, "gzip", "", -1, false},
		{BridgeNoContentRange, "identity", 206, "", "", 10, false},
		{BridgeShortNoContentRange, "identity", 206, "", "", 5, false},
	} {
		s.FaultBridge(tc.f, 1)
		n := s.BridgeFaulted.Load()
		r, b := get(loc, "Range", "bytes=10-19", "Accept-Encoding", tc.accept)
		if r.StatusCode != tc.status || r.Header.Get("Content-Encoding") != tc.enc || r.Header.Get("Content-Range") != tc.cr || (tc.body >= 0 && len(b) != tc.body) || (s.BridgeFaulted.Load() == n) != tc.notFaulted {
			t.Errorf("fault %d (%s): %d %q %q, %d bytes", tc.f, tc.accept, r.StatusCode, r.Header.Get("Content-Encoding"), r.Header.Get("Content-Range"), len(b))
		}
		if r, _ := get(loc, "Range", "bytes=10-19"); r.StatusCode != 206 {
			t.Errorf("fault %d taken twice: %d", tc.f, r.StatusCode)
		}
	}
	s.Expire()
	if r, _ := get(loc, "Range", "bytes=0-0"); r.StatusCode != 403 || s.Expired.Load() != 1 {
		t.Errorf("bridge expired: %d", r.StatusCode)
	}
	_, b := get(s.Hub.URL + "/api/models/org/x/tree/main")
	var tree []struct {
		Path, XetHash string
		LFS           *struct{ OID string }
	}
	if err := json.Unmarshal(b, &tree); err != nil || len(tree) != 2 || tree[0].XetHash != XetHash(big) || tree[0].LFS == nil || tree[0].LFS.OID != SHA256(big) {
		t.Errorf("tree of Xet files: %v %+v", err, tree)
	}
}
