package oci

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// noAuthFiles points the auth-file lookup at an empty directory, so that
// the machine's own ~/.docker/config.json plays no part.
func noAuthFiles(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("REGISTRY_AUTH_FILE", "")
	t.Setenv("DOCKER_CONFIG", dir)
	return dir
}

// writeJSON writes v as JSON to dir/name and returns its path.
func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestCredentialLookup: the keys docker and podman write match the
// registry they name (URL keys, Docker Hub's aliases, containers-auth's
// namespaced keys, most specific first); REGISTRY_AUTH_FILE comes
// before $DOCKER_CONFIG; a helper is named, not run.
func TestCredentialLookup(t *testing.T) {
	dir := noAuthFiles(t)
	docker := writeJSON(t, dir, "config.json", map[string]any{
		"auths": map[string]any{
			"https://index.docker.io/v1/": map[string]string{"auth": b64("hub:hubpw")},
			"reg.example:5000":            map[string]string{"username": "u5000", "password": "p5000"},
			"http://old.example/v2/":      map[string]string{"auth": b64("old:oldpw\x00")},
			"both.example":                map[string]string{"auth": b64("docker:dockerpw")},
			"id.example":                  map[string]string{"identitytoken": "refresh-1"},
			"helped.example":              map[string]string{},
		},
		"credHelpers": map[string]string{"helped.example": "pass"},
	})
	authDir := t.TempDir()
	podman := writeJSON(t, authDir, "auth.json", map[string]any{
		"auths": map[string]any{
			"both.example":         map[string]string{"auth": b64("podman:podmanpw")},
			"ns.example":           map[string]string{"auth": b64("host:hostpw")},
			"ns.example/team":      map[string]string{"auth": b64("team:teampw")},
			"ns.example/team/repo": map[string]string{"auth": b64("repo:repopw")},
		},
	})
	t.Setenv("REGISTRY_AUTH_FILE", podman)
	cases := []struct {
		host, repo, user, pass, identity, helper, file string
	}{
		{"registry-1.docker.io", "library/x", "hub", "hubpw", "", "", docker},
		{"docker.io", "library/x", "hub", "hubpw", "", "", docker},
		{"index.docker.io", "a/b", "hub", "hubpw", "", "", docker},
		{"reg.example:5000", "m", "u5000", "p5000", "", "", docker},
		{"old.example", "m", "old", "oldpw", "", "", docker},
		{"both.example", "m", "podman", "podmanpw", "", "", podman},
		{"ns.example", "team/repo", "repo", "repopw", "", "", podman},
		{"ns.example", "team/other", "team", "teampw", "", "", podman},
		{"ns.example", "solo", "host", "hostpw", "", "", podman},
		{"id.example", "m", "", "", "refresh-1", "", docker},
		{"helped.example", "m", "", "", "", "docker-credential-pass", docker},
	}
	for _, c := range cases {
		got, err := lookupCredential(authFiles(), c.host, c.repo)
		if err != nil || got == nil {
			t.Errorf("%s/%s: %v %v", c.host, c.repo, got, err)
			continue
		}
		if got.user != c.user || got.pass != c.pass || got.identity != c.identity || got.helper != c.helper || got.file != c.file {
			t.Errorf("%s/%s: got %+v, want user %q pass %q identity %q helper %q from %s", c.host, c.repo, *got, c.user, c.pass, c.identity, c.helper, c.file)
		}
	}
	for _, host := range []string{"reg.example", "reg.example:5001", "other.example"} {
		if got, err := lookupCredential(authFiles(), host, "m"); got != nil || err != nil {
			t.Errorf("%s: got %+v %v, want none", host, got, err)
		}
	}
	// credsStore: every host without a secret in the file is the store's.
	writeJSON(t, dir, "config.json", map[string]any{"auths": map[string]any{"x.example": map[string]string{}}, "credsStore": "desktop"})
	t.Setenv("REGISTRY_AUTH_FILE", "")
	got, err := lookupCredential(authFiles(), "x.example", "m")
	if err != nil || got == nil || got.helper != "docker-credential-desktop" || got.usable() {
		t.Errorf("credsStore: got %+v %v", got, err)
	} else if d := got.describe("x.example"); !strings.Contains(d, "docker-credential-desktop, which tensorfs does not run") || !strings.Contains(d, "REGISTRY_AUTH_FILE") {
		t.Errorf("credsStore: says %q", d)
	}
}

// TestCredentialFileBad: a credentials file that cannot be used is one
// line naming the file and the problem, never echoing its text (a
// secret), and a huge one is not read past the budget.
func TestCredentialFileBad(t *testing.T) {
	dir := noAuthFiles(t)
	secret := "hunter2-SECRET"
	cases := []struct{ name, body, want string }{
		{"not JSON", `{"auths":{"h":{"auth":"` + secret + `"}`, "not JSON (syntax error at byte"},
		{"bad JSON token", `{"auths":{"h":{"auth":` + secret + `}}}`, "not JSON (syntax error at byte"},
		{"wrong type", `{"auths":{"h":{"auth":["` + secret + `"]}}}`, `field "auths.auth" is a JSON array, want a string`},
		{"not base64", `{"auths":{"h":{"auth":"` + secret + `!"}}}`, `auths["h"].auth is not base64`},
		{"no colon", `{"auths":{"h":{"auth":"` + b64(secret) + `"}}}`, `auths["h"].auth is not base64 of USER:PASSWORD`},
		{"huge", `{"auths":{},"pad":"` + strings.Repeat("x", maxConfig) + `"}`, "the file is over the budget of 1048576 bytes"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, "config.json")
		if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := lookupCredential(authFiles(), "h", "m")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "registry credentials "+p+": ") || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line naming %s holding %q, no secret", c.name, err, p, c.want)
		}
	}
	// Through Open: the SOURCE, then the file.
	_, src := newFake(t)
	if _, _, err := Open(context.Background(), src+":t", Options{}); err == nil || !strings.HasPrefix(err.Error(), src+": registry credentials "+filepath.Join(dir, "config.json")) {
		t.Errorf("Open with a bad config: %v", err)
	}
}

// authReg is a registry (fake) in front of which a credential is asked:
// Basic, or a token realm on the same server.
type authReg struct {
	f *fake
	// seen are the Authorization headers of each path's requests.
	mu   sync.Mutex
	seen map[string][]string
}

func (a *authReg) saw(path string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen[path])
}

func newAuthReg(t *testing.T, check func(w http.ResponseWriter, r *http.Request) bool) (*authReg, string) {
	f, src := newFake(t)
	a := &authReg{f: f, seen: map[string][]string{}}
	w := []byte("weights")
	f.push("t", []Descriptor{layer(MediaWeightRaw, w, "model.safetensors")}, map[string][]byte{digestOf(w): w})
	f.hook = func(rw http.ResponseWriter, r *http.Request) bool {
		a.mu.Lock()
		a.seen[r.URL.Path] = append(a.seen[r.URL.Path], r.Header.Get("Authorization"))
		a.mu.Unlock()
		return check(rw, r)
	}
	return a, src
}

func readModel(t *testing.T, s *Store) string {
	t.Helper()
	head := make([]byte, 7)
	if _, _, err := s.Open(context.Background(), "model.safetensors", head); err != nil {
		t.Fatalf("Open model.safetensors: %v", err)
	}
	return string(head)
}

// TestBasicAuth: a registry that answers "WWW-Authenticate: Basic" gets
// the auth file's user and password with every request, its blobs'
// redirect target none; a wrong password is one line without it.
func TestBasicAuth(t *testing.T) {
	dir := noAuthFiles(t)
	var otherAuth []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherAuth = append(otherAuth, r.Header.Get("Authorization"))
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader([]byte("weights")))
	}))
	defer other.Close()
	want := "Basic " + b64("alice:s3cret")
	reg, src := newAuthReg(t, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			w.WriteHeader(http.StatusUnauthorized)
			return true
		}
		if strings.Contains(r.URL.Path, "/blobs/") {
			http.Redirect(w, r, other.URL+"/storage/blob?sig=presigned", http.StatusTemporaryRedirect)
			return true
		}
		return false
	})
	host := strings.TrimPrefix(src, "oci://")
	host = host[:strings.IndexByte(host, '/')]
	writeJSON(t, dir, "config.json", map[string]any{"auths": map[string]any{"http://" + host + "/v1/": map[string]string{"auth": b64("alice:s3cret")}}})
	s, _, err := Open(context.Background(), src+":t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readModel(t, s); got != "weights" {
		t.Fatalf("read %q", got)
	}
	if a := reg.saw("/v2/m/manifests/t"); len(a) != 2 || a[0] != "" || a[1] != want {
		t.Errorf("the manifest's requests carried %q, want none then the credential", a)
	}
	if len(otherAuth) == 0 || slices.ContainsFunc(otherAuth, func(a string) bool { return a != "" }) {
		t.Errorf("the blob's redirect target got Authorization %q", otherAuth)
	}
	// A wrong password: refused in one line that names the file, not the password.
	writeJSON(t, dir, "config.json", map[string]any{"auths": map[string]any{host: map[string]string{"username": "alice", "password": "wrong-pw"}}})
	_, _, err = Open(context.Background(), src+":t", Options{})
	if err == nil || !strings.Contains(err.Error(), "the registry refused the credential for "+host+" from "+filepath.Join(dir, "config.json")+" (HTTP 401)") || strings.Contains(err.Error(), "wrong-pw") || strings.Contains(err.Error(), "\n") {
		t.Errorf("wrong password: %v", err)
	}
}

// tokenReg is a registry whose realm (on the same server, /token)
// gives tok for alice:s3cret with GET, or for the refresh token
// "refresh-1" with a POST.
func tokenReg(t *testing.T, tok *string) (*authReg, string) {
	var reg *authReg
	reg, src := newAuthReg(t, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/token" {
			ok := false
			switch r.Method {
			case http.MethodGet:
				u, p, has := r.BasicAuth()
				ok = has && u == "alice" && p == "s3cret" && r.URL.Query().Get("scope") == "repository:m:pull" && r.URL.Query().Get("service") == "reg"
			case http.MethodPost:
				r.ParseForm()
				ok = r.PostForm.Get("grant_type") == "refresh_token" && r.PostForm.Get("refresh_token") == "refresh-1" && r.PostForm.Get("scope") == "repository:m:pull" && r.PostForm.Get("service") == "reg"
			}
			if !ok {
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			json.NewEncoder(w).Encode(map[string]any{"access_token": *tok, "expires_in": 300})
			return true
		}
		if r.Header.Get("Authorization") != "Bearer "+*tok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+r.Host+`/token",service="reg",scope="repository:m:pull"`)
			w.WriteHeader(http.StatusUnauthorized)
			return true
		}
		return false
	})
	return reg, src
}

// TestBearerCredential: the realm gets the auth file's credential (GET
// with Basic auth, or the identity token POSTed as a refresh token), the
// registry only the token; an expired token is fetched again once.
func TestBearerCredential(t *testing.T) {
	for _, entry := range []map[string]string{{"auth": b64("alice:s3cret")}, {"identitytoken": "refresh-1"}} {
		dir := noAuthFiles(t)
		tok := "tok1"
		reg, src := tokenReg(t, &tok)
		host := strings.TrimPrefix(src, "oci://")
		host = host[:strings.IndexByte(host, '/')]
		writeJSON(t, dir, "config.json", map[string]any{"auths": map[string]any{host: entry}})
		s, _, err := Open(context.Background(), src+":t", Options{})
		if err != nil {
			t.Fatalf("%v: %v", entry, err)
		}
		tok = "tok2" // expired: fetched again with the credential
		if got := readModel(t, s); got != "weights" {
			t.Fatalf("%v: read %q", entry, got)
		}
		if n := len(reg.saw("/token")); n != 2 {
			t.Errorf("%v: %d token requests, want 2", entry, n)
		}
		for p, as := range reg.seen {
			for _, a := range as {
				if p != "/token" && a != "" && !strings.HasPrefix(a, "Bearer tok") {
					t.Errorf("%v: %s got Authorization %q", entry, p, a)
				}
			}
		}
	}
}

// TestAuthHostile: each refusal is one line, and no secret goes where
// it could be read on the way.
func TestAuthHostile(t *testing.T) {
	cases := []struct {
		name string
		// loopback is what counts as loopback (nil: the default).
		loopback func(reg, realm string) func(string) bool
		insecure bool
		entry    map[string]string
		realmOn  bool // the token realm is a second server
		status   int  // the registry's answer to a request with a token
		want     string
	}{
		{name: "realm on another host over http", loopback: func(reg, realm string) func(string) bool {
			return func(h string) bool { return h == reg }
		}, entry: map[string]string{"auth": b64("alice:s3cret")}, realmOn: true,
			want: "is not https (http only on loopback), refused: no credential or token is sent to it"},
		{name: "basic in clear off loopback", loopback: func(reg, realm string) func(string) bool {
			return func(string) bool { return false }
		}, insecure: true, entry: map[string]string{"auth": b64("alice:s3cret")},
			want: "over plain http to HOST, off loopback: the credential for HOST from FILE is not sent in clear, refused"},
		{name: "401 after a token", entry: map[string]string{"auth": b64("alice:s3cret")}, status: http.StatusUnauthorized,
			want: "the registry refused the token its realm gave for the credential for HOST from FILE (HTTP 401 again)"},
		{name: "403", entry: map[string]string{"auth": b64("alice:s3cret")}, status: http.StatusForbidden,
			want: "reading the manifest: HTTP 403 Forbidden"},
		{name: "realm refuses the credential", entry: map[string]string{"auth": b64("alice:wrong-pw")},
			want: "HTTP 401 Unauthorized (the credential for HOST from FILE was refused)"},
		{name: "helper", entry: nil,
			want: "HTTP 401 Unauthorized (FILE leaves the credential for HOST to the credential helper docker-credential-pass, which tensorfs does not run"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := noAuthFiles(t)
			var realmSeen []string
			realm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				realmSeen = append(realmSeen, r.Header.Get("Authorization"))
				json.NewEncoder(w).Encode(map[string]string{"token": "tok1"})
			}))
			defer realm.Close()
			var reg *authReg
			tok := "tok1"
			reg, src := tokenReg(t, &tok)
			host := strings.TrimPrefix(src, "oci://")
			host = host[:strings.IndexByte(host, '/')]
			inner := reg.f.hook
			reg.f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				reg.mu.Lock()
				reg.seen[r.URL.Path] = append(reg.seen[r.URL.Path], r.Header.Get("Authorization"))
				reg.mu.Unlock()
				switch {
				case c.insecure:
					w.Header().Set("WWW-Authenticate", `Basic realm="r"`)
					w.WriteHeader(http.StatusUnauthorized)
					return true
				case c.realmOn && r.Header.Get("Authorization") == "":
					w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm.URL+`/token",service="reg"`)
					w.WriteHeader(http.StatusUnauthorized)
					return true
				case c.status != 0 && strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "):
					w.WriteHeader(c.status)
					return true
				}
				return inner(w, r)
			}
			cfg := map[string]any{"auths": map[string]any{host: c.entry}}
			if c.entry == nil {
				cfg = map[string]any{"auths": map[string]any{host: map[string]string{}}, "credHelpers": map[string]string{host: "pass"}}
			}
			file := writeJSON(t, dir, "config.json", cfg)
			if c.loopback != nil {
				isLoopback = c.loopback(host, strings.TrimPrefix(realm.URL, "http://"))
				defer func() { isLoopback = loopback }()
			}
			_, _, err := Open(context.Background(), src+":t", Options{Insecure: c.insecure})
			want := strings.NewReplacer("HOST", host, "FILE", file).Replace(c.want)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), src) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong-pw") {
				t.Errorf("got %v, want one line holding %q", err, want)
			}
			if len(realmSeen) != 0 {
				t.Errorf("the other host's realm got %q", realmSeen)
			}
			for p, as := range reg.seen {
				for _, a := range as {
					if strings.HasPrefix(a, "Basic") && p != "/token" {
						t.Errorf("%s got a password", p)
					}
				}
			}
		})
	}
}

// TestInsecure: a registry off loopback is read over https unless
// named insecure, then over plain http.
func TestInsecure(t *testing.T) {
	noAuthFiles(t)
	_, src := newAuthReg(t, func(http.ResponseWriter, *http.Request) bool { return false })
	isLoopback = func(string) bool { return false }
	defer func() { isLoopback = loopback }()
	if _, _, err := Open(context.Background(), src+":t", Options{}); err == nil || !strings.Contains(err.Error(), "HTTPS") {
		t.Errorf("off loopback, not insecure: %v, want an https failure", err)
	}
	s, _, err := Open(context.Background(), src+":t", Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := readModel(t, s); got != "weights" {
		t.Errorf("read %q", got)
	}
}
