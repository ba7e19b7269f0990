package hf_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/hf/hftest"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/source"
)

// safetensors is a safetensors file of one U8 tensor name holding data.
func safetensors(name string, data []byte) []byte {
	hdr := []byte(fmt.Sprintf(`{%q:{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}`, name, len(data), len(data)))
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

func fill(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// shardedRepo is a sharded checkpoint with a config and a tokenizer, as
// a model repository holds it: the shards in LFS, the rest in git.
func shardedRepo(seed byte) []hftest.File {
	return []hftest.File{
		{Path: "model-00001-of-00002.safetensors", Data: safetensors("a", fill(300<<10, seed)), LFS: true},
		{Path: "model-00002-of-00002.safetensors", Data: safetensors("b", fill(200<<10, seed+1)), LFS: true},
		{Path: "model.safetensors.index.json", Data: []byte(`{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`)},
		{Path: "config.json", Data: []byte(`{"model_type":"test"}`)},
		{Path: "tokenizer.json", Data: []byte(`{}`)},
		{Path: "README.md", Data: []byte("# test\n")},
		{Path: ".gitattributes", Data: []byte("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")},
	}
}

// env points huggingface_hub's variables at srv and an empty HF home.
func env(t *testing.T, srv *hftest.Server) string {
	home := t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.Hub.URL)
	t.Setenv("HF_HOME", home)
	for _, v := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "XDG_CACHE_HOME", "LLAMA_CACHE"} {
		t.Setenv(v, "")
	}
	return home
}

func opts() source.Options {
	return source.Options{Remote: source.RemoteOptions{Remote: remote.Options{PartSize: 64 << 10, ReadErrorsReturned: true, Logf: func(string, ...any) {}}}}
}

func load(t *testing.T, src string) (*source.Checkpoint, error) {
	t.Helper()
	ck, err := source.Load(context.Background(), src, opts())
	if err == nil {
		t.Cleanup(func() { ck.Close() })
	}
	return ck, err
}

// readAll reads every source of ck whole.
func readAll(t *testing.T, ck *source.Checkpoint) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for i, s := range ck.Sources {
		b := make([]byte, s.Size())
		if _, err := s.ReadAt(b, 0); err != nil && err != io.EOF {
			t.Fatalf("reading %s: %v", ck.Index.Sources[i], err)
		}
		out[ck.Index.Sources[i]] = b
	}
	return out
}

// TestLoadRepo: hf://ORG/NAME loads the sharded checkpoint of the
// repository at main, pinned to its sha (in every source's name), the
// tree listed across pages, the shards read through resolve's 302 from
// the CDN with the right bytes, and the token (none here) never sent to
// the CDN.
func TestLoadRepo(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	srv.PageSize = 2 // the tree comes in 4 pages
	files := shardedRepo(1)
	sha := srv.Commit("org/model", "main", files...)
	env(t, srv)
	t.Setenv("HF_TOKEN", "hf_secret")
	ck, err := load(t, "hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.Index.Tensors) != 2 || len(ck.Sources) != 2 {
		t.Fatalf("%d tensors, %d sources", len(ck.Index.Tensors), len(ck.Sources))
	}
	got := readAll(t, ck)
	for _, f := range files[:2] {
		u := "hf://org/model@" + sha + "/" + f.Path
		if !bytes.Equal(got[u], f.Data) {
			t.Errorf("%s: wrong bytes (sources %v)", u, ck.Index.Sources)
		}
	}
	if ck.RemoteKey != "" || !ck.RemoteListable {
		t.Errorf("key %q listable %v", ck.RemoteKey, ck.RemoteListable)
	}
	if srv.CDNAuth.Load() != 0 || srv.HubAuth.Load() == 0 {
		t.Errorf("Authorization sent %d times to the CDN, %d to the Hub", srv.CDNAuth.Load(), srv.HubAuth.Load())
	}
	if srv.CDNRequests.Load() < 2 || srv.Redirects.Load() < 2 {
		t.Errorf("the CDN had %d requests, resolve %d", srv.CDNRequests.Load(), srv.Redirects.Load())
	}
}

// TestParse: the URI grammar.
func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, kind, id, rev, key string }{
		{"hf://org/name", "models", "org/name", "main", ""},
		{"HF://org/name/", "models", "org/name", "main", ""},
		{"hf://models/org/name@v1.0", "models", "org/name", "v1.0", ""},
		{"hf://datasets/org/data@main/train/x.safetensors", "datasets", "org/data", "main", "train/x.safetensors"},
		{"hf://org/name@refs/pr/12/sub/", "models", "org/name", "refs/pr/12", "sub/"},
		{"hf://org/name@refs%2Fpr%2F3/a.gguf", "models", "org/name", "refs/pr/3", "a.gguf"},
		{"hf://org/name@0123456789abcdef0123456789abcdef01234567/a/../b", "models", "org/name", "0123456789abcdef0123456789abcdef01234567", "b"},
	} {
		kind, id, rev, key, err := hf.Parse(tc.in)
		if err != nil || kind != tc.kind || id != tc.id || rev != tc.rev || key != tc.key {
			t.Errorf("Parse(%q) = %q %q %q %q %v, want %q %q %q %q", tc.in, kind, id, rev, key, err, tc.kind, tc.id, tc.rev, tc.key)
		}
	}
	for _, bad := range []string{"hf://", "hf://org", "hf://org/", "hf://spaces/org/x", "hf://org/name@", "hf://org/name@refs/pr/", "hf://../x"} {
		if _, _, _, _, err := hf.Parse(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q): %v, want one line", bad, err)
		}
	}
}

// TestRevisionPinned: a branch that moves after the revision is
// resolved changes nothing served; @SHA, a tag-like branch and
// refs/pr/N (quoted as the API wants) read their own commit.
func TestRevisionPinned(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	old := shardedRepo(1)
	sha1 := srv.Commit("org/model", "main", old...)
	pr := srv.Commit("org/model", "refs/pr/7", shardedRepo(9)...)
	env(t, srv)
	ck, err := load(t, "hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	srv.Commit("org/model", "main", shardedRepo(5)...) // a push during the mount
	srv.Expire()                                       // and the CDN URLs must be asked for again
	got := readAll(t, ck)
	if !bytes.Equal(got["hf://org/model@"+sha1+"/"+old[0].Path], old[0].Data) {
		t.Errorf("after a push to main, the mount serves other bytes (sources %v)", ck.Index.Sources)
	}
	for _, src := range []string{"hf://org/model@" + sha1, "hf://org/model@refs/pr/7", "hf://org/model@refs%2Fpr%2F7/"} {
		ck, err := load(t, src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		want := sha1
		if strings.Contains(src, "pr") {
			want = pr
		}
		if !strings.Contains(ck.Index.Sources[0], "@"+want+"/") {
			t.Errorf("%s: sources %v, want at %s", src, ck.Index.Sources, want)
		}
	}
}

// TestNarrowPath: PATH narrows the repository to a file or a folder; a
// datasets/ repository is read as a model's is; a file in git (not LFS)
// is read through the relative 307 to resolve-cache.
func TestNarrowPath(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	a := safetensors("x", fill(1000, 3))
	b := safetensors("y", fill(2000, 4))
	srv.Commit("org/model", "main", hftest.File{Path: "one/a.safetensors", Data: a, LFS: true}, hftest.File{Path: "two/b.safetensors", Data: b})
	srv.Commit("datasets/org/data", "main", hftest.File{Path: "w/b.safetensors", Data: b, LFS: true})
	env(t, srv)
	for _, tc := range []struct {
		src, tensor string
		data        []byte
	}{
		{"hf://org/model/one/a.safetensors", "x", a},
		{"hf://org/model/one", "x", a},
		{"hf://org/model/two/", "y", b},
		{"hf://datasets/org/data/w", "y", b},
	} {
		ck, err := load(t, tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got := readAll(t, ck)
		if len(ck.Index.Tensors) != 1 || ck.Index.Tensors[0].Name != tc.tensor || !bytes.Equal(got[ck.Index.Sources[0]], tc.data) {
			t.Errorf("%s: tensors %v, sources %v", tc.src, ck.Index.Tensors, ck.Index.Sources)
		}
	}
}

// TestErrors: each failure is one line naming the repository, revision
// or path and saying what to do, from X-Error-Code; the token is never
// in it.
func TestErrors(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	srv.Commit("org/model", "main", shardedRepo(1)...)
	srv.Repo("org/gated", false, true)
	srv.Commit("org/gated", "main", shardedRepo(2)...)
	srv.Repo("org/private", true, false)
	srv.Commit("org/private", "main", shardedRepo(3)...)
	srv.Grant("hf_granted", "org/private")
	srv.Grant("hf_granted", "org/gated")
	for _, tc := range []struct {
		src, token string
		want       []string
	}{
		{"hf://org/gated", "", []string{"hf://org/gated@", "401 GatedRepo", "is gated: set HF_TOKEN"}},
		{"hf://org/gated", "hf_nope", []string{"403 GatedRepo", "HF_TOKEN's account has not been granted access"}},
		{"hf://org/private", "", []string{"401 RepoNotFound", "not found, or private: set HF_TOKEN"}},
		{"hf://org/private", "hf_nope", []string{"404 RepoNotFound", "not found, or HF_TOKEN cannot read it"}},
		{"hf://org/none", "", []string{"RepoNotFound"}},
		{"hf://org/model@v9", "", []string{"hf://org/model@v9", "RevisionNotFound", `revision "v9" not found`}},
		{"hf://org/model/nope.safetensors", "", []string{"/nope.safetensors", "not found"}},
	} {
		env(t, srv)
		t.Setenv("HF_TOKEN", tc.token)
		_, err := load(t, tc.src)
		if err == nil {
			t.Errorf("%s: loaded", tc.src)
			continue
		}
		msg := err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s (token %q): error %q, want %q in it", tc.src, tc.token, msg, w)
			}
		}
		if strings.Contains(msg, "\n") || (tc.token != "" && strings.Contains(msg, tc.token)) || strings.Contains(msg, "Signature") {
			t.Errorf("%s: error %q: more than one line, or a secret", tc.src, msg)
		}
	}
	// With a granted token both load, and the CDN still never sees it.
	for _, src := range []string{"hf://org/private", "hf://org/gated"} {
		env(t, srv)
		t.Setenv("HF_TOKEN", "hf_granted")
		ck, err := load(t, src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		readAll(t, ck)
	}
	if srv.CDNAuth.Load() != 0 {
		t.Errorf("the CDN got Authorization %d times", srv.CDNAuth.Load())
	}
}

// TestTokenSources: the token comes from HF_TOKEN, else HF_TOKEN_PATH's
// file, else $HF_HOME/token, as huggingface_hub reads it.
func TestTokenSources(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	srv.Repo("org/private", true, false)
	srv.Commit("org/private", "main", shardedRepo(3)...)
	srv.Grant("hf_file", "org/private")
	home := env(t, srv)
	if _, err := load(t, "hf://org/private"); err == nil {
		t.Fatal("a private repository loaded without a token")
	}
	os.WriteFile(filepath.Join(home, "token"), []byte("hf_file\n"), 0o600)
	if _, err := load(t, "hf://org/private"); err != nil {
		t.Errorf("with $HF_HOME/token: %v", err)
	}
	os.Remove(filepath.Join(home, "token"))
	p := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(p, []byte("hf_file"), 0o600)
	t.Setenv("HF_TOKEN_PATH", p)
	if _, err := load(t, "hf://org/private"); err != nil {
		t.Errorf("with HF_TOKEN_PATH: %v", err)
	}
	t.Setenv("HF_TOKEN", "hf_other") // HF_TOKEN comes first
	if _, err := load(t, "hf://org/private"); err == nil {
		t.Error("HF_TOKEN did not take precedence over the token file")
	}
}

// TestExpiredURL: a presigned CDN URL that expires while a source is
// read is re-obtained from resolve, not an error.
func TestExpiredURL(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(1)
	srv.Commit("org/model", "main", files...)
	env(t, srv)
	ck, err := load(t, "hf://org/model/"+files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	srv.Expire()
	got := readAll(t, ck)
	if !bytes.Equal(got[ck.Index.Sources[0]], files[0].Data) {
		t.Error("wrong bytes")
	}
	if srv.Expired.Load() == 0 {
		t.Error("no URL expired: the test tested nothing")
	}
}

// TestThrottled: 429s from the Hub are backed off and retried.
func TestThrottled(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	srv.Commit("org/model", "main", shardedRepo(1)...)
	env(t, srv)
	srv.Throttle(3)
	if _, err := load(t, "hf://org/model"); err != nil {
		t.Fatal(err)
	}
	if srv.Throttled.Load() != 3 {
		t.Errorf("%d requests throttled, want 3", srv.Throttled.Load())
	}
}

// TestChangedCDN: a CDN whose bytes for a file change after they were
// first served (another ETag) fails the reads, never mixes versions.
func TestChangedCDN(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(1)
	srv.Commit("org/model", "main", files...)
	env(t, srv)
	ck, err := load(t, "hf://org/model/"+files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(files[0].Data)
	bad[len(bad)-1] ^= 1
	srv.ReplaceBlob(hftest.SHA256(files[0].Data), bad)
	s := ck.Sources[0]
	b := make([]byte, s.Size())
	_, err = s.ReadAt(b, 0)
	if err == nil || !strings.Contains(err.Error(), "ETag") {
		t.Fatalf("read %v, want the change said", err)
	}
}

// TestSHA256: a source states the Hub's sha256 (X-Linked-Etag, the LFS
// oid) of an LFS file, equal to that of its bytes; a file in git none.
func TestSHA256(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(1)
	files[1].LFS = false
	srv.Commit("org/model", "main", files...)
	env(t, srv)
	ck, err := load(t, "hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, ck)
	for i, s := range ck.Sources {
		rs, _ := remote.Unwrap(s)
		sum, ok := rs.SHA256()
		h := sha256.Sum256(got[ck.Index.Sources[i]])
		lfs := strings.HasSuffix(ck.Index.Sources[i], files[0].Path)
		if ok != lfs || (ok && sum != hex.EncodeToString(h[:])) {
			t.Errorf("%s: SHA256 %q %v", ck.Index.Sources[i], sum, ok)
		}
	}
}

// hfCache writes files into the HF cache at hub as huggingface_hub's
// hf_hub_download does: blobs named by the ETag (the LFS sha256, else
// the git oid), snapshot links that climb as many ../ as the path is
// deep, and refs/REV holding the sha.
func hfCache(t *testing.T, hub, repo, rev, sha string, files []hftest.File) {
	t.Helper()
	dir := filepath.Join(hub, hf.RepoFolderName("models", repo))
	for _, f := range files {
		blob := filepath.Join(dir, "blobs", hftest.ETag(f))
		snap := filepath.Join(dir, "snapshots", sha, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(blob, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(filepath.Dir(snap), blob)
		if err := os.Symlink(rel, snap); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "refs"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "refs", rev), []byte(sha), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHFCache: files already in the HF cache at the pinned sha are read
// from there without a request to the CDN or resolve; the others are
// fetched. HF_HUB_CACHE overrides $HF_HOME/hub.
func TestHFCache(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(1)
	files = append(files, hftest.File{Path: "deep/er/c.safetensors", Data: safetensors("c", fill(999, 2)), LFS: true})
	sha := srv.Commit("org/model", "main", files...)
	home := env(t, srv)
	hfCache(t, filepath.Join(home, "hub"), "org/model", "main", sha, []hftest.File{files[0], files[2]}) // a shard and the weight map
	ck, err := load(t, "hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, ck)
	for _, f := range files[:2] {
		if !bytes.Equal(got["hf://org/model@"+sha+"/"+f.Path], f.Data) {
			t.Errorf("%s: wrong bytes", f.Path)
		}
	}
	// The shard not in the cache, and config.json, read for a
	// quantization scheme (source.QuantConfigFiles); not the other
	// files beside the checkpoint.
	if srv.Redirects.Load() != 2 {
		t.Errorf("%d resolve redirects, want 2 (the shard not in the cache, config.json)", srv.Redirects.Load())
	}
	// Everything cached, in HF_HUB_CACHE: no resolve, no CDN.
	other := t.TempDir()
	t.Setenv("HF_HUB_CACHE", other)
	hfCache(t, other, "org/model", "main", sha, files)
	r0, c0 := srv.Redirects.Load(), srv.CDNRequests.Load()
	ck, err = load(t, "hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, ck)
	if ck2, err := load(t, "hf://org/model/deep/er/c.safetensors"); err != nil {
		t.Fatal(err)
	} else {
		readAll(t, ck2)
	}
	if srv.Redirects.Load() != r0 || srv.CDNRequests.Load() != c0 {
		t.Errorf("%d resolves, %d CDN GETs for files all in the cache", srv.Redirects.Load()-r0, srv.CDNRequests.Load()-c0)
	}
}

// TestOffline: with HF_HUB_OFFLINE=1 the revision comes from refs/, the
// listing from the snapshot, the bytes from the blobs, with no request
// at all; a file that is not there is one line saying so.
func TestOffline(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(1)
	sha := srv.Commit("org/model", "main", files...)
	home := env(t, srv)
	hfCache(t, filepath.Join(home, "hub"), "org/model", "main", sha, files)
	t.Setenv("HF_HUB_OFFLINE", "1")
	ck, err := load(t, "hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, ck)
	if !bytes.Equal(got["hf://org/model@"+sha+"/"+files[1].Path], files[1].Data) {
		t.Errorf("wrong bytes (sources %v)", ck.Index.Sources)
	}
	if n := srv.HubRequests.Load() + srv.CDNRequests.Load(); n != 0 {
		t.Errorf("%d requests offline", n)
	}
	for _, tc := range []struct{ src, want string }{
		{"hf://org/model@v2", `HF_HUB_OFFLINE is set and the HF cache has no revision "v2"`},
		{"hf://org/other", "HF_HUB_OFFLINE is set and the HF cache has no revision"},
	} {
		_, err := load(t, tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", tc.src, err, tc.want)
		}
	}
	// A snapshot missing a shard (its blob never downloaded).
	os.Remove(filepath.Join(home, "hub", hf.RepoFolderName("models", "org/model"), "blobs", hftest.ETag(files[1])))
	_, err = load(t, "hf://org/model")
	if err == nil || !strings.Contains(err.Error(), files[1].Path) || strings.Contains(err.Error(), "\n") {
		t.Errorf("a shard missing offline: %v", err)
	}
}

// TestGoClient: the Go client opens hf:// with its default options (no
// AWS SDK, no opener to pass) and reads a tensor's bytes.
func TestGoClient(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	srv.Commit("org/model", "main", shardedRepo(1)...)
	env(t, srv)
	ck, err := client.Open("hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	r, err := ck.OpenTensor("b", dtype.Invalid)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, r.Size())
	if _, err := r.ReadAt(got, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fill(200<<10, 2)) {
		t.Error("wrong bytes")
	}
}
