package integration

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
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

// TestQuantTorchAOMXFP6: a torchao MXTensor with fp6_e3m2 elements (U8
// qdata of the weight's shape, one code a byte: torchao's
// f32_to_f6_e3m2_unpacked) and orig_dtype bf16 is served through the
// binary: cat --dtype f32 bit for bit against each byte's value in the
// torch reference table (quant/testdata/torchao_fp6/e3m2.txt) times
// 2^(e−127) in bf16 (E8M0 255: NaN), check clean, and load --gpu
// --dtype bf16 (stand-in CUDA runtime) uploads and verifies it.
func TestQuantTorchAOMXFP6(t *testing.T) {
	const M, K, bs = 4, 64, 32
	ref, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "quant", "testdata", "torchao_fp6", "e3m2.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var table [256]float32
	for i, l := range strings.Fields(string(ref)) {
		v, err := strconv.ParseUint(l, 16, 32)
		if err != nil || i > 255 {
			t.Fatalf("e3m2.txt line %d: %q", i, l)
		}
		table[i] = math.Float32frombits(uint32(v))
	}
	codes := make([]byte, M*K)
	for i := range codes {
		codes[i] = byte(i*37 + 11) // every byte, bits 6 and 7 too
	}
	scales := []byte{127, 120, 255, 130, 0, 254, 126, 133} // [M, K/bs]
	entry, _ := json.Marshal(map[string]any{"_type": "MXTensor", "_data": map[string]any{"elem_dtype": "fp6_e3m2", "block_size": bs,
		"orig_dtype": map[string]any{"_type": "torch.dtype", "_data": "bfloat16"}, "is_swizzled_scales": false},
		"_tensor_data_names": []string{"qdata", "scale"}})
	meta := map[string]string{"tensor_names": `["q.weight", "n.weight"]`, "q.weight": string(entry), "n.weight": `{"_type": "Tensor"}`}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	writeSafetensors(t, path, []stTensor{
		{Name: "q._weight_qdata", DType: "U8", Shape: []int64{M, K}, Data: codes},
		{Name: "q._weight_scale", DType: "F8_E8M0", Shape: []int64{M, K / bs}, Data: scales},
		{Name: "n.weight", DType: "F32", Shape: []int64{2}, Data: make([]byte, 8)},
	}, meta)
	// bf16 of a float32, round to nearest even (the values here are not NaN)
	bf16 := func(v float32) float32 {
		b := math.Float32bits(v)
		return math.Float32frombits((b + 0x7fff + b>>16&1) &^ 0xffff)
	}
	r := runTensorfs(t, "cat", "--dtype", "f32", path, "q.weight")
	if r.code != 0 || len(r.stdout) != 4*M*K {
		t.Fatalf("cat --dtype f32: exit %d, %d bytes: %s", r.code, len(r.stdout), r.stderr)
	}
	for i, c := range codes {
		e := scales[i/bs]
		want := float32(math.NaN())
		if e != 255 {
			want = bf16(bf16(table[c]) * bf16(float32(math.Ldexp(1, int(e)-127))))
		}
		got := math.Float32frombits(binary.LittleEndian.Uint32([]byte(r.stdout[4*i:])))
		if math.Float32bits(got) != math.Float32bits(want) && !(want != want && got != got) {
			t.Fatalf("element %d (code %#x, scale %d): %v, want %v", i, c, e, got, want)
		}
	}
	if r := runTensorfs(t, "check", path); r.code != 0 {
		t.Errorf("check: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	fakeCUDA(t)
	r = runTensorfs(t, "load", "--gpu", "0", "--verify", "--dtype", "bf16", path)
	up, ver := uploadedLine.FindStringSubmatch(r.stderr), verifiedLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || up == nil || ver == nil || up[1] != "2" || ver[1] != "2" {
		t.Fatalf("load --gpu --dtype bf16: exit %d, want q.weight and n.weight uploaded and verified:\n%s", r.code, r.stderr)
	}
}
