package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cacheMeter measures the page cache that reads bring in. As root, on a
// cgroup v1 or v2 memory controller, it moves this process into a
// private child cgroup of its own, so that exactly the page cache charged
// to this process and the servers it starts (which inherit the cgroup)
// is counted, whatever else the machine does: memory.stat "cache" (v1)
// or "file" (v2). Elsewhere it falls back to the Cached line of
// /proc/meminfo, which counts the whole machine's page cache (noisy on a
// shared machine).
type cacheMeter struct {
	dir  string // the private cgroup; "" for /proc/meminfo
	home string // the cgroup.procs this process came from
	key  string // the memory.stat line
}

// Source says what the meter reads.
func (m *cacheMeter) Source() string {
	if m.dir == "" {
		return "/proc/meminfo Cached (whole machine)"
	}
	return "private cgroup " + filepath.Join(m.dir, "memory.stat") + " " + m.key
}

// newCacheMeter moves this process into a private memory cgroup where it
// can, and otherwise returns a meter of /proc/meminfo.
func newCacheMeter() *cacheMeter {
	if os.Geteuid() != 0 {
		return &cacheMeter{}
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return &cacheMeter{}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var base, key string
		switch {
		case parts[1] == "memory" || strings.Contains(","+parts[1]+",", ",memory,"):
			base, key = "/sys/fs/cgroup/memory", "cache"
		case parts[0] == "0" && parts[1] == "":
			base, key = "/sys/fs/cgroup", "file"
			if c, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err != nil || !bytes.Contains(c, []byte("memory")) {
				continue
			}
		default:
			continue
		}
		home := filepath.Join(base, parts[2])
		dir := filepath.Join(home, fmt.Sprintf("tensorfs-bench-%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			continue
		}
		m := &cacheMeter{dir: dir, home: filepath.Join(home, "cgroup.procs"), key: key}
		if _, err := m.read(); err != nil {
			os.Remove(dir)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			os.Remove(dir)
			continue
		}
		return m
	}
	return &cacheMeter{}
}

// read returns the page cache counted now, in bytes.
func (m *cacheMeter) read() (int64, error) {
	if m.dir == "" {
		return readKeyed("/proc/meminfo", "Cached:", 1024)
	}
	return readKeyed(filepath.Join(m.dir, "memory.stat"), m.key, 1)
}

// readKeyed returns the number after the first line starting with key
// (followed by a space) in file, times unit.
func readKeyed(file, key string, unit int64) (int64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %v", file, key, err)
			}
			return n * unit, nil
		}
	}
	return 0, fmt.Errorf("%s: no %s line", file, key)
}

// close moves this process back where it came from and removes the
// private cgroup (the kernel moves its charges to the parent).
func (m *cacheMeter) close() {
	if m.dir == "" {
		return
	}
	os.WriteFile(m.home, []byte(strconv.Itoa(os.Getpid())), 0)
	os.Remove(m.dir)
}
