package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/s3/s3test"
	"github.com/lazyweights/tensorfs/internal/testenv"
	"github.com/lazyweights/tensorfs/source"
)

// checkShards writes a two-shard safetensors checkpoint to a new
// directory: shard 1 holds a and b, shard 2 holds c and d; the weight map
// is wm (tensor -> shard 1 or 2, or another file name).
func checkShards(t *testing.T, wm map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	f32 := func(name string, seed byte) stTensor {
		return stTensor{Name: name, DType: "F32", Shape: []int64{2, 2}, Data: pattern(16, seed)}
	}
	writeSafetensors(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), []stTensor{f32("a", 1), f32("b", 2)}, nil)
	writeSafetensors(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), []stTensor{f32("c", 3), f32("d", 4)}, nil)
	m := map[string]string{}
	for k, v := range wm {
		switch v {
		case "1", "2":
			v = "model-0000" + v + "-of-00002.safetensors"
		}
		m[k] = v
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": m})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkLines returns the problem lines of a check run's stderr.
func checkLines(r result) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(r.stderr, "\n"), "\n") {
		if strings.HasPrefix(l, "tensorfs: check: ") {
			out = append(out, l)
		}
	}
	return out
}

// TestCheck: check exits 0 with a one-line summary on a whole checkpoint
// (a file, a sharded directory, with and without --data and --json), and
// exits 1 with one line per problem on sharded directories whose map and
// shards disagree: all of them, not only the first.
func TestCheck(t *testing.T) {
	good := map[string]string{"a": "1", "b": "1", "c": "2", "d": "2"}
	file, _ := cliFixture(t)
	for _, src := range []string{file, checkShards(t, good)} {
		for _, args := range [][]string{{"check", src}, {"check", "--data", src}} {
			r := runTensorfs(t, args...)
			if r.code != 0 || r.stderr != "" || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, ": ok: ") {
				t.Errorf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
			}
			if args[1] == "--data" && !strings.Contains(r.stdout, "every byte read") {
				t.Errorf("%q: %q does not say the bytes were read", args, r.stdout)
			}
		}
	}
	r := runTensorfs(t, "check", "--data", "--json", file)
	var rep struct {
		OK      bool
		Tensors int
		Data    struct {
			BytesRead int64 `json:"bytes_read"`
			Values    []struct {
				Name     string
				NaN, Inf int64
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.OK || rep.Tensors != 5 || len(rep.Data.Values) != 3 {
		t.Errorf("check --data --json: exit %d, %v, %+v\n%s", r.code, err, rep, r.stdout)
	}

	for _, tc := range []struct {
		name string
		wm   map[string]string
		want [][]string // fragments of each problem line, sorted by line
	}{
		{"missing shard", map[string]string{"a": "1", "b": "1", "c": "2", "d": "2", "e": "model-00003-of-00003.safetensors"},
			[][]string{{"model.safetensors.index.json: cannot open the shard", `shard "model-00003-of-00003.safetensors"`}}},
		{"tensor the map lacks", map[string]string{"a": "1", "b": "1", "c": "2"},
			[][]string{{"model-00002-of-00002.safetensors: the shard holds a tensor that the weight map", `(tensor "d")`}}},
		{"tensor not in its shard", map[string]string{"a": "1", "b": "1", "c": "2", "d": "2", "e": "1"},
			[][]string{{"model.safetensors.index.json: the weight map puts this tensor in shard model-00001-of-00002.safetensors, which does not hold it", `(tensor "e")`}}},
		{"all three and a misplaced tensor", map[string]string{"a": "1", "b": "2", "c": "2", "e": "1", "f": "x.safetensors"},
			[][]string{
				{"model-00001-of-00002.safetensors: the weight map", "puts this tensor in shard model-00002-of-00002.safetensors", `(tensor "b")`},
				{"model-00002-of-00002.safetensors: the shard holds a tensor", `(tensor "d")`},
				{"model.safetensors.index.json: cannot open the shard", `shard "x.safetensors"`},
				{"model.safetensors.index.json: the weight map puts this tensor", `(tensor "e")`},
			}},
	} {
		dir := checkShards(t, tc.wm)
		r := runTensorfs(t, "check", dir)
		lines := checkLines(r)
		sort.Strings(lines)
		if r.code != 1 || r.stdout != "" || len(lines) != len(tc.want) || strings.Count(r.stderr, "\n") != len(lines) {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s", tc.name, r.code, r.stdout, r.stderr)
			continue
		}
		for i, frags := range tc.want {
			for _, f := range frags {
				if !strings.Contains(lines[i], f) {
					t.Errorf("%s: line %q lacks %q", tc.name, lines[i], f)
				}
			}
		}
	}
}

// TestCheckSharedFixtures: check --data agrees with loading on every
// shared fixture (each file, and each directory as a SOURCE): exit 0 and
// a summary where the checkpoint loads, exit 1 with one line per problem
// where it does not (the deliberately broken files, and the formats
// main does not read), never another status; the quantized checkpoints
// with a broken weight (quant/neg_*) load and exit 1 naming it.
func TestCheckSharedFixtures(t *testing.T) {
	root := testenv.Dir(t)
	var units []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root {
				units = append(units, p)
			}
			return nil
		}
		if strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".tsv") || strings.HasSuffix(name, ".f32ref") {
			return nil
		}
		units = append(units, p)
		return nil
	})
	if len(units) < 100 {
		t.Fatalf("%d fixtures under %s", len(units), root)
	}
	// These must load, and so pass: a sharded safetensors checkpoint with
	// its weight map, a distributed checkpoint, a quantized one.
	mustPass := map[string]bool{"formats2/hf_single": false, "modern/dcp_ws4": false, "quant/fp8_block": false, "generated/npz_compressed.npz": false}
	for _, u := range units {
		rel, _ := filepath.Rel(root, u)
		ck, err := source.Load(context.Background(), u, source.Options{Backing: backing.Options{Mode: backing.Pread}})
		if err == nil {
			ck.Close()
		}
		r := runTensorfs(t, "check", "--data", u)
		if _, ok := mustPass[rel]; ok {
			mustPass[rel] = r.code == 0
		}
		switch {
		case strings.HasPrefix(rel, "quant/neg_") && !strings.HasSuffix(rel, ".safetensors"):
			// weights whose scale is missing or malformed: served
			// without them, and check names each (exit 1)
			if err != nil || r.code != 1 || !strings.Contains(r.stderr, "left out of the converted views") {
				t.Errorf("%s: load %v; check --data: exit %d, want 1 naming the broken weight\n%s%s", rel, err, r.code, r.stdout, r.stderr)
			}
		case strings.HasPrefix(rel, "quant/") && strings.Contains(rel, "-of-") && err == nil && r.code == 1 && onlyLoneParts(r):
			// one shard of a quantized checkpoint, alone (no
			// configuration beside a file): a pair whose other half
			// is in the other shard is named, rightly
		case err == nil && (r.code != 0 || !strings.Contains(r.stdout, ": ok: ")):
			t.Errorf("%s loads, but check --data: exit %d\n%s%s", rel, r.code, r.stdout, r.stderr)
		case err != nil && (r.code != 1 || len(checkLines(r)) == 0 || r.stdout != ""):
			t.Errorf("%s does not load (%v), but check --data: exit %d\n%s%s", rel, err, r.code, r.stdout, r.stderr)
		}
	}
	for rel, ok := range mustPass {
		if !ok {
			t.Errorf("check --data %s: not exit 0", rel)
		}
	}
}

// TestCheckRemote: check reads s3:// and http(s):// SOURCEs as every
// other command does: a broken sharded prefix gives the same problems as
// the local directory, each naming its object by URL; a whole one over
// HTTP (by its weight map) passes, --data included.
func TestCheckRemote(t *testing.T) {
	broken := checkShards(t, map[string]string{"a": "1", "b": "2", "c": "2", "e": "1", "f": "x.safetensors"})
	srv := s3test.Start(t)
	srv.Bucket(t, "models")
	uploadTree(t, srv, "models", broken)
	env := srv.Env()
	local := runEnv(t, env, "check", broken)
	remote := runEnv(t, env, "check", "--part-size", "8KiB", "s3://models/")
	ll, rl := checkLines(local), checkLines(remote)
	if remote.code != 1 || len(rl) != 4 || len(ll) != len(rl) {
		t.Fatalf("check s3://models/: exit %d, %d lines (local: %d):\n%s", remote.code, len(rl), len(ll), remote.stderr)
	}
	for _, l := range rl {
		if !strings.HasPrefix(l, "tensorfs: check: s3://models/") || strings.Contains(l, broken) {
			t.Errorf("check s3://models/: %q does not name the object by its URL", l)
		}
	}

	good := checkShards(t, map[string]string{"a": "1", "b": "1", "c": "2", "d": "2"})
	base := httpServer(t, good)
	for _, args := range [][]string{{"check"}, {"check", "--data"}} {
		r := runTensorfs(t, append(args, base+"/model.safetensors.index.json")...)
		if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, ": ok: 4 tensors in 2 files (safetensors)") {
			t.Errorf("%s over HTTP: exit %d, %q %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// onlyLoneParts reports whether every problem check printed is a
// quantized weight left out because a part of it is missing.
func onlyLoneParts(r result) bool {
	lines := checkLines(r)
	for _, l := range lines {
		if !strings.Contains(l, "left out of the converted views") || !strings.Contains(l, "missing") {
			return false
		}
	}
	return len(lines) > 0
}
