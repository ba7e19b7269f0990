package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// fake is a registry of one repository, "m", serving manifests by tag
// or digest and blobs by digest, with Range.
type fake struct {
	manifests map[string][]byte // reference -> bytes
	blobs     map[string][]byte // digest -> bytes
	hook      func(w http.ResponseWriter, r *http.Request) bool
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.hook != nil && f.hook(w, r) {
		return
	}
	if ref, ok := strings.CutPrefix(r.URL.Path, "/v2/m/manifests/"); ok {
		b, ok := f.manifests[ref]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", mediaOCIManifest)
		w.Write(b)
		return
	}
	if d, ok := strings.CutPrefix(r.URL.Path, "/v2/m/blobs/"); ok {
		b, ok := f.blobs[d]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"`+d+`"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
		return
	}
	http.NotFound(w, r)
}

// push adds a manifest of layers (their bytes by digest) as tag.
func (f *fake) push(tag string, layers []Descriptor, data map[string][]byte) string {
	b, _ := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaOCIManifest, Config: Descriptor{MediaType: "application/vnd.cncf.model.config.v1+json", Digest: digestOf(nil)}, Layers: layers})
	d := digestOf(b)
	f.manifests[tag], f.manifests[d] = b, b
	for k, v := range data {
		f.blobs[k] = v
	}
	return d
}

func layer(mt string, data []byte, path string) Descriptor {
	d := Descriptor{MediaType: mt, Digest: digestOf(data), Size: int64(len(data))}
	if path != "" {
		d.Annotations = map[string]string{annFilepath: path}
	}
	return d
}

func newFake(t *testing.T) (*fake, string) {
	f := &fake{manifests: map[string][]byte{}, blobs: map[string][]byte{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/m"
}

func TestParseRef(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for src, want := range map[string]Ref{
		"oci://reg.example:5000/a/b":      {Host: "reg.example:5000", Repo: "a/b", Reference: "latest"},
		"oci://reg.example/a/b:v1.0":      {Host: "reg.example", Repo: "a/b", Reference: "v1.0"},
		"OCI://reg.example:5000/a/b@" + d: {Host: "reg.example:5000", Repo: "a/b", Reference: d},
	} {
		got, err := ParseRef(src)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", src, got, err, want)
		}
	}
	for _, bad := range []string{"oci://", "oci://host", "oci://host/", "oci://host/A/b", "oci://host/a/../b", "oci://host/a:b:c/d", "oci://host/a@sha256:12", "oci://host/a:-x", "oci://host/a//b"} {
		if _, err := ParseRef(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line", bad, err)
		}
	}
}

// TestOpen: the files of a ModelPack manifest by their annotations (the
// older key too), Docker Model Runner's GGUF by its default name, the
// tag pinned to the digest, sizes and digests as the manifest states
// them, the bytes read in ranges.
func TestOpen(t *testing.T) {
	f, src := newFake(t)
	w, c, g := []byte("weights-bytes"), []byte(`{"a":1}`), []byte("GGUF....")
	cl := layer(MediaConfigRaw, c, "")
	cl.Annotations = map[string]string{annFilepathOld: "sub/config.json"}
	d := f.push("v1", []Descriptor{layer(MediaWeightRaw, w, "sub/model.safetensors"), cl, layer("application/vnd.cncf.model.doc.v1.raw", []byte("README"), "README.md")},
		map[string][]byte{digestOf(w): w, digestOf(c): c})
	s, key, err := Open(context.Background(), src+":v1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if key != "sub/" || s.Pinned() != src+"@"+d || strings.Join(s.Files(), ",") != "sub/config.json,sub/model.safetensors" {
		t.Fatalf("key %q, pinned %s, files %v", key, s.Pinned(), s.Files())
	}
	ents, any, err := s.List(context.Background(), "sub/")
	if err != nil || !any || len(ents) != 2 || ents[1].Name != "model.safetensors" || ents[1].Size != int64(len(w)) {
		t.Errorf("List(sub/): %v %v %v", ents, any, err)
	}
	if h, ok := s.SHA256("sub/model.safetensors"); !ok || "sha256:"+h != digestOf(w) {
		t.Errorf("SHA256: %s %v", h, ok)
	}
	head := make([]byte, 4)
	obj, n, err := s.Open(context.Background(), "sub/model.safetensors", head)
	if err != nil || n != 4 || string(head) != "weig" || obj.Size != int64(len(w)) {
		t.Fatalf("Open: %v %d %q %v", obj, n, head, err)
	}
	buf := make([]byte, 5)
	if err := s.Get(context.Background(), obj, 8, [][]byte{buf}, nil); err != nil || string(buf) != "bytes" {
		t.Fatalf("Get: %q %v", buf, err)
	}

	f.push("dmr", []Descriptor{layer(MediaDockerGGUF, g, ""), layer("application/vnd.docker.ai.license", []byte("MIT"), "")}, map[string][]byte{digestOf(g): g})
	s, _, err = Open(context.Background(), src+":dmr", Options{})
	if err != nil || strings.Join(s.Files(), ",") != "model.gguf" {
		t.Fatalf("dmr: %v %v", s, err)
	}
}

// TestHostile: what a registry or a manifest may do wrong is refused in
// one line naming the artifact and the problem.
func TestHostile(t *testing.T) {
	noAuthFiles(t)
	w := []byte("weights")
	cases := []struct {
		name, want string
		setup      func(f *fake) string // the SOURCE's suffix
	}{
		{"dotdot", `file path "../x" escapes the tree`, func(f *fake) string {
			f.push("t", []Descriptor{layer(MediaWeightRaw, w, "../x")}, nil)
			return ":t"
		}},
		{"absolute", `file path "/etc/x" is absolute`, func(f *fake) string {
			f.push("t", []Descriptor{layer(MediaWeightRaw, w, "/etc/x")}, nil)
			return ":t"
		}},
		{"file under file", `is under file "a"`, func(f *fake) string {
			f.push("t", []Descriptor{layer(MediaWeightRaw, w, "a"), layer(MediaConfigRaw, []byte("x"), "a/b")}, nil)
			return ":t"
		}},
		{"two layers one path", `is also layer`, func(f *fake) string {
			f.push("t", []Descriptor{layer(MediaWeightRaw, w, "a"), layer(MediaWeightRaw, []byte("y"), "a")}, nil)
			return ":t"
		}},
		{"tar", "application/vnd.cncf.model.weight.v1.tar+xz): a tar layer compressed otherwise than gzip or zstd is not read", func(f *fake) string {
			f.push("t", []Descriptor{layer("application/vnd.cncf.model.weight.v1.tar+xz", w, "a")}, nil)
			return ":t"
		}},
		{"no weights", "no weight layer", func(f *fake) string {
			f.push("t", []Descriptor{layer(MediaConfigRaw, w, "config.json")}, nil)
			return ":t"
		}},
		{"no path", "no file path", func(f *fake) string {
			f.push("t", []Descriptor{layer(MediaWeightRaw, w, "")}, nil)
			return ":t"
		}},
		{"over budget", fmt.Sprintf("over the budget of %d", MaxManifest), func(f *fake) string {
			f.manifests["t"] = bytes.Repeat([]byte(" "), MaxManifest+10)
			return ":t"
		}},
		{"wrong digest", "the registry answered a manifest of digest", func(f *fake) string {
			d := f.push("t", []Descriptor{layer(MediaWeightRaw, w, "a")}, nil)
			f.manifests[d] = []byte(`{"schemaVersion":2}`)
			return "@" + d
		}},
		{"docker-content-digest", "the registry says sha256:" + strings.Repeat("0", 64), func(f *fake) string {
			f.push("t", []Descriptor{layer(MediaWeightRaw, w, "a")}, nil)
			f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("0", 64))
				return false
			}
			return ":t"
		}},
		{"redirect to another scheme", "a redirect to a ftp:// URL, refused", func(f *fake) string {
			f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				http.Redirect(w, r, "ftp://example.com/x", http.StatusFound)
				return true
			}
			return ":t"
		}},
		{"redirect loop", "stopped after 10 redirects", func(f *fake) string {
			f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				http.Redirect(w, r, r.URL.Path, http.StatusFound)
				return true
			}
			return ":t"
		}},
		{"basic auth", "the registry asks for credentials (HTTP 401, Basic) and none for", func(f *fake) string {
			f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("WWW-Authenticate", `Basic realm="r"`)
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			return ":t"
		}},
		{"token refused: no loop", "the registry refused the token its realm gave", func(f *fake) string {
			f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path == "/token" {
					w.Write([]byte(`{"token":"t"}`))
					return true
				}
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="reg"`, r.Host))
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			return ":t"
		}},
		{"realm not https", "is not https (http only on loopback), refused", func(f *fake) string {
			f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("WWW-Authenticate", `Bearer realm="http://auth.example/token"`)
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			return ":t"
		}},
		{"token over budget", "the answer is over the budget of 65536 bytes", func(f *fake) string {
			f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path == "/token" {
					w.Write(bytes.Repeat([]byte("x"), 70000))
					return true
				}
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token"`, r.Host))
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			return ":t"
		}},
		{"token with a newline", "no usable token", func(f *fake) string {
			f.hook = func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path == "/token" {
					w.Write([]byte(`{"token":"a\r\nX-Evil: 1"}`))
					return true
				}
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token"`, r.Host))
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			return ":t"
		}},
		{"missing", "no such manifest (HTTP 404)", func(f *fake) string { return ":nope" }},
		// Manifest loops: content addressing makes a cycle of digests
		// impossible, so a loop is an index under an index, followed
		// one level only, whatever its descriptor says it is.
		{"index of an index", "the index names no manifest, only other indexes (1): one level is read", func(f *fake) string {
			a := f.push("a", []Descriptor{layer(MediaWeightRaw, w, "a")}, nil)
			inner, _ := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaOCIIndex, Manifests: []Descriptor{{MediaType: mediaOCIManifest, Digest: a}}})
			f.manifests[digestOf(inner)] = inner
			outer, _ := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaOCIIndex, Manifests: []Descriptor{{MediaType: mediaOCIIndex, Digest: digestOf(inner)}}})
			f.manifests["t"] = outer
			return ":t"
		}},
		{"index of an index called a manifest", "names another index", func(f *fake) string {
			a := f.push("a", []Descriptor{layer(MediaWeightRaw, w, "a")}, nil)
			inner, _ := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaOCIIndex, Manifests: []Descriptor{{MediaType: mediaOCIManifest, Digest: a}}})
			f.manifests[digestOf(inner)] = inner
			outer, _ := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaOCIIndex, Manifests: []Descriptor{{MediaType: mediaOCIManifest, Digest: digestOf(inner)}}})
			f.manifests["t"] = outer
			return ":t"
		}},
		{"index of two", "the index names 2 manifests", func(f *fake) string {
			a := f.push("a", []Descriptor{layer(MediaWeightRaw, w, "a")}, nil)
			b := f.push("b", []Descriptor{layer(MediaWeightRaw, []byte("z"), "a")}, nil)
			ix, _ := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaOCIIndex, Manifests: []Descriptor{{MediaType: mediaOCIManifest, Digest: a}, {MediaType: mediaOCIManifest, Digest: b}}})
			f.manifests["t"] = ix
			return ":t"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, src := newFake(t)
			_, _, err := Open(context.Background(), src+c.setup(f), Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), src) {
				t.Errorf("got %v, want one line starting %s holding %q", err, src, c.want)
			}
		})
	}
}

// TestIndex: an image index naming one manifest is that manifest,
// pinned to its digest.
func TestIndex(t *testing.T) {
	f, src := newFake(t)
	w := []byte("weights")
	a := f.push("a", []Descriptor{layer(MediaWeightRaw, w, "model.safetensors")}, map[string][]byte{digestOf(w): w})
	ix, _ := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaOCIIndex, Manifests: []Descriptor{{MediaType: mediaOCIManifest, Digest: a}}})
	f.manifests["t"] = ix
	s, _, err := Open(context.Background(), src+":t", Options{})
	if err != nil || s.Pinned() != src+"@"+a {
		t.Fatalf("%v %v", s, err)
	}
}

// TestBlobLies: a blob whose size is not the manifest's is refused at
// open; one whose bytes are not its digest's is read, and its digest
// stated, for check --data to find the mismatch.
func TestBlobLies(t *testing.T) {
	f, src := newFake(t)
	w := []byte("weights")
	l := layer(MediaWeightRaw, w, "a")
	l2 := layer(MediaWeightRaw, []byte("other!!"), "b")
	f.push("t", []Descriptor{l, l2}, map[string][]byte{l.Digest: []byte("weights and more"), l2.Digest: []byte("notsame")})
	s, _, err := Open(context.Background(), src+":t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Open(context.Background(), "a", make([]byte, 4))
	if err == nil || !strings.Contains(err.Error(), "is 16 bytes, the manifest says 7") {
		t.Errorf("size: %v", err)
	}
	if _, _, err := s.Open(context.Background(), "b", make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if h, ok := s.SHA256("b"); !ok || "sha256:"+h != l2.Digest || "sha256:"+h == digestOf([]byte("notsame")) {
		t.Errorf("SHA256(b) %s %v", h, ok)
	}
}

// TestDockerSafetensors: Docker Model Runner safetensors layers without
// a title are model.safetensors, or, several, named by their digests;
// a title names one.
func TestDockerSafetensors(t *testing.T) {
	f, src := newFake(t)
	a, b, c := []byte("aaaa"), []byte("bbbb"), []byte("cccc")
	f.push("one", []Descriptor{layer(MediaDockerST, a, "")}, nil)
	s, _, err := Open(context.Background(), src+":one", Options{})
	if err != nil || strings.Join(s.Files(), ",") != "model.safetensors" {
		t.Fatalf("one: %v %v", s, err)
	}
	lc := layer(MediaDockerST, c, "")
	lc.Annotations = map[string]string{annTitle: "model-00003.safetensors"}
	f.push("three", []Descriptor{layer(MediaDockerST, a, ""), layer(MediaDockerST, b, ""), lc}, nil)
	s, _, err = Open(context.Background(), src+":three", Options{})
	want := []string{"model-00003.safetensors", "model-" + digestOf(a)[7:19] + ".safetensors", "model-" + digestOf(b)[7:19] + ".safetensors"}
	sort.Strings(want)
	if err != nil || strings.Join(s.Files(), ",") != strings.Join(want, ",") {
		t.Fatalf("three: %v %v, want %s", s.Files(), err, want)
	}
}

// TestLoopback: plain http only to the loopback interface.
func TestLoopback(t *testing.T) {
	for h, want := range map[string]bool{"127.0.0.1:5000": true, "localhost": true, "[::1]:5000": true, "127.8.0.1": true, "registry.example:5000": false, "10.0.0.1": false, "localhost.example.com": false} {
		if loopback(h) != want {
			t.Errorf("loopback(%s) = %v", h, !want)
		}
	}
}

// TestToken: the anonymous token flow: a 401's Bearer challenge is
// answered from its realm (scope repository:m:pull, no credential sent
// there), the token goes with the manifest and blob requests to the
// registry, a token that expires is fetched again once, and the token is
// not sent on a blob's redirect to another host.
func TestToken(t *testing.T) {
	var other *httptest.Server
	var otherAuth []string
	other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherAuth = append(otherAuth, r.Header.Get("Authorization"))
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader([]byte("weights")))
	}))
	defer other.Close()
	f, src := newFake(t)
	w := []byte("weights")
	f.push("t", []Descriptor{layer(MediaWeightRaw, w, "model.safetensors"), layer(MediaConfigRaw, []byte("{}"), "config.json")}, map[string][]byte{digestOf(w): w, digestOf([]byte("{}")): []byte("{}")})
	current, issued := "tok1", 0
	var scopes, realmAuth []string
	f.hook = func(rw http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/token" {
			issued++
			scopes = append(scopes, r.URL.Query().Get("scope"))
			realmAuth = append(realmAuth, r.Header.Get("Authorization"))
			json.NewEncoder(rw).Encode(map[string]string{"token": current})
			return true
		}
		if r.Header.Get("Authorization") != "Bearer "+current {
			rw.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="reg",scope="repository:m:pull"`, r.Host))
			rw.WriteHeader(http.StatusUnauthorized)
			return true
		}
		if strings.HasSuffix(r.URL.Path, digestOf(w)) && current == "tok3" {
			http.Redirect(rw, r, other.URL+"/blob", http.StatusTemporaryRedirect)
			return true
		}
		return false
	}
	s, _, err := Open(context.Background(), src+":t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 4)
	obj, _, err := s.Open(context.Background(), "model.safetensors", head)
	if err != nil || string(head) != "weig" {
		t.Fatalf("Open: %q %v", head, err)
	}
	current = "tok2" // the token expired: fetched again, once
	buf := make([]byte, 3)
	if err := s.Get(context.Background(), obj, 4, [][]byte{buf}, nil); err != nil || string(buf) != "hts" {
		t.Fatalf("Get after expiry: %q %v", buf, err)
	}
	if issued != 2 || scopes[0] != "repository:m:pull" || realmAuth[0] != "" || realmAuth[1] != "" {
		t.Errorf("tokens issued %d, scopes %v, credentials sent to the realm %q", issued, scopes, realmAuth)
	}
	current = "tok3" // now the blob redirects to another host
	if _, _, err := s.Open(context.Background(), "model.safetensors", head); err != nil {
		t.Fatalf("Open through a redirect: %v", err)
	}
	if len(otherAuth) == 0 || slices.ContainsFunc(otherAuth, func(a string) bool { return a != "" }) {
		t.Errorf("the other host got Authorization %q", otherAuth)
	}
}

// tarOf is a tar of entries (name -> bytes; a name ending in '/' a
// directory, "->TARGET" a symbolic link), in the order given.
func tarOf(t *testing.T, entries ...string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i < len(entries); i += 2 {
		name, data := entries[i], entries[i+1]
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Size = tar.TypeDir, 0
		case strings.HasPrefix(data, "->"):
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, data[2:], 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(data))
		}
	}
	tw.Close()
	return b.Bytes()
}

// TestTar: an uncompressed tar layer's regular files are the artifact's
// files, read in place (ranges of the blob); an entry that escapes,
// links, or is there twice is one line.
func TestTar(t *testing.T) {
	f, src := newFake(t)
	big := strings.Repeat("w", 100000) // past one read-ahead
	tb := tarOf(t, "m/", "", "m/model.safetensors", big+"END", "./m/config.json", `{"a":1}`)
	l := layer(MediaWeightTar, tb, "m")
	f.push("t", []Descriptor{l}, map[string][]byte{l.Digest: tb})
	s, key, err := Open(context.Background(), src+":t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if key != "m/" || strings.Join(s.Files(), ",") != "m/config.json,m/model.safetensors" {
		t.Fatalf("key %q files %v", key, s.Files())
	}
	if _, ok := s.SHA256("m/config.json"); ok {
		t.Errorf("a tar member states a digest (its layer's is the tar's)")
	}
	head := make([]byte, 16)
	obj, n, err := s.Open(context.Background(), "m/config.json", head)
	if err != nil || n != 7 || string(head[:n]) != `{"a":1}` || obj.Size != 7 {
		t.Fatalf("Open: %v %d %q %v", obj, n, head[:n], err)
	}
	obj, _, err = s.Open(context.Background(), "m/model.safetensors", head)
	if err != nil || obj.Size != int64(len(big)+3) {
		t.Fatalf("Open: %v %v", obj, err)
	}
	buf := make([]byte, 4)
	if err := s.Get(context.Background(), obj, int64(len(big))-1, [][]byte{buf}, nil); err != nil || string(buf) != "wEND" {
		t.Fatalf("Get: %q %v", buf, err)
	}
	ents, _, _ := s.List(context.Background(), "m/")
	if len(ents) != 2 || ents[0].Size != 7 {
		t.Errorf("List: %v", ents)
	}
	// The tar's blob whole, for check --data: its headers and padding
	// are in no file; and the config blob.
	whole := s.WholeBlobs()
	if len(whole) != 2 || !slices.Contains(whole, "/blobs/"+digestOf(nil)) || !slices.Contains(whole, "/blobs/"+l.Digest) {
		t.Fatalf("WholeBlobs: %q, want the tar's and the config's", whole)
	}
	whole = []string{"/blobs/" + l.Digest}
	if s.URL(whole[0]) != s.Pinned()+"/blobs/"+l.Digest {
		t.Errorf("URL %q", s.URL(whole[0]))
	}
	if h, ok := s.SHA256(whole[0]); !ok || "sha256:"+h != l.Digest {
		t.Errorf("SHA256 of the whole blob: %q %v, want its digest", h, ok)
	}
	obj, _, err = s.Open(context.Background(), whole[0], head)
	all := make([]byte, len(tb))
	if err != nil || obj.Size != int64(len(tb)) || s.Get(context.Background(), obj, 0, [][]byte{all}, nil) != nil || !bytes.Equal(all, tb) {
		t.Errorf("the whole blob: %v %v, its bytes are the tar's: %v", obj, err, bytes.Equal(all, tb))
	}
	if ents, any, _ := s.List(context.Background(), "/blobs/"); len(ents) != 0 || any {
		t.Errorf("List lists the whole blob: %v", ents)
	}

	for _, c := range []struct {
		entries []string
		want    string
	}{
		{[]string{"../x", "a"}, `tar entry "../x" escapes the tree (..)`},
		{[]string{"/etc/x", "a"}, `tar entry "/etc/x" is absolute`},
		{[]string{"x", "->/etc/passwd"}, `tar entry "x" is not a regular file or directory`},
		{[]string{"x", "a", "./x", "b"}, `tar entry "x" is there twice`},
		{[]string{"raw", "a"}, `tar entry "raw" of layer`},
	} {
		tb := tarOf(t, c.entries...)
		l := layer(MediaWeightTar, tb, "")
		raw := layer(MediaConfigRaw, []byte("r"), "raw")
		f.push("bad", []Descriptor{l, raw}, map[string][]byte{l.Digest: tb, raw.Digest: []byte("r")})
		_, _, err := Open(context.Background(), src+":bad", Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line holding %q", c.entries, err, c.want)
		}
	}
}

// TestProxy: an anonymous registry's blobs go through --proxy's tier
// (one that needs a token is read directly: TestToken).
func TestProxy(t *testing.T) {
	f, src := newFake(t)
	w := []byte("weights")
	f.push("t", []Descriptor{layer(MediaWeightRaw, w, "model.safetensors")}, map[string][]byte{digestOf(w): w})
	var proxied []string
	proxy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		proxied = append(proxied, r.URL.Path)
		req, _ := http.NewRequest(r.Method, r.URL.String(), nil)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			rw.Header()[k] = v
		}
		rw.WriteHeader(resp.StatusCode)
		io.Copy(rw, resp.Body)
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	s, _, err := Open(context.Background(), src+":t", Options{Proxy: pu, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 4)
	if _, _, err := s.Open(context.Background(), "model.safetensors", head); err != nil || string(head) != "weig" {
		t.Fatalf("%q %v", head, err)
	}
	if len(proxied) == 0 || !strings.HasSuffix(proxied[0], "/blobs/"+digestOf(w)) {
		t.Errorf("through the proxy: %v, want the blob", proxied)
	}
}

// TestManifestBusy: a manifest GET answered 429 or a 5xx is asked again
// (after its Retry-After, or a backoff), at most manifestRetries times;
// a registry that stays busy, or asks for a wait over 10 s, is one line
// with its status, and a 4xx other than 429 is not asked again.
func TestManifestBusy(t *testing.T) {
	noAuthFiles(t)
	w := []byte("weights")
	for _, c := range []struct {
		name       string
		status     int
		retryAfter string
		busy       int    // manifest GETs answered status before it is served
		want       string // "": Open succeeds
		gets       int    // manifest GETs made
	}{
		{"503 twice", 503, "", 2, "", 3},
		{"429 once", 429, "0", 1, "", 2},
		{"502 once", 502, "0", 1, "", 2},
		{"500 always", 500, "0", 100, "reading the manifest: HTTP 500 Internal Server Error (Retry-After: 0), asked 5 times", 5},
		{"429 for an hour", 429, "3600", 100, "reading the manifest: HTTP 429 Too Many Requests (Retry-After: 3600)", 1},
		{"403", 403, "", 100, "reading the manifest: HTTP 403 Forbidden", 1},
		{"501", 501, "", 100, "reading the manifest: HTTP 501 Not Implemented", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, src := newFake(t)
			f.push("t", []Descriptor{layer(MediaWeightRaw, w, "model.safetensors")}, map[string][]byte{digestOf(w): w})
			gets := 0
			f.hook = func(rw http.ResponseWriter, r *http.Request) bool {
				if !strings.Contains(r.URL.Path, "/manifests/") {
					return false
				}
				if gets++; gets > c.busy {
					return false
				}
				if c.retryAfter != "" {
					rw.Header().Set("Retry-After", c.retryAfter)
				}
				http.Error(rw, "busy", c.status)
				return true
			}
			s, _, err := Open(context.Background(), src+":t", Options{})
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Open: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("Open: %v, want one line holding %q", err, c.want)
			}
			if s != nil {
				s.Close()
			}
			if gets != c.gets {
				t.Errorf("%d manifest GETs, want %d", gets, c.gets)
			}
		})
	}
}
