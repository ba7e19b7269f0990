package fs

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// panicReader is a view that panics on every read.
type panicReader struct{}

func (panicReader) Size() int64                             { return 8 }
func (panicReader) ReadAt(p []byte, off int64) (int, error) { panic("test panic in ReadAt") }

// mountForTest mounts r in this process; only subprocesses read it.
func mountForTest(t *testing.T, r *Root) string {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.SkipOrFail(t, "no /dev/fuse: "+err.Error())
	}
	dir := t.TempDir()
	server, err := Mount(dir, r, MountOptions{Logger: quietLogger()})
	if err != nil {
		testenv.SkipOrFail(t, "cannot mount FUSE here: "+err.Error())
	}
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			Detach(dir)
		}
	})
	return dir
}

// py runs a Python script in a subprocess with a timeout.
func py(t *testing.T, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, testenv.Python(t), append([]string{"-c", script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}

// TestMountInProcess serves a tree from this process and reads it from a
// subprocess: lookups, listings, attributes, xattrs, statfs, reads, and a
// read that panics (EIO, counted, the server keeps serving).
func TestMountInProcess(t *testing.T) {
	idx, src := fixture(t, basicSpecs)
	r := newRoot(t, idx, src, Options{})
	boom := r.lookupPath(".f32/scale") // converted: read through its reader
	boom.storeContents(&fileContents{r: panicReader{}})
	dir := mountForTest(t, r)

	out := py(t, `
import errno, json, os, sys
m = sys.argv[1]
res = {}
try:
    open(os.path.join(m, '.f32', 'scale'), 'rb').read()
    res['panic'] = 'no error'
except OSError as e:
    res['panic'] = errno.errorcode[e.errno]
files = []
for dp, dns, fns in os.walk(m):
    files += [os.path.relpath(os.path.join(dp, f), m) for f in fns]
res['files'] = len(files)
p = os.path.join(m, 'model', 'embed')
res['embed'] = open(p, 'rb').read().hex()
res['xattrs'] = {k: os.getxattr(p, k).decode() for k in os.listxattr(p)}
st = os.stat(p)
res['stat'] = [oct(st.st_mode), st.st_size, st.st_nlink, st.st_ino]
res['root_ino'] = os.stat(m).st_ino
res['top'] = sorted(os.listdir(m))
res['statfs_namemax'] = os.statvfs(m).f_namemax
res['stats'] = json.load(open(os.path.join(m, '.tensorfs', 'stats.json')))
try:
    os.stat(os.path.join(m, 'no-such'))
except FileNotFoundError:
    res['enoent'] = True
print(json.dumps(res))
`, dir)
	var res struct {
		Panic         string            `json:"panic"`
		Files         uint64            `json:"files"`
		Embed         string            `json:"embed"`
		Xattrs        map[string]string `json:"xattrs"`
		Stat          []any             `json:"stat"`
		RootIno       uint64            `json:"root_ino"`
		Top           []string          `json:"top"`
		StatfsNameMax int               `json:"statfs_namemax"`
		Stats         Stats             `json:"stats"`
		ENOENT        bool              `json:"enoent"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	e := r.lookupPath("model/embed")
	tt := e.file.t
	if res.Panic != "EIO" {
		t.Errorf("read that panics: %s, want EIO", res.Panic)
	}
	if res.Stats.Panics < 1 {
		t.Errorf("stats.json panics = %d", res.Stats.Panics)
	}
	if res.Files != r.Files() {
		t.Errorf("walk found %d files, tree has %d", res.Files, r.Files())
	}
	if want := hexOf(src.data[tt.Offset : tt.Offset+tt.Size]); res.Embed != want {
		t.Errorf("model/embed = %s, want %s", res.Embed, want)
	}
	if res.Xattrs[xattrName] != tt.Name || res.Xattrs[xattrShape] != "[10,4]" || len(res.Xattrs) != 5 {
		t.Errorf("xattrs %v", res.Xattrs)
	}
	if len(res.Stat) != 4 || res.Stat[0] != "0o100444" || res.Stat[1].(float64) != 160 || res.Stat[3].(float64) != float64(e.id) {
		t.Errorf("stat %v (ino %d)", res.Stat, e.id)
	}
	if res.RootIno != 1 {
		t.Errorf("root inode %d", res.RootIno)
	}
	if !strings.Contains(strings.Join(res.Top, " "), ".tensorfs mask model position_ids scale") {
		t.Errorf("top level %v", res.Top)
	}
	if res.StatfsNameMax != 255 || !res.ENOENT {
		t.Errorf("statfs name max %d, ENOENT %v", res.StatfsNameMax, res.ENOENT)
	}
	if res.Stats.Reads < 1 || res.Stats.Bytes < 160 {
		t.Errorf("stats %+v", res.Stats)
	}
	if !Mounted(dir) {
		t.Error("Mounted says no")
	}
	if err := CheckMountpoint(dir); err == nil || !strings.Contains(err.Error(), "already a live") {
		t.Errorf("CheckMountpoint of a live mount: %v", err)
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func TestCheckMountpoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		path, want string
	}{
		{filepath.Join(dir, "missing"), "does not exist"},
		{file, "not a directory"},
	} {
		if err := CheckMountpoint(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckMountpoint(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	if err := CheckMountpoint(dir); err != nil {
		t.Errorf("CheckMountpoint(empty dir) = %v", err)
	}
	if err := Unmount(dir); err == nil || !strings.Contains(err.Error(), "not mounted") {
		t.Errorf("Unmount of a plain directory: %v", err)
	}
	if Mounted(dir) {
		t.Error("Mounted(plain directory)")
	}
	// / is mounted but not FUSE: Unmount refuses.
	if m, ok := findMount("/"); ok && !isFUSE(m) {
		if err := Unmount("/"); err == nil || !strings.Contains(err.Error(), "not a FUSE mount") {
			t.Errorf("Unmount(/) = %v", err)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`:  "/tmp/a b",
		`/x\011y\134z`: "/x\ty\\z",
		`/plain`:       "/plain",
		`/bad\04`:      `/bad\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMaxReadSize(t *testing.T) {
	// 1 MiB on a default system; up to 2 MiB where root raised
	// /proc/sys/fs/fuse/max_pages_limit.
	want := min(kernelMaxPages(), maxFolioPages) * pageSize
	if got := MaxReadSize(false); got != want {
		t.Errorf("MaxReadSize(false) = %d, want %d", got, want)
	}
	got := MaxReadSize(true)
	if got%pageSize != 0 || got > want || got < pageSize {
		t.Errorf("MaxReadSize(true) = %d", got)
	}
}
