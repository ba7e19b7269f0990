package formats

import "testing"

// TestDetect: the table picks each format by content (the detection
// checks of index/gguf's TestGGUFSniff and index/safetensors'
// TestSniffSafetensors, which cannot import formats).
func TestDetect(t *testing.T) {
	gguf := append([]byte("GGUF\x03\x00\x00\x00"), make([]byte, SniffLen-8)...)
	if f, ok := Detect(gguf); !ok || f.Name != "gguf" {
		t.Fatalf("Detect does not pick gguf for a GGUF header")
	}
	good := stBuild(nil, true, stT{Name: "a", DType: "F32", Shape: []int{1}, Bytes: 4})
	if fm, ok := Detect(good); !ok || fm.Name != "safetensors" {
		t.Errorf("Detect = %v, %v", fm, ok)
	}
}
