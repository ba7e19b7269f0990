package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// npzScript writes, with numpy, into argv[1]: big.npz (np.savez_compressed
// of a 48 MiB float32 member, a small one and a 0-d one), zip64.npz (the
// same, written with zip64 headers) and badcrc.npz (a member whose CRC-32
// in both headers is wrong), and prints the sha256 of each array's C-order
// little-endian bytes.
const npzScript = `
import sys, os, json, hashlib, zipfile, struct
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(7)
arrs = {"big": rng.standard_normal((3000, 4096)).astype("<f4"), "small": np.arange(10, dtype=">i8"), "s": np.array(True)}
np.savez_compressed(os.path.join(out, "big.npz"), **arrs)
with zipfile.ZipFile(os.path.join(out, "zip64.npz"), "w", compression=zipfile.ZIP_DEFLATED) as z:
    for k, v in arrs.items():
        with z.open(k + ".npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, v)
bad = os.path.join(out, "badcrc.npz")
np.savez_compressed(bad, w=np.arange(1000, dtype="<f8"))
b = bytearray(open(bad, "rb").read())
crc = zipfile.ZipFile(bad).getinfo("w.npy").CRC
old, new = struct.pack("<I", crc), struct.pack("<I", crc ^ 1)
assert b.count(old) == 2
open(bad, "wb").write(bytes(b).replace(old, new))
def sha(a):
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return hashlib.sha256(a.tobytes()).hexdigest()
print(json.dumps({k: sha(v) for k, v in arrs.items()}))
`

// TestNPZCompressed serves np.savez_compressed files through every path:
// ls, cat, load (the Go client) and a mount read by numpy in another
// process, with a memory limit that sends the big member to a file in
// --cache-dir; the server's memory stays well below the member's size.
// A member whose CRC-32 is wrong fails with one line naming it (EIO and
// one log line through the mount); one over --inflate-disk is refused at
// open; the same files load over HTTP.
func TestNPZCompressed(t *testing.T) {
	dir := t.TempDir()
	var shas map[string]string
	if err := json.Unmarshal([]byte(runPy(t, npzScript, dir)), &shas); err != nil {
		t.Fatal(err)
	}
	want := "" // load --sha256 output, in name order
	for _, n := range []string{"big", "s", "small"} {
		want += shas[n] + "  " + n + "\n"
	}
	small := []string{"--inflate-mem", "4MiB"} // members over 1 MiB go to files
	for _, f := range []string{"big.npz", "zip64.npz"} {
		src := filepath.Join(dir, f)
		if r := runTensorfs(t, "ls", src); r.code != 0 || !strings.Contains(r.stdout, "big    F32    [3000,4096]  49152000") {
			t.Errorf("ls %s: exit %d %q %q", f, r.code, r.stdout, r.stderr)
		}
		for _, flags := range [][]string{nil, small} {
			if r := runTensorfs(t, append(append([]string{"load", "--quiet", "--sha256"}, flags...), src)...); r.code != 0 || r.stdout != want {
				t.Errorf("load %v %s: exit %d %s\n%s", flags, f, r.code, r.stderr, r.stdout)
			}
		}
		if r := runTensorfs(t, append(append([]string{"cat"}, small...), src, "big")...); r.code != 0 || npzSHA([]byte(r.stdout)) != shas["big"] {
			t.Errorf("cat %s big: exit %d %s", f, r.code, r.stderr)
		}
	}

	// Through a mount: numpy reads the .npy view and the stored file; the
	// big member is inflated into an unlinked file in --cache-dir.
	cache := t.TempDir()
	m := mount(t, filepath.Join(dir, "big.npz"), append(small, "--cache-dir", cache)...)
	out := runPy(t, `
import sys, hashlib, numpy as np
a = np.load(sys.argv[1] + "/.npy/big.npy", mmap_mode="r")
print(hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest(), hashlib.sha256(open(sys.argv[1] + "/small", "rb").read()).hexdigest())
`, m.Dir)
	if out != shas["big"]+" "+shas["small"]+"\n" {
		t.Errorf("through the mount: %q, want %s %s", out, shas["big"], shas["small"])
	}
	pid := m.cmd.Process.Pid
	fds, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
	inCache := 0
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, cache+"/") {
			inCache++
		}
	}
	if inCache != 1 {
		t.Errorf("%d files of the server in --cache-dir %s, want 1 (the big member)", inCache, cache)
	}
	// 48 MiB inflated into a file: the server's peak memory stays far
	// below the server's baseline plus the member.
	if hwm := procStatusKB(t, pid, "VmHWM"); hwm > 40<<10 {
		t.Errorf("server peak RSS %d KiB, want under 40 MiB (the member is 48 MiB)", hwm)
	} else {
		t.Logf("server peak RSS %d KiB reading a 48 MiB compressed member with --inflate-mem 4MiB", hwm)
	}
	xs := make([]byte, 4096)
	if n, err := unix.Listxattr(m.Path("big"), xs); err != nil || !strings.Contains(string(xs[:n]), "user.tensorfs.shape") || strings.Contains(string(xs[:n]), "user.tensorfs.source") {
		t.Errorf("xattrs of a compressed member's tensor: %q %v, want no source/offset", xs[:max(n, 0)], err)
	}
	m.Unmount()

	// A CRC-32 mismatch: ls works (the header is fine), cat fails in one
	// line, a mount gives EIO and logs one line however often it is read.
	bad := filepath.Join(dir, "badcrc.npz")
	if r := runTensorfs(t, "ls", bad); r.code != 0 {
		t.Errorf("ls badcrc.npz: exit %d %s", r.code, r.stderr)
	}
	checkOneLineError(t, runTensorfs(t, "cat", bad, "w"), 1, bad+": member w.npy: CRC-32 of the inflated bytes is")
	m = mount(t, bad)
	for i := 0; i < 3; i++ {
		if _, err := os.ReadFile(m.Path("w")); !errors.Is(err, syscall.EIO) {
			t.Errorf("read %d of a member with a bad CRC-32: %v, want EIO", i, err)
		}
	}
	m.Unmount()
	// The line may come before the "serving" line: the test reads as soon
	// as the mount is up, which is before the server says so.
	if s := m.Stderr(); strings.Count(s, "CRC-32") != 1 || !strings.Contains("\n"+s, "\ntensorfs: "+bad+": member w.npy: CRC-32 of the inflated bytes is") {
		t.Errorf("server log: %q", s)
	}

	// A member larger than --inflate-disk cannot be served: refused at open.
	checkOneLineError(t, runTensorfs(t, "ls", "--inflate-mem", "1MiB", "--inflate-disk", "8MiB", filepath.Join(dir, "big.npz")), 1,
		"big.npz: inflates to 49152128 bytes, more than the 8388608 bytes of disk the cache of inflated members may use (tensorfs --inflate-disk) (member big.npy)")

	// Remote: the compressed range is read through the remote source.
	base := httpServer(t, dir)
	for _, flags := range [][]string{nil, small} {
		if r := runTensorfs(t, append(append([]string{"load", "--quiet", "--sha256", "--part-size", "1MiB"}, flags...), base+"/big.npz")...); r.code != 0 || r.stdout != want {
			t.Errorf("load %v over HTTP: exit %d %s\n%s", flags, r.code, r.stderr, r.stdout)
		}
	}
}

func npzSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
