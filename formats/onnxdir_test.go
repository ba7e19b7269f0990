package formats

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestONNXDirSiblings: a directory holding an ONNX model and the
// external data file it names loads as that model, even where the data
// file's first bytes look like another format (a float32 13649.82 is
// "GGUF"): the model's external data files are its own, not checkpoints
// beside it, whether they sort before or after the model.
func TestONNXDirSiblings(t *testing.T) {
	vals := []float32{math.Float32frombits(binary.LittleEndian.Uint32([]byte("GGUF"))), 2, 3}
	data := make([]byte, 12)
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	for _, name := range []string{"a.bin", "weights.bin"} { // before and after model.onnx
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "model.onnx"), onnxExternal(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		idx, files, err := Load(dir, openDCP, testOptions)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if idx.Format != "onnx" || len(idx.Tensors) != 1 || idx.Tensors[0].Name != "w" {
			t.Errorf("%s: %s, %d tensors", name, idx.Format, len(idx.Tensors))
		} else {
			tn := idx.Tensors[0]
			buf := make([]byte, tn.Size)
			files[tn.Source].ReadAt(buf, tn.Offset)
			if string(buf) != string(data) {
				t.Errorf("%s: bytes %x, want %x", name, buf, data)
			}
		}
		closeAll(files)
	}
}
