package dcp

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// memFile is a File over bytes.
type memFile struct {
	*bytes.Reader
	name string
}

func (f memFile) Name() string { return f.name }

// FuzzMetadata: ReadMetadata never panics, never hangs and, when it
// accepts, returns chunks inside their tensors.
func FuzzMetadata(f *testing.F) {
	if dir, _ := testenv.Optional(); os.Getenv("TENSORFS_TESTDATA") != "" || !testenv.InCI() {
		for _, c := range []string{"dcp_single", "dcp_threads", "dcp_ws2"} {
			if data, err := os.ReadFile(filepath.Join(dir, "modern", c, MetadataName)); err == nil {
				f.Add(data)
			}
		}
	}
	if data, err := os.ReadFile("testdata/torch211/w8s13/.metadata"); err == nil {
		f.Add(data)
	}
	md := &Metadata{
		Tensors: []TensorMeta{{FQN: "a.w", DType: dtype.F32, Size: []int64{4, 2}, Chunks: []ChunkMeta{{[]int64{0, 0}, []int64{2, 2}}, {[]int64{2, 0}, []int64{2, 2}}}}},
		Bytes:   []string{"a.step"},
		Planner: map[string][]string{"a.w": {"a", "w"}, "a.step": {"a", "step"}},
		Storage: map[string]Item{itemKey("a.w", []int64{0, 0}): {"__0_0.distcp", 0, 10, ""}, itemKey("a.w", []int64{2, 0}): {"__1_0.distcp", 0, 10, ""}, itemKey("a.step", nil): {"__0_0.distcp", 10, 5, ""}},
	}
	f.Add(encode(md, hostile{}))
	f.Add(encode(md, hostile{transforms: true}))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ReadMetadata(memFile{bytes.NewReader(data), "x/.metadata"})
		if err != nil {
			return
		}
		for _, tm := range got.Tensors {
			if _, ok := index.Elements(tm.Size); !ok || !tm.DType.Valid() {
				t.Fatalf("accepted %s: size %v dtype %v", tm.FQN, tm.Size, tm.DType)
			}
			for _, c := range tm.Chunks {
				for k := range tm.Size {
					if c.Offsets[k]+c.Sizes[k] > tm.Size[k] {
						t.Fatalf("accepted %s: chunk %v outside %v", tm.FQN, c, tm.Size)
					}
				}
			}
		}
	})
}

// FuzzParseDir: ParseDir over the real .distcp files of a torch 2.11
// checkpoint (testdata/torch211/w3s12) with a fuzzed .metadata never
// panics, and what it accepts reads within its files.
func FuzzParseDir(f *testing.F) {
	dir := filepath.Join("testdata", "torch211", "w3s12")
	meta, err := os.ReadFile(filepath.Join(dir, MetadataName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(meta)
	var names []string
	for _, n := range []string{"__0_0.distcp", "__1_0.distcp", "__2_0.distcp"} {
		names = append(names, filepath.Join(dir, n))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, files, err := ParseDir(Dir{Path: dir, Files: names, Open: openPread}, memFile{bytes.NewReader(data), dir + "/.metadata"})
		if err != nil {
			return
		}
		defer func() {
			for _, f := range files {
				f.(interface{ Close() error }).Close()
			}
		}()
		if len(idx.Sources) != len(files)+len(idx.Members) {
			t.Fatalf("%d sources for %d files and %d members", len(idx.Sources), len(files), len(idx.Members))
		}
		for _, tt := range idx.Tensors {
			if m := idx.Member(tt.Source); m != nil {
				if k, ok := m.Kind.(*index.Tiles); !ok || len(k.Chunks) == 0 {
					t.Fatalf("%s: a member with no chunks", tt.Name)
				}
				continue
			}
			if tt.Source >= len(files) || tt.Offset < 0 || tt.Offset+tt.Size > files[tt.Source].Size() {
				t.Fatalf("%s: [%d, +%d) outside source %d", tt.Name, tt.Offset, tt.Size, tt.Source)
			}
		}
	})
}
