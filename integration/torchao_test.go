package integration

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// torchaoFile writes a torchao checkpoint as safetensors (pytorch/ao's
// flatten_tensor_state_dict: M._weight_DATA parts, __metadata__
// tensor_names and one JSON entry per weight): an Int4Tensor q.weight
// [4, 64] in groups of 32 (BF16 scale and zero point stored transposed
// [2, 4]), a plain n.weight; cls replaces q.weight's class.
func torchaoFile(t *testing.T, cls string) (path string, want []float32) {
	const N, K, G = 4, 64, 32
	packed := make([]byte, N*K/2)
	for i := range packed {
		packed[i] = byte(i*37 + 11)
	}
	bf := func(v float32) uint16 { return uint16(math.Float32bits(v) >> 16) } // values chosen exact in bf16
	scale, zero := make([]byte, 2*N*K/G), make([]byte, 2*N*K/G)
	sv, zv := make([]float32, N*K/G), make([]float32, N*K/G)
	for i := range sv {
		sv[i] = float32(math.Ldexp(1+float64(i%5)/8, -6-i%3))
		zv[i] = float32(i%7-3) * 0.0390625
		binary.LittleEndian.PutUint16(scale[2*i:], bf(sv[i]))
		binary.LittleEndian.PutUint16(zero[2*i:], bf(zv[i]))
	}
	entry, _ := json.Marshal(map[string]any{"_type": cls, "_data": map[string]any{"block_size": []int{1, G}, "shape": []int{N, K}},
		"_tensor_data_names": []string{"qdata", "scale", "zero_point"}})
	meta := map[string]string{"tensor_names": `["q.weight", "n.weight"]`, "q.weight": string(entry), "n.weight": `{"_type": "Tensor"}`}
	dir := t.TempDir()
	path = filepath.Join(dir, "model.safetensors")
	writeSafetensors(t, path, []stTensor{
		{Name: "q._weight_qdata", DType: "I8", Shape: []int64{N, K / 2}, Data: packed},
		{Name: "q._weight_scale", DType: "BF16", Shape: []int64{K / G, N}, Data: scale},
		{Name: "q._weight_zero_point", DType: "BF16", Shape: []int64{K / G, N}, Data: zero},
		{Name: "n.weight", DType: "F32", Shape: []int64{2}, Data: make([]byte, 8)},
	}, meta)
	// torchao's _int4_row_dequantize_zp: min = zero − scale·8 in bf16
	// (exact here), W = (q + 8)·scale + min in float32; q the signed
	// nibble, low = even k
	for n := 0; n < N; n++ {
		for k := 0; k < K; k++ {
			b := packed[(n*K+k)/2]
			if k%2 == 1 {
				b >>= 4
			}
			q := int8(b<<4) >> 4
			s, z := sv[(k/G)*N+n], zv[(k/G)*N+n]
			mn := z - s*8
			p := float32((float32(q) + 8) * s)
			want = append(want, p+mn)
		}
	}
	return path, want
}

// TestQuantTorchAO: a torchao file opened alone (its metadata names the
// parts) serves q.weight through cat and convert --dtype, bit for bit,
// without its parts; check is clean. A kernel-specific packing is left
// out with one line naming it, never served as its parts.
func TestQuantTorchAO(t *testing.T) {
	path, want := torchaoFile(t, "Int4Tensor")
	r := runTensorfs(t, "cat", "--dtype", "f32", path, "q.weight")
	if r.code != 0 || len(r.stdout) != 4*len(want) {
		t.Fatalf("cat --dtype f32: exit %d, %d bytes: %s", r.code, len(r.stdout), r.stderr)
	}
	for i, w := range want {
		if got := binary.LittleEndian.Uint32([]byte(r.stdout[4*i:])); got != math.Float32bits(w) {
			t.Fatalf("element %d: %v, want %v", i, math.Float32frombits(got), w)
		}
	}
	out := filepath.Join(t.TempDir(), "out.safetensors")
	if r := runTensorfs(t, "convert", "--dtype", "bf16", path, out); r.code != 0 {
		t.Fatalf("convert: exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+binary.LittleEndian.Uint64(b)], &hdr); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	if err := json.Unmarshal(hdr["__metadata__"], &meta); err != nil {
		t.Fatal(err)
	}
	// q.weight is plain BF16 now: its torchao entry and its name in
	// tensor_names are gone, n.weight's are kept
	if _, ok := meta["q.weight"]; ok || meta["tensor_names"] != `["n.weight"]` || meta["n.weight"] != `{"_type": "Tensor"}` {
		t.Errorf("convert --dtype bf16: __metadata__ %v, want no torchao entry for q.weight", meta)
	}
	delete(hdr, "__metadata__")
	if len(hdr) != 2 || hdr["q.weight"] == nil || hdr["n.weight"] == nil {
		t.Errorf("convert --dtype bf16 wrote %d tensors, want q.weight and n.weight only", len(hdr))
	}
	if r := runTensorfs(t, "check", path); r.code != 0 {
		t.Errorf("check: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if r := runTensorfs(t, "check", out); r.code != 0 {
		t.Errorf("check of the export: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}

	bad, _ := torchaoFile(t, "Int4TilePackedTo4dTensor")
	r = runTensorfs(t, "cat", "--dtype", "f32", bad, "q.weight")
	if r.code == 0 || !strings.Contains(r.stderr, `"q.weight"`) || !strings.Contains(r.stderr, "Int4TilePackedTo4dTensor") {
		t.Errorf("cat of a tile-packed weight: exit %d: %s", r.code, r.stderr)
	}
	if r := runTensorfs(t, "convert", "--dtype", "bf16", "--force", bad, out); r.code != 0 || strings.Count(r.stderr, "left out") != 1 || !strings.Contains(r.stderr, "kernel-specific packing") {
		t.Errorf("convert of a tile-packed weight: exit %d, want 0 and one line: %q", r.code, r.stderr)
	}
	b, _ = os.ReadFile(out)
	hdr = nil
	_ = json.Unmarshal(b[8:8+binary.LittleEndian.Uint64(b)], &hdr)
	delete(hdr, "__metadata__")
	if len(hdr) != 1 || hdr["n.weight"] == nil {
		t.Errorf("convert --dtype bf16 of a tile-packed weight wrote %d tensors, want n.weight only", len(hdr))
	}
}
