package integration

import (
	"encoding/json"
	"os"
	"testing"
)

// TestPageCacheOnce checks that reading a checkpoint through a mount
// leaves one copy of each byte in the page cache, not two (the mount's
// and the backing file's): `tensorfs bench --phases cache` drops the
// checkpoint's pages, then reads every tensor (read(2)) and every .npy
// file (mmap), each through a fresh mount, and counts the page cache its
// private memory cgroup was charged. The bounds are generous (one copy
// is 1.0, two 2.0); with --keep-backing-cache both copies stay. It
// counts bytes, never time.
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
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Runs) != 1 || len(rep.Runs[0].Cache) != 2 {
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
	kept := run("--keep-backing-cache")
	if kept[0].PerByte < 1.6 {
		t.Errorf("--keep-backing-cache, %s: the page cache grew %.2f bytes per byte read, want both copies (at least 1.6)", kept[0].Name, kept[0].PerByte)
	}
}
