package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// bf16Bytes encodes float32 values whose low 16 bits are zero as bfloat16.
func bf16Bytes(vals []float32) []byte {
	b := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(v)>>16))
	}
	return b
}

func TestOpenSafetensorsDirect(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	hVals := []float32{1, -2, 0.5, 65504, -0.125, 1024}
	bVals := []float32{1, -2, 0.5, float32(math.Ldexp(1, 100)), -0.125, -1.5}
	big := randomBytes(7, 3<<20+13)
	ints := make([]byte, 8*5)
	for i := range 5 {
		binary.LittleEndian.PutUint64(ints[8*i:], uint64(int64(i*i-7)))
	}
	writeSafetensors(t, path, map[string]string{"format": "pt"}, []stTensor{
		{"layers/0/half", "F16", []int64{2, 3}, f16Bytes(hVals)},
		{"layers/0/bf", "BF16", []int64{6}, bf16Bytes(bVals)},
		{"embed", "U8", []int64{3<<20 + 13}, big},
		{"ids", "I64", []int64{5}, ints},
		{"scalar", "F32", nil, f32Bytes([]float32{42})},
	})
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.IsMount() || c.Format() != "safetensors" {
		t.Errorf("IsMount %v Format %q", c.IsMount(), c.Format())
	}
	if md, _ := json.Marshal(c.Metadata()); !strings.Contains(string(md), `"format":"pt"`) {
		t.Errorf("metadata %s", md)
	}
	var names []string
	for _, ti := range c.Tensors() {
		names = append(names, ti.Name)
	}
	if got := strings.Join(names, " "); got != "embed ids layers/0/bf layers/0/half scalar" {
		t.Errorf("names %q", got)
	}
	if s, _ := c.Tensor("scalar"); len(s.Shape) != 0 || s.Size != 4 || s.DType != dtype.F32 {
		t.Errorf("scalar: %+v", s)
	}

	native := map[string][]byte{"layers/0/half": f16Bytes(hVals), "layers/0/bf": bf16Bytes(bVals), "embed": big, "ids": ints, "scalar": f32Bytes([]float32{42})}
	sink := newRecSink(t, 1<<20)
	if err := c.Stream(context.Background(), sink, StreamOptions{ChunkSize: 1 << 20, Parallel: 3}); err != nil {
		t.Fatal(err)
	}
	sink.checkEnded()
	for name, want := range native {
		if got := sink.tensors[name]; got == nil || !bytes.Equal(got.data.Bytes(), want) {
			t.Errorf("%s: native bytes differ", name)
		}
	}

	// Converted to F32: the floats exactly (all values are representable),
	// the integers as stored.
	asF32 := map[string][]byte{"layers/0/half": f32Bytes(hVals), "layers/0/bf": f32Bytes(bVals), "embed": big, "ids": ints, "scalar": f32Bytes([]float32{42})}
	sink = newRecSink(t, 4096)
	if err := c.Stream(context.Background(), sink, StreamOptions{ChunkSize: 4096, DType: dtype.F32}); err != nil {
		t.Fatal(err)
	}
	for name, want := range asF32 {
		got := sink.tensors[name]
		if got == nil || !bytes.Equal(got.data.Bytes(), want) {
			t.Errorf("%s as F32: bytes differ", name)
			continue
		}
		ti, _ := c.Tensor(name)
		wantDT := dtype.F32
		if ti.DType.Kind() != dtype.KindFloat {
			wantDT = ti.DType
		}
		if got.dt != wantDT {
			t.Errorf("%s as F32: delivered as %v, want %v", name, got.dt, wantDT)
		}
	}
}

// TestOpenShardedDirectory opens a Hugging Face style sharded checkpoint
// (two safetensors shards and a weight map) and streams it.
func TestOpenShardedDirectory(t *testing.T) {
	dir := t.TempDir()
	a, b := randomBytes(1, 1000), randomBytes(2, 3000)
	writeSafetensors(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), nil, []stTensor{{"a", "U8", []int64{1000}, a}})
	writeSafetensors(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), nil, []stTensor{{"b", "U8", []int64{3000}, b}})
	wm, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": map[string]string{
		"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), wm, 0o644)
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Sources()) != 2 {
		t.Errorf("sources %v", c.Sources())
	}
	sink := newRecSink(t, 256)
	if err := c.Stream(context.Background(), sink, StreamOptions{ChunkSize: 256}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"a": a, "b": b} {
		if got := sink.tensors[name]; got == nil || !bytes.Equal(got.data.Bytes(), want) {
			t.Errorf("%s: bytes differ", name)
		}
	}
}

// hashSink computes the sha256 of every tensor.
type hashSink struct {
	mu     sync.Mutex
	sums   map[string]string
	dtypes map[string]dtype.DType
}

type hashTensor struct {
	s    *hashSink
	name string
	h    hash.Hash
}

func newHashSink() *hashSink {
	return &hashSink{sums: map[string]string{}, dtypes: map[string]dtype.DType{}}
}

func (s *hashSink) Begin(t TensorInfo, dt dtype.DType, size int64) (TensorSink, error) {
	s.mu.Lock()
	s.dtypes[t.Name] = dt
	s.mu.Unlock()
	return &hashTensor{s, t.Name, sha256.New()}, nil
}
func (h *hashTensor) Write(p []byte, off int64) error { h.h.Write(p); return nil }
func (h *hashTensor) End(err error) error {
	if err == nil {
		h.s.mu.Lock()
		h.s.sums[h.name] = hex.EncodeToString(h.h.Sum(nil))
		h.s.mu.Unlock()
	}
	return nil
}

// expectedJSON reads the shared test data's generated/EXPECTED.json.
func expectedJSON(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(testenv.Path(t, "generated/EXPECTED.json"))
	if err != nil {
		testenv.SkipOrFail(t, "no EXPECTED.json: "+err.Error())
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStreamRealNumPyFiles streams the shared NumPy files (big-endian,
// Fortran order, scalars, empty arrays) and compares each tensor's sha256
// with the one NumPy computed of its C-order little-endian bytes.
func TestStreamRealNumPyFiles(t *testing.T) {
	var npy map[string]struct {
		SHA *string `json:"sha256_c_order_le"`
	}
	if err := json.Unmarshal(expectedJSON(t)["numpy"], &npy); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for file, want := range npy {
		if want.SHA == nil {
			continue // structured and unicode arrays: refused, not tensors
		}
		t.Run(file, func(t *testing.T) {
			c, err := Open(testenv.Path(t, "generated/"+file))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s := newHashSink()
			if err := c.Stream(context.Background(), s, StreamOptions{ChunkSize: 7}); err != nil {
				t.Fatal(err)
			}
			if len(s.sums) != 1 {
				t.Fatalf("%d tensors", len(s.sums))
			}
			for name, got := range s.sums {
				if got != *want.SHA {
					t.Errorf("%s: sha256 %s, NumPy says %s", name, got, *want.SHA)
				}
			}
		})
		checked++
	}
	if checked == 0 {
		t.Fatal("no NumPy file checked")
	}
}

// TestStreamRealTorchFiles streams the shared PyTorch state dicts (zip and
// legacy) and compares every tensor with torch's C-order sha256.
func TestStreamRealTorchFiles(t *testing.T) {
	var sd map[string]struct {
		SHA string `json:"sha256_c_order"`
	}
	if err := json.Unmarshal(expectedJSON(t)["torch_state_dict"], &sd); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"torch_mixed_zip.pt", "torch_mixed_legacy.pt"} {
		t.Run(file, func(t *testing.T) {
			c, err := Open(testenv.Path(t, "generated/"+file))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s := newHashSink()
			if err := c.Stream(context.Background(), s, StreamOptions{ChunkSize: 16, Parallel: 3}); err != nil {
				t.Fatal(err)
			}
			matched := 0
			for name, want := range sd {
				got, ok := s.sums[name]
				if !ok {
					continue // complex and other tensors only some files hold
				}
				matched++
				if got != want.SHA {
					t.Errorf("%s: sha256 %s, torch says %s", name, got, want.SHA)
				}
			}
			if matched < len(sd)/2 {
				t.Errorf("only %d of %d expected tensors found (have %v)", matched, len(sd), keys(s.sums))
			}
		})
	}
}

// TestStreamRealGGUFConverted streams the shared quantized GGUF files
// converted to F32 and compares with ggml's own dequantization (.f32ref:
// every tensor in file order).
func TestStreamRealGGUFConverted(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testenv.Dir(t), "gguf", "quantized", "*.gguf"))
	if len(files) == 0 {
		testenv.SkipOrFail(t, "no gguf/quantized files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			ref, err := os.ReadFile(file + ".f32ref")
			if err != nil {
				t.Skip("no .f32ref")
			}
			c, err := Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sink := newRecSink(t, 0)
			if err := c.Stream(context.Background(), sink, StreamOptions{ChunkSize: 100, DType: dtype.F32}); err != nil {
				t.Fatal(err)
			}
			ts := c.Tensors()
			sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
			var got []byte
			for _, ti := range ts {
				r := sink.tensors[ti.Name]
				if r.dt != dtype.F32 {
					t.Fatalf("%s (%v): delivered as %v", ti.Name, ti.DType, r.dt)
				}
				got = append(got, r.data.Bytes()...)
			}
			if !bytes.Equal(got, ref) {
				t.Errorf("F32 stream (%d bytes) differs from ggml's dequantization (%d bytes)", len(got), len(ref))
			}
		})
	}
}

func keys(m map[string]string) string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return fmt.Sprint(k)
}
