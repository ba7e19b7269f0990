package hf_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/hf/hftest"
	"github.com/lazyweights/tensorfs/backing/remote"
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
	for _, v := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "XDG_CACHE_HOME"} {
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
