package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/internal/testdata"
	"golang.org/x/sys/unix"
)

// tnReadScript reads, in another process, every tensor file of the mount
// at argv[1] (paths from index.json) and its .npy view, and prints
// {name: [sha256 of the file, sha256 of the .npy view's C-order
// little-endian bytes, dtype of the .npy]}.
const tnReadScript = `
import sys, json, hashlib
import numpy as np
m = sys.argv[1]
idx = json.load(open(m + "/.tensorfs/index.json"))
out = {}
for t in idx["tensors"]:
    raw = open(m + "/" + t["path"], "rb").read()
    a = np.load(m + "/.npy/" + t["path"] + ".npy", mmap_mode="r")
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    out[t["name"]] = [hashlib.sha256(raw).hexdigest(), hashlib.sha256(a.tobytes()).hexdigest(), a.dtype.name]
print(json.dumps(out))
`

// TestTorchNumpyProtocol2 serves numpy arrays saved with torch.save's
// default pickle protocol 2 (bytes as a Latin-1 str, UTF-8 in the pickle)
// and arrays in a deflated data.pkl, byte-identical with torch.load,
// through ls, cat, load, the Go client and a mount read by numpy in
// another process; a 48 MiB array read through a mount with
// --inflate-mem 4MiB is decoded into a cache file, the server's memory
// staying far below it. A str whose code point is above U+00FF refuses
// the file in one line naming the key and the byte. On the old main
// these arrays were a line in the metadata.
func TestTorchNumpyProtocol2(t *testing.T) {
	testdata.Python(t, "torch", "numpy")
	dir := t.TempDir()
	var ref map[string]map[string][]json.RawMessage
	if err := json.Unmarshal([]byte(runPy(t, testdata.TorchNumpyProtocol2Script, dir, strconv.Itoa(48<<20))), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref) != 6 {
		t.Fatalf("python made %d files", len(ref))
	}
	shaOf := func(r []json.RawMessage) string {
		var s string
		json.Unmarshal(r[2], &s)
		return s
	}
	for src, tensors := range ref {
		base := filepath.Base(src)
		names := make([]string, 0, len(tensors))
		for n := range tensors {
			names = append(names, n)
		}
		sort.Strings(names)
		want := ""
		for _, n := range names {
			want += shaOf(tensors[n]) + "  " + n + "\n"
		}
		if r := runTensorfs(t, "load", "--quiet", "--sha256", src); r.code != 0 || r.stdout != want {
			t.Errorf("load %s: exit %d %s\n%s\nwant\n%s", base, r.code, r.stderr, r.stdout, want)
		}
		first := names[0]
		if _, ok := tensors["np/f32"]; ok {
			first = "np/f32"
			if r := runTensorfs(t, "ls", src); r.code != 0 || !strings.Contains(r.stdout, "np/f32          F32    [7,5]") {
				t.Errorf("ls %s: exit %d %q %s", base, r.code, r.stdout, r.stderr)
			}
		}
		if r := runTensorfs(t, "cat", src, first); r.code != 0 || npzSHA([]byte(r.stdout)) != shaOf(tensors[first]) {
			t.Errorf("cat %s %s: exit %d %s", base, first, r.code, r.stderr)
		}
		// The Go client, in this process.
		c, err := client.Open(src)
		if err != nil {
			t.Fatalf("client %s: %v", base, err)
		}
		for _, n := range names {
			r, err := c.OpenTensor(n, 0)
			if err != nil {
				t.Errorf("client %s %s: %v", base, n, err)
				continue
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil || npzSHA(b) != shaOf(tensors[n]) {
				t.Errorf("client %s %s: %v, bytes differ from torch.load", base, n, err)
			}
		}
		c.Close()
	}

	// Through a mount, read by numpy in another process.
	needFUSE(t)
	for _, f := range []string{"p2_zip.pt", "p2_legacy.pt", "np2_p2_zip.pt", "p2_deflated.pt"} {
		src := filepath.Join(dir, f)
		cache := t.TempDir()
		m := mount(t, src, "--inflate-mem", "4MiB", "--cache-dir", cache)
		var got map[string][3]string
		if err := json.Unmarshal([]byte(runPy(t, tnReadScript, m.Dir)), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ref[src]) {
			t.Errorf("%s: %d tensors through the mount, want %d", f, len(got), len(ref[src]))
		}
		for n, r := range ref[src] {
			var dt string
			json.Unmarshal(r[0], &dt)
			if g := got[n]; g[0] != shaOf(r) || g[1] != shaOf(r) || g[2] != dt {
				t.Errorf("%s: %s through the mount: %v, want %s %s", f, n, g, shaOf(r), dt)
			}
		}
		if _, ok := ref[src]["np/f32"]; ok {
			xs := make([]byte, 4096)
			n, err := unix.Listxattr(m.Path("np/f32"), xs)
			if err != nil || strings.Contains(string(xs[:max(n, 0)]), "user.tensorfs.source") {
				t.Errorf("%s: xattrs of np/f32: %q %v, want no source/offset", f, xs[:max(n, 0)], err)
			}
			v := make([]byte, 64)
			if n, err := unix.Getxattr(m.Path("np/f32"), "user.tensorfs.shape", v); err != nil || string(v[:n]) != "[7,5]" {
				t.Errorf("%s: shape xattr %q %v", f, v[:max(n, 0)], err)
			}
		}
		if f == "p2_zip.pt" {
			// 48 MiB decoded into a file in --cache-dir: the server's
			// peak memory stays far below its baseline plus the array.
			if hwm := procStatusKB(t, m.cmd.Process.Pid, "VmHWM"); hwm > 40<<10 {
				t.Errorf("server peak RSS %d KiB, want under 40 MiB (the array is 48 MiB)", hwm)
			} else {
				t.Logf("server peak RSS %d KiB reading a 48 MiB protocol-2 array with --inflate-mem 4MiB", hwm)
			}
		}
		m.Unmount()
	}

	// A code point above U+00FF in an array's str: one line naming the
	// key and the byte (Python's unpickler fails there too).
	bad := filepath.Join(dir, "np2_p2_legacy.pt")
	b, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.IndexFunc(b, func(r rune) bool { return r >= 0x80 && r < 0x100 })
	if at < 0 {
		t.Fatal("no non-ASCII Latin-1 character in the file")
	}
	b[at], b[at+1] = 0xc4, 0x80
	os.WriteFile(bad, b, 0o644)
	checkOneLineError(t, runTensorfs(t, "ls", bad), 1, bad+`: numpy array: _codecs.encode(str, "latin1") of a str with code point U+0100, which is not Latin-1 (Python's unpickler fails on it too) (tensor "a", at byte `+strconv.Itoa(at)+")")
}
