package dcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// Expected is ../shared/testdata/modern/EXPECTED.json: what DCP's own
// reader (dcp_to_torch_save) assembles from each fixture.
type Expected struct {
	Cases map[string]ExpectedCase `json:"cases"`
}

// ExpectedCase is one checkpoint of EXPECTED.json.
type ExpectedCase struct {
	Kind    string `json:"kind"`
	Tensors []struct {
		DType  string  `json:"dtype"`
		FQN    string  `json:"fqn"`
		Path   []any   `json:"path"`
		SHA256 string  `json:"sha256"`
		Shape  []int64 `json:"shape"`
	} `json:"tensors"`
	NotTensors []struct {
		FQN  string `json:"fqn"`
		Path []any  `json:"path"`
		Repr string `json:"repr"`
	} `json:"not_tensors"`
}

// readExpected reads EXPECTED.json of dir.
func readExpected(t *testing.T, file string) Expected {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	var e Expected
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// pathName joins an EXPECTED path as tensorfs names it.
func pathName(p []any) string {
	parts := make([]string, len(p))
	for i, c := range p {
		switch x := c.(type) {
		case string:
			parts[i] = x
		case float64:
			parts[i] = strings.TrimSuffix(strings.TrimSuffix(json.Number(jsonNum(x)).String(), ".0"), ".")
		}
	}
	return strings.Join(parts, "/")
}

func jsonNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func openPread(p string) (index.File, error) {
	s, err := backing.Open(p, backing.Options{Mode: backing.Pread})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// load reads dir as formats.Load does (which imports this package, so
// the tests cannot): ParseDir, then a backing.Tiled for each member.
func load(dir string) (*index.Index, []index.File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, filepath.Join(dir, e.Name()))
	}
	mp, ok := MetadataFile(names)
	if !ok {
		return nil, nil, os.ErrNotExist
	}
	meta, err := openPread(mp)
	if err != nil {
		return nil, nil, err
	}
	defer meta.(io.Closer).Close()
	idx, files, err := ParseDir(Dir{Path: dir, Files: names, Open: openPread}, meta)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range idx.Members {
		if z, ok := m.Kind.(*index.Zstd); ok {
			mf, err := zstdMember(files[m.File], m, z)
			if err != nil {
				return nil, nil, err
			}
			files = append(files, mf)
			continue
		}
		if d, ok := m.Kind.(*index.Decoded); ok { // a zstd item read lazily
			var b bytes.Buffer
			if err := d.Decode(&b, files[m.File]); err != nil {
				return nil, nil, fmt.Errorf("%s: %v", idx.SourceName(m.Source), err)
			}
			files = append(files, closingMem{memFile{bytes.NewReader(b.Bytes()), m.Name}})
			continue
		}
		k := m.Kind.(*index.Tiles)
		tiles := make([]backing.Tile, len(k.Chunks))
		for i, c := range k.Chunks {
			tiles[i] = backing.Tile{Src: files[c.Source], Offset: c.Offset, Start: c.Start, Shape: c.Shape}
		}
		tl, err := backing.NewTiled(idx.Sources[m.Source], k.Shape, k.ElemSize, tiles)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, tl)
	}
	return idx, files, nil
}

// dtypeNames are torch's names of the dtypes in the fixtures.
var dtypeNames = map[string]string{
	"float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64", "bool": "BOOL",
	"float8_e4m3fn": "F8_E4M3", "float64": "F64", "int32": "I32", "uint8": "U8", "int8": "I8",
}

// checkAgainst loads dir and compares every tensor with c.
func checkAgainst(t *testing.T, dir string, c ExpectedCase) {
	t.Helper()
	idx, files, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.(io.Closer).Close()
		}
	}()
	if len(idx.Sources) != len(files) || len(idx.Files())+len(idx.Members) != len(files) {
		t.Fatalf("%d sources (%d members) for %d files", len(idx.Sources), len(idx.Members), len(files))
	}
	if idx.Format != "dcp" {
		t.Fatalf("format %q", idx.Format)
	}
	got := map[string]*index.Tensor{}
	for i := range idx.Tensors {
		got[idx.Tensors[i].Name] = &idx.Tensors[i]
	}
	if len(got) != len(c.Tensors) {
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("%d tensors, want %d: %v", len(got), len(c.Tensors), names)
	}
	keys := idx.Keys
	tiled := 0
	for _, w := range c.Tensors {
		name := pathName(w.Path)
		tt := got[name]
		if tt == nil {
			t.Errorf("no tensor %q", name)
			continue
		}
		if keys[name] != w.FQN {
			t.Errorf("%s: key %v, want %q", name, keys[name], w.FQN)
		}
		if tt.DType.Name() != dtypeNames[w.DType] || !slices.Equal(tt.Shape, w.Shape) {
			t.Errorf("%s: %s %v, want %s %v", name, tt.DType.Name(), tt.Shape, w.DType, w.Shape)
		}
		if idx.Member(tt.Source) != nil {
			tiled++
		}
		buf := make([]byte, tt.Size)
		if n, err := files[tt.Source].ReadAt(buf, tt.Offset); int64(n) != tt.Size {
			t.Errorf("%s: read %d of %d bytes: %v", name, n, tt.Size, err)
			continue
		}
		sum := sha256.Sum256(buf)
		if hex.EncodeToString(sum[:]) != w.SHA256 {
			t.Errorf("%s: sha256 %x, want %s", name, sum, w.SHA256)
		}
		// Reads at odd offsets and lengths give the same bytes.
		for _, step := range []int64{1, 3, 7, 64} {
			part := make([]byte, step)
			for off := int64(0); off < tt.Size; off += step {
				n, _ := files[tt.Source].ReadAt(part[:min(step, tt.Size-off)], tt.Offset+off)
				if string(part[:n]) != string(buf[off:off+int64(n)]) {
					t.Fatalf("%s: read of %d at %d differs", name, step, off)
				}
			}
		}
	}
	for _, w := range c.NotTensors {
		name := pathName(w.Path)
		v, ok := lookupValue(idx.Metadata, name)
		if !ok {
			t.Errorf("no value %q in the metadata", name)
			continue
		}
		if r := pyRepr(v); r != w.Repr {
			t.Errorf("value %s = %s, want %s", name, r, w.Repr)
		}
	}
	t.Logf("%d tensors (%d tiled), %d values", len(idx.Tensors), tiled, len(c.NotTensors))
}

// lookupValue finds a value by its flattened name: DCP saves a list or
// tuple of plain values as one item (optimizer/param_groups/0/betas),
// which EXPECTED.json lists element by element (.../betas/0).
func lookupValue(md map[string]any, name string) (any, bool) {
	if v, ok := md[name]; ok {
		return v, true
	}
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return nil, false
	}
	v, ok := lookupValue(md, name[:i])
	l, isList := v.([]any)
	if !ok || !isList {
		return nil, false
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 || n >= len(l) {
		return nil, false
	}
	return l[n], true
}

// pyRepr renders a plain metadata value as Python's repr would.
func pyRepr(v any) string {
	switch x := v.(type) {
	case string:
		return "'" + x + "'"
	case int64:
		return jsonNum(float64(x))
	case float64:
		s := jsonNum(x)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case []any:
		parts := make([]string, len(x))
		for i, it := range x {
			parts[i] = pyRepr(it)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestFixtures(t *testing.T) {
	dir := testenv.Path(t, "modern")
	e := readExpected(t, filepath.Join(dir, "EXPECTED.json"))
	n := 0
	for name, c := range e.Cases {
		if c.Kind != "dcp" {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) { checkAgainst(t, filepath.Join(dir, name), c) })
	}
	if n < 4 {
		t.Fatalf("%d DCP cases in EXPECTED.json, want at least 4", n)
	}
}

// TestTorch211 reads DCPs written by a newer torch (2.11, on 1, 3 and 8
// ranks, a 2x4 mesh and uneven dim-1 shards among them), committed in
// testdata/torch211: every tensor byte-exact with what the ranks held.
func TestTorch211(t *testing.T) {
	data, err := os.ReadFile("testdata/torch211/EXPECTED.json")
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Cases map[string]map[string]string
	}
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Cases) != 3 {
		t.Fatalf("%d cases", len(e.Cases))
	}
	for name, want := range e.Cases {
		t.Run(name, func(t *testing.T) {
			idx, files, err := load(filepath.Join("testdata", "torch211", name))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, f := range files {
					f.(io.Closer).Close()
				}
			}()
			got := map[string]string{}
			for _, tt := range idx.Tensors {
				buf := make([]byte, tt.Size)
				if n, err := files[tt.Source].ReadAt(buf, tt.Offset); int64(n) != tt.Size {
					t.Fatalf("%s: %d bytes: %v", tt.Name, n, err)
				}
				sum := sha256.Sum256(buf)
				got[tt.Name] = hex.EncodeToString(sum[:])
			}
			if len(got) != len(want) {
				t.Errorf("%d tensors, want %d", len(got), len(want))
			}
			for n, w := range want {
				if got[n] != w {
					t.Errorf("%s: sha256 %s, want %s", n, got[n], w)
				}
			}
			if idx.Metadata["step"] != int64(9) {
				t.Errorf("step = %v", idx.Metadata["step"])
			}
		})
	}
}
