package main

import (
	"encoding/json"
	"testing"

	"github.com/lazyweights/tensorfs/client/cuda"
)

// TestCudaIndexFiles: .cuda/index.json names each tensor at the path the
// mount gives it (a tensor named as a model directory file at NAME#N),
// under .native/ where it is left out of the converted top level, and
// keeps the rest of the document.
func TestCudaIndexFiles(t *testing.T) {
	doc := &cuda.IPCIndex{Device: 1, UUID: "GPU-x", Tensors: []cuda.IPCTensor{
		{Name: "config.json", Path: "config.json", DType: "F32", Shape: []int64{2}, Size: 8},
		{Name: "ids", Path: "ids", DType: "I64", Shape: []int64{1}, Offset: 8, Size: 8},
	}}
	moved := map[string]string{"config.json": "config.json#1"}
	render := cudaIndexFiles(doc, []bool{false, true})
	files, err := render(func(name string) string {
		if p, ok := moved[name]; ok {
			return p
		}
		return name
	})
	if err != nil {
		t.Fatal(err)
	}
	var got cuda.IPCIndex
	if err := json.Unmarshal(files["index.json"], &got); err != nil {
		t.Fatalf("index.json: %v\n%s", err, files["index.json"])
	}
	if got.Device != 1 || got.UUID != "GPU-x" || len(got.Tensors) != 2 || got.Tensors[1].Offset != 8 {
		t.Fatalf("index.json: %+v", got)
	}
	for i, want := range []string{"config.json#1", ".native/ids"} {
		if got.Tensors[i].Path != want {
			t.Errorf("tensor %q at %q, want %q", got.Tensors[i].Name, got.Tensors[i].Path, want)
		}
	}
	if doc.Tensors[0].Path != "config.json" {
		t.Errorf("the upload's document changed: %q", doc.Tensors[0].Path)
	}
}
