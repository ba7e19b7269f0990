package hf_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/hf/hftest"
)

// TestHubCacheOrder: the HF cache is looked up in llama.cpp's order:
// LLAMA_CACHE, HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, $HF_HOME/hub,
// $XDG_CACHE_HOME/huggingface/hub.
func TestHubCacheOrder(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"LLAMA_CACHE": "/l", "HF_HUB_CACHE": "/c", "HUGGINGFACE_HUB_CACHE": "/o", "HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/l"},
		{map[string]string{"HF_HUB_CACHE": "/c", "HUGGINGFACE_HUB_CACHE": "/o", "HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/c"},
		{map[string]string{"HUGGINGFACE_HUB_CACHE": "/o", "HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/o"},
		{map[string]string{"HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}, filepath.Join("/h", "hub")},
		{map[string]string{"XDG_CACHE_HOME": "/x"}, filepath.Join("/x", "huggingface", "hub")},
		{map[string]string{"LLAMA_CACHE": "/l", "XDG_CACHE_HOME": "/x"}, "/l"},
	} {
		for _, v := range []string{"LLAMA_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"} {
			t.Setenv(v, tc.env[v])
		}
		if got := hf.HubCacheFromEnv(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}

// TestLlamaCache: a repository llama.cpp downloaded with -hf into
// LLAMA_CACHE (huggingface_hub's layout) is read from there, offline,
// before huggingface_hub's cache, which holds the same sha with other
// bytes; one that only huggingface_hub's cache holds is read from there
// though LLAMA_CACHE is set.
func TestLlamaCache(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(4)
	sha := srv.Commit("org/model", "main", files...)
	other := shardedRepo(9) // the same sizes, other bytes
	osha := srv.Commit("org/other", "main", other...)
	home := env(t, srv)
	llama := t.TempDir()
	hfCache(t, llama, "org/model", "main", sha, files)
	hfCache(t, filepath.Join(home, "hub"), "org/model", "main", sha, other)
	hfCache(t, filepath.Join(home, "hub"), "org/other", "main", osha, other)
	t.Setenv("LLAMA_CACHE", llama)
	t.Setenv("HF_HUB_OFFLINE", "1")
	for _, tc := range []struct {
		repo, sha string
		want      []byte
	}{
		{"org/model", sha, files[0].Data},
		{"org/other", osha, other[0].Data},
	} {
		ck, err := load(t, "hf://"+tc.repo)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, ck)
		if !bytes.Equal(got["hf://"+tc.repo+"@"+tc.sha+"/"+files[0].Path], tc.want) {
			t.Errorf("%s: wrong bytes (sources %v)", tc.repo, ck.Index.Sources)
		}
	}
	if n := srv.HubRequests.Load() + srv.CDNRequests.Load(); n != 0 {
		t.Errorf("%d requests offline", n)
	}
}
