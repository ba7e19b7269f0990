package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf/hftest"
)

// hfRepo commits a sharded checkpoint of random tensors (about 24 MiB,
// three LFS shards, a weight map, config.json and tokenizer.json in
// git) to srv as org/model and returns its sha, its size in bytes (the
// shards) and its `load --sha256` lines (from a local copy).
func hfRepo(t *testing.T, srv *hftest.Server) (sha string, size int64, want string) {
	t.Helper()
	files, size, want := hfFiles(t)
	return srv.Commit("org/model", "main", files...), size, want
}

// hfFiles are hfRepo's files, its size and its `load --sha256` lines.
func hfFiles(t *testing.T) (files []hftest.File, size int64, want string) {
	t.Helper()
	r := rand.New(rand.NewPCG(36, 1))
	dir := t.TempDir()
	wm := map[string]string{}
	for s := range 3 {
		var ts []stTensor
		for i := range 2 {
			data := make([]byte, 4<<20+(s*2+i)*4096)
			for j := range data {
				data[j] = byte(r.Uint32())
			}
			name := fmt.Sprintf("layer%d.weight", s*2+i)
			ts = append(ts, stTensor{Name: name, DType: "U8", Shape: []int64{int64(len(data))}, Data: data})
			wm[name] = fmt.Sprintf("model-%05d-of-00003.safetensors", s+1)
		}
		p := filepath.Join(dir, fmt.Sprintf("model-%05d-of-00003.safetensors", s+1))
		writeSafetensors(t, p, ts, nil)
		b, _ := os.ReadFile(p)
		size += int64(len(b))
		files = append(files, hftest.File{Path: filepath.Base(p), Data: b, LFS: true})
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": wm})
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644)
	files = append(files,
		hftest.File{Path: "model.safetensors.index.json", Data: idx},
		hftest.File{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)},
		hftest.File{Path: "tokenizer.json", Data: []byte(`{"version":"1.0"}`)})
	w := runTensorfs(t, "load", "--quiet", "--sha256", dir)
	if w.code != 0 {
		t.Fatal(w.stderr)
	}
	return files, size, w.stdout
}

// TestHFXet: `load --sha256` of a repository whose shards are in Xet,
// each past the bridge's cap on unranged GETs (CloudFront's 50 GB,
// scaled down), equals the local copy's with no unranged GET; a bridge
// that answers a range once with the whole file changes nothing; one
// that answers every range with half of it without Content-Range is
// one line naming the file once, exit 1.
func TestHFXet(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	srv.BridgeUnrangedMax = 1 << 20
	files, _, want := hfFiles(t)
	for i := range files {
		files[i].Xet = files[i].LFS
	}
	sha := srv.Commit("org/xet", "main", files...)
	env := hfEnv(t, srv)
	load := func() result {
		return runEnv(t, env, "load", "--quiet", "--sha256", "--part-size", "1MiB", "hf://org/xet")
	}
	if r := load(); r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", r.code, r.stdout, want, r.stderr)
	}
	srv.FaultBridge(hftest.BridgeWhole, 1)
	if r := load(); r.code != 0 || r.stdout != want || srv.BridgeFaulted.Load() != 1 {
		t.Fatalf("a whole 200 once (%d faulted): exit %d, stdout:\n%s\nstderr: %s", srv.BridgeFaulted.Load(), r.code, r.stdout, r.stderr)
	}
	if srv.BridgeRequests.Load() == 0 || srv.BridgeUnranged.Load() != 0 || srv.CDNAuth.Load() != 0 {
		t.Fatalf("the bridge had %d requests, %d unranged, %d with Authorization", srv.BridgeRequests.Load(), srv.BridgeUnranged.Load(), srv.CDNAuth.Load())
	}
	srv.FaultBridge(hftest.BridgeShortNoContentRange, -1)
	r := load()
	var line string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if strings.Contains(l, "without Content-Range") {
			line = l
		}
	}
	if r.code != 1 || line == "" || strings.Count(line, "hf://org/xet@"+sha+"/model-") != 1 || strings.Contains(r.stderr, "Signature") {
		t.Fatalf("a bridge that halves every range: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	t.Logf("%s", line)
}

// hfEnv points a tensorfs process at srv, with a token and an empty HF
// home.
func hfEnv(t *testing.T, srv *hftest.Server) []string {
	return []string{"HF_ENDPOINT=" + srv.Hub.URL, "HF_HOME=" + t.TempDir(), "HF_TOKEN=hf_fleet", "HF_HUB_CACHE=", "HF_HUB_OFFLINE=", "HF_TOKEN_PATH=", "LLAMA_CACHE="}
}

// TestHFFleetThroughTier: 8 processes load one hf:// repository through
// the nginx tier (docs/scripts/nginx-tier.conf): each is byte-exact, and
// the Hub and its CDN together serve at most 1.10x the model's bytes
// (API replies included), against about 8x through the tier's plain
// proxy. The CDN's presigned URLs differ per process; the tier keys
// them by path. The token reaches the Hub only.
func TestHFFleetThroughTier(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	_, size, want := hfRepo(t, srv)
	ng := startNginx(t)
	env := hfEnv(t, srv)
	for _, tt := range []struct {
		name, proxy string
		tier        bool
	}{
		{"through the tier", ng.Tier, true},
		{"without the tier", ng.Pass, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hub0, cdn0 := srv.HubBytes.Load(), srv.CDNBytes.Load()
			var wg sync.WaitGroup
			results := make([]result, 8)
			for i := range results {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					results[i] = runEnv(t, env, "load", "--quiet", "--sha256", "--part-size", "1MiB", "--proxy", tt.proxy, "hf://org/model")
				}(i)
			}
			wg.Wait()
			for i, r := range results {
				if r.code != 0 || r.stdout != want {
					t.Fatalf("process %d of 8: exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", i, r.code, r.stdout, want, r.stderr)
				}
				if strings.Contains(r.stderr, "reading from the origin directly") {
					t.Fatalf("the tier was bypassed: %s", r.stderr)
				}
			}
			hub, cdn := srv.HubBytes.Load()-hub0, srv.CDNBytes.Load()-cdn0
			ratio := float64(hub+cdn) / float64(size)
			t.Logf("%s: Hub %d + CDN %d bytes for a model of %d: %.3fx", tt.name, hub, cdn, size, ratio)
			if tt.tier && ratio > 1.10 {
				t.Fatalf("the origin served %.3fx the model through the tier, want at most 1.10x", ratio)
			}
			if !tt.tier && ratio < 7.5 {
				t.Fatalf("the origin served %.3fx the model without the tier, want about 8x (the counting is off)", ratio)
			}
		})
	}
	if srv.CDNAuth.Load() != 0 || srv.HubAuth.Load() == 0 {
		t.Fatalf("Authorization: %d requests to the CDN, %d to the Hub", srv.CDNAuth.Load(), srv.HubAuth.Load())
	}
}

// TestHFMount: `tensorfs mount hf://ORG/NAME M` serves the repository's
// tensors and, beside model.safetensors at the top level, in the views
// and in .safetensors/, its config.json and tokenizer.json; its shards
// as they are in .files/; index.json names the commit sha; `ls --json`
// too.
func TestHFMount(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	sha, _, want := hfRepo(t, srv)
	env := hfEnv(t, srv)
	ls := runEnv(t, env, "ls", "--json", "hf://org/model")
	if ls.code != 0 || !strings.Contains(ls.stdout, "hf://org/model@"+sha+"/model-00001-of-00003.safetensors") {
		t.Fatalf("ls --json: exit %d, %s %s", ls.code, ls.stdout[:min(len(ls.stdout), 400)], ls.stderr)
	}
	m := mountEnv(t, env, "hf://org/model")
	defer m.Unmount()
	r := runCmdIn(t, m.Dir, nil, "sh", "-c", "sha256sum layer*")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("sha256sum in the mount: %s %s", r.stdout, r.stderr)
	}
	for _, f := range []string{".safetensors/config.json", ".safetensors/tokenizer.json", "config.json", "tokenizer.json", ".bf16/config.json"} {
		b, err := os.ReadFile(filepath.Join(m.Dir, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Each shard as it is, read lazily from the Hub: the same checkpoint.
	if got := runTensorfs(t, "load", "--quiet", "--sha256", m.Path(".files")); got.code != 0 || got.stdout != want {
		t.Errorf("load --sha256 of .files/: exit %d\n%s%s\nwant\n%s", got.code, got.stdout, got.stderr, want)
	}
	idx, err := os.ReadFile(filepath.Join(m.Dir, ".tensorfs", "index.json"))
	if err != nil || !strings.Contains(string(idx), "@"+sha+"/") {
		t.Errorf("index.json does not name the sha: %v", err)
	}
}

// TestHFFleetTLSCDN: the CDN speaks https:// (as the Hub's does), which a
// CONNECT tunnel would make uncacheable; with --proxy-terminates-tls the
// 8 processes send the CDN GETs to the nginx tier in absolute form
// ("GET https://..."), the tier makes the TLS requests and caches them
// by path, and the Hub and CDN serve at most 1.10x the model.
func TestHFFleetTLSCDN(t *testing.T) {
	srv := hftest.NewTLSCDN()
	defer srv.Close()
	_, size, want := hfRepo(t, srv)
	ng := startNginx(t)
	env := hfEnv(t, srv)
	var wg sync.WaitGroup
	results := make([]result, 8)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = runEnv(t, env, "load", "--quiet", "--sha256", "--part-size", "1MiB", "--proxy", ng.Tier, "--proxy-terminates-tls", "hf://org/model")
		}(i)
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 || r.stdout != want {
			t.Fatalf("process %d of 8: exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", i, r.code, r.stdout, want, r.stderr)
		}
		if strings.Contains(r.stderr, "reading from the origin directly") {
			t.Fatalf("the tier was bypassed: %s", r.stderr)
		}
	}
	hub, cdn := srv.HubBytes.Load(), srv.CDNBytes.Load()
	ratio := float64(hub+cdn) / float64(size)
	t.Logf("https CDN through a terminating tier: Hub %d + CDN %d bytes for a model of %d: %.3fx", hub, cdn, size, ratio)
	if ratio > 1.10 || cdn < size {
		t.Fatalf("the origin served %.3fx the model (CDN %d of %d), want 1 to 1.10x", ratio, cdn, size)
	}
}

// TestHFCheckData: `check --data hf://…` hashes each LFS file whole
// against the Hub's X-Linked-Etag: a good repository passes with the
// files counted; one whose CDN serves other bytes of the same size
// under the same headers (ETag, X-Linked-Size) fails, naming the file
// and both digests.
func TestHFCheckData(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	hfRepo(t, srv)
	env := hfEnv(t, srv)
	r := runEnv(t, env, "check", "--data", "hf://org/model")
	if r.code != 0 || !strings.Contains(r.stdout, "3 files verified by sha256") {
		t.Fatalf("check --data of a good repository: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	r = runEnv(t, env, "check", "--data", "--json", "hf://org/model")
	var rep struct {
		OK   bool
		Data struct {
			Files []struct{ File, SHA256, Status string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.OK || len(rep.Data.Files) != 3 {
		t.Fatalf("check --data --json: exit %d, %v, %s %s", r.code, err, r.stdout, r.stderr)
	}
	for _, f := range rep.Data.Files {
		if f.Status != "sha256 ok" || len(f.SHA256) != 64 {
			t.Errorf("check --data --json: %+v", f)
		}
	}
	// The second shard's bytes change on the CDN, same size, same
	// headers: the tensors still read, the file's hash does not match.
	srv2 := hftest.New()
	defer srv2.Close()
	sha, _, _ := hfRepo(t, srv2)
	name := "model-00002-of-00003.safetensors"
	hub, served := srv2.CorruptLFS("org/model", sha, name, func(b []byte) { b[len(b)-1] ^= 0xff })
	r = runEnv(t, hfEnv(t, srv2), "check", "--data", "hf://org/model")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, name) || !strings.Contains(r.stderr, hub) || !strings.Contains(r.stderr, served) {
		t.Fatalf("check --data of a repository with a bad file: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestHFCacheWrite: `load --hf-cache-write hf://…` leaves the model in
// the HF cache as huggingface_hub lays it out, so that a second load
// with HF_HUB_OFFLINE=1 reads the same bytes with no request; a mount
// that reads part of a shard does not put that shard there, and leaves
// no file behind when it is unmounted.
func TestHFCacheWrite(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	sha, _, want := hfRepo(t, srv)
	env := hfEnv(t, srv)
	home := strings.TrimPrefix(env[1], "HF_HOME=")
	repo := filepath.Join(home, "hub", "models--org--model")

	m := mountEnv(t, env, "hf://org/model", "--hf-cache-write")
	r := runCmdIn(t, m.Dir, nil, "sh", "-c", "head -c 1000 layer0.weight | wc -c")
	m.Unmount()
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1000" {
		t.Fatalf("head in the mount: %q %s", r.stdout, r.stderr)
	}
	// The small files in git the mount read whole (the weight map,
	// config.json, tokenizer.json) are there, named by their git sha1;
	// no shard (an LFS blob is named by its sha256), no file left.
	blobs, _ := filepath.Glob(filepath.Join(repo, "blobs", "*"))
	for _, b := range blobs {
		if len(filepath.Base(b)) != 40 {
			t.Errorf("after reading 1000 bytes of a shard, the HF cache holds %s", filepath.Base(b))
		}
	}
	if len(blobs) == 0 {
		t.Errorf("the files in git the mount read whole are not in the HF cache")
	}

	w := runEnv(t, env, "load", "--quiet", "--sha256", "--hf-cache-write", "hf://org/model")
	if w.code != 0 || w.stdout != want {
		t.Fatalf("load --hf-cache-write: exit %d, %s %s", w.code, w.stdout, w.stderr)
	}
	if w.stderr != "" {
		t.Errorf("load --hf-cache-write said: %s", w.stderr)
	}
	for i := 1; i <= 3; i++ {
		link := filepath.Join(repo, "snapshots", sha, fmt.Sprintf("model-%05d-of-00003.safetensors", i))
		if l, err := os.Readlink(link); err != nil || !strings.HasPrefix(l, "../../blobs/") {
			t.Errorf("%s: %q %v", link, l, err)
		}
	}
	if parts, _ := filepath.Glob(filepath.Join(repo, "blobs", "*.part")); len(parts) != 0 {
		t.Errorf("left behind: %v", parts)
	}
	h0, c0 := srv.HubRequests.Load(), srv.CDNRequests.Load()
	off := runEnv(t, append(env, "HF_HUB_OFFLINE=1"), "load", "--quiet", "--sha256", "hf://org/model")
	if off.code != 0 || off.stdout != want {
		t.Fatalf("offline load from what --hf-cache-write wrote: exit %d, %s %s", off.code, off.stdout, off.stderr)
	}
	if n := srv.HubRequests.Load() - h0 + srv.CDNRequests.Load() - c0; n != 0 {
		t.Errorf("%d requests offline", n)
	}
}
