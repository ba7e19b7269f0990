package dcp

import (
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/dcp/internal/dcpwrite"
)

// countingFile counts the bytes read from a File.
type countingFile struct {
	index.File
	n *atomic.Int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

func (f countingFile) Close() error { return f.File.(io.Closer).Close() }

// hostileDir writes dcpwrite's hostile checkpoint kind of n and parses
// it, counting the bytes read from its .distcp files.
func hostileDir(t *testing.T, kind string, n int) (*index.Index, int64, int64) {
	t.Helper()
	dir := t.TempDir()
	if err := dcpwrite.Hostile(dir, kind, n); err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	open := func(p string) (index.File, error) {
		f, err := openPread(p)
		if err != nil {
			return nil, err
		}
		return countingFile{f, &read}, nil
	}
	meta, err := openPread(filepath.Join(dir, MetadataName))
	if err != nil {
		t.Fatal(err)
	}
	defer meta.(io.Closer).Close()
	files := []string{filepath.Join(dir, MetadataName), filepath.Join(dir, "__0_0.distcp")}
	idx, opened, err := ParseDir(Dir{Path: dir, Files: files, Open: open}, meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range opened {
		f.(io.Closer).Close()
	}
	st, err := os.Stat(files[1])
	if err != nil {
		t.Fatal(err)
	}
	return idx, read.Load(), st.Size()
}

// TestSharedValues: 3,000 values whose storage_data name one 1 MB item
// read it once (each read it again: 3 GB), and their bytes in all stay
// within the budget of values: a floor and 8 per byte of the .metadata
// and of the item; the rest are described, not read.
func TestSharedValues(t *testing.T) {
	idx, read, size := hostileDir(t, "shared-values", 3000)
	if read > 2*size {
		t.Errorf("read %d bytes of a %d-byte .distcp", read, size)
	}
	full, described := 0, 0
	var bytes int64
	for i := range 3000 {
		switch v := idx.Metadata["v."+itoa(i)].(type) {
		case string:
			full++
			bytes += int64(len(v))
		case map[string]any:
			if s, _ := v["value"].(string); !strings.Contains(s, "shared items multiply") {
				t.Fatalf("v.%d = %v", i, v)
			}
			described++
		default:
			t.Fatalf("v.%d = %T", i, v)
		}
	}
	if full == 0 || full+described != 3000 || bytes > 64<<20 {
		t.Errorf("%d values read (%d bytes), %d described", full, bytes, described)
	}
	t.Logf("%d values read (%d bytes), %d described", full, bytes, described)
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestSharedChunks: 200 tensors whose one chunk names one item, whose
// data.pkl also holds a 16 MiB str, parse the item once (once per
// tensor: 3.2 GB of pickle).
func TestSharedChunks(t *testing.T) {
	idx, read, size := hostileDir(t, "shared-chunks", 200)
	if len(idx.Tensors) != 200 {
		t.Fatalf("%d tensors", len(idx.Tensors))
	}
	if read > 3*size {
		t.Errorf("read %d bytes of a %d-byte .distcp", read, size)
	}
}

// TestManyChunksEachDim: a tensor of [1,1] chunks along dim 1, along
// dim 0, and a column of one chunk beside a column of [1,1] chunks loads
// and reads back every element (element i is i; [r, c] is 2r+c). What
// each costs at issue 34's sizes (65,536 chunks; 32,768 rows) is counted
// in tiling's TestCheckLinear and backing's TestTiledReadLinear: here
// the cost is parsing one zip per chunk.
func TestManyChunksEachDim(t *testing.T) {
	for _, c := range []struct {
		kind string
		n    int
	}{{"dim1", 1 << 14}, {"dim0", 1 << 12}, {"column", 1 << 13}} {
		t.Run(c.kind, func(t *testing.T) {
			dir := t.TempDir()
			if err := dcpwrite.Hostile(dir, c.kind, c.n); err != nil {
				t.Fatal(err)
			}
			idx, files, err := load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, f := range files {
					f.(io.Closer).Close()
				}
			}()
			tt := idx.Tensors[0]
			buf := make([]byte, tt.Size)
			if n, err := files[tt.Source].ReadAt(buf, tt.Offset); int64(n) != tt.Size {
				t.Fatalf("read %d of %d: %v", n, tt.Size, err)
			}
			for i := 0; i < len(buf)/4; i++ {
				if v := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])); v != float32(i) {
					t.Fatalf("element %d is %v", i, v)
				}
			}
		})
	}
}

// TestNamesCoincide: {"a/b": t1, "a": {"b": t2}} as dcp.save writes it
// is served with both tensors, the later as a/b#1 (FORMATS.md's rule),
// and a value keyed "dcp.keys" is the checkpoint's: the key map is
// Index.Keys.
func TestNamesCoincide(t *testing.T) {
	dir := t.TempDir()
	if err := dcpwrite.Hostile(dir, "names", 1); err != nil {
		t.Fatal(err)
	}
	idx, files, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.(io.Closer).Close()
		}
	}()
	want := map[string][2]float32{"a/b": {1, 2}, "a/b#1": {3, 4}}
	if len(idx.Tensors) != 2 {
		t.Fatalf("%d tensors", len(idx.Tensors))
	}
	for _, tt := range idx.Tensors {
		buf := make([]byte, 8)
		files[tt.Source].ReadAt(buf, tt.Offset)
		got := [2]float32{math.Float32frombits(binary.LittleEndian.Uint32(buf)), math.Float32frombits(binary.LittleEndian.Uint32(buf[4:]))}
		if w, ok := want[tt.Name]; !ok || w != got {
			t.Errorf("%s = %v, want %v", tt.Name, got, want[tt.Name])
		}
	}
	if idx.Keys["a/b"] != "a/b" || idx.Keys["a/b#1"] != "a.b" {
		t.Errorf("keys %v", idx.Keys)
	}
	if idx.Metadata["dcp.keys"] != "mine" {
		t.Errorf("the value keyed dcp.keys is %v", idx.Metadata["dcp.keys"])
	}
}
