package formats

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// hfPiece writes a safetensors file of one F32 tensor w of shape
// [rows, 3], elements from first, with DCP_SHARDING_INFO info ("" for
// none).
func hfPiece(t *testing.T, path string, rows int, first float32, info string) {
	t.Helper()
	var data bytes.Buffer
	for i := 0; i < rows*3; i++ {
		binary.Write(&data, binary.LittleEndian, first+float32(i))
	}
	hdr := map[string]any{"w": map[string]any{"dtype": "F32", "shape": []int{rows, 3}, "data_offsets": []int{0, data.Len()}}}
	if info != "" {
		hdr["__metadata__"] = map[string]string{"DCP_SHARDING_INFO": info, "format": "pt"}
	}
	h, _ := json.Marshal(hdr)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data.Bytes()...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHFStorageWriterPieces: safetensors files whose DCP_SHARDING_INFO
// places pieces of one tensor (torch's HuggingFaceStorageWriter with
// save_distributed) are read as the whole tensor; pieces that overlap,
// leave holes, or are not placed are one line naming the file.
func TestHFStorageWriterPieces(t *testing.T) {
	cases := []struct {
		name string
		a, b string // DCP_SHARDING_INFO of the two files
		err  string
	}{
		{"whole", `{"w": {"saved_offsets": [0, 0]}}`, `{"w": {"saved_offsets": [2, 0]}}`, ""},
		{"overlapping", `{"w": {"saved_offsets": [0, 0]}}`, `{"w": {"saved_offsets": [1, 0]}}`, "leave holes or overlap"},
		{"out of bounds", `{"w": {"saved_offsets": [0, 0]}}`, `{"w": {"saved_offsets": [3, 0]}}`, "leave holes or overlap"},
		{"same place", `{"w": {"saved_offsets": [0, 0]}}`, `{"w": {"saved_offsets": [0, 0]}}`, "leave holes or overlap"},
		{"diagonal", `{"w": {"saved_offsets": [0, 0]}}`, `{"w": {"saved_offsets": [2, 3]}}`, "leave holes or overlap"},
		{"not placed", `{"w": {"saved_offsets": [0, 0]}}`, `{"v": {"saved_offsets": [2, 0]}}`, "does not place this tensor"},
		{"wrong rank", `{"w": {"saved_offsets": [0, 0]}}`, `{"w": {"saved_offsets": [2]}}`, "1 offsets for a tensor of 2 dims"},
		{"not JSON", `{"w": {"saved_offsets": [0, 0]}}`, `{"w": `, "DCP_SHARDING_INFO is not a JSON object"},
		{"negative", `{"w": {"saved_offsets": [0, 0]}}`, `{"w": {"saved_offsets": [-2, 0]}}`, "non-negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			hfPiece(t, filepath.Join(dir, "shard-00001-model-00001-of-00001.safetensors"), 2, 0, c.a)
			hfPiece(t, filepath.Join(dir, "shard-00002-model-00001-of-00001.safetensors"), 2, 6, c.b)
			idx, files, err := Load(dir, openDCP, testOptions)
			defer closeAll(files)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") || !errors.Is(err, index.ErrFormat) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("error %v, want one line naming the directory with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(idx.Tensors) != 1 || idx.Tensors[0].Name != "w" || len(idx.Tensors[0].Shape) != 2 || idx.Tensors[0].Shape[0] != 4 || idx.Tensors[0].Size != 48 {
				t.Fatalf("tensors %+v", idx.Tensors)
			}
			tn := idx.Tensors[0]
			got := make([]byte, tn.Size)
			if _, err := files[tn.Source].ReadAt(got, tn.Offset); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 12; i++ {
				if v := binary.LittleEndian.Uint32(got[4*i:]); v != mathFloat32bits(float32(i)) {
					t.Fatalf("element %d: %08x", i, v)
				}
			}
			if _, ok := idx.Metadata["DCP_SHARDING_INFO"]; ok {
				t.Errorf("metadata %v", idx.Metadata)
			}
		})
	}
}

func mathFloat32bits(f float32) uint32 { return math.Float32bits(f) }
