package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIKTrellisGGUF: a GGUF of ik_llama.cpp's types (dtype/testdata/ikllama2,
// from ik_llama.cpp's own quantizers) serves its Q6_0 tensor in the .f32/
// and .bf16/ views and through load --dtype exactly as ik_llama.cpp's
// dequantize_row_q6_0 gives it, and names each _KT tensor as not served
// (a scale heads each row), in ls, load and convert, one line each.
func TestIKTrellisGGUF(t *testing.T) {
	base, err := filepath.Abs(filepath.Join("..", "dtype", "testdata", "ikllama2", "seed44"))
	if err != nil {
		t.Fatal(err)
	}
	src := base + ".gguf"
	refAll, err := os.ReadFile(base + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tensors []struct {
			Name, Type string
			Shape      []int64
			SHA256F32  string `json:"sha256_f32"`
		}
	}
	js, err := os.ReadFile(base + ".json")
	if err != nil || json.Unmarshal(js, &doc) != nil || len(doc.Tensors) != 5 || doc.Tensors[0].Type != "Q6_0" {
		t.Fatalf("seed44.json: %v", err)
	}
	q6 := doc.Tensors[0]
	ref := refAll[:4*q6.Shape[0]*q6.Shape[1]] // Q6_0 is the first tensor
	var refBF16 []byte
	for i := 0; i < len(ref); i += 4 {
		b := binary.LittleEndian.Uint32(ref[i:])
		if math.IsNaN(float64(math.Float32frombits(b))) {
			t.Fatal("NaN in the reference")
		}
		refBF16 = binary.LittleEndian.AppendUint16(refBF16, uint16((b+0x7fff+(b>>16&1))>>16))
	}

	kt := []string{"IQ1_KT", "IQ2_KT", "IQ3_KT", "IQ4_KT"}
	oneLineEach := func(what, stderr string) {
		t.Helper()
		for _, typ := range kt {
			if n := strings.Count(stderr, "is not served: ik_llama.cpp's "+typ+" (ggml type "); n != 1 {
				t.Errorf("%s: %d lines naming %s, want 1:\n%s", what, n, typ, stderr)
			}
		}
	}

	r := runTensorfs(t, "ls", src)
	if r.code != 0 || !strings.Contains(r.stdout, q6.Name) || strings.Contains(r.stdout, "_kt") {
		t.Errorf("ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	oneLineEach("ls", r.stderr)

	r = runTensorfs(t, "load", "--dtype", "f32", "--sha256", "--quiet", src)
	if !strings.Contains(r.stdout, q6.SHA256F32+"  "+q6.Name) {
		t.Errorf("load --dtype f32: want %s for %s:\n%s%s", q6.SHA256F32, q6.Name, r.stdout, r.stderr)
	}
	if r.code == 0 || !strings.Contains(r.stderr, "4 tensors not loaded") {
		t.Errorf("load: exit %d, want the 4 _KT tensors named as not loaded:\n%s", r.code, r.stderr)
	}
	oneLineEach("load", r.stderr)

	r = runTensorfs(t, "convert", "--quiet", src, filepath.Join(t.TempDir(), "out.safetensors"))
	if r.code == 0 || !strings.Contains(r.stderr, "cannot write 4 tensors") || !strings.Contains(r.stderr, `"blk.3.iq3_kt.weight" (IQ3_KT)`) {
		t.Errorf("convert: exit %d, want the 4 _KT tensors named:\n%s", r.code, r.stderr)
	}

	needFUSE(t)
	m := mount(t, src)
	for view, want := range map[string][]byte{".f32": ref, ".bf16": refBF16} {
		got, err := os.ReadFile(m.Path(filepath.Join(view, q6.Name)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s/%s: %d bytes (%v), differs from ik_llama.cpp's dequantization", view, q6.Name, len(got), err)
		}
	}
	if _, err := os.Stat(m.Path("blk.2.iq2_kt.weight")); !os.IsNotExist(err) {
		t.Errorf("the IQ2_KT tensor is served as codes: %v", err)
	}
}
