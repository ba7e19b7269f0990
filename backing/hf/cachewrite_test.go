package hf_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/hf/hftest"
	"github.com/lazyweights/tensorfs/source"
)

// cacheWriteLoad loads src with --hf-cache-write, its log lines kept.
func cacheWriteLoad(t *testing.T, src string) (*source.Checkpoint, *logLines) {
	t.Helper()
	o := opts()
	o.Remote.HF.CacheWrite = true
	ll := &logLines{}
	o.Remote.Remote.Logf = ll.logf
	ck, err := source.Load(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	return ck, ll
}

type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", `\n`)))
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// parts lists the private files being written under dir's blobs.
func parts(t *testing.T, dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "blobs", "*.part"))
	return m
}

// TestCacheWrite: with --hf-cache-write, the files read whole from the
// Hub (in many ranged GETs) are put into the HF cache as
// huggingface_hub lays it out — blobs named by the ETag, snapshot links
// that climb as deep as the path, refs/main — so that an offline load
// then reads them with no request; a file read in part is not put there
// and leaves no file behind; without the flag nothing is written.
func TestCacheWrite(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(3)
	files = append(files, hftest.File{Path: "deep/er/c.safetensors", Data: safetensors("c", fill(150<<10, 4)), LFS: true})
	sha := srv.Commit("org/model", "main", files...)
	home := env(t, srv)
	dir := filepath.Join(home, "hub", hf.RepoFolderName("models", "org/model"))

	// Without the flag: nothing is written.
	ck, err := load(t, "hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, ck)
	ck.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the HF cache was written without --hf-cache-write: %v", err)
	}

	// A file read in part: not put there, nothing left behind.
	ck, ll := cacheWriteLoad(t, "hf://org/model/deep/er/c.safetensors")
	b := make([]byte, 100)
	if _, err := ck.Sources[0].ReadAt(b, 1000); err != nil {
		t.Fatal(err)
	}
	ck.Close()
	if _, err := os.Stat(filepath.Join(dir, "blobs", hftest.ETag(files[len(files)-1]))); err == nil {
		t.Errorf("a file read in part was put into the cache")
	}
	if p := parts(t, dir); len(p) != 0 {
		t.Errorf("left behind: %v", p)
	}

	// The sharded checkpoint read whole, and config.json (read for the
	// quantization scheme), and the nested file.
	ck, ll = cacheWriteLoad(t, "hf://org/model")
	readAll(t, ck)
	ck.Close()
	ck, ll2 := cacheWriteLoad(t, "hf://org/model/deep/er/c.safetensors")
	readAll(t, ck)
	ck.Close()
	if ll.String() != "" || ll2.String() != "" {
		t.Errorf("log lines: %q %q", ll, ll2)
	}
	for _, f := range []hftest.File{files[0], files[1], files[3], files[len(files)-1]} {
		blob := filepath.Join(dir, "blobs", hftest.ETag(f))
		if got, err := os.ReadFile(blob); err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("%s: blob %s: %v (%d bytes, want %d)", f.Path, blob, err, len(got), len(f.Data))
		}
		snap := filepath.Join(dir, "snapshots", sha, filepath.FromSlash(f.Path))
		want := strings.Repeat("../", strings.Count(f.Path, "/")+2) + "blobs/" + hftest.ETag(f)
		if l, err := os.Readlink(snap); err != nil || l != want {
			t.Errorf("%s: link %q (%v), want %q", f.Path, l, err, want)
		}
	}
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", "main")); err != nil || string(ref) != sha {
		t.Errorf("refs/main: %q %v, want %s", ref, err, sha)
	}
	if p := parts(t, dir); len(p) != 0 {
		t.Errorf("left behind: %v", p)
	}

	// Offline, from what was written: the same bytes, no request.
	t.Setenv("HF_HUB_OFFLINE", "1")
	h0, c0 := srv.HubRequests.Load(), srv.CDNRequests.Load()
	ck, err = load(t, "hf://org/model")
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, ck)
	for _, f := range files[:2] {
		if !bytes.Equal(got["hf://org/model@"+sha+"/"+f.Path], f.Data) {
			t.Errorf("offline: %s: wrong bytes", f.Path)
		}
	}
	if n := srv.HubRequests.Load() - h0 + srv.CDNRequests.Load() - c0; n != 0 {
		t.Errorf("%d requests offline", n)
	}
}

// TestCacheWriteCorrupt: bytes from the CDN that do not hash to the
// Hub's sha256 are served (the read is the CDN's) but never put into
// the HF cache: one line says so, and nothing is left behind.
func TestCacheWriteCorrupt(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := shardedRepo(5)
	sha := srv.Commit("org/model", "main", files...)
	home := env(t, srv)
	dir := filepath.Join(home, "hub", hf.RepoFolderName("models", "org/model"))
	srv.CorruptLFS("org/model", sha, files[1].Path, func(b []byte) { b[len(b)-1] ^= 1 })
	ck, ll := cacheWriteLoad(t, "hf://org/model")
	readAll(t, ck)
	ck.Close()
	if _, err := os.Stat(filepath.Join(dir, "blobs", hftest.ETag(files[1]))); err == nil {
		t.Errorf("bytes that do not hash to the Hub's sha256 were put into the cache")
	}
	if _, err := os.Stat(filepath.Join(dir, "blobs", hftest.ETag(files[0]))); err != nil {
		t.Errorf("the good shard: %v", err)
	}
	lines := ll.String()
	if strings.Count(lines, "\n") != 0 || !strings.Contains(lines, files[1].Path) || !strings.Contains(lines, "not put into the HF cache") || !strings.Contains(lines, hftest.ETag(files[1])) {
		t.Errorf("log: %q", lines)
	}
	if p := parts(t, dir); len(p) != 0 {
		t.Errorf("left behind: %v", p)
	}
}
