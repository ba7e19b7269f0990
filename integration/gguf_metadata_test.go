package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/index"
)

// hBigMetadataGGUF writes a GGUF file whose metadata is one u8 array of n
// elements (a sparse file when sparse: the array's bytes are a hole) and
// a tensor, and returns its path and the array's offset.
func hBigMetadataGGUF(t *testing.T, dir, name string, n int64, sparse bool) (string, int64) {
	t.Helper()
	head := hCat([]byte("GGUF"), hLE32(3), hLE64(1), hLE64(2),
		hGKV("general.architecture", hGString, hGStr("llama")),
		hGStr("big"), hLE32(hGArray), hLE32(0), hLE64(uint64(n)))
	off := int64(len(head))
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	if sparse {
		if _, err := f.Seek(n, 1); err != nil {
			t.Fatal(err)
		}
	} else {
		// in 1 MiB pieces: a child's peak RSS starts from the test
		// process's at fork
		chunk := pattern(1<<20, 9)
		for left := n; left > 0; left -= int64(len(chunk)) {
			if _, err := f.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	tail := hGTI("t", 0, 0, 4)
	end := off + n + int64(len(tail))
	tail = append(tail, make([]byte, (32-end%32)%32)...)
	if _, err := f.Write(append(tail, pattern(16, 3)...)); err != nil {
		t.Fatal(err)
	}
	return p, off
}

// TestHostileBigMetadata: a GGUF file whose metadata is one large u8
// array (64 MiB written, 16 GiB sparse) lists and mounts in memory that
// does not follow the array (main: 2.5 GB peak and 256 MB of index.json
// for 64 MiB; 32 GiB asked for the sparse one), index.json elides the
// array, .tensorfs/metadata/big serves its bytes, and the client's
// Metadata is the same directly and through the mount.
func TestHostileBigMetadata(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := os.WriteFile(good, hGGUFValid().b, 0o644); err != nil {
		t.Fatal(err)
	}
	base := mount(t, good)
	mustRun(t, "cat", base.Path(".tensorfs/index.json"))
	baseHWM := procStatusKB(t, base.cmd.Process.Pid, "VmHWM") << 10
	base.Unmount()
	baseLs := hRun(t, "", 0, "ls", "--json", good).maxRSS

	for _, tc := range []struct {
		name   string
		n      int64
		sparse bool
	}{
		{"64MiB.gguf", 64 << 20, false},
		{"sparse-16GiB.gguf", 16 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, off := hBigMetadataGGUF(t, dir, tc.name, tc.n, tc.sparse)
			ls := hRun(t, "", 0, "ls", "--json", p)
			if ls.code != 0 {
				t.Fatalf("ls: exit %d: %s", ls.code, ls.stderr)
			}
			if len(ls.stdout) > 2048 || !strings.Contains(ls.stdout, `"tensorfs.elided":true`) {
				t.Errorf("ls --json: %d bytes: %.300s", len(ls.stdout), ls.stdout)
			}
			if ls.maxRSS > baseLs+32<<20 {
				t.Errorf("ls: peak RSS %.1f MiB, listing a small file %.1f MiB", float64(ls.maxRSS)/(1<<20), float64(baseLs)/(1<<20))
			}

			m := mount(t, p)
			data, err := os.ReadFile(m.Path(".tensorfs/index.json"))
			if err != nil {
				t.Fatal(err)
			}
			hwm := procStatusKB(t, m.cmd.Process.Pid, "VmHWM") << 10
			t.Logf("ls peak RSS %.1f MiB; mount peak RSS %.1f MiB (small file: %.1f); index.json %d bytes", float64(ls.maxRSS)/(1<<20), float64(hwm)/(1<<20), float64(baseHWM)/(1<<20), len(data))
			if hwm > baseHWM+32<<20 {
				t.Errorf("mount: peak RSS %.1f MiB, mounting a small file %.1f MiB", float64(hwm)/(1<<20), float64(baseHWM)/(1<<20))
			}
			doc, err := index.ParseDocument(data)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"tensorfs.elided": true, "type": "array", "element_type": "uint8",
				"count": json.Number(strconv.FormatInt(tc.n, 10)), "bytes": json.Number(strconv.FormatInt(tc.n, 10)),
				"encoding": "gguf", "path": ".tensorfs/metadata/big"}
			if !reflect.DeepEqual(doc.Metadata["big"], want) || len(data) > 2048 {
				t.Errorf("index.json (%d bytes): big = %v, want %v", len(data), doc.Metadata["big"], want)
			}
			st, err := os.Stat(m.Path(".tensorfs/metadata/big"))
			if err != nil || st.Size() != tc.n {
				t.Fatalf("metadata/big: %v, %v", st, err)
			}
			if !tc.sparse { // the whole array, byte for byte, read by a subprocess
				mustRun(t, "cmp", "-i", strconv.FormatInt(off, 10)+":0", "-n", strconv.FormatInt(tc.n, 10), p, m.Path(".tensorfs/metadata/big"))
			}
			if got := mustRun(t, "cat", m.Path(".tensorfs/metadata/general.architecture")); got != "llama" {
				t.Errorf("metadata/general.architecture = %q", got)
			}

			direct, err := client.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			via, err := client.Open(m.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer via.Close()
			if !reflect.DeepEqual(direct.Metadata(), via.Metadata()) || !reflect.DeepEqual(via.Metadata()["big"], want) {
				t.Errorf("client metadata: %v directly, %v through the mount", direct.Metadata(), via.Metadata())
			}
		})
	}
}
