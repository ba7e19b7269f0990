package dcp

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testdata"
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
	if dir := os.Getenv("TENSORFS_TESTDATA"); dir != "" || !testdata.InCI() {
		if dir == "" {
			dir = filepath.Join(testdata.RepoRoot(), "..", "shared", "testdata")
		}
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
		Storage: map[string]Item{itemKey("a.w", []int64{0, 0}): {"__0_0.distcp", 0, 10}, itemKey("a.w", []int64{2, 0}): {"__1_0.distcp", 0, 10}, itemKey("a.step", nil): {"__0_0.distcp", 10, 5}},
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
