package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// kernelAtLeast reports whether the running kernel is major.minor or
// later.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	parts := strings.SplitN(unix.ByteSliceToString(u.Release[:]), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return ma > major || ma == major && mi >= minor
}

// kernelConfig returns the value of a kernel build option from
// /proc/config.gz ("y", "m", "n" when not set), or "" when unknown.
func kernelConfig(name string) string {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return ""
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return ""
	}
	data, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return v
		}
		if line == "# "+name+" is not set" {
			return "n"
		}
	}
	return ""
}

// TestPassthrough mounts a .npy checkpoint, whose .npy/ file is the
// checkpoint byte for byte: as root on Linux 6.9+, reading it goes to the
// backing file through FUSE passthrough, so the server answers no READ;
// with --no-passthrough (and everywhere else) the server serves it. The
// bytes are the file's either way, read(2) and mmap alike.
func TestPassthrough(t *testing.T) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	npy := hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (786432,), }", data)
	src := filepath.Join(t.TempDir(), "w.npy")
	if err := os.WriteFile(src, npy, 0o644); err != nil {
		t.Fatal(err)
	}
	exact := os.Geteuid() == 0 && kernelAtLeast(6, 9) && kernelConfig("CONFIG_FUSE_PASSTHROUGH") != "n"
	for _, c := range []struct {
		flags []string
		pass  bool
	}{
		{nil, exact},
		{[]string{"--no-passthrough"}, false},
	} {
		m := mount(t, src, c.flags...)
		p := m.Path(".npy/w.npy")
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, npy) {
			t.Fatalf("%v: %s: %d bytes, %v; want the checkpoint's %d", c.flags, p, len(got), err, len(npy))
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		mm, err := unix.Mmap(int(f.Fd()), 0, len(npy), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			t.Fatalf("%v: mmap %s: %v", c.flags, p, err)
		}
		same := bytes.Equal(mm, npy)
		unix.Munmap(mm)
		if !same {
			t.Errorf("%v: mmap of %s: wrong bytes", c.flags, p)
		}
		var st struct {
			Reads uint64 `json:"reads"`
		}
		js, err := os.ReadFile(m.Path(".tensorfs/stats.json"))
		if err != nil || json.Unmarshal(js, &st) != nil {
			t.Fatalf("stats.json: %v %s", err, js)
		}
		if c.pass && st.Reads != 0 {
			t.Errorf("%v: the server answered %d READs of a passthrough file, want none", c.flags, st.Reads)
		}
		if !c.pass && st.Reads == 0 {
			t.Errorf("%v: the server answered no READ: the file was not served by it", c.flags)
		}
		m.Unmount()
	}
}

// TestPassthroughODirectUnaligned reads the .npy/ file of a .npy
// checkpoint opened with O_DIRECT at an offset and length off any block
// alignment: the server serves such an open (passthrough would hand the
// read to the backing file as it is, which refuses it with EINVAL), and a
// plain open after it is still passed through.
func TestPassthroughODirectUnaligned(t *testing.T) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*5 + i>>10)
	}
	npy := hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (262144,), }", data)
	src := filepath.Join(t.TempDir(), "w.npy")
	if err := os.WriteFile(src, npy, 0o644); err != nil {
		t.Fatal(err)
	}
	m := mount(t, src)
	defer m.Unmount()
	p := m.Path(".npy/w.npy")
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatalf("open %s O_DIRECT: %v", p, err)
	}
	defer unix.Close(fd)
	for _, c := range []struct{ off, n int }{{1, 3}, {0, 4096}, {4097, 100}, {len(npy) - 5, 5}} {
		buf := make([]byte, c.n)
		n, err := unix.Pread(fd, buf, int64(c.off))
		if err != nil || n != c.n || !bytes.Equal(buf, npy[c.off:c.off+c.n]) {
			t.Errorf("O_DIRECT pread(%d, %d) of %s: %d bytes, %v; want the checkpoint's", c.n, c.off, p, n, err)
		}
	}
	// A plain open while the O_DIRECT one is open reads the same bytes.
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, npy) {
		t.Fatalf("%s read with an O_DIRECT open beside it: %d bytes, %v", p, len(got), err)
	}
}
