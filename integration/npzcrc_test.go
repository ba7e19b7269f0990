package integration

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// npzStored writes an .npz of stored members (np.savez): a, float32
// [256], and b, float32 [4]; with flip, one data byte of a.npy is
// changed after the zip recorded its CRC-32 (as numpy: "Bad CRC-32").
func npzStored(t *testing.T, path string, flip bool) {
	t.Helper()
	npy := func(n int) []byte {
		dict := "{'descr': '<f4', 'fortran_order': False, 'shape': (" + strconv.Itoa(n) + ",), }"
		hdr := dict + strings.Repeat(" ", 127-10-len(dict)) + "\n"
		b := []byte("\x93NUMPY\x01\x00")
		b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
		b = append(b, hdr...)
		for i := range n {
			b = binary.LittleEndian.AppendUint32(b, uint32(i)*0x01010101)
		}
		return b
	}
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, m := range []struct {
		name string
		n    int
	}{{"a.npy", 256}, {"b.npy", 4}} {
		f, err := w.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		f.Write(npy(m.n))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if flip {
		i := bytes.Index(b, []byte("\x93NUMPY")) + 128 + 500 // inside a's data
		b[i] ^= 0x40
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Whole reads check the CRC-32 of a stored .npz member: cat, load
// (stream and fill) and convert fail on a flipped data byte with one
// line naming the member and "CRC-32"; the intact file passes.
func TestNPZStoredCRC(t *testing.T) {
	dir := t.TempDir()
	ok, bad := filepath.Join(dir, "ok.npz"), filepath.Join(dir, "bad.npz")
	npzStored(t, ok, false)
	npzStored(t, bad, true)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"cat", []string{"cat", "SRC", "a"}},
		{"cat --dtype", []string{"cat", "--dtype", "f64", "SRC", "a"}},
		{"cat --npy", []string{"cat", "--npy", "SRC", "a"}},
		{"load", []string{"load", "--quiet", "SRC"}},
		{"load --dtype", []string{"load", "--quiet", "--dtype", "f16", "SRC"}},
		{"convert", []string{"convert", "--quiet", "SRC", "OUT"}},
	} {
		for _, src := range []string{ok, bad} {
			args := make([]string, len(c.args))
			out := filepath.Join(dir, filepath.Base(src)+strings.ReplaceAll(c.name, " ", "")+".safetensors")
			for i, a := range c.args {
				args[i] = strings.NewReplacer("SRC", src, "OUT", out).Replace(a)
			}
			r := runTensorfs(t, args...)
			if src == ok {
				if r.code != 0 {
					t.Errorf("%s intact: exit %d: %s", c.name, r.code, r.stderr)
				}
				continue
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "a.npy") || !strings.Contains(lines[0], "CRC-32") || !strings.Contains(lines[0], src) {
				t.Errorf("%s flipped byte: exit %d, stderr %q; want exit 1, one line naming %s, a.npy and CRC-32", c.name, r.code, r.stderr, src)
			}
			if strings.HasPrefix(c.name, "cat") && r.stdout != "" {
				t.Errorf("%s flipped byte: %d bytes on stdout, want none", c.name, len(r.stdout))
			}
			if _, err := os.Stat(out); c.name == "convert" && err == nil {
				t.Errorf("convert flipped byte: %s written", out)
			}
		}
	}
}
