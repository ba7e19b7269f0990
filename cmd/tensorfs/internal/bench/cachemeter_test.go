package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadKeyed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "memory.stat")
	if err := os.WriteFile(p, []byte("rss 5\ncache 4096\ntotal_cache 9\nCached:   12 kB\nbad x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		unit int64
		want int64
		ok   bool
	}{
		{"cache", 1, 4096, true},
		{"Cached:", 1024, 12 << 10, true},
		{"file", 1, 0, false},
		{"bad", 1, 0, false},
	} {
		got, err := readKeyed(p, c.key, c.unit)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("readKeyed(%q) = %d, %v; want %d, ok %v", c.key, got, err, c.want, c.ok)
		}
	}
}

// TestCacheMeter checks that a meter reads a figure and gives the process
// back to its own cgroup.
func TestCacheMeter(t *testing.T) {
	before, _ := os.ReadFile("/proc/self/cgroup")
	m := newCacheMeter()
	if _, err := m.read(); err != nil {
		t.Fatalf("%s: %v", m.Source(), err)
	}
	m.close()
	if after, _ := os.ReadFile("/proc/self/cgroup"); string(after) != string(before) {
		t.Errorf("cgroup after the meter:\n%s\nbefore:\n%s", after, before)
	}
	if m.dir != "" {
		if _, err := os.Stat(m.dir); !os.IsNotExist(err) {
			t.Errorf("private cgroup %s left behind (%v)", m.dir, err)
		}
	}
}
