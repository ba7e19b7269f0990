package integration

import (
	"encoding/json"
	"os"
	"testing"
)

// TestPageCacheOnce checks that reading a checkpoint through a mount
// leaves one copy of each byte in the page cache, not two (the mount's
// and the backing file's): `tensorfs bench --phases cache` drops the
// checkpoint's pages, then reads every tensor (read(2)), every .npy
// file (mmap), the safetensors export (read(2), then mmap) and the .f32/
// view's export (read(2)), each through a fresh mount, and counts the
// page cache its private memory cgroup was charged. The bounds are
// generous (one copy is 1.0, two 2.0, 1.5 for the .f32/ export, whose
// bytes are twice the backing file's); with --keep-backing-cache both
// copies stay. It counts bytes, never time.
func TestPageCacheOnce(t *testing.T) {
	needFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the page cache is counted in a private memory cgroup")
	}
	type cacheRow struct {
		Name    string  `json:"name"`
		Bytes   int64   `json:"bytes"`
		PerByte float64 `json:"per_byte"`
		Meter   string  `json:"meter"`
	}
	run := func(mountFlags string) []cacheRow {
		t.Helper()
		r := runTensorfs(t, "bench", "--size", "32MiB", "--phases", "cache", "--dir", t.TempDir(), "--mount", mountFlags, "--json")
		if r.code != 0 {
			t.Fatalf("tensorfs bench --phases cache --mount %q: exit %d\n%s", mountFlags, r.code, r.stderr)
		}
		var rep struct {
			Runs []struct {
				Cache []cacheRow `json:"cache"`
			} `json:"runs"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Runs) != 1 || len(rep.Runs[0].Cache) != 5 {
			t.Fatalf("bench --json: %v\n%s", err, r.stdout)
		}
		rows := rep.Runs[0].Cache
		for _, row := range rows {
			if row.Bytes < 16<<20 {
				t.Errorf("%s: %d bytes read, want at least the checkpoint's tensors", row.Name, row.Bytes)
			}
			if row.Meter == "" || row.Meter[0] == '/' {
				t.Fatalf("%s: counted by %q, not a private cgroup: the figure would be the whole machine's", row.Name, row.Meter)
			}
		}
		return rows
	}
	for _, row := range run("") {
		if row.PerByte > 1.3 {
			t.Errorf("default mount, %s: the page cache grew %.2f bytes per byte read, want one copy (at most 1.3)", row.Name, row.PerByte)
		}
	}
	// Both copies: 2.0 where the mount serves the stored bytes, 1.5 for
	// the .f32/ export. (The .npy files of BF16 tensors are F32, so the
	// .npy row is left unbounded here.)
	keptMin := map[string]float64{"cache_read": 1.6, "cache_export_read": 1.6, "cache_export_mmap": 1.6, "cache_f32_export_read": 1.35}
	for _, row := range run("--keep-backing-cache") {
		if lo, ok := keptMin[row.Name]; ok && row.PerByte < lo {
			t.Errorf("--keep-backing-cache, %s: the page cache grew %.2f bytes per byte read, want both copies (at least %.2f)", row.Name, row.PerByte, lo)
		}
		delete(keptMin, row.Name)
	}
	if len(keptMin) > 0 {
		t.Errorf("--keep-backing-cache: no rows %v", keptMin)
	}
}
